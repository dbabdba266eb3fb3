"""Seed 003's "Transition / Useful attributes" table, row by row, on the agent loop's trace records.

Each row of the seed's table names a move and the attributes an on-call
engineer wants on it; every one is read from the run (machine data, or what
the driver fed in and the machine kept), under the OpenTelemetry GenAI name
where the conventions have one and ``agent_loop.*`` otherwise.
"""

from __future__ import annotations

from typing import Any

from loopfsm.core import tracing
from loopfsm.core.fieldtypes import INT_MAX
from loopfsm.core.tracing import TransitionRecord
from loopfsm.machines.agent_loop import AgentLoop, arguments_hash

H = arguments_hash({"order": "A-1001"})
CHECKS = ["output_valid", "artifacts_present", "side_effects_resolved"]

#: seed 003's table: the move, then the attributes it names (as this project spells them)
SEED_TABLE: list[tuple[str, str, set[str]]] = [
    (
        "planning",
        "awaiting_tool",
        {"gen_ai.request.model", "gen_ai.tool.name", "agent_loop.tool.arguments_schema_version"},
    ),
    (
        "awaiting_tool",
        "awaiting_approval",
        {"agent_loop.policy_reason", "agent_loop.approval.risk_class", "agent_loop.approval.expires_at"},
    ),
    (
        "awaiting_tool",
        "executing_tool",
        {"agent_loop.tool.idempotent", "agent_loop.tool.expected_latency_ms", "agent_loop.deadline.remaining_ms"},
    ),
    (
        "executing_tool",
        "observing_result",
        {"agent_loop.result.status", "agent_loop.result.size_bytes", "agent_loop.result.validation"},
    ),
    (
        "observing_result",
        "planning",
        {"agent_loop.result.accepted_facts", "agent_loop.result.rejected_fields", "agent_loop.next_obligation"},
    ),
    ("recovering", "failed", {"agent_loop.attempts", "error.type", "agent_loop.compensation"}),
    ("*", "expired", {"agent_loop.deadline.at_ms", "gen_ai.agent.id", "agent_loop.side_effects.pending"}),
]


def traced(fn: Any) -> list[TransitionRecord]:
    records: list[TransitionRecord] = []
    with tracing.global_sink(records.append):
        fn()
    return [r for r in records if r.kind == "feed"]


def move(records: list[TransitionRecord], a: str, b: str) -> dict[str, Any]:
    (r,) = [r for r in records if r.from_state == a and r.to_state == b]
    return dict(r.attributes)


def proposal(m: AgentLoop, now: int, idempotent: bool = True) -> None:
    m.tool_proposed(
        "search_docs",
        H,
        idempotent,
        now,
        model="claude-sonnet-4",
        call_id="toolu_01",
        arguments_schema_version="v3",
    )


def happy_path() -> list[TransitionRecord]:
    m = AgentLoop.new_run("run_1", "support_agent", 100_000)

    def go() -> None:
        proposal(m, 0)
        m.dispatch(1, expected_latency_ms=1_500)
        m.tool_succeeded(2, status="ok", result_size=2_048, validation="valid")
        m.result_accepted(3, accepted_facts=4, rejected_fields=1, next_obligation="cite_sources")

    return traced(go)


def approval_path() -> list[TransitionRecord]:
    m = AgentLoop.new_run("run_2", "support_agent", 100_000)

    def go() -> None:
        proposal(m, 0, idempotent=False)
        m.approval_required("alice", 50_000, "payment", 1, risk_class="payment_high")

    return traced(go)


def exhausted_path() -> list[TransitionRecord]:
    m = AgentLoop.new_run("run_3", "support_agent", 100_000)

    def go() -> None:
        proposal(m, 0)
        m.dispatch(1, expected_latency_ms=200)
        m.tool_failed("http_503", True, 2)
        m.dispatch(3, policy={"max_attempts": 1}, compensation="not_needed")

    return traced(go)


