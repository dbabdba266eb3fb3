"""The tests ``loopfsm paths`` writes catch faults: generated from the shipped table, run against copies with
one fault planted each (an action dropped, a value changed, a guard negated, a move redirected, a reply
changed), at least 80% of the faulty copies fail them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loopfsm.cli.main import main

from tests.support.planted import run_generated_module

from .test_paths_coverage import BOUNDS

pytestmark = pytest.mark.slow  # generates two modules and runs them against twenty faulty tables

ROOT = Path(__file__).resolve().parents[2]

FAULTS = {
    "run_lock": [
        ("actions: [clamp_clock, extend, {name: emit", "actions: [clamp_clock, {name: emit"),  # data
        ("events: [lock.renewed]", "events: [lock.extended]"),  # data
        ("events: [lock.taken_over]", "events: [lock.taken]"),  # data
        ("actions: [mark_cancel, {name: emit", "actions: [{name: emit"),  # data
        (
            "- guard: fence_current\n          to: Free",
            "- guard: {name: fence_current, negate: true}\n          to: Free",
        ),
        (
            "- guard: fence_current\n          stay: true",
            "- guard: {name: fence_current, negate: true}\n          stay: true",
        ),
        (
            "        - to: Held\n          actions: [clamp_clock, grant, {name: emit, params: {events: [lock.preempted"
            "]}}]",
            "        - stay: true\n          actions: [clamp_clock, {name: emit, params: {events: [lock.preempted]}}]",
        ),
        (
            "- guard: lease_expired\n          to: Held",
            "- guard: {name: lease_expired, negate: true}\n          to: Held",
        ),
        (
            "          actions: [clamp_clock, {name: emit, params: {events: [lock.released]}}]",
            "          actions: [{name: emit, params: {events: [lock.released]}}]",
        ),
        (
            "          actions: [fenced_out]\n          description: stale fence refused\n      Free:\n"
            "        - stay: true\n          actions: [fenced_out]\n"
            "          description: stale fence refused\n  release:",
            "          actions: [clamp_clock]\n          description: stale fence refused\n      Free:\n"
            "        - stay: true\n          actions: [fenced_out]\n"
            "          description: stale fence refused\n  release:",
        ),
    ],
    "tool_breaker": [
        (
            "actions: [allow, {name: hold_permit, params: {limit: {policy: max_outstanding}}}]",
            "actions: [{name: hold_permit, params: {limit: {policy: max_outstanding}}}, allow]",
        ),  # order only: may live
        (
            "        - guard: cooldown_over\n          to: HalfOpen",
            "        - guard: {name: cooldown_over, negate: true}\n          to: HalfOpen",
        ),  # guard
        (
            'reject, params: {reason: "open: {trip_reason}", retry_at: open_until}',
            'reject, params: {reason: "open", retry_at: open_until}',
        ),  # reply
        ("grant_probe, params: {ttl_ms: {policy: probe_ttl_ms}}", "grant_probe, params: {ttl_ms: 7}"),  # data
        ("        - guard: lease_expired\n          to: Open", "        - guard: lease_expired\n          to: Closed"),
    ],
}


@pytest.mark.parametrize("machine", sorted(FAULTS))
def test_the_generated_tests_kill_most_planted_faults(tmp_path, monkeypatch, capsys, machine):
    project = tmp_path / "project"
    (project / "machines").mkdir(parents=True)
    (project / "tests").mkdir()
    table = project / "machines" / f"{machine}.yaml"
    shutil.copy(ROOT / "machines" / f"{machine}.yaml", table)
    monkeypatch.chdir(project)
    module = project / "tests" / f"test_{machine}_paths.py"
    assert main(["paths", str(table), "-o", str(module), "-q", *BOUNDS[machine]]) == 0
    capsys.readouterr()
    count, _ = run_generated_module(module)
    assert count > 5  # the shipped table passes its own generated tests
    shipped = table.read_text(encoding="utf-8")
    killed, survived = 0, []
    for old, new in FAULTS[machine]:
        assert shipped.count(old) >= 1, old
        table.write_text(shipped.replace(old, new), encoding="utf-8")
        try:
            run_generated_module(module)
        except (Exception, pytest.fail.Exception):  # noqa: BLE001 - a failed assertion or raises, a bad table
            killed += 1
        else:
            survived.append(new)
    print(f"{machine}: {killed} of {len(FAULTS[machine])} planted faults killed; survived: {survived}")
    assert killed >= 0.8 * len(FAULTS[machine]), survived
