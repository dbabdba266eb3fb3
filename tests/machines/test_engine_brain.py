"""The engine brain against seeds 000 and 001: tables, traces, arithmetic, outcomes, snapshots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopfsm import load_machine
import yaml

from loopfsm import IllegalFeed, NoBranchMatched, SnapshotError
from loopfsm.core.errors import FeedArgumentError
from loopfsm.machines.engine_brain import (
    CallLLM,
    CallTools,
    Cancelled,
    Compact,
    Completed,
    ContextExceeded,
    Done,
    Emergency,
    Failed,
    LoopError,
    LoopMachine,
    MachinePolicy,
    MaxTurnsExceeded,
    Message,
    RunCancelled,
    ThresholdExceeded,
    ToolCall,
    TurnLimitExceeded,
)
from loopfsm.core.resources import machine_path

from tests.support.brain_helpers import TOOLS, P, answers, brain_in, reply_with_tools, step

STATES = ["Start", "AwaitingModel", "AwaitingTools", "AwaitingCompaction", "Terminal"]


def feed_model_reply(m):
    m.model_response(reply_with_tools("shell"), 1200, TOOLS)


def feed_tool_results(m):
    m.tool_results(answers(m) if m.state == "AwaitingTools" else [Message.tool_result("c1", "x")])


def feed_compaction_done(m):
    m.compaction_result([Message.user("summary")], 190_000, 20_000)


FEEDS = {
    "model_response": feed_model_reply,
    "tool_results": feed_tool_results,
    "compaction_result": feed_compaction_done,
}

# Seed 000, "Was in x Feed": None = illegal, "ignored" = terminal, else the new state.
SEED_TABLE = {
    "Start": {"model_response": None, "tool_results": None, "compaction_result": None},
    "AwaitingModel": {"model_response": "AwaitingTools", "tool_results": None, "compaction_result": None},
    "AwaitingTools": {"model_response": None, "tool_results": "Start", "compaction_result": None},
    "AwaitingCompaction": {"model_response": None, "tool_results": None, "compaction_result": "Start"},
    "Terminal": {"model_response": "ignored", "tool_results": "ignored", "compaction_result": "ignored"},
}


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("feed", list(FEEDS))
def test_seed_000_feed_table(state, feed):
    m = brain_in(state)
    assert m.state == state
    expected = SEED_TABLE[state][feed]
    before = m.snapshot()
    if expected is None:
        with pytest.raises(IllegalFeed) as info:
            FEEDS[feed](m)
        assert (info.value.machine, info.value.state, info.value.feed) == ("engine_brain", state, feed)
        assert m.snapshot() == before
    elif expected == "ignored":
        FEEDS[feed](m)
        assert m.snapshot() == before
    else:
        FEEDS[feed](m)
        assert m.state == expected


def test_model_reply_without_tool_calls_completes():
    m = brain_in("AwaitingModel")
    m.model_response(Message.assistant("done"), 10, TOOLS)
    assert m.state_and_data() == ("Terminal", {"outcome": Completed("done")})


def test_compaction_without_progress_fails_from_the_table_cell():
    m = brain_in("AwaitingCompaction")
    m.compaction_result([Message.user("summary")], 190_000, 190_000)
    assert m.state_and_data() == (
        "Terminal",
        {"outcome": Failed(ContextExceeded("compaction made no progress (190000 -> 190000 tokens)"))},
    )


def test_two_turn_walk():
    """Seed 000's two-turn run: six transitions, the whole run."""
    m = LoopMachine()
    m.accept_input("summarize this folder")
    seen = [m.state_and_data()]
    assert step(m) == CallLLM(0)
    seen.append(m.state_and_data())
    m.model_response(reply_with_tools("read_file"), 800, TOOLS)
    seen.append(m.state_and_data())
    s = step(m)
    assert isinstance(s, CallTools) and [p.call.name for p in s.calls] == ["read_file"]
    m.tool_results(answers(m))
    seen.append(m.state_and_data())
    assert step(m) == CallLLM(1)
    seen.append(m.state_and_data())
    m.model_response(Message.assistant("two files"), 900, TOOLS)
    seen.append(m.state_and_data())
    assert seen == [
        ("Start", {}),
        ("AwaitingModel", {"turn": 0}),
        ("AwaitingTools", {"turn": 0}),
        ("Start", {}),
        ("AwaitingModel", {"turn": 1}),
        ("Terminal", {"outcome": Completed("two files")}),
    ]
    m.commit_pending()
    assert [msg.role for msg in m.history()] == ["user", "assistant", "tool", "assistant"]


