"""A typed method's list argument comes from a list or another iterable, never from one string."""

from __future__ import annotations

import pytest

from tests.support.brain_helpers import TOOLS, brain_in, reply_with_tools
from loopfsm.core.errors import FeedArgumentError
from loopfsm.machines import AgentLoop


@pytest.mark.parametrize("tools", ["ls", b"ls", None, 3])
def test_available_tools_as_one_string_or_a_non_iterable_is_refused_and_changes_nothing(tools):
    m = brain_in("AwaitingModel")
    before = m.snapshot()
    with pytest.raises(FeedArgumentError, match="argument 'available_tools' must be a list"):
        m.model_response(reply_with_tools("ls"), 1000, tools)
    assert m.snapshot() == before


def test_available_tools_from_a_tuple_or_a_generator_still_work():
    for tools in (tuple(TOOLS), (t for t in TOOLS)):
        m = brain_in("AwaitingModel")
        m.model_response(reply_with_tools("shell"), 1000, tools)
        assert m.state == "AwaitingTools" and m.data.pending_tools[0].answer is None


@pytest.mark.parametrize("passed", ["tests", None])
def test_final_answer_checks_as_one_string_or_none_are_refused(passed):
    run = AgentLoop.new_run("r1", "alice")
    before = run.snapshot()
    with pytest.raises(FeedArgumentError, match="argument 'passed' must be a list"):
        run.final_answer(passed, 0)
    assert run.snapshot() == before


@pytest.mark.parametrize(
    "args, word",
    [
        ((5, "alice"), "run_id"),
        (("r1", None), "owner"),
        (("r1", "alice", "soon"), "deadline_at"),
        (("r1", "a", True), "deadline_at"),
    ],
)
def test_a_new_run_with_wrongly_typed_identity_is_refused(args, word):
    with pytest.raises(FeedArgumentError, match=f"new_run's '{word}'"):
        AgentLoop.new_run(*args)


def test_allowed_outcomes_as_one_string_is_refused():
    run = AgentLoop.new_run("r1", "alice")
    with pytest.raises(FeedArgumentError, match="argument 'allowed_outcomes' must be a list"):
        run.approval_required("bob", 100, "needs a human", 0, allowed_outcomes="approve")  # type: ignore[arg-type]


def test_a_model_reply_with_two_tool_calls_of_one_id_is_refused():
    from loopfsm.machines.messages import Message, ToolCall

    with pytest.raises(FeedArgumentError, match="distinct ids; repeated: \\['c'\\]"):
        Message.assistant("", [ToolCall("c", "ls", {}), ToolCall("c", "ls", {})])
    m = brain_in("AwaitingTools")
    call = m.data.pending_tools[0].call
    twice = [Message.tool_result(call.id, "ran"), Message.tool_result(call.id, "ran again")]
    before = m.snapshot()
    with pytest.raises(FeedArgumentError, match="exactly once"):
        m.tool_results(twice)
    assert m.snapshot() == before


def _proposed():
    from loopfsm.machines.agent_loop import arguments_hash

    run = AgentLoop.new_run("r1", "alice")
    h = arguments_hash({"path": "a.txt"})
    run.tool_proposed("write", h, True, 10)
    return run, h


@pytest.mark.parametrize(
    "changed, rule",
    [
        ({"allowed_outcomes": []}, "allowed_outcomes is empty"),
        ({"expires_at": 10}, "expires_at is not after now"),
        ({"expires_at": 5}, "expires_at is not after now"),
        ({"arguments_hash": "nothash"}, "arguments_hash must be 'sha256:'"),
        ({"arguments_hash": "sha256:" + "A" * 64}, "arguments_hash must be 'sha256:'"),
    ],
)
def test_an_approval_request_nobody_could_answer_is_refused_and_changes_nothing(changed, rule):
    from loopfsm.core.errors import FeedRefused

    proposed, h = _proposed()
    planning = AgentLoop.new_run("r2", "alice")  # from planning the request itself names the action
    request = {"expires_at": 100, "tool": "write", "arguments_hash": h, **changed}
    for run in (proposed, planning):
        before = run.snapshot()
        with pytest.raises(FeedRefused, match=rule):
            run.approval_required(
                "bob",
                request["expires_at"],
                "needs a human",
                10,
                **{k: v for k, v in request.items() if k != "expires_at"},
            )
        assert run.snapshot() == before


def test_a_proposal_with_a_malformed_hash_is_refused():
    from loopfsm.core.errors import FeedRefused

    run = AgentLoop.new_run("r1", "alice")
    with pytest.raises(FeedRefused, match="arguments_hash must be 'sha256:'"):
        run.tool_proposed("write", "nothash", True, 10)
    assert run.state == "planning"


@pytest.mark.parametrize(
    "overrides, error, words",
    [
        (["ls"], "PolicyError", "overrides map tool names to policies, got list"),
        ({5: None}, "FeedArgumentError", "a tool name is a string, got int 5"),
        ({"ls": {"trip_after": "x"}}, "PolicyError", "'trip_after' = 'x' must be integer"),
    ],
)
def test_tool_health_overrides_of_the_wrong_shape_are_refused(overrides, error, words):
    from loopfsm.machines import ToolHealth

    with pytest.raises(Exception) as err:
        ToolHealth(None, overrides)
    assert type(err.value).__name__ == error and words in str(err.value)