def expired_path() -> list[TransitionRecord]:
    m = AgentLoop.new_run("run_4", "support_agent", 100_000)

    def go() -> None:
        proposal(m, 0)
        m.dispatch(1, expected_latency_ms=200)
        m.tick(100_000)

    return traced(go)


def test_every_row_of_the_seeds_table_is_on_its_move():
    records = happy_path() + approval_path() + exhausted_path() + expired_path()
    for a, b, names in SEED_TABLE:
        moves = [r for r in records if (a == "*" or r.from_state == a) and r.to_state == b and r.moved]
        assert moves, (a, b)
        for r in moves:
            missing = names - set(r.attributes)
            assert not missing, f"{a} -> {b} lacks {sorted(missing)}"


def test_the_values_are_the_ones_fed_in_or_kept():
    records = happy_path()
    proposed = move(records, "planning", "awaiting_tool")
    assert {k: proposed[k] for k in proposed if k.startswith("gen_ai.")} == {
        "gen_ai.conversation.id": "run_1",
        "gen_ai.agent.id": "support_agent",
        "gen_ai.request.model": "claude-sonnet-4",
        "gen_ai.tool.name": "search_docs",
        "gen_ai.tool.call.id": "toolu_01",
        "gen_ai.tool.type": "function",
    }
    assert proposed["agent_loop.tool.arguments_schema_version"] == "v3"
    running = move(records, "awaiting_tool", "executing_tool")
    assert running["agent_loop.tool.expected_latency_ms"] == 1_500
    assert running["agent_loop.tool.idempotent"] is True and running["agent_loop.deadline.remaining_ms"] == 99_999
    result = move(records, "executing_tool", "observing_result")
    assert (
        result["agent_loop.result.status"],
        result["agent_loop.result.size_bytes"],
        result["agent_loop.result.validation"],
    ) == ("ok", 2_048, "valid")
    accepted = move(records, "observing_result", "planning")
    assert (
        accepted["agent_loop.result.accepted_facts"],
        accepted["agent_loop.result.rejected_fields"],
        accepted["agent_loop.next_obligation"],
    ) == (4, 1, "cite_sources")
    asked = move(approval_path(), "awaiting_tool", "awaiting_approval")
    assert asked["agent_loop.approval.risk_class"] == "payment_high" and asked["agent_loop.policy_reason"] == "payment"


def test_the_move_that_clears_the_proposal_still_names_the_call():
    """observing_result -> planning clears the proposal; the record keeps what it was about."""
    accepted = move(happy_path(), "observing_result", "planning")
    assert accepted["gen_ai.tool.name"] == "search_docs"
    assert accepted["gen_ai.tool.call.id"] == "toolu_01"
    assert accepted["gen_ai.request.model"] == "claude-sonnet-4"
    m = AgentLoop.new_run("r", "o")
    proposal(m, 0)
    m.dispatch(1)
    m.tool_failed("timeout", True, 2)
    records = traced(lambda: m.replan(3))
    assert records[0].attributes["gen_ai.tool.name"] == "search_docs"
    assert m.data.tool is None  # the proposal is gone from the run, only the record keeps it
    later = traced(lambda: m.tick(4))  # a later record does not carry the old call
    assert "gen_ai.tool.name" not in later[0].attributes


def test_failing_when_no_attempt_is_left_keeps_the_tools_error_class():
    failed = move(exhausted_path(), "recovering", "failed")
    assert failed["error.type"] == "http_503"
    assert failed["agent_loop.error_class"] == "attempts_exhausted"
    assert failed["agent_loop.attempts"] == 1 and failed["agent_loop.compensation"] == "not_needed"


def test_error_type_is_the_failures_own_class_elsewhere():
    m = AgentLoop.new_run("r", "o")
    proposal(m, 0, idempotent=False)
    m.dispatch(1)
    (r,) = traced(lambda: m.tool_failed("http_400", False, 2))
    assert r.attributes["error.type"] == r.attributes["agent_loop.error_class"] == "http_400"
    m = AgentLoop.new_run("r", "o")
    proposal(m, 0)
    m.dispatch(1)
    m.tool_failed("timeout", True, 2)
    (r,) = traced(lambda: m.fail("guardrail", 3, compensation="done"))
    assert (r.attributes["error.type"], r.attributes["agent_loop.compensation"]) == ("guardrail", "done")
    assert m.state_data["last_error_class"] is None


