"""``CompiledMachine.to_transitions()``: a stock ``transitions.Machine`` that runs the table as instances do.

The differential tests drive every shipped machine, and generated user
machines, through both loopfsm's interpreter (the instance API) and the
``transitions`` machine with the same random feeds, comparing after every
step what each answered (or which error it raised, and its words) and the
state, state data and data.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import threading
from typing import Any

import pytest
import transitions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transitions.extensions import LockedMachine

from loopfsm import FeedRefused, IllegalFeed, LoopFsmError, NoBranchMatched, compile_spec, load_machine, parse
from loopfsm.core.fieldtypes import INT_MAX, INT_MIN
from loopfsm.machines.engine_brain import LoopError, Message
from loopfsm.machines.engine_values import ModelError
from loopfsm.core.registry import Registry
from loopfsm.core.spec import FieldDef
from loopfsm.core.transitions_machine import TransitionsModel

from tests.support.brain_helpers import reply_with_tools
from tests.support.specs import dedent

SHIPPED = (
    "agent_loop",
    "engine_brain",
    "fallback_breaker",
    "router_client",
    "router_run",
    "run_lock",
    "stream_assembly",
    "tool_breaker",
    "turnstile",
)

NEXT_STEP = object()  # stands for "the step the instance's next_step decision answers now"

#: Values of the shipped machines' own field types; every pool also meets values of the wrong type.
CODEC_VALUES: dict[str, list[Any]] = {
    "message": [
        Message.assistant("hi"),
        reply_with_tools("shell"),
        reply_with_tools("no_such_tool"),
        Message.tool_result("c1", "ok"),
        Message.user("u"),
    ],
    "loop_error": [LoopError("e"), ModelError("m")],
    "tool_health": [None],
    "step": [NEXT_STEP],
}
WRONG = st.sampled_from([None, -1, 1.5, True, "", "x", [], {}, ["x"], ("x",), b"x"])
WORDS = ["", "a", "c1", "c2", "shell", "read_file", "primary", "message:m1", "tool_call:c1", "x" * 40]


def field_values(f: FieldDef) -> st.SearchStrategy[Any]:
    if f.enum:
        one: st.SearchStrategy[Any] = st.sampled_from(list(f.enum))
    elif f.type == "integer":
        one = st.one_of(st.integers(-2, 12), st.integers(0, 250_000), st.sampled_from([INT_MIN, INT_MAX, INT_MAX + 1]))
    elif f.type == "number":
        one = st.one_of(st.integers(-2, 12), st.floats(-10, 10))
    elif f.type == "boolean":
        one = st.booleans()
    elif f.type == "string":
        one = st.sampled_from(WORDS)
    elif f.type == "json":
        one = st.sampled_from([None, 0, "x", {"a": 1}, [1, 2], {}, {"text": "hi"}])
    else:
        one = st.sampled_from(CODEC_VALUES[f.type])
    if f.list:
        one = st.lists(one, max_size=3)
    if f.nullable:
        one = st.one_of(st.none(), one)
    return st.one_of(one, one, one, one, one, one, one, one, one, WRONG)  # mostly well typed


def feeds_of(compiled: Any) -> st.SearchStrategy[tuple[str, tuple[Any, ...]]]:
    """A feed of the machine with arguments for it, all of them, in order (some of the wrong type)."""
    options = []
    for ev in compiled.spec.events.values():
        args = st.tuples(*(field_values(f) for f in ev.args.values()))
        options.append(st.tuples(st.just(ev.name), args))
    return st.one_of(options)


def outcome(run: Any, *args: Any) -> tuple[str, Any]:
    """What ``run(*args)`` answered, or the LoopFsmError it raised (its class and words)."""
    try:
        return ("answered", run(*args))
    except LoopFsmError as err:
        return (type(err).__name__, str(err))


def trigger(model: TransitionsModel, feed: str, *args: Any) -> Any:
    """The trigger, answering as a feed does: with the reply (a trigger itself returns True / False)."""
    model.trigger(feed, *args)  # type: ignore[attr-defined]  # transitions adds it
    return model.reply


def resolved(inst: Any, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    if NEXT_STEP not in args:
        return args
    try:
        step = inst.decide("next_step")
    except LoopFsmError:
        return None
    return tuple(step if a is NEXT_STEP else a for a in args)


def drive_both(compiled: Any, feeds: list[tuple[str, tuple[Any, ...]]], policy: Any = None) -> None:
    """Each feed to an instance (with ``policy``) and to a transitions machine built for ``policy``."""
    inst = compiled.new()
    model = compiled.to_transitions(policy).model
    model.data = copy.deepcopy(inst.data)  # a typed class may set data when it makes an instance (a breaker's name)
    assert (model.state, model.state_data) == (inst.state, inst.state_data)
    for step, (feed, raw) in enumerate(feeds):
        args = resolved(inst, raw)
        if args is None:
            continue
        mine = outcome(lambda *a: inst.feed(*a, policy=policy), feed, *args)
        theirs = outcome(trigger, model, feed, *copy.deepcopy(args))
        where = f"step {step}: {feed}{args!r}"
        assert mine == theirs, where
        assert model.state == inst.state, where
        assert model.state_data == inst.state_data, where
        assert model.data == inst.data, where


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_machine_runs_the_same_on_transitions(name: str) -> None:
    compiled = load_machine(name)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(feeds_of(compiled), max_size=25))
    def check(feeds: list[tuple[str, tuple[Any, ...]]]) -> None:
        drive_both(compiled, feeds)

    check()


# -- generated user machines -------------------------------------------------------------------


def user_registry() -> Registry:
    reg = Registry("fuzzed")

    @reg.guard
    def x_at_least(m: Any, ctx: Any, *, n: int) -> bool:
        return bool(ctx.args["x"] >= n)

    @reg.guard
    def count_below(m: Any, ctx: Any, *, limit: int) -> bool:
        return bool(m.data.count < limit)

    @reg.guard(reads=("kind",))
    def kind_is(m: Any, ctx: Any, *, kind: str) -> bool:
        return bool(ctx.args["kind"] == kind)

    @reg.action
    def add(m: Any, ctx: Any, *, by: int) -> None:
        m.data.count += by

    @reg.action
    def log(m: Any, ctx: Any, *, text: str) -> None:
        m.data.log.append(text)

    @reg.action
    def keep_x(m: Any, ctx: Any) -> None:
        ctx.enter(x=ctx.args["x"])

    @reg.action
    def divide(m: Any, ctx: Any) -> None:
        m.data.count = 100 // ctx.args["x"]  # raises ZeroDivisionError for x == 0: an ActionError

    return reg


GUARDS = [
    "{name: x_at_least, params: {n: %d}}",
    "{name: x_at_least, params: {n: %d}, negate: true}",
    "{name: count_below, params: {limit: {policy: limit}}}",
    "{name: kind_is, params: {kind: %s}}",
    "{name: kind_is, params: {kind: %s}, negate: true}",
    "{any: [{name: kind_is, params: {kind: %s}},"
    " [{name: x_at_least, params: {n: %d}}, {name: count_below, params: {limit: {policy: limit}}}]]}",
]


#: A branch's ``when:`` (empty: a guard alone), on the enum argument the feed narrows on and on an integer.
WHENS = ["", "{kind: a}", "{kind: [b, null]}", "{x: %d}", "{x: [0, 2], kind: a}"]


@st.composite
def user_machines(draw: Any) -> str:
    """A valid machine: a chain of states with data-carrying ones, feeds with guarded branches
    (``when:`` conditions among them), refusals, otherwise stay or raise, and terminal states that ignore or raise."""
    n = draw(st.integers(2, 5))
    states = [f"s{i}" for i in range(n)]
    lines = [
        "machine: fuzzed",
        "description: a generated machine",
        "registry: fuzzed",
        f"terminal_feeds: {draw(st.sampled_from(['ignore', 'raise']))}",
        "policy:",
        f"  limit: {{type: integer, default: {draw(st.integers(0, 6))}, minimum: 0, description: a limit}}",
        "data:",
        "  count: {type: integer, default: 0}",
        "  log: {type: string, list: true}",
        "states:",
    ]
    carrying = {s for s in states[1:] if draw(st.booleans())}
    for i, s in enumerate(states):
        extra = ", initial: true" if i == 0 else ""
        data = ", data: {x: {type: integer, description: the x it was entered with}}" if s in carrying else ""
        lines.append(f"  {s}: {{description: state {i}{extra}{data}}}")
    lines.append("  done: {terminal: true, description: the end}")
    lines.append("events:")
    # Every state reaches the next one and the end, so every state is reachable.
    lines += ["  step:", "    description: to the next state", "    args:", "      x: {type: integer}", "    from:"]
    for i, s in enumerate(states):
        to = states[i + 1] if i + 1 < n else "done"
        keep = "keep_x, " if to in carrying else ""
        lines.append(f"      {s}: [{{to: {to}, actions: [{keep}{{name: log, params: {{text: step}}}}]}}]")
    lines += ["  stop:", "    description: to the end", "    from:", "      '*': [{to: done}]"]
    for f in range(draw(st.integers(1, 3))):
        otherwise = draw(st.sampled_from(["stay", "raise"]))
        lines += [
            f"  f{f}:",
            f"    description: generated feed {f}",
            f"    otherwise: {otherwise}",
            "    args:",
            "      x: {type: integer}",
            "      kind: {type: string, enum: [a, b], nullable: true}",
            "    from:",
        ]
        for s in states:
            if s != states[0] and not draw(st.booleans()):
                continue
            lines.append(f"      {s}:")
            for _ in range(draw(st.integers(1, 3))):
                guard = draw(st.sampled_from(GUARDS))
                guard = guard.replace("%d", str(draw(st.integers(-1, 3))), 1).replace("%s", draw(st.sampled_from("ab")))
                guard = guard.replace("%d", str(draw(st.integers(-1, 3))))
                when = draw(st.sampled_from(WHENS)).replace("%d", str(draw(st.integers(-1, 3))))
                if not when:
                    lines.append(f"        - guard: {guard}")
                else:
                    lines.append(f"        - when: {when}")
                    if draw(st.booleans()):
                        lines.append(f"          guard: {guard}")
                move = draw(st.sampled_from(["stay", "to", "refuse", "divide"]))
                to = draw(st.sampled_from(states))
                keep = "keep_x, " if to in carrying else ""
                if move == "refuse":
                    lines.append("          refuse: not now")
                elif move == "to":
                    lines.append(f"          to: {to}")
                    lines.append(f"          actions: [{keep}{{name: add, params: {{by: {draw(st.integers(1, 3))}}}}}]")
                else:
                    lines.append("          stay: true")
                    lines.append(
                        "          actions: [divide]"
                        if move == "divide"
                        else "          actions: [{name: add, params: {by: 1}}]"
                    )
            if draw(st.booleans()):
                lines.append("        - stay: true")
                lines.append("          actions: [{name: log, params: {text: fallback}}]")
    return "\n".join(lines) + "\n"


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(user_machines(), st.data())
def test_generated_user_machines_run_the_same_on_transitions(text: str, data: Any) -> None:
    reg = user_registry()
    compiled = compile_spec(parse(text, "fuzzed.yaml", reg), reg)
    feeds = data.draw(st.lists(feeds_of(compiled), max_size=20))
    policy = data.draw(st.sampled_from([None, {"limit": 0}, {"limit": 3}]))
    drive_both(compiled, feeds, policy)


# -- what the transitions machine is ---------------------------------------------------------

TURNSTILE = load_machine("turnstile")


def test_it_is_a_stock_transitions_machine_whose_triggers_are_the_feeds() -> None:
    machine = TURNSTILE.to_transitions()
    assert type(machine) is transitions.Machine
    assert all(type(e) is transitions.core.Event for e in machine.events.values())
    ts = [t for e in machine.events.values() for bs in e.transitions.values() for t in bs]
    assert ts and all(type(t) is transitions.core.Transition for t in ts)
    model = machine.model
    assert isinstance(model, TransitionsModel) and model.state == "locked"
    assert model.coin() is True and model.state == "unlocked"
    assert model.trigger("push") is True and (model.state, model.data.passages) == ("locked", 1)
    assert machine.get_triggers("locked") == ["coin", "push"]


def test_conditions_are_the_registrys_guards_with_their_yaml_parameters() -> None:
    machine = TURNSTILE.to_transitions(policy={"fare": 2})
    (paid, keep) = machine.events["coin"].transitions["locked"]
    assert (paid.dest, keep.dest) == ("unlocked", None)  # YAML order; stay: true is an internal transition
    (condition,) = paid.conditions
    assert condition.func.__name__ == "fare_paid" and condition.target is True
    assert keep.conditions == [] and [c.__name__ for c in keep.before] == ["keep_credit"]
    model = machine.model
    model.coin()
    assert (model.state, model.data.credit) == ("locked", 1)  # fare 2: one coin is not enough
    model.coin()
    assert model.state == "unlocked"


def test_only_to_transitions_imports_transitions() -> None:
    code = (
        "import sys, loopfsm\n"
        "from loopfsm.machines import LoopMachine, Turnstile\n"
        "t = Turnstile(); t.coin(); t.push(); LoopMachine().accept_input('hi')\n"
        "assert 'transitions' not in sys.modules\n"
        "Turnstile.compiled.to_transitions()\n"
        "assert 'transitions' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_illegal_refused_and_unmatched_feeds_raise_what_the_instance_api_raises() -> None:
    breaker = load_machine("tool_breaker").to_transitions().model
    breaker.acquire(5, "c1")
    assert type(breaker.reply).__name__ == "Allow"
    breaker.record(6, "c1", "success", 0)
    breaker.acquire(6, "c2")
    assert type(breaker.reply).__name__ == "Allow"
    before = (breaker.state, copy.deepcopy(breaker.data))
    with pytest.raises(FeedRefused, match="no permit is outstanding"):
        breaker.record(7, "c1", "success", 0)
    assert (breaker.state, breaker.data, breaker.reply) == (*before, None)
    with pytest.raises(LoopFsmError, match="argument 'outcome'"):
        breaker.record(7, "c1", "nope", 0)
    brain = load_machine("engine_brain").to_transitions().model
    with pytest.raises(IllegalFeed, match="feed 'tool_results' is illegal in state 'Start'"):
        brain.tool_results([])
    assert brain.state == "Start"


def test_otherwise_raise_is_a_last_internal_transition() -> None:
    text = dedent("""
        machine: picky
        description: moves only on a big enough x
        data:
          seen: {type: integer, default: 0}
        states:
          a: {initial: true, description: waiting}
          b: {terminal: true, description: moved}
        events:
          go:
            description: try to move
            otherwise: raise
            args:
              x: {type: integer}
            from:
              a:
                - guard: {name: x_at_least, params: {n: 3}}
                  to: b
    """)
    reg = user_registry()
    model = compile_spec(parse(text, "picky.yaml", reg), reg).to_transitions().model
    with pytest.raises(NoBranchMatched):
        model.go(1)
    assert model.state == "a"
    assert model.go(3) is True and model.state == "b"


def test_transitions_extensions_run_it_locked_and_as_a_graph() -> None:
    """``machine_class=`` builds the table on a ``transitions`` extension: here its LockedMachine and GraphMachine."""
    machine = TURNSTILE.to_transitions(machine_class=LockedMachine)
    assert isinstance(machine, LockedMachine)
    model = machine.model
    errors: list[BaseException] = []

    def turn() -> None:
        try:
            for _ in range(100):
                model.coin()
                model.push()
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=turn) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and model.state in ("locked", "unlocked") and 100 <= model.data.passages <= 400

    from transitions.extensions import GraphMachine

    graph = TURNSTILE.to_transitions(machine_class=GraphMachine, show_conditions=True)
    source = graph.model.get_graph().source
    assert "unlocked" in source and "fare_paid" in source
    graph.model.coin()
    assert graph.model.state == "unlocked"