def trace_prefix():
    """Rows 1-5 of seed 000's event trace, checked row by row."""
    m = LoopMachine()
    # 1: Start, accept_input -> Start, scratchpad seeded
    m.accept_input("fix the failing tests")
    assert m.state_and_data() == ("Start", {}) and m.full_history() == [Message.user("fix the failing tests")]
    # 2: Start, CallLLM(0) runs; model_response with 2 known tool calls -> AwaitingTools(0)
    assert step(m) == CallLLM(0)
    m.model_response(reply_with_tools("shell", "read_file"), 150_000, TOOLS)
    assert m.state_and_data() == ("AwaitingTools", {"turn": 0})
    assert [p.pre_answered for p in m.data.pending_tools] == [False, False]
    # 3: AwaitingTools(0), CallTools runs; tool_results consumes pending_tools -> Start
    assert isinstance(step(m), CallTools)
    m.tool_results(answers(m))
    assert m.state_and_data() == ("Start", {}) and m.data.pending_tools == []
    m.set_context_tokens(165_000)  # the driver refreshes the estimate after tool results
    # 4: Start, next_step: past 80% of the window -> Compact(ThresholdExceeded) -> AwaitingCompaction
    assert step(m) == Compact(ThresholdExceeded)
    assert m.state_and_data() == ("AwaitingCompaction", {"reason": ThresholdExceeded})
    assert m.data.last_compaction_tokens == 165_000
    # 5: compaction_result: history replaced wholesale, pending cleared, estimate = after -> Start
    m.compaction_result([Message.user("summary of the work so far")], 165_000, 30_000)
    assert m.state_and_data() == ("Start", {})
    assert m.history() == [Message.user("summary of the work so far")] and m.data.pending == []
    assert m.data.context_tokens == 30_000
    return m


def test_seed_000_seven_row_trace():
    m = trace_prefix()
    # 6: Start, CallLLM(1); model_response without tool calls -> Terminal(Completed)
    assert step(m) == CallLLM(1)
    m.model_response(Message.assistant("tests pass now"), 31_000, TOOLS)
    assert m.state_and_data() == ("Terminal", {"outcome": Completed("tests pass now")})
    # 7: Terminal: any further feed is ignored, forever
    frozen = m.snapshot()
    m.accept_input("again")
    m.cancel()
    m.set_context_tokens(5)
    m.inject(Message.user("hello?"))
    m.fail(LoopError("late"))
    m.model_response(Message.assistant("x"), 1, TOOLS)
    m.begin(Done(Cancelled()))
    assert m.snapshot() == frozen
    assert m.next_step(policy=P) == m.next_step(policy=MachinePolicy(max_turns=0)) == Done(Completed("tests pass now"))


def test_trace_cancel_variant():
    """Row 6 swapped for Ctrl-C during the model call: cancel, Done(Cancelled), scratchpad discarded."""
    m = trace_prefix()
    step(m)
    m.cancel()
    assert m.is_cancelled() and m.state == "AwaitingModel"
    assert m.next_step(policy=P) == Done(Cancelled())
    step(m)
    assert m.state_and_data() == ("Terminal", {"outcome": Cancelled()})
    assert isinstance(m.to_loop_error(), RunCancelled)
    m.discard_pending()
    # the mid-run compaction was a commit point: its history stays
    assert m.full_history() == [Message.user("summary of the work so far")]


def test_trace_no_progress_variant():
    """Row 4's darker twin: a pass that shaves nothing ends the run, buffers untouched."""
    m = LoopMachine()
    m.accept_input("fix the failing tests")
    step(m)
    m.model_response(reply_with_tools("shell"), 170_000, TOOLS)
    step(m)
    m.tool_results(answers(m))
    step(m)
    before = (m.history(), list(m.data.pending))
    m.compaction_result([Message.user("not smaller")], 170_000, 171_000)
    assert m.is_terminal() and isinstance(m.to_loop_error(), ContextExceeded)
    assert (m.history(), m.data.pending) == before
    m.discard_pending()
    assert m.full_history() == []


