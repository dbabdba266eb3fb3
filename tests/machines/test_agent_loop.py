"""Seed 003's agent loop: exactly the allowed pairs, its guards, approvals as state, resume, completion."""

from __future__ import annotations

import datetime
import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopfsm import IllegalFeed
from loopfsm.core import tracing
from loopfsm.core.errors import FeedArgumentError, FeedRefused
from loopfsm.core.fieldtypes import INT_MAX, INT_MIN
from loopfsm.machines.agent_loop import RESUME_ANSWERS, AgentLoop, AgentLoopPolicy, arguments_hash

AGENT_LOOP = AgentLoop.compiled

# The seed's allowed-transition table, written out by hand from the seed's prose table
# (one line per source state; terminal states have no line).
ORACLE_TEXT = """
planning          -> awaiting_tool awaiting_approval completed failed expired
awaiting_tool     -> executing_tool awaiting_approval failed expired
executing_tool    -> observing_result recovering failed expired
observing_result  -> planning completed failed expired
awaiting_approval -> executing_tool planning failed expired
recovering        -> executing_tool planning failed expired
"""
ORACLE = {
    (line.split("->")[0].strip(), t) for line in ORACLE_TEXT.strip().splitlines() for t in line.split("->")[1].split()
}
TERMINAL = {"completed", "failed", "expired"}
STATES = {"planning", "awaiting_tool", "executing_tool", "observing_result", "awaiting_approval", "recovering"}
CHECKS = ["output_valid", "artifacts_present", "side_effects_resolved"]

DEADLINE = 100_000
ARGS = {"query": "refund policy", "limit": 5}
H = arguments_hash(ARGS)


def failed_with(error_class: str, last: str | None = None) -> dict[str, object]:
    """The data of failed: the error class, the failure recovered from (when no attempt was left), no compensation."""
    return {"error_class": error_class, "last_error_class": last, "compensation": None}


def test_oracle_has_the_seeds_25_pairs():
    assert len(ORACLE) == 25


def test_table_has_exactly_the_seeds_pairs():
    pairs = set()
    for event in AGENT_LOOP.events.values():
        for state, branches in event.branches.items():
            for t in branches:
                if t.dest is not None and t.dest != state:
                    pairs.add((state, t.dest))
    assert pairs == ORACLE
    assert set(AGENT_LOOP.spec.states) == STATES | TERMINAL
    assert AGENT_LOOP.terminal_states == TERMINAL and AGENT_LOOP.initial == "planning"
    assert "handoff" not in AGENT_LOOP.spec.states


def test_arguments_hash_is_sha256_of_canonical_json():
    expected = hashlib.sha256(b'{"limit":5,"query":"refund policy"}').hexdigest()
    assert H == "sha256:" + expected
    assert arguments_hash({"query": "refund policy", "limit": 5}) == arguments_hash(dict(reversed(ARGS.items())))
    assert arguments_hash({"q": "é"}) == "sha256:" + hashlib.sha256('{"q":"é"}'.encode()).hexdigest()
    with pytest.raises(FeedArgumentError, match=r"arguments\['x'\] is nan"):
        arguments_hash({"x": float("nan")})


@pytest.mark.parametrize(
    "arguments,where",
    [
        ({"d": datetime.date(2024, 1, 1)}, "arguments['d'] is of type date, not a JSON value"),
        ({1: "a", "b": "c"}, "arguments has a key of type int; JSON object keys are strings"),
        ({1: "a"}, "arguments has a key of type int"),  # not quietly the hash of {"1": "a"}
        ({"a": [1, {"b": b"raw"}]}, "arguments['a'][1]['b'] is of type bytes"),
        ({"x": float("inf")}, "arguments['x'] is inf"),
        ({"t": ["ok", "\ud83d"]}, "arguments['t'][1] holds half a surrogate pair"),  # UTF-8 has no bytes for it
        ({"a": {"\udc00": 1}}, "arguments['a'] has a key with half a surrogate pair"),
    ],
)
def test_arguments_with_no_json_form_are_a_typed_error_naming_where(arguments, where):
    with pytest.raises(FeedArgumentError) as info:
        arguments_hash(arguments)
    assert str(info.value).startswith("arguments have no canonical JSON form: ") and where in str(info.value)


