"""State names inside guard, action and invariant parameters are resolved like a branch's ``to:``.

A parameter annotated ``StateName`` or ``list[StateName]`` (the built-in
``state_in`` guard's ``states``, the agent loop's ``expire`` action's
``side_effects_pending_in``) names states: a typo is an error at the name's own
line and column, once, with a did-you-mean, instead of a comparison that
silently never matches.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from loopfsm import Registry, SpecError, load, parse
from loopfsm.core.errors import Problem
from loopfsm.core.invariants import BUILTINS
from loopfsm.core.registry import StateName
from loopfsm.machines.agent_loop import REGISTRY as AGENT_LOOP

AGENT_LOOP_YAML = Path(__file__).resolve().parents[2] / "machines" / "agent_loop.yaml"

PENDING = "side_effects_pending_in: [executing_tool, recovering]"
COMPLETED = "{name: state_in, negate: true, params: {states: [completed]}}"


def _errors(text: str, registry: Registry | None, file: str = "m.yaml") -> list[Problem]:
    with pytest.raises(SpecError) as info:
        parse(text, file, registry)
    return [p for p in info.value.problems if p.severity == "error"]


def _place(text: str, line_with: str, word: str) -> tuple[int, int]:
    """The line and column (1-based) of ``word`` on the one line of ``text`` holding ``line_with``."""
    (line,) = [i for i, t in enumerate(text.splitlines(), 1) if line_with in t]
    return line, text.splitlines()[line - 1].index(word) + 1


def _shipped() -> str:
    text = AGENT_LOOP_YAML.read_text(encoding="utf-8")
    assert text.count(PENDING) == 1 and text.count(COMPLETED) == 1, "the shipped agent loop changed: update the test"
    return text


def test_the_annotations_say_state_names():
    assert BUILTINS.get("guard", "state_in").params["states"].type == list[StateName]
    assert AGENT_LOOP.get("action", "expire").params["side_effects_pending_in"].type == list[StateName]


def test_the_shipped_agent_loop_names_real_states():
    spec = parse(_shipped(), str(AGENT_LOOP_YAML), AGENT_LOOP)
    assert spec.name == "agent_loop"


def test_a_typo_in_state_in_is_one_error_at_its_place():
    text = _shipped().replace(COMPLETED, COMPLETED.replace("[completed]", "[completd]"))
    (err,) = _errors(text, AGENT_LOOP, "agent_loop.yaml")
    assert (err.line, err.column) == _place(text, "[completd]", "completd")
    assert err.path.endswith(".params.states[0]"), err.path
    assert err.message == (
        "parameter 'states' of guard 'state_in' names states, but the machine has no state 'completd'; "
        "did you mean 'completed'?"
    )


def test_a_typo_in_an_action_parameter_is_one_error_though_its_branch_is_used_three_times():
    text = _shipped()
    assert text.count("*deadline") > 1  # the branch holding `expire` is an anchor, aliased in many states
    text = text.replace(PENDING, PENDING.replace("recovering]", "recoverng]"))
    (err,) = _errors(text, AGENT_LOOP, "agent_loop.yaml")
    assert (err.line, err.column) == _place(text, "recoverng]", "recoverng")
    assert err.path.endswith(".params.side_effects_pending_in[1]"), err.path
    assert err.message == (
        "parameter 'side_effects_pending_in' of action 'expire' names states, but the machine has no state "
        "'recoverng'; did you mean 'recovering'?"
    )


def test_a_number_is_refused_where_state_names_are_expected():
    for wrong, shown in (("5", "int 5"), ("[7]", "list [7]"), ("[executing_tool, 3]", "list ['executing_tool', 3]")):
        text = _shipped().replace(PENDING, f"side_effects_pending_in: {wrong}")
        (err,) = _errors(text, AGENT_LOOP, "agent_loop.yaml")
        assert err.message == (
            f"parameter 'side_effects_pending_in' of action 'expire' expects list[StateName], got {shown}"
        )
        assert err.path.endswith(".params.side_effects_pending_in"), err.path


SMALL = """\
machine: lamp
description: a lamp for tests
registry: lamp
data:
  presses: {type: integer, default: 0, description: presses so far}