def test_compaction_noop_keeps_both_buffers_and_continues():
    m = brain_in("AwaitingCompaction")
    before = (m.history(), list(m.data.pending))
    m.compaction_noop(190_000, 150_000)
    assert m.state == "Start" and (m.history(), m.data.pending) == before
    assert m.data.context_tokens == 150_000
    m2 = brain_in("AwaitingCompaction")
    m2.compaction_noop(190_000, 190_000)
    assert isinstance(m2.to_loop_error(), ContextExceeded) and m2.data.pending == before[1]


# -- the guard chain's arithmetic -------------------------------------------------------------


def ask(tokens: int, policy=P, **data):
    m = LoopMachine()
    m.accept_input("x")
    m.set_context_tokens(tokens)
    for k, v in data.items():
        setattr(m.data, k, v)
    return m.next_step(policy=policy)


@pytest.mark.parametrize(
    "tokens,policy,expected",
    [
        (190_000, P, Compact(Emergency)),  # exactly 95%: inclusive
        (189_999, P, Compact(ThresholdExceeded)),  # just under the emergency line
        (160_000, P, CallLLM(0)),  # exactly at the 80% threshold: served normally
        (160_001, P, Compact(ThresholdExceeded)),  # threshold + 1
        (10**9, MachinePolicy(context_window=0), CallLLM(0)),  # window 0 disables both lines
        (190_000, MachinePolicy(auto_compact=False), Compact(Emergency)),  # emergency ignores auto_compact
        (189_999, MachinePolicy(auto_compact=False), CallLLM(0)),
        (189_999, MachinePolicy(context_window=199_999), Compact(Emergency)),  # 199999*95//100 = 189999
        (159_999, MachinePolicy(context_window=199_999), CallLLM(0)),  # 199999*80//100 = 159999, strict
        (160_000, MachinePolicy(context_window=199_999), Compact(ThresholdExceeded)),
        (100, MachinePolicy(compact_threshold=0), Compact(ThresholdExceeded)),
    ],
)
def test_guard_chain_boundaries(tokens, policy, expected):
    assert ask(tokens, policy) == expected


def test_cancel_beats_max_turns_and_max_turns_beats_compaction():
    assert ask(0, MachinePolicy(max_turns=0), cancelled=True) == Done(Cancelled())
    assert ask(199_000, MachinePolicy(max_turns=3), turns_taken=3) == Done(MaxTurnsExceeded())
    assert ask(199_000, MachinePolicy(max_turns=4), turns_taken=3) == Compact(Emergency)


def test_next_step_is_repeatable_and_changes_nothing():
    for state in STATES:
        m = brain_in(state)
        before = m.snapshot()
        assert m.next_step(policy=P) == m.next_step(policy=P)
        assert m.snapshot() == before


def test_awaiting_states_answer_their_step_again():
    m = brain_in("AwaitingModel")
    assert m.next_step(policy=P) == CallLLM(0)
    m.begin(CallLLM(0))  # re-polled: nothing changes
    assert m.state_and_data() == ("AwaitingModel", {"turn": 0})
    m = brain_in("AwaitingCompaction")
    assert m.next_step(policy=P) == Compact(Emergency)
    m = brain_in("AwaitingTools")
    assert m.next_step(policy=P) == CallTools(0, tuple(m.data.pending_tools))


@pytest.mark.parametrize(
    "state,bad",
    [
        ("Start", CallLLM(5)),  # stale turn
        ("Start", Done(Completed("invented"))),  # Completed only comes from a reply
        ("AwaitingTools", CallLLM(1)),
        ("AwaitingTools", CallTools(0, ())),  # not the pending calls
        ("AwaitingCompaction", CallLLM(0)),
    ],
)
def test_begin_refuses_steps_the_state_cannot_be_acting_on(state, bad):
    m = brain_in(state)
    before = m.snapshot()
    with pytest.raises(NoBranchMatched):
        m.begin(bad)
    assert m.snapshot() == before


# -- feeds' postconditions ----------------------------------------------------------------------


def test_unknown_tools_are_pre_answered():
    m = brain_in("AwaitingModel")
    m.model_response(Message.assistant("", [ToolCall("a", "shell"), ToolCall("b", "rm_rf")]), 10, ["shell"])
    known, unknown = m.data.pending_tools
    assert known.answer is None
    assert unknown.answer == Message.tool_result("b", "tool 'rm_rf' is not available", is_error=True)
    s = step(m)
    assert s.calls == (known, unknown)