def test_arguments_that_contain_themselves_or_nest_too_deep_are_a_typed_error():
    loop: list[object] = []
    loop.append(loop)
    deep: list[object] = []
    inner = deep
    for _ in range(100_000):
        inner.append([])
        inner = inner[0]  # type: ignore[assignment]
    for arguments in (loop, deep):
        with pytest.raises(FeedArgumentError, match="no canonical JSON form"):
            arguments_hash(arguments)
    shared = [1]
    assert arguments_hash({"a": shared, "b": shared}) == arguments_hash({"a": [1], "b": [1]})


# -- driving helpers --------------------------------------------------------------------------------


def run(deadline_at: int | None = DEADLINE) -> AgentLoop:
    return AgentLoop.new_run("run_93a7", "tool_router", deadline_at)


def proposed(idempotent: bool = True, now: int = 1) -> AgentLoop:
    m = run()
    m.tool_proposed("search_docs", H, idempotent, now)
    return m


def awaiting_approval(expires_at: int = 50_000, outcomes=("approve", "deny", "revise")) -> AgentLoop:
    m = proposed(idempotent=False)
    m.approval_required("alice", expires_at, "side_effects", 2, allowed_outcomes=list(outcomes))
    return m


def executing(idempotent: bool = True) -> AgentLoop:
    m = proposed(idempotent)
    m.dispatch(2)
    return m


def unchanged(m: AgentLoop, feed, *args, error=IllegalFeed, **kw):
    before = json.dumps(m.snapshot(), sort_keys=True)
    with pytest.raises(error) as info:
        feed(*args, **kw)
    assert json.dumps(m.snapshot(), sort_keys=True) == before
    return info.value


# -- deadline ------------------------------------------------------------------------------------


def test_dispatch_needs_deadline_remaining():
    m = proposed()
    m.dispatch(DEADLINE - 1)
    assert m.state == "executing_tool"
    assert m.state_data == {"attempt": 1, "started_at": DEADLINE - 1, "expected_latency_ms": None}
    m = proposed()
    m.dispatch(DEADLINE)
    assert m.state == "expired" and m.state_data == {"reason": "deadline", "pending_side_effects": False}


@pytest.mark.parametrize(
    "setup,feed,args",
    [
        (run, "tool_proposed", ("search_docs", H, True)),
        (run, "final_answer", (CHECKS,)),
        (proposed, "dispatch", ()),
        (executing, "tool_succeeded", ()),
        (executing, "tool_failed", ("timeout", True)),
        (executing, "worker_lost", ()),
        (awaiting_approval, "approval_decided", ("approve", "alice", H)),
        (awaiting_approval, "tick", ()),
        (run, "fail", ("guardrail",)),
        (run, "hand_off", ("other_agent",)),
    ],
)
def test_any_feed_past_the_deadline_expires_the_run(setup, feed, args):
    m = setup()
    left = m.state
    m.feed(feed, *args, now=DEADLINE + 5)
    # a call's side effects are unresolved only when the run expired while one was executing
    unresolved = left == "executing_tool"
    assert m.state == "expired" and m.state_data == {"reason": "deadline", "pending_side_effects": unresolved}


def test_an_illegal_feed_past_the_deadline_is_refused_and_changes_nothing():
    """A feed the state does not take is a driver bug, reported as one even past the deadline;
    tick, taken everywhere, is what expires the run."""
    m = AgentLoop.new_run("r", "o", 10)
    err = unchanged(m, m.dispatch, 20)
    assert type(err) is IllegalFeed and m.state == "planning"
    m.tick(20)
    assert m.state == "expired" and m.state_data == {"reason": "deadline", "pending_side_effects": False}


@pytest.mark.parametrize("deadline_at", [2**64, 10**30, INT_MAX + 1, INT_MIN - 1])
def test_new_run_refuses_a_deadline_outside_64_bits(deadline_at):
    with pytest.raises(FeedArgumentError, match="new_run's 'deadline_at' .* outside the signed 64-bit range"):
        AgentLoop.new_run("r", "o", deadline_at)


@pytest.mark.parametrize("deadline_at", [INT_MIN, INT_MAX])
def test_a_deadline_at_the_edge_of_64_bits_runs_and_saves(deadline_at):
    m = AgentLoop.new_run("r", "o", deadline_at)
    m.tool_proposed("search_docs", H, True, 0)
    assert AgentLoop.restore(m.snapshot()).data.deadline_at == deadline_at


