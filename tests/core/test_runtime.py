"""The compiled runtime: first-hit order, loud illegal feeds, terminal rules, snapshots, compile-once."""

from __future__ import annotations

import json

import pytest
import transitions
from hypothesis import given, settings
from hypothesis import strategies as st

from loopfsm import (
    FeedArgumentError,
    IllegalFeed,
    NoBranchMatched,
    PolicyError,
    SnapshotError,
    compile_spec,
    parse,
)
from loopfsm.core.errors import ActionError, DecisionError, UnknownFeed

from tests.support.specs import dedent, make_registry

COUNTER = dedent("""
    machine: counter
    description: counts ticks until a policy limit, then finishes
    terminal_feeds: ignore
    policy:
      limit: {type: integer, default: 3, minimum: 0, maximum: 1000, description: ticks before done}
    data:
      count: {type: integer, default: 0}
      log: {type: string, list: true}
    states:
      idle: {initial: true, description: not started}
      counting:
        description: ticking
        data:
          n: {type: integer}
      done: {terminal: true, description: finished}
    events:
      start:
        description: begin counting
        args:
          n: {type: integer, default: 0}
        from:
          idle:
            - to: counting
              actions: [{name: enter_with, params: {key: n}}]
      tick:
        description: one tick
        otherwise: raise
        from:
          counting:
            - guard: {name: at_least, params: {field: count, value: {policy: limit}}}
              to: done
              actions: [{name: log, params: {text: first}}]
            - guard: {name: at_least, params: {field: count, value: 0}}
              stay: true
              actions: [{name: bump, params: {field: count}}, {name: log, params: {text: second}}]
      poke:
        description: answers, and is an error once done
        on_terminal: raise
        from:
          counting:
            - stay: true
              actions: [{name: answer, params: {text: poked}}]
      label:
        description: guarded on an argument
        otherwise: stay
        args:
          kind: {type: string}
        from:
          idle:
            - guard: {name: arg_is, params: {name: kind, value: a}}
              stay: true
              actions: [{name: log, params: {text: a}}]
            - guard: {name: arg_is, params: {name: kind, value: b}, negate: true}
              stay: true
              actions: [{name: log, params: {text: not-b}}]
      strict:
        description: like label, but raises when no guard holds
        otherwise: raise
        args:
          kind: {type: string}
        from:
          idle:
            - guard: {name: arg_is, params: {name: kind, value: a}}
              stay: true
    decisions:
      what_next:
        description: a pure question
        rules:
          - name: finished
            states: [done]
            result: {name: constant, params: {value: nothing}}
          - name: over_limit
            guard: {name: at_least, params: {field: count, value: {policy: limit}}}
            result: {name: constant, params: {value: stop}}
          - name: keep_going
            states: [idle, counting]
            result: {name: constant, params: {value: tick}}
""")


def compiled(text: str = COUNTER):
    reg = make_registry()
    return compile_spec(parse(text, "counter.yaml", reg), reg)


@pytest.fixture(scope="module")
def C():
    return compiled()


def test_first_hit_wins(C):
    m = C.new()
    m.start(7)
    assert m.state == "counting" and m.state_data == {"n": 7}
    for _ in range(3):
        m.tick()
    assert m.data.count == 3 and m.data.log == ["second"] * 3
    m.tick()  # both guards hold now: the first listed wins, alone
    assert m.state == "done" and m.data.log[-1] == "first" and m.data.count == 3


def test_swapping_branch_order_in_yaml_changes_behaviour():
    lines = COUNTER.splitlines(keepends=True)
    i = next(k for k, line in enumerate(lines) if "value: {policy: limit}}}" in line and "guard" in line)
    j = next(k for k, line in enumerate(lines) if "value: 0}}" in line and "guard" in line)
    swapped = lines[:i] + lines[j : j + 3] + lines[i:j] + lines[j + 3 :]
    C2 = compiled("".join(swapped))
    m = C2.new()
    m.start()
    for _ in range(10):
        m.tick()
    assert m.state == "counting" and m.data.count == 10  # the unconditional-ish branch now always wins


def test_illegal_feed_names_machine_state_feed_and_legal_states(C):
    m = C.new()
    with pytest.raises(IllegalFeed) as info:
        m.tick()
    err = info.value
    assert (err.machine, err.state, err.feed, err.legal_states) == ("counter", "idle", "tick", ("counting",))
    assert "counter" in str(err) and "'tick'" in str(err) and "'idle'" in str(err) and "counting" in str(err)
    assert m.state == "idle"