def test_tool_results_must_answer_the_pending_calls():
    m = brain_in("AwaitingTools")
    before = m.snapshot()
    with pytest.raises(FeedArgumentError, match="missing: \\['c1'\\]; unexpected: \\['zz'\\]"):
        m.tool_results([Message.tool_result("zz", "?")])
    assert m.snapshot() == before


def test_model_response_counts_the_turn_and_adopts_the_estimate():
    m = brain_in("AwaitingModel")
    m.model_response(reply_with_tools("shell"), 4321, TOOLS)
    assert m.turns_taken() == 1 and m.data.context_tokens == 4321
    assert m.full_history()[-1] == reply_with_tools("shell")


def test_inject_does_not_refresh_the_estimate_and_accept_input_resets():
    m = brain_in("AwaitingTools")
    m.cancel()
    m.inject(Message.user("a" * 1000))
    assert m.data.context_tokens == 1000 and m.full_history()[-1] == Message.user("a" * 1000)
    m.accept_input("new run")
    d = m.data
    assert (m.state, d.pending, d.pending_tools, d.turns_taken, d.cancelled) == (
        "Start",
        [Message.user("new run")],
        [],
        0,
        False,
    )


@pytest.mark.parametrize("state", ["Start", "AwaitingModel", "AwaitingTools", "AwaitingCompaction", "Terminal"])
def test_inject_many_is_inject_for_each_message_in_one_feed(state):
    """A stored conversation resumed in one feed ends exactly where one inject a message ends, in every state."""
    msgs = [Message.user("a"), reply_with_tools("shell"), Message.tool_result("c1", "ok"), Message.user("b")]
    one, many = brain_in(state), brain_in(state)
    before = many.full_history()
    for msg in msgs:
        one.inject(msg)
    many.inject_many(iter(msgs))
    assert many.snapshot() == one.snapshot()
    # appended, in order; a Terminal brain keeps its outcome and its history as they are
    assert many.full_history() == (before if state == "Terminal" else [*before, *msgs])
    many.inject_many([])
    assert many.snapshot() == one.snapshot()


@pytest.mark.parametrize("bad", ["not a list", [Message.user("ok"), "not a message"], None])
def test_inject_many_refuses_what_is_not_a_list_of_messages_and_changes_nothing(bad):
    m = brain_in("AwaitingTools")
    before = m.snapshot()
    with pytest.raises(FeedArgumentError, match="inject_many"):
        m.inject_many(bad)
    assert m.snapshot() == before


def test_fail_is_instant_and_kept_through_snapshots():
    m = brain_in("AwaitingTools")
    m.fail(LoopError("driver lost the connection", kind="Transport"))
    assert m.is_terminal()
    r = LoopMachine.restore(json.loads(json.dumps(m.snapshot())))
    err = r.to_loop_error()
    assert (err.kind, err.message) == ("Transport", "driver lost the connection")
    assert r.next_step(policy=P) == Done(Failed(err))


@pytest.mark.parametrize(
    "outcome,error",
    [
        (Completed("x"), None),
        (Cancelled(), RunCancelled),
        (MaxTurnsExceeded(), TurnLimitExceeded),
        (Failed(ContextExceeded("full")), ContextExceeded("full")),
    ],
)
def test_to_loop_error_is_total(outcome, error):
    m = LoopMachine()
    m._state, m.state_data = "Terminal", {"outcome": outcome}
    got = m.to_loop_error()
    if error is None or isinstance(error, LoopError):
        assert got == error
    else:
        assert type(got) is error
    assert LoopMachine().to_loop_error() is None  # not finished: no error yet


def test_commit_and_discard_work_in_terminal():
    m = brain_in("Terminal")
    m.commit_pending()
    assert [x.role for x in m.history()] == ["user", "assistant"] and m.data.pending == []
    m2 = brain_in("Terminal")
    m2.discard_pending()
    assert m2.full_history() == [] and m2.is_terminal()


# -- policy and YAML ----------------------------------------------------------------------------


def test_policy_defaults_come_from_the_yaml():
    declared = yaml.safe_load(machine_path("engine_brain").read_text())["policy"]
    p = MachinePolicy()
    assert {k: getattr(p, k) for k in declared} == {k: v["default"] for k, v in declared.items()}
    assert (p.max_turns, p.context_window, p.compact_threshold, p.auto_compact) == (200, 200_000, 80, True)