def test_deadline_remaining_in_the_trace_stays_a_64_bit_integer():
    records: list[tracing.TransitionRecord] = []
    m = AgentLoop.new_run("r", "o", INT_MIN)
    with tracing.attached(m, records.append):
        m.tick(INT_MAX)  # deadline_at - now is -(2**64 - 1): saturated, as OTLP's int64 must carry it
    assert m.state == "expired"
    assert records[-1].attributes["agent_loop.deadline.remaining_ms"] == INT_MIN


def test_without_a_deadline_nothing_expires_by_time():
    m = run(deadline_at=None)
    m.tool_proposed("search_docs", H, True, 10**15)
    m.dispatch(10**15)
    assert m.state == "executing_tool"


def test_time_never_runs_backwards():
    m = proposed(now=DEADLINE + 1 - 1)  # the proposal is fed at DEADLINE
    assert m.state == "expired"
    m = proposed(now=DEADLINE - 10)
    m.tick(DEADLINE + 1)
    assert m.state == "expired"
    m = run()
    m.tick(DEADLINE - 1)
    m.tool_proposed("search_docs", H, True, DEADLINE - 1)
    m.dispatch(5)  # a clock that jumped back does not buy time: it reads as DEADLINE - 1
    assert m.state == "executing_tool" and m.state_data["started_at"] == DEADLINE - 1


# -- retries ---------------------------------------------------------------------------------------


def test_three_attempts_by_default_then_failed():
    m = executing()
    for attempt in (1, 2):
        assert m.state_data["attempt"] == attempt
        m.tool_failed("timeout", True, 10)
        assert m.state == "recovering" and m.state_data == {"error_class": "timeout"}
        m.dispatch(11)
    assert m.state_data["attempt"] == 3
    m.tool_failed("timeout", True, 12)
    assert m.state == "failed" and m.state_data == failed_with("attempts_exhausted", "timeout")


def test_attempt_limit_is_policy():
    m = executing()
    m.tool_failed("timeout", True, 10, policy=AgentLoopPolicy(max_attempts=1))
    assert m.state == "failed"


@pytest.mark.parametrize("idempotent,transient", [(False, True), (True, False)])
def test_only_idempotent_calls_with_transient_failures_recover(idempotent, transient):
    m = executing(idempotent)
    m.tool_failed("http_503", transient, 10)
    assert m.state == "failed" and m.state_data == failed_with("http_503")


def test_a_lost_worker_recovers_an_idempotent_call_and_fails_another():
    m = executing(True)
    m.worker_lost(10)
    assert m.state == "recovering" and m.state_data == {"error_class": "worker_lost"}
    m = executing(False)
    m.worker_lost(10)
    assert m.state == "failed" and m.state_data == failed_with("worker_lost")


def test_a_lowered_limit_after_recovering_fails_the_retry():
    m = executing()
    m.tool_failed("timeout", True, 10)
    m.dispatch(11)
    m.tool_failed("timeout", True, 12)
    assert m.state == "recovering" and m.data.attempts == 2
    assert m.resume(13, policy={"max_attempts": 2}) == "give_up"
    m.dispatch(13, policy={"max_attempts": 2})
    assert m.state == "failed" and m.state_data == failed_with("attempts_exhausted", last="timeout")


@pytest.mark.parametrize("proposed_idempotent", [True, False])
def test_an_approval_request_cannot_contradict_the_proposed_calls_idempotency(proposed_idempotent):
    m = proposed(idempotent=proposed_idempotent)
    err = unchanged(
        m, m.approval_required, "alice", 9_000, "payment", 2, idempotent=not proposed_idempotent, error=FeedRefused
    )
    assert "idempotent differs from the proposed call's" in err.reason
    m.approval_required("alice", 9_000, "payment", 2, idempotent=proposed_idempotent)
    assert m.state == "awaiting_approval" and m.data.idempotent is proposed_idempotent


