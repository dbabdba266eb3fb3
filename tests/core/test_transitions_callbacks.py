"""A ``transitions`` user's own parts on an instance: callbacks that raise, bad callback options, threads.

The table decides what a feed does; a callback of the user's cannot leave an
instance half-moved, and racing threads on a ``LockedMachine`` see what one
thread feeding in turn would see.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest
from transitions.extensions import LockedMachine

from loopfsm import ActionError, CallbackError, ConfigError, IllegalFeed, compile_spec, parse
from loopfsm.core import tracing
from loopfsm.core.registry import Registry
from loopfsm.machines import ToolHealth, Turnstile

from tests.support.specs import dedent


def _recorded(gate: Turnstile, feed: str) -> tuple[list[Any], BaseException | None]:
    records: list[Any] = []
    with tracing.attached(gate, records.append):
        try:
            gate.feed(feed)
        except CallbackError as err:
            return records, err
    return records, None


@pytest.mark.parametrize("where", ["on_exit_locked", "on_enter_unlocked", "after_state_change"])
def test_a_callback_that_raises_after_the_branch_is_taken_leaves_the_move_complete_and_traced(where: str) -> None:
    def boom(self: Any, event: Any = None) -> None:
        raise RuntimeError("the alert failed")

    if where == "after_state_change":
        gate = Turnstile(machine_options={"after_state_change": lambda event: boom(None)})
    else:
        gate = type("Loud", (Turnstile,), {"__slots__": (), where: boom})()
    records, err = _recorded(gate, "coin")
    assert isinstance(err, CallbackError) and err.moved
    assert isinstance(err.__cause__, RuntimeError) and str(err.__cause__) == "the alert failed"
    assert "turnstile: feed 'coin' in state 'locked': a transitions callback raised RuntimeError" in str(err)
    assert (gate.state, gate.state_data) == ("unlocked", {})
    assert [(r.from_state, r.feed, r.to_state) for r in records] == [("locked", "coin", "unlocked")]
    assert Turnstile.restore(gate.snapshot()).state == "unlocked"


def test_a_before_state_change_callback_that_raises_changes_nothing_and_sends_no_record() -> None:
    def refuse(event: Any) -> None:
        raise ValueError("not now")

    gate = Turnstile(machine_options={"before_state_change": refuse})
    before = gate.snapshot()
    records, err = _recorded(gate, "coin")
    assert isinstance(err, CallbackError) and not err.moved and "nothing changed" in str(err)
    assert gate.snapshot() == before and records == []


@pytest.mark.parametrize(
    "value, words",
    [
        (5, "machine option after_state_change: a int is not a callback"),
        ("no_such_method", "'no_such_method' names neither a method of Turnstile nor an importable callable"),
        (["is_terminal", "os.path.nope"], "'os.path.nope' names neither"),
    ],
)
def test_a_callback_option_transitions_could_not_call_is_refused_when_the_instance_is_made(
    value: Any, words: str
) -> None:
    with pytest.raises(ConfigError, match=words):
        Turnstile(machine_options={"after_state_change": value})


class Noting(Turnstile):
    __slots__ = ()

    def noted(self, event: Any) -> None:
        NOTES.append(f"method: {self.state}")


NOTES: list[str] = []


def note(event: Any) -> None:
    NOTES.append(f"function: {event.model.state}")


def test_callback_options_naming_a_method_or_an_importable_function_are_called() -> None:
    NOTES.clear()
    gate = Noting(machine_options={"after_state_change": ["noted", "tests.core.test_transitions_callbacks.note"]})
    gate.coin()
    assert NOTES == ["method: unlocked", "function: unlocked"]


def test_threads_feeding_a_locked_instance_see_one_chain_of_trace_records_and_only_loopfsm_errors() -> None:
    """A one-way door: ``open`` is legal only while shut; racing threads must get IllegalFeed, and the
    records must chain (each from the state the one before ended in)."""
    reg = Registry("door")
    text = dedent("""
        machine: door
        description: a door that is opened and shut by many threads
        registry: door
        states:
          shut: {initial: true, description: shut}
          open: {description: open}
        events:
          open: {description: opens it, from: {shut: [{to: open}]}}
          shut: {description: shuts it, from: {open: [{to: shut}]}}
    """)
    door = compile_spec(parse(text, "door.yaml", reg), reg).new(machine_class=LockedMachine)
    records: list[Any] = []
    unexpected: list[BaseException] = []
    illegal = [0]

    def turn(feed: str) -> None:
        for _ in range(1000):
            try:
                door.feed(feed)
            except IllegalFeed:
                illegal[0] += 1
            except BaseException as err:  # noqa: BLE001 - reported below
                unexpected.append(err)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch every few bytecodes: the races show within 4,000 feeds
    try:
        with tracing.attached(door, records.append):
            threads = [threading.Thread(target=turn, args=(f,)) for f in ("open", "shut", "open", "shut")]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        sys.setswitchinterval(interval)
    assert unexpected == []
    assert len(records) + illegal[0] == 4000
    for earlier, later in zip(records, records[1:], strict=False):
        assert later.from_state == earlier.to_state != later.to_state
    assert records[-1].to_state == door.state


def test_a_feed_that_finds_its_state_changed_under_it_is_judged_in_the_state_it_found() -> None:
    """Two threads on an unlocked instance: the state read for the legality check and the one transitions
    reads differ.  A state attribute that answers differently on its second read stands in for the race."""
    reg = Registry("raced")
    text = dedent("""
        machine: raced
        description: r
        registry: raced
        states:
          a: {initial: true, description: a}
          b: {description: b}
          end: {terminal: true, description: end}
        events:
          go: {description: g, from: {a: [{to: b}]}}
          stop: {description: s, from: {a: [{to: end}], b: [{to: end}]}}
    """)
    compiled = compile_spec(parse(text, "raced.yaml", reg), reg)

    class Raced(compiled.Instance):  # type: ignore[name-defined,misc]
        reads = 0

        @property  # type: ignore[misc]
        def _state(self) -> str:
            Raced.reads += 1
            return "a" if Raced.reads == 1 else "b"

        @_state.setter
        def _state(self, value: str) -> None:
            pass

    with pytest.raises(IllegalFeed, match="state 'b'"):
        Raced(engine="transitions").go()


def test_tool_health_refuses_an_unknown_engine_when_it_is_made() -> None:
    with pytest.raises(ConfigError, match="tool_health: engine=: engine must be one of"):
        ToolHealth(engine="fast")  # type: ignore[arg-type]


def test_copies_go_the_way_pickling_goes_keeping_the_named_engine_not_an_own_machine() -> None:
    import copy

    locked = Turnstile(machine_class=LockedMachine)
    locked.coin()
    fast = Turnstile(engine="interpreter")
    for make in (copy.copy, copy.deepcopy):
        again = make(locked)
        assert again.machine is Turnstile.compiled.machine and again.snapshot() == locked.snapshot()
        assert make(fast).engine == "interpreter"


def test_nested_feeds_reach_the_recursion_limit_as_a_typed_error_on_both_engines(loopfsm_coverage_paused: Any) -> None:
    """docs/transitions.md gives the depths (about 80 levels against about 250, with no trace sink listening:
    a listening sink adds frames to every level): each is pinned to a range."""
    reg = Registry("deep")
    depth = [0]

    @reg.action
    def again(m: Any, ctx: Any) -> None:
        depth[0] += 1
        m.go()

    text = dedent("""
        machine: deep
        description: an action that feeds its own instance
        registry: deep
        states:
          a: {initial: true, description: a}
        events:
          go: {description: g, from: {a: [{stay: true, actions: [again]}]}}
    """)
    compiled = compile_spec(parse(text, "deep.yaml", reg), reg)
    reached: dict[str, int] = {}
    raised: dict[str, BaseException] = {}

    def go(engine: str) -> None:  # on a thread of its own: the stack starts empty, as in a user's script
        depth[0] = 0
        try:
            compiled.new(engine=engine).go()
        except BaseException as err:  # noqa: BLE001 - checked below
            raised[engine] = err
        reached[engine] = depth[0] * 1000 // sys.getrecursionlimit()

    for engine in ("transitions", "interpreter"):
        thread = threading.Thread(target=go, args=(engine,))
        thread.start()
        thread.join()
        assert isinstance(raised[engine], ActionError) and isinstance(raised[engine].__cause__, RecursionError)
    assert 50 <= reached["transitions"] <= 110 and 200 <= reached["interpreter"] <= 300
