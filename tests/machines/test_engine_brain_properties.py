"""Property tests: random legal drives of the brain under random policies keep its invariants."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopfsm.machines.engine_brain import Completed, LoopError, LoopMachine, MachinePolicy, Message, ToolCall

from tests.support.brain_helpers import answers

pytestmark = pytest.mark.slow  # a long hypothesis run

policies = st.builds(
    MachinePolicy,
    max_turns=st.integers(0, 6),
    context_window=st.sampled_from([0, 1000, 200_000]),
    compact_threshold=st.integers(0, 100),
    auto_compact=st.booleans(),
)
tokens = st.one_of(st.integers(0, 1200), st.integers(150_000, 200_000))

LIVE_OPS = ["step", "set_context_tokens", "inject", "cancel", "fail", "accept_input"]
BY_STATE = {
    "Start": LIVE_OPS,
    "AwaitingModel": LIVE_OPS + ["model_response"] * 4,
    "AwaitingTools": LIVE_OPS + ["tool_results"] * 4,
    "AwaitingCompaction": LIVE_OPS + ["compaction_result", "compaction_noop"] * 2,
    "Terminal": ["accept_input", "cancel", "inject", "set_context_tokens", "fail", "step"],
}


def draw_op(data, m) -> tuple:
    """An operation and all its parameters, drawn once so it can be applied to twins identically."""
    op = data.draw(st.sampled_from(BY_STATE[m.state]))
    if op == "step":
        return (op, data.draw(policies))
    if op == "set_context_tokens":
        return (op, data.draw(tokens))
    if op == "model_response":
        names = data.draw(st.lists(st.sampled_from(["shell", "read_file", "ghost"]), max_size=3))
        reply = Message.assistant("final" if not names else "", [ToolCall(f"t{i}", n) for i, n in enumerate(names)])
        return (op, reply, data.draw(tokens))
    if op in ("compaction_result", "compaction_noop"):
        before = m.data.context_tokens
        return (op, before, data.draw(st.integers(0, before + 10)))
    return (op,)


def apply(m, op: tuple) -> None:
    name = op[0]
    if name == "step":
        m.begin(m.next_step(policy=op[1]))
    elif name == "set_context_tokens":
        m.set_context_tokens(op[1])
    elif name == "inject":
        m.inject(Message.user("note"))
    elif name == "cancel":
        m.cancel()
    elif name == "fail":
        m.fail(LoopError("boom"))
    elif name == "accept_input":
        m.accept_input("again")
    elif name == "model_response":
        m.model_response(op[1], op[2], ["shell", "read_file"])
    elif name == "tool_results":
        m.tool_results(answers(m))
    elif name == "compaction_result":
        m.compaction_result([Message.user("summary")], op[1], op[2])
    elif name == "compaction_noop":
        m.compaction_noop(op[1], op[2])


@settings(max_examples=300, deadline=None)
@given(data=st.data(), n_ops=st.integers(1, 40), restore_at=st.integers(0, 40))
def test_invariants_under_random_legal_drives(data, n_ops, restore_at):
    m = LoopMachine()
    m.accept_input("start")
    twin = None
    history_at_run_start = list(m.data.history)
    compacted_this_run = False
    for i in range(n_ops):
        if i == restore_at:
            twin = LoopMachine.restore(json.loads(json.dumps(m.snapshot())))
        probe = data.draw(policies)
        before = m.snapshot()
        # next_step is pure and repeatable
        assert m.next_step(policy=probe) == m.next_step(policy=probe)
        assert m.snapshot() == before
        was_terminal = m.is_terminal()
        tools_before = list(m.data.pending_tools)
        op = draw_op(data, m)
        apply(m, op)
        if twin is not None:
            apply(twin, op)
            assert twin.snapshot() == m.snapshot()
            assert twin.next_step(policy=probe) == m.next_step(policy=probe)
        # terminal is forever
        if was_terminal:
            assert m.snapshot() == before
        # pending_tools changes only through model_response (filling it), tool_results, or a new run
        if m.data.pending_tools != tools_before:
            assert op[0] in ("model_response", "tool_results", "accept_input"), op
            if op[0] == "model_response":
                assert tools_before == []
        if op[0] == "accept_input" and not was_terminal:
            history_at_run_start, compacted_this_run = list(m.data.history), False
        if op[0] == "compaction_result" and m.state == "Start":
            compacted_this_run = True
    # a failed run leaves history as it was before the run, except after a mid-run compaction
    if m.is_terminal() and not isinstance(m.outcome(), Completed):
        m.discard_pending()
        if not compacted_this_run:
            assert m.full_history() == history_at_run_start
    # and a finished machine still knows it finished after a round trip
    r = LoopMachine.restore(json.loads(json.dumps(m.snapshot())))
    assert r.is_terminal() == m.is_terminal() and r.outcome() == m.outcome()