def test_a_refund_approved_as_not_idempotent_is_never_run_twice():
    """The issue's run: proposed as idempotent, then asked about as a payment that is not."""
    m = run()
    m.tool_proposed("issue_refund", H, True, 0)
    unchanged(m, m.approval_required, "alice", 100, "payment", 1, idempotent=False, error=FeedRefused)
    m = run()  # named from planning without saying: not idempotent
    m.approval_required("alice", 100, "payment", 1, tool="issue_refund", arguments_hash=H)
    m.approval_decided("approve", "alice", H, 2)
    m.tool_failed("timeout", True, 3)
    assert m.state == "failed" and m.state_data == failed_with("timeout")


def test_recovering_can_replan():
    m = executing()
    m.tool_failed("timeout", True, 10)
    m.replan(11)
    assert m.state == "planning" and m.data.tool is None and m.data.attempts == 0


# -- approvals --------------------------------------------------------------------------------------


def test_approval_state_holds_the_request():
    m = awaiting_approval()
    assert m.state == "awaiting_approval"
    assert m.state_data == {
        "approver": "alice",
        "expires_at": 50_000,
        "policy_reason": "side_effects",
        "allowed_outcomes": ["approve", "deny", "revise"],
        "requested_at": 2,
    }
    assert (m.data.tool, m.data.arguments_hash, m.data.idempotent) == ("search_docs", H, False)


def test_approve_runs_the_exact_action():
    m = awaiting_approval()
    m.approval_decided("approve", "alice", H, 3)
    assert m.state == "executing_tool" and m.state_data["attempt"] == 1


@pytest.mark.parametrize("approver,hash_", [("mallory", H), ("alice", arguments_hash({**ARGS, "limit": 500}))])
def test_a_decision_from_someone_else_or_about_other_arguments_is_refused(approver, hash_):
    m = awaiting_approval()
    err = unchanged(m, m.approval_decided, "approve", approver, hash_, 3, error=FeedRefused)
    assert "named approver" in str(err) and hash_ not in str(err)


@pytest.mark.parametrize("approver", ["", "   "])
def test_a_blank_approver_is_refused(approver):
    m = proposed()
    err = unchanged(m, m.approval_required, approver, 9_000, "payment", 2, error=FeedRefused)
    assert "approver is empty" in err.reason
    m = run()
    err = unchanged(
        m, m.approval_required, approver, 9_000, "payment", 2, tool="t", arguments_hash=H, error=FeedRefused
    )
    assert "approver is empty" in err.reason


@pytest.mark.parametrize("owner", ["", "   "])
def test_a_hand_off_to_a_blank_owner_is_refused(owner):
    for m in (run(), proposed(), awaiting_approval()):
        err = unchanged(m, m.hand_off, owner, 3, error=FeedRefused)
        assert "owner is empty" in err.reason and m.data.owner == "tool_router"


@pytest.mark.parametrize("run_id,owner,name", [("", "o", "run_id"), ("r", " ", "owner"), ("\t", "o", "run_id")])
def test_new_run_refuses_a_blank_run_id_or_owner(run_id, owner, name):
    with pytest.raises(FeedArgumentError, match=f"new_run's '{name}' (is empty|holds no visible character)"):
        AgentLoop.new_run(run_id, owner, 100)


def test_a_blank_approver_in_a_restored_request_never_decides():
    snap = awaiting_approval().snapshot()
    snap["state_data"]["approver"] = ""
    m = AgentLoop.restore(snap)
    unchanged(m, m.approval_decided, "approve", "", H, 3, error=FeedRefused)


def test_a_stranger_cannot_expire_an_approval_either():
    m = awaiting_approval(expires_at=10)
    unchanged(m, m.approval_decided, "approve", "mallory", H, 20, error=FeedRefused)


def test_an_outcome_not_offered_is_refused():
    m = awaiting_approval(outcomes=("approve", "deny"))
    err = unchanged(m, m.approval_decided, "revise", "alice", H, 3, error=FeedRefused)
    assert "allowed outcomes" in str(err)


@pytest.mark.parametrize("decided_at", [50_000, 50_001])
def test_a_decision_at_or_after_expiry_expires_the_run(decided_at):
    m = awaiting_approval(expires_at=50_000)
    m.approval_decided("approve", "alice", H, decided_at)
    assert m.state == "expired" and m.state_data == {"reason": "approval", "pending_side_effects": False}


def test_a_lapsed_approval_expires_on_tick():
    m = awaiting_approval(expires_at=50_000)
    m.tick(49_999)
    assert m.state == "awaiting_approval"
    m.tick(50_000)
    assert m.state == "expired" and m.state_data == {"reason": "approval", "pending_side_effects": False}


