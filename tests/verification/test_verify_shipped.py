"""The shipped tool breaker's invariants, proven by ``loopfsm verify`` to a documented bound; and for each,
a fault planted in a copy of the YAML that verify catches and replay reproduces."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopfsm.cli.main import main

from tests.support.planted import planted_copy

# Each exploration runs for seconds: proving the shipped invariants and finding planted faults.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BREAKER = ROOT / "machines" / "tool_breaker.yaml"

#: The bound each machine is proven to is its own ``verify:`` section (machines/*.yaml): no options.
BOUND = ["-q"]


def test_the_tool_breaker_holds_every_invariant_to_its_bound(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["verify", str(BREAKER), *BOUND]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "explored every run of up to 5 feeds" in out and "tool_breaker.yaml's verify: section\n" in out
    for name in (
        "half_open_age_bounded",
        "leases_bounded_by_ttl",
        "probes_bounded",
        "lease_call_ids_unique",
        "stale_result_never_moves",
        "stale_probe_result_never_moves",
    ):
        assert f"holds        {name}\n" in out


HALF_OPEN_OVERDUE = "half_open_overdue, params: {max_ms: {policy: half_open_max_ms}}"
PROBE_TTL = "grant_probe, params: {ttl_ms: {policy: probe_ttl_ms}}"
STALE_IN_CLOSED = "      - guard: stale\n        states: [Closed, Disabled]\n"  # record's first: list
STALE_IN_HALF_OPEN = """        - guard: {any: [stale, {name: holds_lease, negate: true}]}
          stay: true
          actions: [{name: count, params: {what: stale}}]
          description: from before the last transition, or for a lease that expired or never was
"""

ONE_LEASE_PER_CALL = """        - guard: holds_lease
          stay: true
          actions: [{name: reject, params: {reason: probe_in_flight, retry_at: first_lease_expiry}}]
          description: one lease per call id, so one record settles it