def edited_brain(tmp_path: Path, edit) -> type:
    doc = yaml.safe_load(machine_path("engine_brain").read_text())
    edit(doc)
    f = tmp_path / "engine_brain.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_machine(f)


def test_editing_the_threshold_default_changes_behaviour(tmp_path):
    def lower(doc):
        doc["policy"]["compact_threshold"]["default"] = 50

    brain = edited_brain(tmp_path, lower)
    m = brain.Instance()
    m.accept_input("x")
    m.set_context_tokens(120_000)
    assert m.next_step(policy=brain.Policy()) == Compact(ThresholdExceeded)
    assert ask(120_000) == CallLLM(0)


def test_swapping_two_rules_changes_behaviour(tmp_path):
    def swap(doc):
        rules = doc["decisions"]["next_step"]["rules"]
        rules[0], rules[2] = rules[2], rules[0]  # max_turns before cancel
        rules[0], rules[1] = rules[1], rules[0]  # keep the terminal rule first of the two scoped ones

    brain = edited_brain(tmp_path, swap)
    m = brain.Instance()
    m.accept_input("x")
    m.cancel()
    assert m.next_step(policy=brain.Policy(max_turns=0)) == Done(MaxTurnsExceeded())
    assert ask(0, MachinePolicy(max_turns=0), cancelled=True) == Done(Cancelled())


def test_snapshot_restores_across_a_policy_edit_but_not_a_shape_edit(tmp_path):
    def lower(doc):
        doc["policy"]["compact_threshold"]["default"] = 50

    def retype(doc):
        doc["data"]["turns_taken"]["type"] = "string"
        doc["data"]["turns_taken"]["default"] = "0"
        doc["data"]["turns_taken"].pop("minimum", None)

    brain = edited_brain(tmp_path, lower)
    assert LoopMachine.restore(brain.Instance().snapshot()).state == "Start"
    saved = brain_in("AwaitingTools").snapshot()
    assert brain.restore(saved).snapshot()["data"] == saved["data"]
    with pytest.raises(SnapshotError, match="field turns_taken changed from integer to string"):
        edited_brain(tmp_path, retype).restore(saved)


def test_brain_snapshot_with_corrupt_message_is_refused():
    m = brain_in("AwaitingTools")
    snap = json.loads(json.dumps(m.snapshot()))
    snap["data"]["pending"][0]["role"] = "wizard"
    with pytest.raises(SnapshotError, match=r"data.pending\[0\].role must be one of"):
        LoopMachine.restore(snap)


def test_messages_round_trip_through_json():
    msgs = [Message.user("hi"), reply_with_tools("shell", "nope"), Message.tool_result("c1", "ok", is_error=True)]
    assert [Message.from_json(json.loads(json.dumps(x.to_json()))) for x in msgs] == msgs
    with pytest.raises(FeedArgumentError):
        Message("tool", "no call id")


def test_policy_is_never_stored():
    m = brain_in("AwaitingModel")
    assert "policy" not in json.dumps(m.snapshot())
    assert not any("max_turns" in f for f in LoopMachine.compiled.spec.data)


def test_brain_pre_answers_calls_whose_breaker_rejects():
    from loopfsm.machines.tool_breaker import ToolBreakerPolicy, ToolHealth

    health = ToolHealth(ToolBreakerPolicy(trip_after=1, cooldown_ms=30_000))
    m = brain_in("AwaitingModel")
    m.model_response(reply_with_tools("shell", "read_file"), 100, TOOLS, tool_health=health, now=1_000)
    shell, read = m.data.pending_tools
    assert not shell.pre_answered and shell.generation == 0
    results = [Message.tool_result("c1", "boom", is_error=True), Message.tool_result("c2", "ok")]
    step(m)
    m.tool_results(results)
    health.record("shell", 1_500, shell.permit, "failure")
    health.record("read_file", 1_500, read.permit, "success")
    assert health.states == {"read_file": "Closed", "shell": "Open"}
    step(m)
    m.model_response(reply_with_tools("shell", "read_file"), 200, TOOLS, tool_health=health, now=2_000)
    shell, read = m.data.pending_tools
    assert shell.answer == Message.tool_result(
        "c1", "tool 'shell' is temporarily unavailable (open: consecutive_failures); retry at t=31500 ms", is_error=True
    )
    assert not read.pre_answered
    # the model sees the refusal in the next request and can adapt
    step(m)
    m.tool_results(answers(m))
    assert "retry at t=31500 ms" in m.full_history()[-2].text
    # consulting health needs a time
    m2 = brain_in("AwaitingModel")
    before = m2.snapshot()
    with pytest.raises(FeedArgumentError, match="needs 'now'"):
        m2.model_response(reply_with_tools("shell"), 1, TOOLS, tool_health=health)
    with pytest.raises(FeedArgumentError, match="needs an assistant message"):
        m2.model_response(Message.user("not a reply"), 1, TOOLS)
    assert m2.snapshot() == before


