"""The machine language: YAML 1.2 booleans, typed enums, `any:` guards, `before:` actions, reach-a-terminal."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopfsm import SpecError, compile_spec, parse
from loopfsm.rendering.labels import branch_label, guards_label
from loopfsm.rendering.matrix import review_sheet
from loopfsm.rendering.mermaid import decision_flowchart

from tests.support.specs import dedent, make_registry, marked_line

ROOT = Path(__file__).resolve().parents[2]

LAMP = dedent("""
    machine: lamp
    description: a switch with words that YAML 1.1 would have read as booleans
    policy:
      mode: {type: string, default: on, enum: [on, off, yes, no], description: a switch position}
    data:
      count: {type: integer, default: 0}
      log: {type: string, list: true}
    states:
      no: {initial: true, description: a state named no}
      yes: {description: a state named yes}
    events:
      flip:
        description: flip it
        args:
          to: {type: string, enum: [on, off]}
        from:
          no: [{to: yes}]
          yes: [{to: no}]
""")


def test_on_off_yes_no_are_strings_in_machine_files():
    spec = parse(LAMP, "lamp.yaml", make_registry())
    assert spec.policy["mode"].enum == ("on", "off", "yes", "no") and spec.policy["mode"].default == "on"
    assert list(spec.states) == ["no", "yes"]
    m = compile_spec(spec, make_registry()).new()
    m.flip("on", policy={"mode": "off"})
    assert m.state == "yes"


def test_true_and_false_are_still_booleans():
    bad = LAMP.replace("default: on,", "default: true,")
    with pytest.raises(SpecError, match="default True is not one of|must be string"):
        parse(bad, "lamp.yaml", make_registry())


MACHINE = dedent("""
    machine: gate
    description: any-guards and before-actions
    before: [{name: log, params: {text: machine}}]
    data:
      count: {type: integer, default: 0}
      log: {type: string, list: true}
    states:
      idle: {initial: true, description: waiting}
      open: {description: open}
      done: {terminal: true, description: finished}
    events:
      knock:
        description: someone knocks
        args:
          who: {type: string}
        before: [{name: log, params: {text: feed}}]
        otherwise: stay
        from:
          idle:
            - guard:
                any:
                  - {name: arg_is, params: {name: who, value: owner}}
                  - - {name: arg_is, params: {name: who, value: guest}}
                    - {name: at_least, params: {field: count, value: 2}}
              to: open
              actions: [{name: log, params: {text: branch}}]
            - guard: {name: arg_is, params: {name: who, value: guest}}
              stay: true
              actions: [{name: bump, params: {field: count}}]
      close:
        description: close it
        from:
          open: [{to: done}]
