"""Restoring is strict: one envelope, typed fields, declared minimums; a restored machine takes its next feed."""

from __future__ import annotations

import copy
import json
import math
import os
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopfsm import LoopFsmError, SnapshotError
from loopfsm.core.catalog import load_machine
from loopfsm.machines import FallbackBreaker, ToolHealth
from loopfsm.machines.breaker_values import Allow, Reject, Route, backoff_ms
from loopfsm.machines.tool_breaker import ToolBreaker, ToolBreakerPolicy
from loopfsm.machines.turnstile import Turnstile

from tests.support.brain_helpers import brain_in, step

TRIP_FAST = ToolBreakerPolicy(trip_after=2, cooldown_ms=100, minimum_calls=100)


def tool_breaker_in(state: str) -> ToolBreaker:
    b = ToolBreaker()
    if state == "Closed":
        p = b.acquire(1, "c0", policy=TRIP_FAST)
        b.record(2, p, "success", policy=TRIP_FAST)
        return b
    for i in range(2):
        b.record(3 + i, b.acquire(3 + i, f"c{i}", policy=TRIP_FAST), "failure", policy=TRIP_FAST)
    if state == "HalfOpen":
        b.acquire(10_000, "probe", policy=TRIP_FAST)
    return b


def fallback_in(state: str) -> FallbackBreaker:
    b = FallbackBreaker()
    if state == "Primary":
        return b
    for t in range(0, 30, 10):
        r = b.route(t)
        if isinstance(r, Route) and r.model == "primary":
            b.record(t, r, "transient")
    if state == "Recovering":
        b.route(10_000_000)
    return b


def samples():
    out = [("turnstile", Turnstile())]
    out += [(f"tool_breaker/{s}", tool_breaker_in(s)) for s in ("Closed", "Open", "HalfOpen")]
    out += [(f"fallback/{s}", fallback_in(s)) for s in ("Primary", "Fallback", "Recovering")]
    out += [
        (f"brain/{s}", brain_in(s))
        for s in ("Start", "AwaitingModel", "AwaitingTools", "AwaitingCompaction", "Terminal")
    ]
    return out


SAMPLES = samples()


def test_samples_reach_their_states():
    for name, m in SAMPLES:
        assert m.state == name.split("/")[-1] or name == "turnstile", (name, m.state)


def next_feeds(m) -> None:
    """Drive a restored machine a few steps; only a LoopFsmError may come out."""
    calls = {
        ToolBreaker: lambda: [
            m.tick(10**7),
            m.record(10**7 + 1, m.acquire(10**7, "n"), "failure")
            if isinstance(p := m.acquire(10**7, "n2"), Allow)
            else p,
        ],
        FallbackBreaker: lambda: [m.tick(10**9), m.route(10**9)],
        Turnstile: lambda: [m.coin(), m.push()],
    }
    try:
        if type(m) in calls:
            calls[type(m)]()
        else:
            step(m)
            m.cancel()
            m.next_step()
    except LoopFsmError:
        pass


def refuses(cls, snap) -> str:
    with pytest.raises(SnapshotError) as info:
        cls.restore(snap)
    return str(info.value)


# -- the envelope ----------------------------------------------------------------


@pytest.mark.parametrize(
    "key,value",
    [
        ("format", True),
        ("format", 1.0),
        ("format", "1"),
        ("machine", None),
        ("fingerprint", 1),
        ("state", ["Closed"]),
        ("data", None),
        ("state_data", []),
    ],
)
def test_envelope_values_are_exact(key, value):
    snap = tool_breaker_in("Open").snapshot()
    snap[key] = value
    refuses(ToolBreaker, snap)


def test_extra_and_missing_top_level_keys_are_refused():
    snap = Turnstile().snapshot()
    assert "unknown key 'extra'" in refuses(Turnstile, dict(snap, extra=1))
    del snap["data"]
    assert "missing data" in refuses(Turnstile, snap)


# -- fields -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "field,value",
    [
        ("trips", 1.0),
        ("trips", True),
        ("trips", -1),
        ("generation", -5),
        ("consecutive_failures", "1"),
        ("stats", None),
        ("stats", {"allowed": -1}),
        ("stats", {"allowed": 1.5}),
        ("stats", {"allowed": math.nan}),
        ("stats", []),
        ("leases", [1]),
        ("leases", [{"call_id": "x"}]),
        ("leases", [{"call_id": 1, "expires_at": 1}]),
        ("leases", [{"call_id": "x", "expires_at": 1, "more": 2}]),
        ("window", ["maybe"]),
        ("tool", None),
    ],
)
def test_breaker_fields_are_typed(field, value):
    snap = tool_breaker_in("HalfOpen").snapshot()
    snap["data"][field] = value
    refuses(ToolBreaker, snap)


