"""Rows of the shipped tables that no other test took, each driven here and pinned by its stable name.

Found by ``pytest --loopfsm-coverage``: every test below takes exactly the row
it names (the trace says so) and checks what that row does.
"""

from __future__ import annotations

import pytest

from loopfsm.core import tracing
from loopfsm.machines.breaker_values import Allow, Route
from loopfsm.machines.engine_brain import LoopMachine
from loopfsm.machines.messages import Message
from loopfsm.machines.fallback_breaker import FallbackBreaker, FallbackBreakerPolicy
from loopfsm.machines.tool_breaker import ToolBreaker, ToolBreakerPolicy
from loopfsm.core.tracing import TransitionRecord

TP = ToolBreakerPolicy(
    trip_after=3,
    failure_rate_percent=0,
    cooldown_ms=1000,
    max_probes=1,
    probe_ttl_ms=100,
    recover_after=2,
    half_open_max_ms=500,
)
FP = FallbackBreakerPolicy(
    trip_after=3,
    cooldown_ms=1000,
    probe_ttl_ms=100,
    recover_after=2,
    fallback_fail_max=2,
    when_fallback_fails="fail_fast",
)


def traced(machine, feed: str, *args, **kw) -> tuple[TransitionRecord, object]:
    records: list[TransitionRecord] = []
    with tracing.attached(machine, records.append):
        reply = getattr(machine, feed)(*args, **kw)
    assert len(records) == 1
    return records[0], reply


# -- tool breaker ----------------------------------------------------------------
def tool_half_open() -> tuple[ToolBreaker, Allow]:
    b = ToolBreaker()
    for i in range(3):
        b.record(0, b.acquire(0, f"f{i}", policy=TP), "failure", policy=TP)
    probe = b.acquire(1000, "p", policy=TP)
    assert b.state == "HalfOpen" and isinstance(probe, Allow) and probe.probe
    return b, probe


def test_tool_half_open_a_callers_mistake_frees_the_lease_without_judging_the_tool():
    b, probe = tool_half_open()
    rec, _ = traced(b, "record", 1010, probe, "failure", error_kind="invalid_arguments", policy=TP)
    assert rec.branch == "record/HalfOpen[3]" and b.state == "HalfOpen"
    assert b.data.leases == [] and b.data.probe_success_count == 0
    assert b.data.stats.get("ignored") == 1
    assert isinstance(b.acquire(1020, "q", policy=TP), Allow)  # the slot is free again


def test_tool_tick_after_half_open_max_reopens_before_looking_at_leases():
    b, _ = tool_half_open()
    rec, _ = traced(b, "tick", 1500, policy=TP)  # the lease expired at 1100 too; overdue is checked first
    assert rec.branch == "tick/HalfOpen[0]" and rec.to_state == "Open"
    assert b.state_data["reason"] == "half_open_timeout"


def test_tool_results_while_forced_open_or_disabled_are_only_counted():
    b = ToolBreaker()
    permit = b.acquire(0, "c", policy=TP)
    b.force_open(1)
    gen = b.data.generation
    rec, _ = traced(b, "record", 2, permit, "failure", policy=TP)
    assert rec.branch == "record/ForcedOpen[0]" and b.state == "ForcedOpen" and b.data.generation == gen
    assert b.data.stats.get("stale") == 1
    rec, _ = traced(b, "tick", 3, policy=TP)
    assert rec.branch == "tick/ForcedOpen[0]" and b.state == "ForcedOpen"

    b.disable(4)
    permit = b.acquire(5, "d", policy=TP)
    assert isinstance(permit, Allow)
    rec, _ = traced(b, "record", 6, permit, "failure", policy=TP)
    assert rec.branch == "record/Disabled[2]" and b.state == "Disabled"
    assert b.data.stats.get("unguarded") == 1 and b.data.consecutive_failures == 0
    rec, _ = traced(b, "tick", 7, policy=TP)
    assert rec.branch == "tick/Disabled[0]" and b.state == "Disabled"


# -- fallback breaker ------------------------------------------------------------
def fallback_tripped() -> FallbackBreaker:
    b = FallbackBreaker()
    for _ in range(3):
        b.record(0, b.route(0, policy=FP), "transient", policy=FP)
    assert b.state == "Fallback"
    return b