def test_deny_fails_the_run():
    m = awaiting_approval()
    m.approval_decided("deny", "alice", H, 3)
    assert m.state == "failed" and m.state_data == failed_with("approval_denied")


def test_revise_replans_with_a_constraint_that_holds():
    m = awaiting_approval()
    m.approval_decided("revise", "alice", H, 3)
    assert m.state == "planning" and m.data.constraints == [f"search_docs {H}"]
    for err in (
        unchanged(m, m.tool_proposed, "search_docs", H, False, 4, error=FeedRefused),
        unchanged(
            m,
            m.approval_required,
            "alice",
            9,
            "side_effects",
            4,
            tool="search_docs",
            arguments_hash=H,
            error=FeedRefused,
        ),
    ):  # the refusal says why: not "no branch's guard held", not "must name the tool" (both were named)
        assert "sent back by an earlier revise" in err.reason and H not in str(err)
    m.tool_proposed("search_docs", arguments_hash({**ARGS, "limit": 1}), False, 4)
    assert m.state == "awaiting_tool"


def test_approval_from_planning_names_the_action():
    m = run()
    unchanged(m, m.approval_required, "alice", 9, "payment", 1, error=FeedRefused)
    m.approval_required("alice", 9, "payment", 1, tool="refund", arguments_hash=H, idempotent=False)
    assert m.state == "awaiting_approval" and m.data.tool == "refund"


def test_approval_from_awaiting_tool_is_about_the_proposed_call():
    m = proposed()
    unchanged(m, m.approval_required, "alice", 9, "side_effects", 1, tool="delete_all", error=FeedRefused)
    m.approval_required("alice", 9, "side_effects", 1, tool="search_docs", arguments_hash=H)
    assert m.state == "awaiting_approval"


# -- completion, handoff, terminal ------------------------------------------------------------------


def test_completed_only_when_every_declared_output_check_holds():
    m = run()
    m.final_answer(CHECKS[:2], 1)
    assert m.state == "planning"
    m = executing()
    m.tool_succeeded(3)
    m.final_answer(["output_valid"], 4)
    assert m.state == "planning"
    m = executing()
    m.tool_succeeded(3)
    m.final_answer(CHECKS + ["extra"], 4)
    assert m.state == "completed"


def test_handoff_changes_the_owner_not_the_state():
    m = proposed()
    m.hand_off("billing_agent", 3)
    assert m.state == "awaiting_tool" and m.data.owner == "billing_agent"
    m.dispatch(4)
    unchanged(m, m.hand_off, "billing_agent", 5)


@pytest.mark.parametrize("end", ["completed", "failed", "expired"])
def test_terminal_is_forever(end):
    m = run()
    if end == "completed":
        m.final_answer(CHECKS, 1)
    elif end == "failed":
        m.fail("guardrail", 1)
    else:
        m.tick(DEADLINE)
    assert m.state == end and m.is_terminal()
    for feed, args in [
        ("tool_succeeded", (2,)),
        ("tool_failed", ("x", True, 2)),
        ("worker_lost", (2,)),
        ("tick", (2,)),
    ]:
        m.feed(feed, *args)  # late news is ignored
        assert m.state == end
    for feed, args in [
        ("tool_proposed", ("t", H, True, 2)),
        ("result_accepted", (2,)),
        ("replan", (2,)),
        ("final_answer", (CHECKS, 2)),
        ("fail", ("x", 2)),
        ("dispatch", (2,)),
        ("hand_off", ("o", 2)),
        ("approval_decided", ("approve", "alice", H, 2)),
    ]:
        unchanged(m, m.feed, feed, *args)
    assert m.resume(DEADLINE * 2) == "audit"


# -- resume ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "setup,now,expected",
    [
        (run, 5, "plan"),
        (run, DEADLINE, "expire"),
        (proposed, 5, "dispatch"),
        (executing, 5, "recover"),
        (awaiting_approval, 5, "wait"),
        (awaiting_approval, 50_000, "expire"),
    ],
)
def test_resume_answers_after_a_restore(setup, now, expected):
    m = AgentLoop.restore(json.loads(json.dumps(setup().snapshot())))
    assert m.resume(now) == expected
    feed = RESUME_ANSWERS[expected]
    if feed in ("tick", "worker_lost"):
        m.feed(feed, now)
        assert m.state in ("expired", "recovering")