@pytest.mark.parametrize("field,value", [("until", 1.0), ("until", None), ("reason", 3)])
def test_state_data_is_typed(field, value):
    snap = tool_breaker_in("Open").snapshot()
    snap["state_data"][field] = value
    refuses(ToolBreaker, snap)


@pytest.mark.parametrize(
    "path,value",
    [
        (("data", "turns_taken"), -1),
        (("data", "context_tokens"), -3),
        (("data", "context_tokens"), 1.0),
        (("state_data", "turn"), -1),
        (("data", "cancelled"), 0),
    ],
)
def test_brain_counters_honour_their_minimums(path, value):
    m = brain_in("AwaitingModel")
    snap = m.snapshot()
    snap[path[0]][path[1]] = value
    refuses(type(m), snap)


def test_huge_trip_count_restores_and_backs_off_in_bounded_steps():
    snap = tool_breaker_in("HalfOpen").snapshot()
    snap["data"]["trips"] = 10**12
    b = ToolBreaker.restore(snap)
    b.record(20_000, Allow("probe", b.data.generation, probe=True), "failure")
    assert b.state == "Open"
    assert b.state_data["until"] - 20_000 <= ToolBreakerPolicy().max_cooldown_ms * 2
    assert backoff_ms(10, 10**6, 10**15, 10**9, None) == 10**9
    assert backoff_ms(10, 2, 4, 10**9, None) == 80
    assert backoff_ms(10, 2, 4, 50, 70) == 70


@pytest.mark.parametrize("breakers", [None, [], "x", 1, {"ls": None}, {"ls": []}])
def test_tool_health_restore_refuses_bad_breakers(breakers):
    health = ToolHealth()
    health.acquire("ls", 0, "c1")
    snap = health.snapshot()
    snap["breakers"] = breakers
    with pytest.raises(SnapshotError):
        ToolHealth.restore(snap)
    with pytest.raises(SnapshotError):
        ToolHealth.restore(dict(health.snapshot(), extra=1))


# -- fuzz: every corruption restores whole, exactly, and runs on; or is refused ----

HOSTILE = st.one_of(
    st.sampled_from(
        [
            -1,
            0,
            1,
            1.0,
            -1.5,
            True,
            False,
            None,
            "",
            "x",
            [],
            {},
            [1],
            {"a": 1},
            10**30,
            -(10**30),
            math.nan,
            math.inf,
            -math.inf,
            [None],
            {"": []},
            "Closed",
            "Open",
            "primary",
            [{"call_id": "x", "expires_at": -1}],
        ]
    ),
    st.integers(),
    st.text(max_size=5),
)