def test_terminal_ignores_or_raises_as_declared(C):
    m = C.new()
    m.start()
    for _ in range(4):
        m.tick()
    assert m.state == "done" and m.is_terminal()
    before = m.snapshot()
    m.tick()  # terminal_feeds: ignore
    m.start()
    assert m.snapshot() == before
    with pytest.raises(IllegalFeed) as info:  # on_terminal: raise overrides
        m.poke()
    assert info.value.state == "done"


def test_otherwise_stay_and_raise(C):
    m = C.new()
    m.label("a")
    m.label("c")  # second branch: negated guard holds for anything but b
    m.label("b")  # no guard holds -> otherwise: stay
    assert m.data.log == ["a", "not-b"] and m.state == "idle"
    with pytest.raises(NoBranchMatched) as info:
        m.strict("z")
    assert info.value.state == "idle" and info.value.feed == "strict"
    assert isinstance(info.value, IllegalFeed)


def test_feed_arguments_are_checked_before_anything_runs(C):
    m = C.new()
    with pytest.raises(FeedArgumentError, match="argument 'n' must be integer, got str"):
        m.start("7")
    with pytest.raises(FeedArgumentError, match="unexpected keyword argument 'count'"):
        m.start(count=1)
    with pytest.raises(FeedArgumentError, match="no feed named 'stat'"):
        m.feed("stat")
    with pytest.raises(FeedArgumentError, match="must be integer"):
        m.start(True)  # a bool is not an integer here
    assert m.state == "idle" and m.data.count == 0


def test_feed_reply_and_keyword_arguments(C):
    m = C.new()
    m.feed("start", n=2)
    assert m.state_data == {"n": 2}
    assert m.poke() == "poked"


def test_policy_is_fed_in_and_checked(C):
    m = C.new()
    m.start()
    m.tick(policy={"limit": 0})
    assert m.state == "done"
    with pytest.raises(PolicyError, match="= 5000 is above the maximum 1000"):
        C.policy({"limit": 5000})
    with pytest.raises(PolicyError, match="must be integer"):
        C.Policy(limit="3")
    with pytest.raises(PolicyError, match="no policy number .limt.; did you mean .limit."):
        C.policy({"limt": 3})
    assert C.Policy().limit == 3  # the YAML default


def test_decisions_are_pure_and_ordered(C):
    m = C.new()
    before = m.snapshot()
    assert m.explain("what_next") == ("keep_going", "tick")
    assert m.decide("what_next", policy={"limit": 0}) == "stop"
    assert m.snapshot() == before
    with pytest.raises(UnknownFeed, match="no decision named 'nope'"):
        m.decide("nope")


def test_action_that_forgets_state_data_is_loud():
    text = "".join(line for line in COUNTER.splitlines(keepends=True) if "enter_with" not in line)
    m = compiled(text).new()
    with pytest.raises(ActionError, match="entering 'counting' on 'start': state data missing n"):
        m.start(1)


# -- snapshots ------------------------------------------------------------------------

FEEDS = st.lists(st.sampled_from(["start", "tick", "label_a", "label_c", "poke"]), max_size=12)


def apply(m, feed: str) -> str:
    try:
        if feed.startswith("label_"):
            m.label(feed[-1])
        else:
            r = m.feed(feed)
            return f"ok:{r}"
        return "ok"
    except IllegalFeed as err:
        return f"illegal:{err.state}"


@settings(max_examples=60, deadline=None)
@given(prefix=FEEDS, rest=FEEDS)
def test_snapshot_mid_run_decides_identically(C, prefix, rest):
    m = C.new()
    for f in prefix:
        apply(m, f)
    snap = json.loads(json.dumps(m.snapshot()))
    r = C.restore(snap)
    assert r.snapshot() == m.snapshot()
    for f in rest:
        assert apply(m, f) == apply(r, f)
        assert m.decide("what_next") == r.decide("what_next")
        assert m.snapshot() == r.snapshot()


def test_restore_is_independent_of_the_original(C):
    m = C.new()
    m.label("a")
    r = C.restore(m.snapshot())
    r.label("a")
    assert m.data.log == ["a"] and r.data.log == ["a", "a"]


def corrupt(snap, path, value):
    s = json.loads(json.dumps(snap))
    node = s
    for p in path[:-1]:
        node = node[p]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return s


