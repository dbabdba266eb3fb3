"""The model fallback breaker: every arrow, outcome classes, one probe, the fallback failing too."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopfsm.machines.breaker_values import FailFast, Route
from loopfsm.machines.fallback_breaker import FallbackBreaker, FallbackBreakerPolicy

P = FallbackBreakerPolicy(
    trip_after=3,
    cooldown_ms=1000,
    cooldown_multiplier=2,
    max_cooldown_ms=8000,
    probe_ttl_ms=100,
    recover_after=2,
    fallback_fail_max=2,
    when_fallback_fails="fail_fast",
)


def send(b, now, outcome, policy=P, **kw):
    r = b.route(now, policy=policy)
    if isinstance(r, Route):
        b.record(now, r, outcome, policy=policy, **kw)
    return r


def tripped(policy=P):
    b = FallbackBreaker()
    for _ in range(policy.trip_after):
        send(b, 0, "transient", policy)
    assert b.state == "Fallback"
    return b


def test_primary_trips_after_exactly_trip_after_counted_failures():
    b = FallbackBreaker()
    send(b, 0, "transient")
    send(b, 0, "rate_limited")
    assert b.state == "Primary"
    send(b, 0, "transient")
    assert b.state == "Fallback" and b.state_data == {"until": 1000, "reason": "consecutive_failures"}


@pytest.mark.parametrize("outcome", ["auth", "quota"])
def test_some_classes_trip_at_once(outcome):
    b = FallbackBreaker()
    send(b, 0, outcome)
    assert b.state == "Fallback" and b.state_data["reason"] == outcome


@pytest.mark.parametrize("outcome", ["context_length", "content_policy"])
def test_request_faults_do_not_count(outcome):
    b = FallbackBreaker()
    for _ in range(10):
        send(b, 0, outcome)
    assert b.state == "Primary" and b.data.primary_failures == 0


def test_ok_resets_the_count():
    b = FallbackBreaker()
    for o in ["transient", "transient", "success", "transient", "transient"]:
        send(b, 0, o)
    assert b.state == "Primary"


def test_fallback_serves_until_the_cooldown_then_exactly_one_probe():
    b = tripped()
    assert b.route(999, policy=P) == Route("fallback", b.data.generation, number=4, breaker=b.data.name)
    probe = b.route(1000, policy=P)
    assert probe.model == "primary" and probe.probe and b.state == "Recovering"
    assert b.route(1001, policy=P) == Route(
        "fallback", b.data.generation, number=6, breaker=b.data.name
    )  # one probe at a time
    assert b.route(1002, policy=P).model == "fallback"


def test_recovering_returns_to_primary_after_m_successes():
    b = tripped()
    b.record(1000, b.route(1000, policy=P), "success", policy=P)
    assert b.state == "Recovering"
    b.record(1001, b.route(1001, policy=P), "success", policy=P)
    assert b.state == "Primary" and b.data.trips == 0


def test_a_failed_probe_returns_to_fallback_with_a_longer_cooldown():
    b = tripped()
    b.record(1000, b.route(1000, policy=P), "transient", policy=P)
    assert b.state_data == {"until": 3000, "reason": "probe_failed"}
    b.record(3000, b.route(3000, policy=P), "transient", policy=P)
    assert b.state_data == {"until": 7000, "reason": "probe_failed"}


def test_an_expired_probe_lease_returns_to_fallback():
    b = tripped()
    b.route(1000, policy=P)
    b.tick(1099, policy=P)
    assert b.state == "Recovering"
    b.tick(1100, policy=P)
    assert b.state == "Fallback" and b.state_data["reason"] == "probe_lease_expired"
    b2 = tripped()
    b2.route(1000, policy=P)
    assert b2.route(1100, policy=P).model == "fallback" and b2.state == "Fallback"


def test_a_record_after_the_probe_lease_expired_returns_to_fallback_first():
    # The lease's expiry is checked on record too: a fallback call reported at the expiry moves the breaker
    # (the probe stays out no longer), and its outcome moves nothing (counted as late).
    b = tripped()
    probe = b.route(1000, policy=P)
    other = b.route(1050, policy=P)
    assert other.model == "fallback"
    b.record(1100, other, "success", policy=P)
    assert b.state == "Fallback" and b.state_data == {"until": 3100, "reason": "probe_lease_expired"}
    assert b.data.probe_expires_at is None and b.data.stats["late"] == 1
    assert b.data.stats.get("fallback_success", 0) == 0
    b.record(1100, probe, "success", policy=P)  # the probe itself, now from an old generation
    assert b.state == "Fallback" and b.data.stats["stale"] == 1


def test_a_probe_reported_at_its_expiry_is_late_not_a_success():
    b = tripped()
    probe = b.route(1000, policy=P)
    b.record(1100, probe, "success", policy=P)
    assert b.state == "Fallback" and b.state_data["reason"] == "probe_lease_expired"
    assert b.data.probe_success_count == 0 and b.data.stats["late"] == 1


def test_retry_after_is_respected():
    b = FallbackBreaker()
    send(b, 10, "quota", retry_after=50_000)
    assert b.state_data["until"] == 50_010


def test_stale_results_are_counted_but_do_not_move_it():
    b = FallbackBreaker()
    routes = [b.route(0, policy=P) for _ in range(5)]
    for r in routes[:3]:
        b.record(1, r, "transient", policy=P)
    b.record(2, routes[3], "success", policy=P)  # from before the trip
    probe = b.route(1002, policy=P)
    b.record(1003, routes[4], "auth", policy=P)
    assert b.state == "Recovering" and b.data.stats["stale"] == 2
    b.record(1004, probe, "success", policy=P)
    assert b.state == "Recovering"


def test_fallback_failing_fails_fast_or_tries_the_primary():
    b = tripped()
    for _ in range(2):
        send(b, 10, "transient")  # the fallback fails too
    assert b.route(20, policy=P) == FailFast(1000, "primary tripped and the fallback is failing too")
    p2 = FallbackBreakerPolicy(**{**P.__dict__, "when_fallback_fails": "try_primary"})
    r = b.route(21, policy=p2)
    assert r == Route("primary", b.data.generation, number=6, breaker=b.data.name)
    b.record(22, r, "success", policy=p2)
    assert b.state == "Primary"


def test_clock_going_backwards_is_clamped():
    b = FallbackBreaker()
    send(b, 5000, "auth")
    assert b.state_data["until"] == 6000
    assert b.route(0, policy=P).model == "fallback" and b.data.last_now == 5000


@pytest.mark.parametrize("where", ["Fallback", "Recovering"])
def test_snapshot_restore_mid_run(where):
    b = tripped()
    if where == "Recovering":
        b.route(1000, policy=P)
    r = FallbackBreaker.restore(json.loads(json.dumps(b.snapshot())))
    for m in (b, r):
        route = m.route(1050, policy=P)
        m.record(1050, route, "success", policy=P)
        m.tick(1200, policy=P)
    assert r.snapshot() == b.snapshot()


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(
        st.tuples(
            st.integers(0, 600),
            st.sampled_from(
                ["success", "transient", "rate_limited", "auth", "quota", "context_length", "content_policy"]
            ),
            st.booleans(),
        ),
        max_size=60,
    )
)
def test_recovering_never_has_two_primary_probes_out(ops):
    b = FallbackBreaker()
    now, outstanding = 0, []
    for dt, outcome, report in ops:
        now += dt
        r = b.route(now, policy=P)
        if isinstance(r, Route):
            outstanding.append(r)
        if report and outstanding:
            b.record(now, outstanding.pop(0), outcome, policy=P)
        probes = [x for x in outstanding if x.probe and x.generation == b.data.generation]
        assert len(probes) <= 1
        if b.state == "Recovering" and b.data.probe_expires_at is not None:
            assert b.data.last_now < b.data.probe_expires_at


def test_two_unnamed_breakers_never_take_each_others_routes():
    """The issue's case: a Route from another default-constructed breaker, same generation and number."""
    from loopfsm.core.errors import FeedArgumentError

    a, b = FallbackBreaker(), FallbackBreaker()
    assert a.data.name != b.data.name and a.data.name.startswith("fallback-")
    ra, rb = a.route(0), b.route(0)
    assert (ra.generation, ra.number) == (rb.generation, rb.number)
    before = b.snapshot()
    with pytest.raises(FeedArgumentError, match="issued by the breaker named"):
        b.record(0, ra, "auth")
    after = b.snapshot()
    assert after["data"]["stats"].pop("refused_permits") == 1 and after == before
    assert FallbackBreaker.restore(a.snapshot()).data.name == a.data.name  # the identity survives a restore
    assert FallbackBreaker("fb").data.name == "fb"