def leaves(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from leaves(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from leaves(v, prefix + (i,))


def put(doc, path, value):
    if not path:
        return value
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    parent[path[-1]] = value
    return doc


@settings(max_examples=int(os.environ.get("LOOPFSM_FUZZ", 150)), deadline=None)
@given(data=st.data(), which=st.integers(0, len(SAMPLES) - 1), n=st.integers(1, 3))
def test_corrupted_snapshots_of_every_machine(data, which, n):
    _, machine = SAMPLES[which]
    snap = machine.snapshot()
    for _ in range(n):
        path = data.draw(st.sampled_from(list(leaves(snap))))
        if path and path[-1] == "role":
            continue
        snap = put(copy.deepcopy(snap), path, data.draw(HOSTILE))
    try:
        restored = type(machine).restore(snap)
    except SnapshotError:
        return
    again = restored.snapshot()
    # The values come back exactly; the envelope's version, fingerprint and shape are the restoring
    # table's (a run saved under another version whose shape fits is now a run of this one).
    values = ("format", "machine", "state", "state_data", "data")
    given_back = json.loads(json.dumps(snap))
    assert {k: again[k] for k in values} == {k: given_back[k] for k in values}, (
        "a restored machine must snapshot exactly what it was given"
    )
    assert {k: again[k] for k in ("version", "fingerprint", "shape")} == {
        k: machine.snapshot()[k] for k in ("version", "fingerprint", "shape")
    }
    assert type(machine).restore(again).snapshot() == again
    next_feeds(restored)


# -- ToolHealth under threads ------------------------------------------------------


# 1,000 calls a thread keeps the quick loop under its one-second rule; the slow run gives races five times
# the room (the switch interval lets a thread run about 5 ms at a time).
@pytest.mark.parametrize("per_thread", [1_000, pytest.param(5_000, marks=pytest.mark.slow)])
def test_tool_health_shared_by_eight_threads_counts_exactly(per_thread):
    health = ToolHealth(ToolBreakerPolicy(trip_after=0, failure_rate_percent=0))
    threads = 8
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            start.wait()
            for i in range(per_thread):
                tool = f"tool{i % 3}" if i % 2 else f"new{t}-{i % 5}"
                permit = health.acquire(tool, i, f"{t}-{i}")
                assert isinstance(permit, Allow)
                health.record(tool, i, permit, "success" if i % 4 else "failure")
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert not errors, errors
    snap = health.snapshot()["breakers"]
    assert len(snap) == 3 + threads * 5
    total = {"allowed": 0, "success": 0, "failure": 0}
    for b in snap.values():
        for k in total:
            total[k] += b["data"]["stats"].get(k, 0)
    assert total == {
        "allowed": threads * per_thread,
        "success": threads * per_thread * 3 // 4,
        "failure": threads * per_thread // 4,
    }


def test_tool_health_refuses_a_tool_name_that_is_not_a_string():
    health = ToolHealth()
    before = health.snapshot()
    for bad in (None, 1, ("ls",)):
        with pytest.raises(LoopFsmError):
            health.acquire(bad, 0, "c")  # type: ignore[arg-type]
    assert health.snapshot() == before
    assert isinstance(health.acquire("ls", 0, "c"), (Allow, Reject))


def test_a_field_refusal_names_the_machine_and_reads_as_english():
    snap = Turnstile().snapshot()
    snap["data"]["credit"] = 1.0
    with pytest.raises(SnapshotError) as err:
        Turnstile.restore(snap)
    assert (
        str(err.value) == "turnstile: refusing snapshot: field 'credit' holds 1.0, which is not an integer (at least 0)"
    )


def test_a_snapshot_its_own_restore_would_refuse_is_not_taken():
    """An action may set anything; the snapshot says so at once instead of saving a run that cannot come back."""
    t = Turnstile()
    t.data.credit = "lots"  # as a careless action would
    with pytest.raises(
        SnapshotError, match="turnstile: cannot snapshot: field 'credit' holds 'lots', which is not an integer"
    ):
        t.snapshot()
    t.data.credit = 2**63  # past what any field holds
    with pytest.raises(SnapshotError, match="which is not an integer \\(signed 64-bit\\)"):
        t.snapshot()
    t.data.credit = 2
    assert Turnstile.restore(t.snapshot()).snapshot() == t.snapshot()


# -- every shipped counter has its bounds --------------------------------------------

SHIPPED = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "machines").glob("*.yaml"))
# Integer fields that hold a time fed in (ms) rather than a count: any integer is a time.
TIMES = ("last_now", "until", "since")


def _integer_fields(name: str):
    spec = load_machine(name).spec
    yield from ((None, f) for f in spec.data.values() if f.type == "integer")
    for state in spec.states.values():
        yield from ((state.name, f) for f in state.data.values() if f.type == "integer")


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_counter_declares_its_minimum(name):
    """A count (attempts, credit, fence, ...) is never negative: the table says so, so restore refuses -1."""
    unbounded = [
        f"{state or 'data'}.{f.name}"
        for state, f in _integer_fields(name)
        if f.minimum is None and not (f.name in TIMES or f.name.endswith("_at"))
    ]
    assert unbounded == []


@pytest.mark.parametrize("name", SHIPPED)
def test_a_counter_below_its_minimum_is_refused_on_restore(name):
    machine = load_machine(name)
    snap = machine.new().snapshot()
    fields = [f for state, f in _integer_fields(name) if state is None and f.minimum is not None]
    assert fields, name
    for f in fields:
        bad = copy.deepcopy(snap)
        bad["data"][f.name] = [f.minimum - 1] if f.list else f.minimum - 1
        with pytest.raises(SnapshotError, match=f"data.{f.name}"):
            machine.restore(bad)


def test_turnstile_credit_of_minus_one_is_refused():
    snap = Turnstile().snapshot()
    snap["data"]["credit"] = -1
    with pytest.raises(SnapshotError, match="data.credit must be bigger than or equal to 0"):
        Turnstile.restore(snap)