def test_tool_permits_while_disabled_are_recorded_once_and_stale_ones_only_counted():
    from loopfsm.core.errors import FeedRefused

    b = ToolBreaker()
    before_disable = b.acquire(0, "a", policy=TP)
    b.disable(1)
    permit = b.acquire(2, "d", policy=TP)
    assert b.data.permits == ["d"]
    rec, _ = traced(b, "record", 3, before_disable, "failure", policy=TP)
    assert rec.branch == "record/Disabled[0]" and b.data.stats.get("stale") == 1
    b.record(4, permit, "success", policy=TP)
    snap = b.snapshot()
    for bad in (permit, Allow("never", b.data.generation)):
        records: list[TransitionRecord] = []
        with tracing.attached(b, records.append), pytest.raises(FeedRefused, match="recorded already"):
            b.record(5, bad, "failure", policy=TP)
        assert records == []
    after = b.snapshot()
    assert after["data"]["stats"].pop("refused_permits") == 2
    assert after == snap and b.data.stats["unguarded"] == 1


def test_fallback_a_stale_result_in_primary_is_only_counted():
    b = FallbackBreaker()
    old = b.route(0, policy=FP)
    for _ in range(3):
        b.record(0, b.route(0, policy=FP), "transient", policy=FP)
    for t in (1000, 1001):  # two good probes: back to Primary, two generations later
        b.record(t, b.route(t, policy=FP), "success", policy=FP)
    assert b.state == "Primary" and old.generation != b.data.generation
    rec, _ = traced(b, "record", 1002, old, "auth", policy=FP)
    assert rec.branch == "record/Primary[1]" and b.state == "Primary"
    assert b.data.primary_failures == 0 and b.data.stats.get("stale") == 1


@pytest.mark.parametrize("state", ["Primary", "Fallback", "Recovering"])
def test_fallback_a_route_recorded_twice_or_never_issued_is_refused_in_every_state(state):
    from loopfsm.core.errors import FeedRefused

    b = FallbackBreaker() if state == "Primary" else fallback_tripped()
    t = 1000 if state == "Recovering" else 10
    r = b.route(t, policy=FP)
    if state == "Recovering":
        r = b.route(t, policy=FP)  # a fallback call beside the probe
    assert b.state == state
    b.record(t, r, "context_length", policy=FP)
    before = b.snapshot()
    for bad in (r, Route(r.model, r.generation, number=r.number + 50, breaker=r.breaker)):
        records: list[TransitionRecord] = []
        with tracing.attached(b, records.append), pytest.raises(FeedRefused, match="recorded already, never issued"):
            b.record(t, bad, "auth", policy=FP)
        assert records == []  # a refused feed takes no row
    after = b.snapshot()
    assert after["data"]["stats"].pop("refused_permits") == 2
    assert after == before and b.state == state


def test_fallback_a_failed_try_of_the_primary_counts_against_it():
    b = fallback_tripped()
    for _ in range(2):  # the fallback fails too, so try_primary sends this call to the primary
        b.record(10, b.route(10, policy=FP), "transient", policy=FP)
    failures = b.data.primary_failures
    tried = b.route(10, policy=FallbackBreakerPolicy(**{**FP.__dict__, "when_fallback_fails": "try_primary"}))
    assert tried.model == "primary"
    rec, _ = traced(b, "record", 10, tried, "transient", policy=FP)
    assert rec.branch == "record/Fallback[3]" and b.state == "Fallback"
    assert b.data.primary_failures == failures + 1


def test_fallback_while_recovering_fallback_failures_and_other_fallback_results():
    b = fallback_tripped()
    probe = b.route(1000, policy=FP)
    assert b.state == "Recovering" and probe.model == "primary"
    side = b.route(1001, policy=FP)
    assert side.model == "fallback"
    rec, _ = traced(b, "record", 1002, side, "rate_limited", policy=FP)
    assert rec.branch == "record/Recovering[4]" and b.state == "Recovering" and b.data.fallback_failures == 1
    side = b.route(1003, policy=FP)
    rec, _ = traced(b, "record", 1003, side, "context_length", policy=FP)
    assert rec.branch == "record/Recovering[5]" and b.state == "Recovering"
    assert b.data.probe_expires_at is not None  # the primary's probe is still out