"""

# (invariant, what is planted: (old text, new text), every occurrence replaced[, more verify arguments])
FAULTS: list[tuple[str, tuple[str, str]] | tuple[str, tuple[str, str], list[str]]] = [
    ("half_open_age_bounded", (HALF_OPEN_OVERDUE, "half_open_overdue, params: {max_ms: 1000000}")),
    ("leases_bounded_by_ttl", (PROBE_TTL, "grant_probe, params: {ttl_ms: 100}")),
    (
        "probes_bounded",
        ("probe_slot_free, params: {max_probes: {policy: max_probes}}", "probe_slot_free, params: {max_probes: 2}"),
        # one call id gets one lease: a third probe needs a second id (4 feeds reach it)
        ["--values", 'call_id=["a", "b"]', "--depth", "4"],
    ),
    ("stale_result_never_moves", (STALE_IN_CLOSED, STALE_IN_CLOSED.replace("Closed, ", ""))),
    ("stale_probe_result_never_moves", (STALE_IN_HALF_OPEN, "")),
    # a second lease for one call id needs room for two probes
    ("lease_call_ids_unique", (ONE_LEASE_PER_CALL, ""), ["--set", "max_probes=2"]),
]


@pytest.mark.parametrize(
    ("invariant", "fault", "more"),
    [(f[0], f[1], f[2] if len(f) > 2 else []) for f in FAULTS],
    ids=[f[0] for f in FAULTS],
)
def test_a_planted_fault_is_caught_and_replayed(tmp_path, monkeypatch, capsys, invariant, fault, more):
    monkeypatch.chdir(tmp_path)
    faulty = planted_copy(BREAKER, tmp_path, *fault)
    assert main(["verify", str(faulty), *BOUND, *more]) == 1
    out = capsys.readouterr().out
    assert f"VIOLATED     {invariant}:" in out
    assert "shortest counterexample" in out
    trace = tmp_path / f"tool_breaker.{invariant}.trace.yaml"
    assert main(["replay", str(faulty), str(trace)]) == 1
    assert f"invariant {invariant} violated after step" in capsys.readouterr().out


AGENT_LOOP = ROOT / "machines" / "agent_loop.yaml"


def test_the_agent_loop_holds_every_invariant_to_its_bound(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["verify", str(AGENT_LOOP), *BOUND]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    for name in (
        "live_only_before_the_deadline",
        "attempts_bounded",
        "no_retry_of_a_non_idempotent_call",
        "completed_only_with_every_check",
        "terminals_are_forever",
    ):
        assert f"holds        {name}\n" in out
    assert "reached      completes in 1 feed" in out


ATTEMPTS_LEFT = "{name: attempts_left, params: {max_attempts: {policy: max_attempts}}}"
DISPATCH = "    first: [*deadline]\n    from:\n      awaiting_tool:\n        - name: run\n"
CHECKED_IN_OBSERVING = (
    "        - name: accepted\n          guard: *checks\n          to: completed\n"
    "          actions: [clamp_clock, clear_proposal]\n"
)
FAIL_FROM_ANYWHERE = '    first: [*deadline]\n    from:\n      "*":\n        - name: fail\n'

AGENT_FAULTS = [
    # dispatch's deadline check tried from recovering only
    (
        "live_only_before_the_deadline",
        (DISPATCH, DISPATCH.replace("[*deadline]", "[{<<: *deadline, states: [recovering]}]")),
    ),
    ("attempts_bounded", (ATTEMPTS_LEFT, "{name: attempts_left, params: {max_attempts: 5}}")),
    ("no_retry_of_a_non_idempotent_call", ("guard: [transient, idempotent_call, ", "guard: [transient, ")),
    (
        "completed_only_with_every_check",
        (
            CHECKED_IN_OBSERVING,
            CHECKED_IN_OBSERVING.replace("*checks", "{name: checks_passed, params: {required: [output_valid]}}"),
        ),
    ),
    (
        "terminals_are_forever",
        (
            FAIL_FROM_ANYWHERE,
            # the deadline copied into the live states, and a terminal state that takes fail and changes
            "    from:\n      failed:\n        - to: failed\n"
            "          actions: [{name: fail_with, params: {error_class: tampered}}]\n"
            '      "*":\n        - *deadline\n        - name: fail\n',
        ),
    ),
    ("completes", ("side_effects_resolved]}}", "side_effects_resolved, reviewed]}}")),
]


@pytest.mark.parametrize(("invariant", "fault"), AGENT_FAULTS, ids=[f[0] for f in AGENT_FAULTS])
def test_a_planted_fault_in_the_agent_loop_is_caught_and_replayed(tmp_path, monkeypatch, capsys, invariant, fault):
    monkeypatch.chdir(tmp_path)
    faulty = planted_copy(AGENT_LOOP, tmp_path, *fault)
    assert main(["verify", str(faulty), *BOUND]) == 1
    out = capsys.readouterr().out
    if invariant == "completes":  # a goal without an example: nothing to replay
        assert "NOT REACHED  completes" in out
        return
    assert f"VIOLATED     {invariant}:" in out
    trace = tmp_path / f"agent_loop.{invariant}.trace.yaml"
    assert main(["replay", str(faulty), str(trace)]) == 1
    assert f"invariant {invariant} violated after step" in capsys.readouterr().out


FALLBACK = ROOT / "machines" / "fallback_breaker.yaml"

STALE_IN_FALLBACK = "        states: [Primary, Fallback]  # Recovering checks the probe's lease first\n"
EXPIRY_ON_RECORD = """        - guard: probe_expired
          to: Fallback
          actions: [{name: count, params: {what: late}}, {name: trip, params: *trip_params}]
          description: the probe lease expired first; time moves it, not the result (before the stale check)