""")


def gate():
    return compile_spec(parse(MACHINE, "gate.yaml", make_registry()), make_registry())


def test_any_guard_holds_when_one_option_holds():
    g = gate()
    owner = g.new()
    owner.knock("owner")
    assert owner.state == "open"
    guest = g.new()
    guest.knock("guest")  # the AND option needs count >= 2: falls through to the next branch
    guest.knock("guest")
    assert guest.state == "idle" and guest.data.count == 2
    guest.knock("guest")
    assert guest.state == "open"
    stranger = g.new()
    assert stranger.can("knock", "stranger")  # otherwise: stay accepts it
    stranger.knock("stranger")  # no option holds, otherwise: stay
    assert stranger.state == "idle" and stranger.data.count == 0


def test_before_actions_run_first_and_only_when_a_branch_is_taken():
    m = gate().new()
    m.knock("owner")
    assert m.data.log == ["machine", "feed", "branch"]
    m.close()
    assert m.data.log == ["machine", "feed", "branch", "machine"]
    other = gate().new()
    other.knock("stranger")  # no branch taken: nothing runs
    assert other.data.log == []


def test_labels_show_any_and_before():
    spec = parse(MACHINE, "gate.yaml", make_registry())
    b = spec.events["knock"].sources["idle"][0]
    label = guards_label(spec, b.guards)
    assert label == (
        "(arg_is(name=who, value=owner) or arg_is(name=who, value=guest) and at_least(field=count, value=2))"
    )
    assert branch_label(spec, "knock", b).endswith("/ log, log, log")
    sheet = review_sheet(spec)
    assert "Before the actions of every branch taken, of any feed: `log(text=machine)`" in sheet
    assert "| `knock` | who: string | `log(text=feed)` |" in sheet


def test_unknown_names_inside_any_and_before_are_located():
    text = MACHINE.replace("value: owner}}", "value: owner}}   # <-").replace(
        "{name: arg_is, params: {name: who, value: owner}}", "{name: arg_iz, params: {name: who, value: owner}}"
    )
    with pytest.raises(SpecError) as err:
        parse(text, "gate.yaml", make_registry())
    (p,) = [p for p in err.value.problems if p.severity == "error"]
    assert p.line == marked_line(text) and "unknown guard 'arg_iz'" in p.message
    assert p.path == "events.knock.from.idle[0].guard.any[0].name"
    text = MACHINE.replace("before: [{name: log, params: {text: feed}}]", "before: [lgo]   # <-")
    with pytest.raises(SpecError) as err:
        parse(text, "gate.yaml", make_registry())
    (p,) = [p for p in err.value.problems if p.severity == "error"]
    assert p.line == marked_line(text) and "unknown action 'lgo'" in p.message


def test_any_needs_two_options():
    start = MACHINE.index("any:")
    end = MACHINE.rindex("\n", 0, MACHINE.index("to: open")) + 1
    text = MACHINE[:start] + "any: [{name: arg_is, params: {name: who, value: owner}}]\n" + MACHINE[end:]
    with pytest.raises(SpecError, match="'any:' needs at least two alternatives"):
        parse(text, "gate.yaml", make_registry())


def test_any_in_a_decision_rule():
    text = MACHINE + dedent("""
        decisions:
          ask:
            description: what next
            rules:
              - guard: {any: [{name: at_least, params: {field: count, value: 1}}, {name: flag, params: {field: count}}]}
                result: {name: constant, params: {value: busy}}
              - result: {name: constant, params: {value: calm}}
    """)
    m = compile_spec(parse(text, "gate.yaml", make_registry()), make_registry()).new()
    assert m.decide("ask") == "calm"
    m.knock("guest")
    assert m.decide("ask") == "busy"
    chart = decision_flowchart(m.compiled.spec, m.compiled.spec.decisions["ask"]).replace("<br/>", " ")
    assert "(at_least(field=count, value=1) or flag(field=count))" in chart


def test_breakers_state_clamp_clock_once_and_use_any():
    for name in ("tool_breaker", "fallback_breaker"):
        text = (ROOT / "machines" / f"{name}.yaml").read_text()
        assert text.count("clamp_clock") == 1 and "\nbefore: [clamp_clock]" in text
    assert (ROOT / "machines" / "tool_breaker.yaml").read_text().count("any:") >= 1


def test_a_state_that_cannot_reach_a_terminal_is_warned_about():
    text = dedent("""
        machine: trap
        description: a loop with no way out
        states:
          idle: {initial: true, description: waiting}
          spin: {description: spinning}
          spun: {description: spun}
          done: {terminal: true, description: finished}
        events:
          go:
            description: go
            from:
              idle: [{to: spin}]
              spin: [{to: spun}]
              spun: [{to: spin}]
          stop:
            description: stop
            from:
              idle: [{to: done}]
    """)
    spec = parse(text, "trap.yaml", make_registry())
    warned = [w for w in spec.warnings if "never reach a terminal" in w.message]
    assert sorted(w.path for w in warned) == ["states.spin", "states.spun"]
    assert all(w.severity == "warning" for w in warned)
    for name in ("engine_brain", "turnstile", "tool_breaker", "fallback_breaker"):
        from loopfsm import load_machine

        assert not [w for w in load_machine(name).spec.warnings if "terminal" in w.message]