@pytest.mark.parametrize(
    "idempotent,max_attempts,answer,after",
    [(True, 3, "recover", "recovering"), (False, 3, "unrecoverable", "failed"), (True, 1, "unrecoverable", "failed")],
)
def test_resume_in_executing_tool_answers_what_worker_lost_will_do(idempotent, max_attempts, answer, after):
    """The seed's second question, "is the next transition still legal under the current policy"."""
    m = AgentLoop.restore(executing(idempotent).snapshot())
    policy = {"max_attempts": max_attempts}
    assert m.resume(5, policy=policy) == answer
    m.feed(RESUME_ANSWERS[answer], 5, policy=policy)
    assert m.state == after


def test_resume_in_recovering_and_observing():
    m = executing()
    m.tool_failed("timeout", True, 3)
    assert m.resume(4) == "retry"
    m.dispatch(4)
    m.tool_succeeded(5)
    assert m.resume(6) == "observe"


# -- the table against the oracle, on random runs ----------------------------------------------------

FEEDS = st.one_of(
    st.tuples(
        st.just("tool_proposed"),
        st.tuples(st.sampled_from(["search_docs", "refund"]), st.sampled_from([H, "sha256:other"]), st.booleans()),
    ),
    st.tuples(
        st.just("approval_required"),
        st.tuples(st.sampled_from(["alice", "bob"]), st.integers(0, 400), st.just("side_effects")),
    ),
    st.tuples(
        st.just("approval_decided"),
        st.tuples(
            st.sampled_from(["approve", "deny", "revise"]),
            st.sampled_from(["alice", "bob"]),
            st.sampled_from([H, "sha256:other"]),
        ),
    ),
    st.tuples(
        st.sampled_from(["dispatch", "tool_succeeded", "worker_lost", "result_accepted", "replan", "tick"]), st.just(())
    ),
    st.tuples(st.just("tool_failed"), st.tuples(st.sampled_from(["timeout"]), st.booleans())),
    st.tuples(st.just("final_answer"), st.tuples(st.sampled_from([CHECKS, CHECKS[:1]]))),
    st.tuples(st.just("fail"), st.tuples(st.just("guardrail"))),
)


@settings(max_examples=150, deadline=None)
@given(steps=st.lists(st.tuples(FEEDS, st.integers(0, 40)), max_size=25), max_attempts=st.integers(1, 4))
def test_random_runs_only_take_allowed_moves_under_the_seeds_guards(steps, max_attempts):
    m = AgentLoop.new_run("r", "o", 300)
    policy = AgentLoopPolicy(max_attempts=max_attempts)
    now = 0
    for (feed, args), dt in steps:
        now += dt
        before_state, before = m.state, json.dumps(m.snapshot(), sort_keys=True)
        attempts, idempotent = m.data.attempts, m.data.idempotent
        kwargs = {"tool": "search_docs", "arguments_hash": H} if feed == "approval_required" else {}
        try:
            m.feed(feed, *args, now, policy=policy, **kwargs)
        except IllegalFeed:
            assert json.dumps(m.snapshot(), sort_keys=True) == before
            continue
        after = m.state
        if before_state in TERMINAL:
            assert after == before_state
            continue
        assert after == before_state or (before_state, after) in ORACLE
        clock = m.data.last_now
        if after != before_state:
            assert (after == "expired") == (
                clock >= 300
                or (
                    before_state == "awaiting_approval"
                    and feed in ("tick", "approval_decided")
                    and m.state_data == {"reason": "approval", "pending_side_effects": False}
                )
            )
        if after == "executing_tool" and before_state != after:
            assert clock < 300
        if after == "recovering" and before_state != after:
            assert attempts < max_attempts and idempotent


def test_can_answers_no_for_a_decision_the_table_refuses():
    m = awaiting_approval()
    assert not m.can("approval_decided", "approve", "mallory", H, 3)
    assert not m.can("approval_decided", "approve", "alice", "sha256:other", 3)
    assert m.can("approval_decided", "approve", "alice", H, 3)
    assert m.can("approval_decided", "deny", "alice", H, 60_000)  # lapsed: accepted, and expires the run
