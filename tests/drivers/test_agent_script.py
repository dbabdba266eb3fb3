"""``loopfsm run agent_loop --script``: the printed trace, and scripts that go wrong end in a message."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopfsm.drivers.agent_script import drive
from loopfsm.core.errors import LoopFsmError

from loopfsm.cli.main import main

GOOD = """
run: {run_id: r1, owner: me, deadline_at: 10000}
steps:
  - {at: 0, feed: tool_proposed, tool: search, arguments: {q: "secret words"}, idempotent: true}
  - {at: 1, feed: dispatch}
  - {at: 2, feed: tool_failed, error_class: timeout, transient: true}
  - {at: 3, resume: true}
  - {at: 4, feed: dispatch}
  - {at: 5, feed: tool_succeeded}
  - {at: 6, feed: final_answer, passed: [output_valid, artifacts_present, side_effects_resolved]}
"""


def run(tmp_path, text: str, capsys) -> tuple[int, str, str]:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    code = main(["run", "agent_loop", "--script", str(path)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_scripted_run_prints_one_line_per_record(tmp_path, capsys):
    code, out, err = run(tmp_path, GOOD, capsys)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert len(lines) == 1 + 7
    assert "executing_tool -> recovering" in lines[3] and "error.type='timeout'" in lines[3]
    assert "resume? [retry] = retry" in lines[4]
    assert "observing_result -> completed" in lines[7]
    assert "secret words" not in out and "sha256" not in out


@pytest.mark.parametrize(
    "text,message",
    [
        (
            "run: {run_id: r, owner: o}\nsteps: [{at: 0, feed: tick, now: 5}]",
            "step 1: a step's time is its 'at'; drop 'now'",
        ),
        (
            "run: {run_id: r, owner: o}\nsteps: [{at: 0, feed: tick, policy: {}}]",
            "feed 'tick' has no argument 'policy'",
        ),
        ("run: {run_id: r, owner: o}\nsteps: [{at: 0, feed: tick, event: x}]", "feed 'tick' has no argument 'event'"),
        (
            "run: {run_id: r, owner: o}\nsteps: [{at: 0, feed: nope, event: x}]",
            "step 1: agent_loop has no feed named 'nope'",
        ),
        (
            "run: {run_id: r, owner: o}\nsteps: [{at: 0, feed: tik, self: x}]",
            "no feed named 'tik'; did you mean 'tick'?",
        ),
        (
            "run: {run_id: r, owner: o}\nsteps: [{at: 0, feed: tool_proposed, tol: t}]",
            "has no argument 'tol'; did you mean 'tool'? (it takes: tool, arguments_hash, idempotent, model, call_id, "
            "tool_type, arguments_schema_version, arguments)",
        ),
        (
            "run: {run_id: r, owner: o}\nsteps: [{at: 0, feed: resume}]",
            "step 1: resume is a question, not a feed: write 'resume: true'",
        ),
        (
            "run: {run_id: r, owner: o}\nsteps: [{at: 0, feed: tool_proposed, tool: t, arguments: {d: 2024-01-01},"
            " idempotent: true}]",
            "step 1: arguments have no canonical JSON form: arguments['d'] is of type date, not a JSON value",
        ),
        (
            "run: {run_id: r, owner: o}\nsteps: [{at: 0, feed: tool_proposed, tool: t, arguments: {1: a, b: c},"
            " idempotent: true}]",
            "step 1: arguments have no canonical JSON form: arguments has a key of type int",
        ),
        (
            "run: {run_id: r, owner: o}\nsteps: [{at: 0, feed: tool_proposed, tool: t, arguments: {a: 1},"
            " arguments_hash: 'sha256:00', idempotent: true}]",
            "step 1: give the tool's arguments or its arguments_hash, not both",
        ),
        (
            "input: hi\nmodel: [{text: done, context_tokens: 5}]",
            "'run' is a required property (this is a script for engine_brain: loopfsm run engine_brain --script FILE)",
        ),
        ("[1, 2]", "script (top): [1, 2] is not of type 'object'"),
        ("run: {run_id: r, owner: o}\nsteps: [{at: 0, feed: nope}]", "no feed named 'nope'"),
        ("run: {run_id: r, owner: o}\nsteps: [{at: 0, feed: dispatch, bogus: 1}]", "bogus"),
        ("run: {run_id: r, owner: o}\nsteps: [{at: 0, resume: true, now: 1}]", "resume takes no arguments"),
        (  # a missing argument is placed in the script, like every refusal the machine raises
            "run: {run_id: r, owner: o}\nsteps: [{at: 0, feed: tick}, {at: 1, feed: approval_required, approver: a,"
            " expires_at: 5}]",
            "s.yaml: step 2: FeedArgumentError: agent_loop: feed 'approval_required(",
        ),
        ("run: {run_id: r, owner: o}\nsteps: [{at: 0, feed: dispatch, arguments: {}}]", "takes no tool arguments"),
        ("run: {run_id: r, owner: o}\npolicy: {max_attempts: 0}\nsteps: [{at: 0, resume: true}]", "max_attempts"),
        (
            "run: {run_id: r, owner: o}\nsteps: [{at: 0, feed: tool_proposed, tool: t, arguments: {a: .nan},"
            " idempotent: true}]",
            "step 1: arguments have no canonical JSON form",
        ),
        (
            "run: {run_id: r, owner: o}\nsteps: [{at: 0, feed: approval_decided, outcome: approve, approver: a}]",
            "s.yaml: step 1: IllegalFeed: agent_loop: feed 'approval_decided' is illegal in state 'planning'",
        ),
        (
            "run: {run_id: r, owner: o}\nsteps:\n  - {at: 0, feed: tool_proposed, tool: t, arguments: {a: 1},"
            " idempotent: true}\n  - {at: 1, feed: approval_required, approver: alice, expires_at: 9,"
            " policy_reason: p}\n  - {at: 2, feed: approval_decided, outcome: approve, approver: bob}",
            "step 3: FeedRefused: agent_loop: feed 'approval_decided' is illegal in state 'awaiting_approval': the",
        ),
    ],
)
def test_bad_scripts_end_in_a_message_not_a_traceback(tmp_path, capsys, text, message):
    code, out, err = run(tmp_path, text, capsys)
    assert code == 1 and message in err and "Traceback" not in err


def test_a_refused_step_still_prints_the_trace_so_far(tmp_path, capsys):
    text = (
        "run: {run_id: r, owner: o}\nsteps:\n  - {at: 0, feed: tool_proposed, tool: t, arguments: {a: 1},"
        " idempotent: true}\n  - {at: 1, feed: fail, error_class: x}\n  - {at: 2, feed: dispatch}"
    )
    code, out, err = run(tmp_path, text, capsys)
    assert code == 1 and "planning -> awaiting_tool" in out and "awaiting_tool -> failed" in out
    assert "step 3: IllegalFeed: agent_loop: feed 'dispatch' is illegal in state 'failed'" in err


def test_a_missing_script_is_a_usage_error(tmp_path, capsys):
    assert main(["run", "agent_loop", "--script", str(tmp_path / "none.yaml")]) == 2


@pytest.mark.parametrize("machine", ["agent_loop", "engine_brain", "router_run"])
def test_a_directory_as_the_script_is_a_usage_error(tmp_path, capsys, machine):
    assert main(["run", machine, "--script", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a directory" in err and "Traceback" not in err


def test_the_brains_driver_names_the_machine_an_agent_loop_script_is_for(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(GOOD)
    assert main(["run", "engine_brain", "--script", str(path)]) == 1
    assert "this is a script for agent_loop: loopfsm run agent_loop --script FILE" in capsys.readouterr().err


FEED_NAMES = ["tool_proposed", "approval_required", "approval_decided", "dispatch", "tool_failed", "tick", "resume"]
STEP_KEYS = ["tool", "arguments_hash", "idempotent", "approver", "expires_at", "policy_reason", "outcome"]
STEP_KEYS += ["error_class", "transient", "now", "policy", "event", "self", "arguments", 1]
VALUES = st.sampled_from(
    [None, True, 0, 2**70, "", "approve", ["approve"], {}, {1: "a"}, datetime.date(2024, 1, 1), float("nan")]
)
STEPS = st.lists(
    st.fixed_dictionaries(
        {"at": st.integers(0, 100), "feed": st.sampled_from(FEED_NAMES + ["nope"])},
        optional={k: VALUES for k in STEP_KEYS},
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(steps=STEPS)
def test_whatever_a_step_names_ends_in_a_loopfsm_error_or_a_trace(steps):
    try:
        list(drive({"run": {"run_id": "r", "owner": "o", "deadline_at": 50}, "steps": steps}))
    except LoopFsmError as err:
        assert "\n" not in str(err)