def test_fallback_a_record_after_the_probe_lease_expired_is_late_and_trips():
    b = fallback_tripped()
    b.route(1000, policy=FP)
    side = b.route(1001, policy=FP)
    expiry = b.data.probe_expires_at
    rec, _ = traced(b, "record", expiry, side, "success", policy=FP)
    assert rec.branch == "record/Recovering[1]" and b.state == "Fallback"
    assert b.state_data["reason"] == "probe_lease_expired" and b.data.stats["late"] == 1


def test_fallback_ticks_in_primary_and_fallback_only_move_the_clock():
    b = FallbackBreaker()
    rec, _ = traced(b, "tick", 50, policy=FP)
    assert rec.branch == "tick/Primary[0]" and b.state == "Primary"
    b = fallback_tripped()
    until = b.state_data["until"]
    rec, _ = traced(b, "tick", until + 10, policy=FP)  # the cooldown is over, but only a route starts the probe
    assert rec.branch == "tick/Fallback[0]" and b.state == "Fallback"


# -- engine brain -----------------------------------------------------------------
def test_brain_begin_while_compacting_repolls_or_ends():
    m = LoopMachine()
    m.accept_input("hi")
    m.set_context_tokens(199_000)
    step = m.next_step()
    m.begin(step)
    assert m.state == "AwaitingCompaction"
    records: list[TransitionRecord] = []
    with tracing.attached(m, records.append):
        again = m.next_step()
        m.begin(again)
        assert m.state == "AwaitingCompaction"
        m.cancel()
        m.begin(m.next_step())
    assert [r.branch for r in records if r.kind == "feed"] == [
        "begin/AwaitingCompaction[0]",
        "cancel/*[0]",
        "begin/AwaitingCompaction[1]",
    ]
    assert m.state == "Terminal"


def test_brain_commit_and_discard_in_a_live_state():
    m = LoopMachine()
    m.accept_input("hi")
    m.inject(Message.user("more"))
    pending = len(m.data.pending)
    assert pending >= 1
    rec, _ = traced(m, "commit_pending")
    assert rec.branch == "commit_pending/*[0]" and m.state == "Start" and m.data.pending == []
    m.inject(Message.user("scratch"))
    rec, _ = traced(m, "discard_pending")
    assert rec.branch == "discard_pending/*[0]" and m.data.pending == []


def test_fallback_a_probe_that_was_the_requests_fault_frees_the_probe_and_judges_nothing():
    b = fallback_tripped()
    probe = b.route(1000, policy=FP)
    assert b.state == "Recovering" and probe.probe
    rec, _ = traced(b, "record", 1010, probe, "content_policy", policy=FP)
    assert rec.branch == "record/Recovering[6]" and b.state == "Recovering"
    assert b.data.probe_expires_at is None and b.data.probe_success_count == 0
    assert b.route(1020, policy=FP).probe  # the next call may probe again


def test_a_refusal_is_traced_and_counted_as_its_branch():
    from loopfsm import FeedRefused, load_machine
    from loopfsm.verification.coverage import Collector

    loop = load_machine("agent_loop").new()
    records: list[TransitionRecord] = []
    collector = Collector()
    with tracing.attached(loop, records.append), tracing.global_sink(collector):
        with pytest.raises(FeedRefused):
            loop.feed("approval_required", approver="ann", expires_at=10, policy_reason="risky", now=0)
    assert records == []  # ordinary sinks hear nothing of a refused feed
    assert collector.taken["agent_loop"] == {("branch", "no_action_named")}


# -- stream assembly ----------------------------------------------------------------
def test_stream_usage_mid_stream_and_a_repeated_message_start_after_stop():
    from loopfsm.machines.stream_assembly import StreamAssembly

    s = StreamAssembly()
    s.start("msg_1", "m", usage={"input_tokens": 5})
    rec, _ = traced(s, "usage", {"output_tokens": 3})
    assert rec.branch == "usage/Streaming[0]" and s.state == "Streaming"
    assert s.data.usage["output_tokens"] == 3 and s.data.usage["input_tokens"] == 5
    s.stop("end_turn")
    assert s.state == "Stopped"
    rec, _ = traced(s, "restate_message", "msg_1", "assistant")
    assert rec.branch == "restate_message/Stopped[0]" and s.state == "Stopped"
    from loopfsm.machines.errors import StreamProtocolError

    with pytest.raises(StreamProtocolError):
        s.restate_message("msg_2")  # another message's start is refused