def test_expiry_says_whether_side_effects_were_pending():
    expired = move(expired_path(), "executing_tool", "expired")
    assert expired["agent_loop.side_effects.pending"] is True
    assert expired["agent_loop.deadline.at_ms"] == 100_000 and expired["gen_ai.agent.id"] == "support_agent"
    m = AgentLoop.new_run("r", "o", 10)
    (r,) = traced(lambda: m.tick(10))
    assert r.attributes["agent_loop.side_effects.pending"] is False


def test_moves_the_table_limits_an_attribute_to_leave_it_out():
    records = happy_path()
    assert "agent_loop.result.accepted_facts" not in move(records, "awaiting_tool", "executing_tool")
    assert "agent_loop.deadline.at_ms" not in move(records, "planning", "awaiting_tool")
    assert "agent_loop.tool.arguments_schema_version" not in move(records, "awaiting_tool", "executing_tool")


def test_the_driver_may_leave_its_facts_out():
    m = AgentLoop.new_run("r", "o")
    (r,) = traced(lambda: m.tool_proposed("search_docs", H, True, 0))
    assert "gen_ai.request.model" not in r.attributes and "gen_ai.tool.call.id" not in r.attributes
    assert m.data.tool_type == "function"


def test_integer_attributes_fit_otlp():
    m = AgentLoop.new_run("r", "o", INT_MAX)
    (r,) = traced(lambda: m.tick(-(2**63)))
    assert r.attributes["agent_loop.deadline.remaining_ms"] == INT_MAX  # saturated, not 2**64 - 1


def test_the_risk_class_stays_with_the_call_it_was_given_to():
    m = AgentLoop.new_run("r", "o")
    proposal(m, 0, idempotent=False)
    m.approval_required("alice", 50_000, "payment", 1, risk_class="payment_high")
    records = traced(lambda: m.approval_decided("approve", "alice", H, 2))
    assert records[0].attributes["agent_loop.approval.risk_class"] == "payment_high"  # on the approved run
    m.tool_succeeded(3)
    m.result_accepted(4)
    assert m.data.risk_class is None  # cleared with the proposal
    (again,) = traced(lambda: m.tool_proposed("search_docs", H, True, 5))
    assert "agent_loop.approval.risk_class" not in again.attributes


def test_runs_saved_before_the_trace_fields_restore_and_go_on():
    """Snapshots taken under the table before these fields (one per state with data) restore unchanged."""
    import json
    from pathlib import Path

    saved = json.loads((Path(__file__).parent / "data" / "agent_loop_saved_before_trace_fields.json").read_text())
    restored = {s["state"]: AgentLoop.restore(s) for s in saved}
    states_with_data = {"executing_tool", "recovering", "failed", "awaiting_approval", "expired", "observing_result"}
    assert set(restored) == states_with_data
    assert restored["expired"].state_data == {"reason": "deadline", "pending_side_effects": None}
    assert restored["failed"].state_data["error_class"] == "attempts_exhausted"
    m = restored["executing_tool"]
    (r,) = traced(lambda: m.tool_succeeded(5, result_size=3))
    assert r.attributes["gen_ai.tool.name"] == "t" and r.attributes["agent_loop.result.size_bytes"] == 3


def test_the_tracing_pages_table_is_the_seeds_table_as_traced():
    import re

    from tests.support.docs_pages import page, section

    text = section(page("docs/tracing.md"), "## The agent loop's attributes")
    rows = [line for line in text.splitlines() if "->" in line and line.startswith("| ")]
    declared = set(AgentLoop.compiled.spec.source.doc["trace"])
    assert len(rows) == len(SEED_TABLE)
    for line, (a, b, names) in zip(rows, SEED_TABLE, strict=True):
        move_cell, attrs_cell = line.strip("|").split("|")
        assert move_cell.strip() == f"{'any' if a == '*' else a} -> {b}"
        listed = set(re.findall(r"`([a-z_.]+)`", attrs_cell))
        assert names <= listed <= declared, line