@pytest.mark.parametrize(
    "path,value,message",
    [
        (("data", "count"), "three", "data.count must be integer"),
        (("data", "log"), [1], "data.log[0] must be string"),
        (("data", "count"), KeyError, "data must contain ['count'] properties"),
        (("data", "extra"), 1, "data must not contain {'extra'} properties"),
        (("state",), "flying", "unknown state 'flying'"),
        (("state_data", "n"), KeyError, "state_data must contain ['n'] properties (in state 'counting')"),
        (("format",), 99, "format 99 is not a supported format (1, 2)"),
        (("machine",), "turnstile", "it is of machine 'turnstile'"),
        (("fingerprint",), 7, "fingerprint 7 is not a string"),
        (("version",), 0, "version 0 is not a positive integer"),
        (("shape", "states"), [], "its shape is not a shape"),
        (("shape", "data", "count"), "str ing", "its shape is not a shape"),
        (("shape", "states", "counting", "n"), "string", "field n of state counting changed from string to integer"),
    ],
)
def test_corrupt_snapshots_are_refused(C, path, value, message):
    m = C.new()
    m.start(1)
    with pytest.raises(SnapshotError) as info:
        C.restore(corrupt(m.snapshot(), path, value))
    assert message in str(info.value)


def format_1(snap):
    """A snapshot as it was written before snapshots recorded their shape."""
    return {k: v for k, v in snap.items() if k not in ("version", "shape")} | {"format": 1}


def test_snapshot_from_another_spec_restores_by_shape_but_format_1_does_not(C):
    other = compiled(COUNTER.replace("value: 0}}\n", "value: 1}}\n", 1))
    m = other.new()
    assert other.fingerprint != C.fingerprint
    assert C.restore(m.snapshot()).state == "idle"  # a guard parameter changed: the shape did not
    assert C.restore(format_1(C.new().snapshot())).state == "idle"  # format 1, same fingerprint: as always
    with pytest.raises(SnapshotError, match="another version of the spec"):
        C.restore(format_1(m.snapshot()))
    with pytest.raises(SnapshotError, match="expected a JSON object"):
        C.restore([1, 2])


def test_descriptions_do_not_change_the_fingerprint(C):
    reworded = compiled(COUNTER.replace("description: ticking", "description: ticking away"))
    assert reworded.fingerprint == C.fingerprint


def test_instances_share_one_transitions_machine_and_never_join_it(monkeypatch):
    """No machine per instance and no model registered: creating and dropping instances costs no machine work."""
    C = compiled(COUNTER)  # its own class: the machine is built here, on its first feed, once
    calls = []
    orig_init = transitions.Machine.__init__
    monkeypatch.setattr(
        transitions.Machine, "__init__", lambda self, *a, **k: (calls.append("init"), orig_init(self, *a, **k))[1]
    )
    monkeypatch.setattr(transitions.Machine, "add_model", lambda *a, **k: calls.append("add_model"))
    snaps = []
    for i in range(50):
        m = C.new()
        m.start(i)
        m.tick()
        snaps.append(m.snapshot())
    restored = [C.restore(s) for s in snaps]
    assert calls == ["init"]
    assert [r.state_data["n"] for r in restored] == list(range(50))
    assert {r.machine for r in restored} == {C.machine}


def test_registries_resolve_from_installed_entry_points_only(monkeypatch):
    import loopfsm.core.registries as registries_module
    from loopfsm import SpecError

    class FakeEntryPoint:
        def __init__(self, name, value):
            self.name, self.value = name, value

        def load(self):
            return self.value

    custom = make_registry()
    eps = [FakeEntryPoint("custom", custom), FakeEntryPoint("broken", object())]
    monkeypatch.setattr(
        registries_module, "entry_points", lambda group, name=None: [e for e in eps if name in (None, e.name)]
    )
    spec = parse(COUNTER.replace("machine: counter\n", "machine: counter\nregistry: custom\n"), "c.yaml")
    assert spec.registry == "custom" and compile_spec(spec).registry is custom
    with pytest.raises(SpecError, match="not a loopfsm Registry"):
        parse(COUNTER.replace("machine: counter\n", "machine: counter\nregistry: broken\n"), "c.yaml")
    with pytest.raises(SpecError, match=r"unknown registry 'nope' \(known: broken, custom\)"):
        parse(COUNTER.replace("machine: counter\n", "machine: counter\nregistry: nope\n"), "c.yaml")


def test_a_decision_may_declare_states_without_an_answer():
    from loopfsm.rendering import render

    text = COUNTER.replace("    states: [idle, counting]\n", "    states: [idle]\n") + "    otherwise: raise\n"
    assert text != COUNTER + "    otherwise: raise\n"
    C2 = compiled(text)
    m = C2.new()
    assert m.decide("what_next") == "tick"
    m.start()
    with pytest.raises(DecisionError, match="decision 'what_next' has no answer in state 'counting'"):
        m.decide("what_next")
    assert "no answer (raises)" in render(C2.spec, ["mermaid"])["counter.what_next.mmd"]
    assert "no answer (raises)" not in render(compiled().spec, ["mermaid"])["counter.what_next.mmd"]


