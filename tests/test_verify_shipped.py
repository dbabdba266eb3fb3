"""The shipped tool breaker's invariants, proven by ``loopfsm verify`` to a documented bound; and for each,
a fault planted in a copy of the YAML that verify catches and replay reproduces."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopfsm.review.cli import main

ROOT = Path(__file__).resolve().parent.parent
BREAKER = ROOT / "machines" / "tool_breaker.yaml"

#: The bound the tool breaker is proven to: every run of up to 5 feeds under a small policy (so that
#: tripping, probing, expiring and closing all happen within it), one call id, counters not told apart.
BOUND = [
    *("--depth", "5", "--set", "trip_after=1", "--set", "cooldown_ms=2", "--set", "max_cooldown_ms=2"),
    *("--set", "probe_ttl_ms=3", "--set", "half_open_max_ms=5", "--set", "recover_after=1"),
    *("--values", 'call_id=["a"]', "--forget", "stats", "-q"),
]


def test_the_tool_breaker_holds_every_invariant_to_its_bound(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["verify", str(BREAKER), *BOUND]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    for name in (
        "half_open_age_bounded",
        "leases_bounded_by_ttl",
        "probes_bounded",
        "stale_result_never_moves",
        "stale_probe_result_never_moves",
    ):
        assert f"holds        {name}\n" in out


HALF_OPEN_OVERDUE = "half_open_overdue, params: {max_ms: {policy: half_open_max_ms}}"
PROBE_TTL = "grant_probe, params: {ttl_ms: {policy: probe_ttl_ms}}"
STALE_IN_CLOSED = """        - guard: stale
          stay: true
          actions: [{name: count, params: {what: stale}}]
          description: from before the last transition; stats only
        - guard: {name: holds_permit, negate: true}
          refuse: "no permit is outstanding for this call: it was recorded already, or never issued"
          description: a permit is recorded at most once
"""
STALE_IN_HALF_OPEN = """        - guard: {any: [stale, {name: holds_lease, negate: true}]}
          stay: true
          actions: [{name: count, params: {what: stale}}]
          description: from before the last transition, or for a lease that expired or never was
"""

# (invariant, what is planted: (old text, new text), every occurrence replaced)
FAULTS = [
    ("half_open_age_bounded", (HALF_OPEN_OVERDUE, "half_open_overdue, params: {max_ms: 1000000}")),
    ("leases_bounded_by_ttl", (PROBE_TTL, "grant_probe, params: {ttl_ms: 100}")),
    (
        "probes_bounded",
        ("probe_slot_free, params: {max_probes: {policy: max_probes}}", "probe_slot_free, params: {max_probes: 2}"),
    ),
    (
        "stale_result_never_moves",
        (
            STALE_IN_CLOSED,
            STALE_IN_CLOSED.split("        - guard: {name: holds_permit")[0].replace(
                "guard: stale", "guard: {name: stale, negate: true}"
            )
            + STALE_IN_CLOSED[STALE_IN_CLOSED.index("        - guard: {name: holds_permit") :],
        ),
    ),
    ("stale_probe_result_never_moves", (STALE_IN_HALF_OPEN, "")),
]


@pytest.mark.parametrize(("invariant", "fault"), FAULTS, ids=[f[0] for f in FAULTS])
def test_a_planted_fault_is_caught_and_replayed(tmp_path, monkeypatch, capsys, invariant, fault):
    monkeypatch.chdir(tmp_path)
    old, new = fault
    text = BREAKER.read_text(encoding="utf-8")
    assert old in text
    faulty = tmp_path / "tool_breaker.yaml"
    faulty.write_text(text.replace(old, new), encoding="utf-8")
    assert main(["verify", str(faulty), *BOUND]) == 1
    out = capsys.readouterr().out
    assert f"VIOLATED     {invariant}:" in out
    assert "shortest counterexample" in out
    trace = tmp_path / f"tool_breaker.{invariant}.trace.yaml"
    assert main(["replay", str(faulty), str(trace)]) == 1
    assert f"invariant {invariant} violated after step" in capsys.readouterr().out
