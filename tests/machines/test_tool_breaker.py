"""The per-tool circuit breaker: every arrow, every boundary, the four classic faults, ToolHealth."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopfsm import FeedArgumentError, SnapshotError
from loopfsm.machines.breaker_values import Allow, Reject
from loopfsm.machines.tool_breaker import ToolBreaker, ToolBreakerPolicy, ToolHealth, jitter_ms

# Small numbers so every boundary is easy to reach: trips on 3 in a row, or 50% of >= 4 calls.
P = ToolBreakerPolicy(
    trip_after=3,
    failure_rate_percent=50,
    slow_rate_percent=0,
    window_size=4,
    minimum_calls=4,
    cooldown_ms=1000,
    cooldown_multiplier=2,
    max_cooldown_ms=5000,
    jitter_percent=0,
    max_probes=1,
    probe_ttl_ms=100,
    recover_after=2,
    half_open_max_ms=500,
)


def call(b, now, outcome, policy=P, call_id="c", **kw):
    permit = b.acquire(now, call_id, policy=policy)
    if isinstance(permit, Allow):
        b.record(now, permit, outcome, policy=policy, **kw)
    return permit


def opened(at=0, policy=P):
    b = ToolBreaker()
    for i in range(policy.trip_after):
        call(b, at, "failure", policy, call_id=f"f{i}")
    assert b.state == "Open"
    return b


def half_open(policy=P):
    b = opened(policy=policy)
    probe = b.acquire(1000, "p", policy=policy)
    assert b.state == "HalfOpen" and probe.probe
    return b, probe


# -- arrows ---------------------------------------------------------------------------


def test_closed_to_open_on_consecutive_failures_exactly_at_k():
    b = ToolBreaker()
    call(b, 0, "failure")
    call(b, 1, "failure")
    assert b.state == "Closed" and b.data.consecutive_failures == 2
    call(b, 2, "failure")
    assert b.state == "Open" and b.state_data == {"until": 1002, "reason": "consecutive_failures"}


def test_success_resets_the_consecutive_count():
    b = ToolBreaker()
    for o in ["failure", "failure", "success", "failure", "failure"]:
        call(b, 0, o, ToolBreakerPolicy(trip_after=3, failure_rate_percent=0))
    assert b.state == "Closed"


def test_failure_rate_exactly_at_the_line_trips_and_below_does_not():
    b = ToolBreaker()
    for o in ["failure", "success", "success"]:
        call(b, 0, o)
    assert b.state == "Closed"  # 1 of 3: below minimum_calls anyway
    call(b, 0, "failure")  # 2 of 4 = 50%: exactly the rate
    assert b.state == "Open" and b.state_data["reason"] == "failure_rate"
    b2 = ToolBreaker()
    for o in ["failure", "success", "success", "success"]:
        call(b2, 0, o)  # 25%
    assert b2.state == "Closed"


def test_minimum_calls_gate_the_rate():
    p = ToolBreakerPolicy(trip_after=0, failure_rate_percent=50, window_size=10, minimum_calls=5)
    b = ToolBreaker()
    for _ in range(4):
        call(b, 0, "failure", p)
    assert b.state == "Closed"  # 100% of 4 calls, but fewer than 5 recorded
    call(b, 0, "failure", p)
    assert b.state == "Open"


def test_slow_rate_trips_and_slow_is_not_a_failure():
    p = ToolBreakerPolicy(trip_after=2, failure_rate_percent=0, slow_rate_percent=75, window_size=4, minimum_calls=4)
    b = ToolBreaker()
    for o in ["failure", "slow", "failure", "slow"]:  # slow resets the consecutive count
        call(b, 0, o, p)
    assert b.state == "Closed"
    b2 = ToolBreaker()
    for o in ["slow", "slow", "success", "slow"]:
        call(b2, 0, o, p)
    assert b2.state == "Open" and b2.state_data["reason"] == "slow_rate"


def test_window_slides():
    p = ToolBreakerPolicy(trip_after=0, failure_rate_percent=50, window_size=4, minimum_calls=4)
    b = ToolBreaker()
    for o in ["failure", "success", "success", "success", "failure"]:  # window now [s, s, s, f]
        call(b, 0, o, p)
    assert b.state == "Closed" and b.data.window == ["success", "success", "success", "failure"]


def test_ignored_outcomes_and_callers_faults_do_not_count():
    b = ToolBreaker()
    for _ in range(5):
        call(b, 0, "ignored")
        call(b, 0, "failure", error_kind="invalid_arguments")
    assert b.state == "Closed" and b.data.window == [] and b.data.stats["ignored"] == 10


def test_open_rejects_until_exactly_open_until_then_half_open_lazily():
    b = opened()
    assert b.acquire(999, "x", policy=P) == Reject(1000, "open: consecutive_failures")
    assert b.state == "Open"
    permit = b.acquire(1000, "x", policy=P)  # now == open_until
    assert permit == Allow("x", b.data.generation, probe=True, lease_expires_at=1100)
    assert b.state == "HalfOpen" and b.state_data == {"since": 1000}


def test_tick_moves_open_to_half_open_without_a_call():
    b = opened()
    b.tick(999, policy=P)
    assert b.state == "Open"
    b.tick(1000, policy=P)
    assert b.state == "HalfOpen" and b.data.leases == []


def test_half_open_closes_after_r_successes_and_resets_the_window():
    b, probe = half_open()
    b.record(1001, probe, "success", policy=P)
    assert b.state == "HalfOpen" and b.data.probe_success_count == 1
    probe2 = b.acquire(1002, "p2", policy=P)
    b.record(1003, probe2, "success", policy=P)
    assert b.state == "Closed" and b.data.window == [] and b.data.trips == 0


@pytest.mark.parametrize("outcome", ["failure", "slow"])
def test_a_failed_probe_reopens_for_longer(outcome):
    b, probe = half_open()
    b.record(1001, probe, outcome, policy=P)
    assert b.state == "Open" and b.state_data == {"until": 1001 + 2000, "reason": "probe_failed"}


def test_backoff_grows_caps_and_respects_retry_after():
    b, probe = half_open()
    durations = []
    for _ in range(4):
        b.record(b.data.last_now, probe, "failure", policy=P)
        durations.append(b.state_data["until"] - b.data.last_now)
        probe = b.acquire(b.state_data["until"], "p", policy=P)
    assert durations == [2000, 4000, 5000, 5000]  # 1000 * 2^(trips-1), capped at 5000
    b.record(b.data.last_now, probe, "failure", policy=P, retry_after=60_000)
    assert b.state_data["until"] - b.data.last_now == 60_000


def test_jitter_is_deterministic_and_bounded():
    assert jitter_ms("search", 3, 10_000, 20) == jitter_ms("search", 3, 10_000, 20)
    values = {jitter_ms(f"tool{i}", 1, 10_000, 20) for i in range(50)}
    assert len(values) > 10 and all(0 <= v <= 2000 for v in values)
    assert jitter_ms("search", 3, 10_000, 0) == 0
    p = ToolBreakerPolicy(trip_after=1, cooldown_ms=10_000, jitter_percent=20)
    b = ToolBreaker()
    b.data.tool = "search"
    call(b, 0, "failure", p)
    assert b.state_data["until"] == 10_000 + jitter_ms("search", 1, 10_000, 20)


def test_admin_arrows():
    for start in (ToolBreaker(), opened(), half_open()[0]):
        b = ToolBreaker.restore(start.snapshot())
        b.force_open(5000)
        assert b.state == "ForcedOpen" and b.acquire(6000, "x", policy=P) == Reject(None, "forced_open")
        b.disable(6001)
        assert b.state == "Disabled" and isinstance(b.acquire(6002, "x", policy=P), Allow)
        b.reset(6003)
        assert b.state == "Closed" and b.data.trips == 0 and b.data.window == []


# -- the four faults of the well-known breakers ------------------------------------------------


def test_a_probe_that_never_reports_cannot_leave_it_stuck_half_open():
    b, probe = half_open()
    b.tick(1099, policy=P)
    assert b.state == "HalfOpen"
    b.tick(1100, policy=P)  # lease expires at exactly its TTL
    assert b.state == "Open" and b.state_data["reason"] == "probe_lease_expired"
    b2, _ = half_open()
    assert isinstance(b2.acquire(1100, "next", policy=P), Reject) and b2.state == "Open"


def test_half_open_has_a_maximum_age_even_with_probes_reporting():
    p = ToolBreakerPolicy(**{**P.__dict__, "recover_after": 100, "probe_ttl_ms": 1000})
    b, probe = half_open(p)
    t = 1000
    while b.state == "HalfOpen":
        b.record(t, probe, "success", policy=p)
        t += 50
        probe = b.acquire(t, f"p{t}", policy=p)
    assert b.state == "Open" and b.state_data["reason"] == "half_open_timeout" and t == 1500


def test_probe_limit_stops_a_stampede():
    p = ToolBreakerPolicy(**{**P.__dict__, "max_probes": 2})
    b, first = half_open(p)
    second = b.acquire(1010, "p2", policy=p)
    third = b.acquire(1020, "p3", policy=p)
    assert second.probe and third == Reject(1100, "probes_busy")
    b.record(1030, first, "success", policy=p)
    assert b.acquire(1040, "p4", policy=p).probe


def test_a_call_id_holding_a_probe_lease_is_rejected_a_second_one():
    # One lease per call id: asking again for the same call is rejected, even with a probe slot free,
    # so one record settles exactly the lease it names.
    p = ToolBreakerPolicy(**{**P.__dict__, "max_probes": 2})
    b, first = half_open(p)
    assert b.acquire(1010, "p", policy=p) == Reject(1100, "probe_in_flight")
    assert b.data.leases == [{"call_id": "p", "expires_at": 1100}] and b.state == "HalfOpen"
    assert b.acquire(1010, "p2", policy=p).probe  # another call still gets the free slot
    b.record(1020, first, "success", policy=p)
    assert b.acquire(1030, "p", policy=p).probe  # recorded: the id may probe again


def test_results_from_before_a_transition_cannot_move_it():
    b = ToolBreaker()
    old_permits = [b.acquire(0, f"c{i}", policy=P) for i in range(5)]
    for permit in old_permits[:3]:
        b.record(1, permit, "failure", policy=P)
    assert b.state == "Open"
    b.record(2, old_permits[3], "failure", policy=P)  # in Open
    probe = b.acquire(1002, "p", policy=P)
    b.record(1003, old_permits[4], "failure", policy=P)  # in HalfOpen, from the Closed generation
    assert b.state == "HalfOpen" and b.data.stats["stale"] == 2
    b.record(1004, probe, "success", policy=P)
    b.record(1005, b.acquire(1005, "p2", policy=P), "success", policy=P)
    assert b.state == "Closed"
    b.record(1006, probe, "failure", policy=P)  # the probe's generation is gone too
    assert b.state == "Closed" and b.data.stats["stale"] == 3 and b.data.consecutive_failures == 0


def test_time_going_backwards_is_clamped():
    b = opened(at=5000)
    assert b.state_data["until"] == 6000
    assert b.acquire(100, "x", policy=P) == Reject(6000, "open: consecutive_failures")  # 100 is read as 5000
    b.tick(0, policy=P)
    assert b.state == "Open" and b.data.last_now == 5000
    assert b.acquire(6000, "y", policy=P).probe


def test_unknown_outcome_is_refused_before_anything_changes():
    b = ToolBreaker()
    permit = b.acquire(0, "c", policy=P)
    before = b.snapshot()
    with pytest.raises(FeedArgumentError, match="one of 'success', 'failure', 'slow', 'ignored'"):
        b.record(1, permit, "fail", policy=P)
    assert b.snapshot() == before


@pytest.mark.parametrize("where", ["Open", "HalfOpen"])
def test_snapshot_restore_mid_open_and_half_open_gives_the_same_future(where):
    b = opened() if where == "Open" else half_open()[0]
    r = ToolBreaker.restore(json.loads(json.dumps(b.snapshot())))
    assert r.state == where
    for m in (b, r):
        m.tick(1050, policy=P)
        permit = m.acquire(1200, "z", policy=P)
        if isinstance(permit, Allow):
            m.record(1201, permit, "success", policy=P)
    assert r.snapshot() == b.snapshot()


# -- ToolHealth ----------------------------------------------------------------------------------


def test_tool_health_creates_breakers_lazily_and_snapshots_as_one_value():
    health = ToolHealth(P, overrides={"flaky": ToolBreakerPolicy(trip_after=1, cooldown_ms=10)})
    assert health.states == {}
    permit = health.acquire("flaky", 0, "a")
    health.record("flaky", 1, permit, "failure")
    health.acquire("shell", 2, "b")
    assert health.states == {"flaky": "Open", "shell": "Closed"}
    snap = json.loads(json.dumps(health.snapshot()))
    again = ToolHealth.restore(snap, P, overrides={"flaky": ToolBreakerPolicy(trip_after=1, cooldown_ms=10)})
    assert again.states == health.states
    assert again.acquire("flaky", 5, "c") == health.acquire("flaky", 5, "c")


# -- against pybreaker --------------------------------------------------------------------------


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def now(self, tz=None):
        import datetime

        return datetime.datetime(2026, 1, 1, tzinfo=tz) + datetime.timedelta(milliseconds=self.t)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(0, 700), st.booleans()), min_size=1, max_size=40),
    k=st.integers(1, 4),
    r=st.integers(1, 3),
)
def test_state_sequence_matches_pybreaker(steps, k, r):
    import pybreaker

    clock = FakeClock()
    original = pybreaker.datetime
    pybreaker.datetime = clock
    try:
        cb = pybreaker.CircuitBreaker(fail_max=k, reset_timeout=1.0, success_threshold=r)
        ours = ToolBreaker()
        p = ToolBreakerPolicy(
            trip_after=k,
            failure_rate_percent=0,
            slow_rate_percent=0,
            cooldown_ms=1000,
            cooldown_multiplier=1,
            max_cooldown_ms=1000,
            max_probes=1,
            probe_ttl_ms=10_000,
            recover_after=r,
            half_open_max_ms=10**9,
        )
        now, theirs_seq, ours_seq = 0, [], []

        def fail():
            raise ValueError("tool failed")

        for i, (dt, ok) in enumerate(steps):
            now += dt
            clock.t = now
            try:
                cb.call((lambda: None) if ok else fail)
            except (ValueError, pybreaker.CircuitBreakerError):
                pass
            theirs_seq.append(cb.current_state)
            permit = ours.acquire(now, f"c{i}", policy=p)
            if isinstance(permit, Allow):
                ours.record(now, permit, "success" if ok else "failure", policy=p)
            ours_seq.append({"Closed": "closed", "Open": "open", "HalfOpen": "half-open"}[ours.state])
        assert ours_seq == theirs_seq
    finally:
        pybreaker.datetime = original


# -- properties -----------------------------------------------------------------------------------

ops = st.lists(
    st.tuples(
        st.sampled_from(["acquire", "record", "tick"]),
        st.integers(-50, 400),
        st.sampled_from(["success", "failure", "slow", "ignored"]),
    ),
    max_size=80,
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(ops=ops, max_probes=st.integers(1, 3))
def test_never_more_probes_than_allowed_and_never_stuck_half_open(ops, max_probes):
    p = ToolBreakerPolicy(
        trip_after=2,
        failure_rate_percent=50,
        window_size=4,
        minimum_calls=2,
        cooldown_ms=300,
        max_probes=max_probes,
        probe_ttl_ms=150,
        recover_after=2,
        half_open_max_ms=400,
    )
    b = ToolBreaker()
    now, permits, n = 0, [], 0
    for op, dt, outcome in ops:
        now = max(0, now + dt)  # sometimes backwards: the breaker must clamp
        if op == "acquire":
            n += 1
            permit = b.acquire(now, f"c{n}", policy=p)
            if isinstance(permit, Allow):
                permits.append(permit)
        elif op == "record" and permits:
            b.record(now, permits.pop(0), outcome, policy=p)
        else:
            b.tick(now, policy=p)
        clock = b.data.last_now
        assert len(b.data.leases) <= max_probes
        if b.state == "HalfOpen":
            assert clock < b.state_data["since"] + p.half_open_max_ms
            assert all(clock < lease["expires_at"] for lease in b.data.leases)


def test_time_a_stale_result_carries_still_ages_half_open():
    """Found by the property test: a stale result arriving after the maximum age used to be filed as
    stale before the age was checked, leaving HalfOpen past its maximum until the next acquire."""
    b = ToolBreaker()
    old = b.acquire(0, "old", policy=P)
    b, _ = half_open()
    b.record(1499, old, "success", policy=P)  # stale, within the maximum age... but the probe lease expired
    assert b.state == "Open" and b.state_data["reason"] == "probe_lease_expired"
    b2, probe = half_open(ToolBreakerPolicy(**{**P.__dict__, "probe_ttl_ms": 10_000}))
    b2.record(1200, old, "failure", policy=b2.compiled.Policy(**{**P.__dict__, "probe_ttl_ms": 10_000}))
    assert b2.state == "HalfOpen" and b2.data.stats["stale"] == 1  # stale and in time: counted only
    b2.record(1500, old, "success", policy=P)
    assert b2.state == "Open" and b2.state_data["reason"] == "half_open_timeout"


@pytest.mark.parametrize("tool", [None, 5, ["search"]])
def test_tool_health_refuses_a_tool_name_that_is_not_a_string(tool):
    health = ToolHealth(P)
    permit = health.acquire("search", 1, "c1")
    for call in (
        lambda: health.acquire(tool, 1, "c2"),
        lambda: health.record(tool, 2, permit, "success"),
        lambda: health.breaker(tool),
    ):
        with pytest.raises(FeedArgumentError, match="a tool name is a string"):
            call()
    assert health.states == {"search": "Closed"}


class _Int(int):
    pass


class _Str(str):
    pass


@pytest.mark.parametrize(
    ("position", "value", "accepted"),
    [
        (0, True, False),  # a bool is not a time
        (0, 1.0, False),
        (0, _Int(5), True),  # an int subclass is an int
        (1, _Str("c"), True),
        (1, 7, False),
        (2, "bogus", False),  # not one of the outcomes
        (2, _Str("success"), True),
        (3, None, False),
        (4, 5, False),  # error_kind: a string or None
        (4, "timeout", True),
        (5, True, False),  # retry_after: an integer or None
        (5, 250, True),
    ],
)
def test_record_arguments_are_checked_whatever_their_type(position, value, accepted):
    """The binder's shortcut for plain int / str / None arguments decides exactly as the full checks."""
    b = ToolBreaker()
    permit = b.acquire(1, "c", policy=P)
    args = [2, "c", "success", permit.generation, None, None]
    args[position] = value
    before = b.snapshot()
    if accepted:
        b.feed("record", *args, policy=P)
        assert b.data.last_now == 5 if position == 0 else b.data.last_now == 2
        assert type(b.data.last_now) is int
    else:
        names = ("now", "call_id", "outcome", "generation", "error_kind", "retry_after")
        with pytest.raises(FeedArgumentError, match=f"argument '{names[position]}' must be"):
            b.feed("record", *args, policy=P)
        assert b.snapshot() == before


def test_tool_health_refusal_prints_both_fingerprints_whole():
    health = ToolHealth(ToolBreakerPolicy())
    snap = json.loads(json.dumps(health.snapshot())) | {"format": 1, "fingerprint": "sha256:" + "0" * 32}
    with pytest.raises(SnapshotError) as info:
        ToolHealth.restore(snap, ToolBreakerPolicy())
    mine = ToolHealth(ToolBreakerPolicy()).snapshot()["fingerprint"]
    assert f"(fingerprint 'sha256:{'0' * 32}', this spec is {mine!r})" in str(info.value)