def test_brain_pre_answers_a_reused_call_id_whose_probe_lease_is_still_out():
    """A model may reuse a call id across turns; a probe lease its driver never recorded is not granted twice."""
    from loopfsm.machines.tool_breaker import ToolBreakerPolicy, ToolHealth

    health = ToolHealth(ToolBreakerPolicy(trip_after=1, cooldown_ms=10, max_probes=2))
    health.record("shell", 0, health.acquire("shell", 0, "x"), "failure")
    m = brain_in("AwaitingModel")
    m.model_response(reply_with_tools("shell"), 1, TOOLS, tool_health=health, now=100)
    (shell,) = m.data.pending_tools
    assert not shell.pre_answered and health.states == {"shell": "HalfOpen"}
    step(m)
    m.tool_results(answers(m))  # the tool ran; its outcome was never recorded
    step(m)
    m.model_response(reply_with_tools("shell"), 1, TOOLS, tool_health=health, now=101)
    (shell,) = m.data.pending_tools
    assert shell.answer is not None and "(probe_in_flight); retry at t=30100 ms" in shell.answer.text
    assert len(health.breaker("shell").data.leases) == 1


def test_brain_answers_a_forced_open_breaker_with_the_tables_retry_wording():
    """A breaker only a reset reopens has no retry time: the answer says so, in the YAML's words."""
    from loopfsm.machines.tool_breaker import ToolHealth

    health = ToolHealth()
    health.breaker("shell").force_open(500)
    m = brain_in("AwaitingModel")
    m.model_response(reply_with_tools("shell"), 100, TOOLS, tool_health=health, now=1_000)
    (shell,) = m.data.pending_tools
    import yaml

    from loopfsm.core.resources import machine_path

    table = yaml.safe_load(machine_path("engine_brain").read_text())
    actions = table["events"]["model_response"]["from"]["AwaitingModel"][-1]["actions"]
    params = next(a["params"] for a in actions if isinstance(a, dict) and a["name"] == "classify_tool_calls")
    assert shell.answer is not None and shell.answer.text.endswith("; retry " + params["retry_never"])
    assert params["retry_never"] == "after an operator reset"


def test_the_resume_example_of_the_docs_runs():
    from tests.support.docs_pages import example, page

    block = example(page("docs/machines/engine_brain.md"), "resume")
    assert "inject_many(" in block and "assert " in block
    exec(compile(block, "docs-engine-brain-resume", "exec"), {})


def test_the_compaction_example_of_the_docs_runs():
    from tests.support.docs_pages import example, page

    text = page("docs/machines/engine_brain.md")
    block = example(text, "compaction")
    assert "compaction_result(" in block and "compaction_noop(" in block
    exec(compile(block, "docs-engine-brain-compaction", "exec"), {})


@pytest.mark.parametrize(
    "bad",
    [
        [1],
        "text",
        None,
        {},
        {"role": "user", "tool_calls": [5]},
        {"role": "user", "server_blocks": [{}]},
        {"role": 1},
        {"role": "tool", "text": "x", "tool_call_id": "c1", "is_error": "no"},  # read as True by bool()
        {"role": "tool", "text": "x", "tool_call_id": "c1", "is_error": 0},
        {"role": "user", "text": "x", "tool_call": []},  # a misspelt key was dropped without a word
    ],
)
def test_a_message_from_json_that_is_not_one_is_a_feed_argument_error(bad):
    """JSON from outside (a client's opened history, a stored row) is refused in one typed error: never coerced,
    never a key dropped."""
    with pytest.raises(FeedArgumentError):
        Message.from_json(bad)