def test_policy_enums_are_enforced_for_defaults_and_fed_values():
    from loopfsm import SpecError, PolicyError as PE
    from loopfsm.machines.fallback_breaker import FallbackBreakerPolicy

    with pytest.raises(PE, match="when_fallback_fails' = 'panic' is not one of \\['fail_fast', 'try_primary'\\]"):
        FallbackBreakerPolicy(when_fallback_fails="panic")
    text = COUNTER.replace(
        "policy:\n", "policy:\n  mode: {type: string, default: slow, enum: [fast, careful], description: how}\n"
    )
    assert "mode:" in text
    with pytest.raises(SpecError, match="default 'slow' is not one of \\['fast', 'careful'\\]"):
        compiled(text)


def test_registry_refuses_what_yaml_could_not_call_safely():
    from loopfsm import Registry
    from loopfsm.core.errors import RegistryError

    reg = Registry("r")

    @reg.guard
    def ok(m, ctx, *, n: int) -> bool:
        return True

    with pytest.raises(RegistryError, match="guard 'ok' is registered twice"):
        reg.guard(ok)
    with pytest.raises(RegistryError, match="exactly two positional arguments"):
        reg.action(lambda m: None, name="one_arg")
    with pytest.raises(RegistryError, match="may not take \\*args or \\*\\*kwargs"):
        reg.action(lambda m, ctx, **kw: None, name="loose")
    with pytest.raises(RegistryError, match="has no action named 'ok'"):
        reg.get("action", "ok")
    assert reg.get("guard", "ok").params["n"].type is int


def test_an_exception_from_a_registered_guard_or_action_is_an_action_error_naming_the_branch():
    from loopfsm import ActionError, Registry, compile_spec, parse

    reg = Registry("raising")

    @reg.guard
    def blows(m, ctx):
        raise RuntimeError("guard blew")

    @reg.action
    def bump_then_fail(m, ctx):
        m.data.n += 100
        raise ValueError("mid-feed failure")

    text = """\
machine: raising
description: guards and actions that raise
data:
  n: {type: integer, default: 0}
states:
  a: {initial: true, description: start}
  b: {terminal: true, description: end}
events:
  check:
    description: a guard that raises
    from:
      a:
        - {guard: blows, to: b}
        - {stay: true}
  act:
    description: an action that raises after a change
    from:
      a:
        - {to: b, actions: [bump_then_fail]}
"""
    m = compile_spec(parse(text, "raising.yaml", reg), reg).new()
    with pytest.raises(ActionError, match="raising: feed 'check' in state 'a', branch 'check/a\\[0\\]'") as err:
        m.feed("check")
    assert isinstance(err.value.__cause__, RuntimeError) and m.state == "a" and m.data.n == 0
    with pytest.raises(ActionError, match="raised ValueError: mid-feed failure") as err:
        m.feed("act")
    assert isinstance(err.value.__cause__, ValueError)
    assert m.state == "a" and m.data.n == 100  # docs/errors.md says so: what ran before the raise stays


def test_a_refused_fingerprint_is_printed_like_the_local_one(C):
    """Both fingerprints in the refusal whole (they are short), so a reader can compare them by eye."""
    other = compiled(COUNTER.replace("value: 0}}\n", "value: 1}}\n", 1))
    with pytest.raises(SnapshotError) as info:
        C.restore(format_1(other.new().snapshot()))
    assert f"(fingerprint {other.fingerprint!r}, this spec is {C.fingerprint!r})" in str(info.value)
    huge = format_1(C.new().snapshot()) | {"fingerprint": "sha256:" + "f" * 10_000}
    with pytest.raises(SnapshotError) as info:
        C.restore(huge)
    assert "f" * 100 not in str(info.value) and "(10,009 characters)" in str(info.value)


def test_an_argument_outside_its_bounds_is_told_the_bounds_it_missed():
    """'must be integer, got int 99' left the caller guessing: 99 is an integer; the bounds are what it missed."""
    C = compiled(
        COUNTER.replace("n: {type: integer, default: 0}", "n: {type: integer, default: 0, minimum: 0, maximum: 9}")
    )
    m = C.new()
    with pytest.raises(FeedArgumentError, match=r"argument 'n' must be integer \(at least 0, at most 9\), got int 99$"):
        m.start(99)
    with pytest.raises(FeedArgumentError, match=r"must be integer \(at least 0, at most 9\), got int -1$"):
        m.start(n=-1)
    assert m.state == "idle" and not m.can("start", 10) and m.can("start", 9)