"""
ON_FALLBACK = "        - when: {outcome: success}\n          guard: &on_fallback"
STALE_IN_RECOVERING = (
    "        - guard: stale\n          stay: true\n          actions: [{name: count, params: {what: stale}}]\n"
    + ON_FALLBACK
)
FALLBACK_FAULTS = [
    (
        "probe_lease_bounded",
        ("grant_probe, params: {ttl_ms: {policy: probe_ttl_ms}}", "grant_probe, params: {ttl_ms: 50}"),
    ),
    ("cooldown_bounded", ("max_cooldown_ms: {policy: max_cooldown_ms}", "max_cooldown_ms: 100000")),
    ("stale_result_never_moves", (STALE_IN_FALLBACK, STALE_IN_FALLBACK.replace(", Fallback", ""))),
    ("probe_lease_unexpired", (EXPIRY_ON_RECORD, "")),
    ("stale_probe_result_never_moves", (STALE_IN_RECOVERING, ON_FALLBACK)),
]


def test_the_fallback_breaker_holds_every_invariant_to_its_bound(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["verify", str(FALLBACK), *BOUND]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    for name in (
        "probe_lease_bounded",
        "cooldown_bounded",
        "probe_lease_unexpired",
        "stale_result_never_moves",
        "stale_probe_result_never_moves",
    ):
        assert f"holds        {name}\n" in out


@pytest.mark.parametrize(("invariant", "fault"), FALLBACK_FAULTS, ids=[f[0] for f in FALLBACK_FAULTS])
def test_a_planted_fault_in_the_fallback_breaker_is_caught_and_replayed(
    tmp_path, monkeypatch, capsys, invariant, fault
):
    monkeypatch.chdir(tmp_path)
    faulty = planted_copy(FALLBACK, tmp_path, *fault)
    # a lower cooldown cap than the proof's, so a cooldown past the cap shows within the bound
    assert "max_cooldown_ms: 4," in FALLBACK.read_text(encoding="utf-8")
    assert main(["verify", str(faulty), *BOUND, "--set", "max_cooldown_ms=2"]) == 1
    assert f"VIOLATED     {invariant}:" in capsys.readouterr().out
    assert main(["replay", str(faulty), str(tmp_path / f"fallback_breaker.{invariant}.trace.yaml")]) == 1
    assert f"invariant {invariant} violated after step" in capsys.readouterr().out


RUN_LOCK = ROOT / "machines" / "run_lock.yaml"

# A copy of the run lock's registry whose grant lowers the fence on a second grant: a fault in Python,
# which no edit of the YAML can plant (no action of the table lowers the fence).
LOWERING_REGISTRY = """
from loopfsm import Registry
from loopfsm.machines.run_lock import REGISTRY as SHIPPED

REGISTRY = Registry("run_lock")
for kind, entries in SHIPPED.entries.items():
    for name, entry in entries.items():
        if kind == "action" and name == "grant":
            continue
        if kind == "guard":
            REGISTRY.guard(entry.fn, name=name, reads=tuple(entry.reads) if entry.reads is not None else None)
        else:
            getattr(REGISTRY, kind)(entry.fn, name=name)
for error in SHIPPED.errors.values():
    REGISTRY.error(error)


@REGISTRY.action
def grant(m, ctx):
    m.data.fence = 1 if m.data.fence == 0 else m.data.fence - 1
    now = m.data.last_now
    expires = now + ctx.args["lease_ms"]
    ctx.enter(holder=ctx.args["holder"], started_at=now, lease_expires_at=expires, cancel_requested=None)
"""


def test_the_run_lock_holds_every_invariant_to_its_bound(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["verify", str(RUN_LOCK), *BOUND]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "holds        fence_only_grows\n" in out and "holds        stale_fence_moves_nothing\n" in out


def test_a_stale_fence_that_releases_is_caught_and_replayed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    release = "        - guard: fence_current\n          to: Free\n"
    text = RUN_LOCK.read_text(encoding="utf-8")
    assert release in text
    faulty = tmp_path / "run_lock.yaml"
    faulty.write_text(
        text.replace(release, "        - guard: {name: fence_current, negate: true}\n          to: Free\n")
    )
    assert main(["verify", str(faulty), *BOUND]) == 1
    assert "VIOLATED     stale_fence_moves_nothing:" in capsys.readouterr().out
    assert main(["replay", str(faulty), "run_lock.stale_fence_moves_nothing.trace.yaml"]) == 1
    assert "invariant stale_fence_moves_nothing violated after step" in capsys.readouterr().out


def test_a_grant_that_lowers_the_fence_is_caught_and_replayed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "lowering.py").write_text(LOWERING_REGISTRY)
    faulty = ["--registry", "run_lock=lowering:REGISTRY"]
    assert main(["verify", str(RUN_LOCK), *BOUND, *faulty]) == 1
    out = capsys.readouterr().out
    assert "VIOLATED     fence_only_grows:" in out and "shortest counterexample, 2 feeds:" in out
    assert main(["replay", str(RUN_LOCK), "run_lock.fence_only_grows.trace.yaml", *faulty]) == 1
    assert "invariant fence_only_grows violated after step 2" in capsys.readouterr().out
    assert main(["replay", str(RUN_LOCK), "run_lock.fence_only_grows.trace.yaml"]) == 0  # the shipped registry