states:
  off: {initial: true, description: dark}
  on: {description: lit}
events:
  press:
    description: press the switch
    from:
      off:
        - guard: {name: was_in, params: {state: on}}
          stay: true
        - to: on
      on:
        - {to: off}
invariants:
  lit_or_dark:
    description: the lamp is on or off
    always: {name: state_in, params: {states: [off, on]}}
"""


def _lamp() -> Registry:
    reg = Registry("lamp")

    @reg.guard
    def was_in(m: object, ctx: object, *, state: StateName | None = None) -> bool:
        return state is None

    return reg


def test_correct_names_pass():
    spec = parse(SMALL, "lamp.yaml", _lamp())
    assert set(spec.states) == {"off", "on"}


def test_a_typo_in_an_invariant_is_caught_with_or_without_the_registry(tmp_path):
    text = SMALL.replace("states: [off, on]", "states: [of, on]")
    path = tmp_path / "lamp.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load(path, lookup=lambda name: None)  # no registry: the built-in guard is checked all the same
    with_registry = _errors(text, _lamp())
    assert len(with_registry) == len(info.value.problems) == 1
    for err in (*with_registry, *info.value.problems):
        assert (err.line, err.column) == _place(text, "[of, on]", "of,")
        assert err.message == (
            "parameter 'states' of guard 'state_in' names states, but the machine has no state 'of'; "
            "did you mean 'off'?"
        )


def test_one_state_name_is_resolved_too():
    text = SMALL.replace("{state: on}", "{state: onn}")
    (err,) = _errors(text, _lamp())
    assert (err.line, err.column) == _place(text, "{state: onn}", "onn")
    assert err.path == "events.press.from.off[0].guard.params.state"
    assert err.message == (
        "parameter 'state' of guard 'was_in' names a state, but the machine has no state 'onn'; did you mean 'on'?"
    )
    (err,) = _errors(SMALL.replace("{state: on}", "{state: 4}"), _lamp())
    assert err.message == "parameter 'state' of guard 'was_in' expects StateName | None, got int 4"
    (err,) = _errors(SMALL.replace("states: [off, on]", "states: 4"), _lamp())
    assert err.message == "parameter 'states' of guard 'state_in' expects list[StateName], got int 4"


def test_a_misspelt_stay_is_one_error_at_the_typo_and_both_moves_still_refused():
    """``sty: true`` is one mistake: the unknown key, not also "a branch needs exactly one of to or stay"; a branch
    that has both ``to`` and ``stay`` beside a misspelt key is refused for both."""
    from loopfsm.machines.engine_brain import REGISTRY as BRAIN

    shipped = (Path(__file__).parents[2] / "machines" / "engine_brain.yaml").read_text(encoding="utf-8")
    block = "          actions: [extend_pending]"
    assert shipped.count("        - stay: true\n" + block) == 1, "the shipped engine brain changed: update the test"
    text = shipped.replace("        - stay: true\n" + block, "        - sty: true\n" + block)
    (err,) = _errors(text, BRAIN, "engine_brain.yaml")
    assert (err.line, err.column) == _place(text, "- sty: true", "sty")
    assert err.message.startswith("unknown key 'sty'; did you mean 'stay'?"), err.message
    both = shipped.replace(
        "        - stay: true\n" + block, "        - stay: true\n          to: Start\n          sty: 1\n" + block
    )
    messages = sorted(e.message.split(";")[0] for e in _errors(both, BRAIN, "engine_brain.yaml"))
    assert messages == ["a branch needs exactly one of 'to: <State>' or 'stay: true'", "unknown key 'sty'"], messages