def test_an_approval_request_cannot_drop_or_change_the_proposals_facts():
    from loopfsm.core.errors import FeedRefused

    m = AgentLoop.new_run("r", "o")
    proposal(m, 0, idempotent=False)
    before = m.snapshot()
    for fact in ({"call_id": "toolu_02"}, {"model": "other"}, {"tool_type": "datastore"}):
        try:
            m.approval_required("alice", 50_000, "payment", 1, **fact)
        except FeedRefused as err:
            assert "differs from the proposed call's" in err.reason
        else:
            raise AssertionError(f"{fact} was taken")
        assert m.snapshot() == before
    m.approval_required("alice", 50_000, "payment", 1, call_id="toolu_01", tool_type="function")  # the same: fine
    assert m.state == "awaiting_approval" and m.data.call_id == "toolu_01"


def test_a_call_that_fails_for_good_reports_its_compensation():
    # executing_tool -> failed (a final error, or a lost worker on a call that may not run again)
    # is where a non-idempotent call's side effects matter most: the driver can say how they stand.
    m = AgentLoop.new_run("r", "o")
    proposal(m, 0, idempotent=False)
    m.dispatch(1)
    (r,) = traced(lambda: m.tool_failed("http_400", False, 2, compensation="pending"))
    assert (r.to_state, r.attributes["agent_loop.compensation"]) == ("failed", "pending")
    m = AgentLoop.new_run("r", "o")
    proposal(m, 0, idempotent=False)
    m.dispatch(1)
    (r,) = traced(lambda: m.worker_lost(2, compensation="failed"))
    assert (r.to_state, r.attributes["agent_loop.compensation"]) == ("failed", "failed")
    assert m.state_data == {"error_class": "worker_lost", "last_error_class": None, "compensation": "failed"}
    m = AgentLoop.new_run("r", "o")
    proposal(m, 0)
    m.dispatch(1)
    (r,) = traced(lambda: m.tool_failed("timeout", True, 2, compensation="done"))  # retried: nothing failed yet
    assert r.to_state == "recovering" and "agent_loop.compensation" not in r.attributes


def test_a_retryable_failure_on_the_last_attempt_says_attempts_exhausted():
    # the same cause as dispatch's no_attempts_left, so the same words: the run failed because no
    # attempt was left (agent_loop.error_class), the tool's own class stays in error.type
    m = AgentLoop.new_run("r", "o")
    proposal(m, 0)
    m.dispatch(1, policy={"max_attempts": 1})
    (r,) = traced(lambda: m.tool_failed("timeout", True, 2, policy={"max_attempts": 1}))
    assert (r.branch, r.to_state) == ("attempts_exhausted", "failed")
    assert (r.attributes["agent_loop.error_class"], r.attributes["error.type"]) == ("attempts_exhausted", "timeout")
    assert m.state_data["last_error_class"] == "timeout"
    m = AgentLoop.new_run("r", "o")
    proposal(m, 0)
    m.dispatch(1)
    (r,) = traced(lambda: m.tool_failed("http_400", False, 2))  # not transient: the tool's own class, as before
    assert (r.branch, r.attributes["agent_loop.error_class"]) == ("final", "http_400")


def test_a_huge_string_reaches_the_trace_cut_and_marked_never_whole():
    """A 10 MB status fed to tool_succeeded: the record carries 256 characters that say how long it was."""
    m = AgentLoop.new_run("run_9", "support_agent", 100_000)

    def go() -> None:
        proposal(m, 0)
        m.dispatch(1)
        m.tool_succeeded(2, status="x" * 10_000_000)

    status = move(traced(go), "executing_tool", "observing_result")["agent_loop.result.status"]
    assert len(status) == tracing.MAX_ATTRIBUTE_CHARS and status.endswith("... (10,000,000 characters)")
    assert m.state_data["status"] == "x" * 10_000_000  # the machine keeps what it was fed; only the trace is cut
