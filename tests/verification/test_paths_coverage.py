"""``loopfsm paths`` takes every branch, refusal and decision rule of every shipped machine: the generated
module's tests alone, run under the coverage collector, take 100% of the rows the coverage plugin counts.

Each machine's bound is stated here. Rows a single policy shuts (a threshold of 1 that trips at once, a
setting that is one value or another) are reached under the policies paths explores after the first: every
other value of each enum and boolean setting, then the ``--variant`` the bound names.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopfsm.core import loader
from loopfsm.core.compiler import compile_file
from loopfsm.cli.main import main
from loopfsm.verification.coverage import rows_of

from tests.support.planted import run_generated_module

ROOT = Path(__file__).resolve().parents[2]
MACHINES = ROOT / "machines"
HASH = "sha256:" + "a" * 64


def _agent_starts(tmp_path: Path) -> list[str]:
    """A run with its deadline at 6 ms; and one recovering after two attempts under max_attempts 3, so that
    the bound's max_attempts 2 leaves it none (a policy lowered while a run was recovering)."""
    compiled = compile_file(MACHINES / "agent_loop.yaml")
    inst = compiled.new()
    inst.data.run_id, inst.data.owner, inst.data.deadline_at = "r", "o", 6
    fresh = tmp_path / "start.json"
    fresh.write_text(json.dumps(inst.snapshot()))
    three = compiled.policy({"max_attempts": 3})
    inst.feed("tool_proposed", policy=three, tool="t", arguments_hash=HASH, idempotent=True, now=0)
    for _ in range(2):
        inst.feed("dispatch", policy=three, now=0)
        inst.feed("tool_failed", policy=three, error_class="e", transient=True, now=0)
    assert inst.state == "recovering"
    recovering = tmp_path / "recovering.json"
    recovering.write_text(json.dumps(inst.snapshot()))
    return ["--from", str(fresh), "--from", str(recovering)]


# machine -> the bound paths explores it to (besides -q); `slow` when it runs for more than a few seconds
BOUNDS: dict[str, list[str]] = {
    "turnstile": ["--set", "fare=2"],
    "run_lock": ["--depth", "4"],
    "router_client": ["--depth", "3"],
    "stream_assembly": ["--depth", "3"],
    "engine_brain": ["--depth", "5", "--set", "max_turns=1"],
    "router_run": ["--depth", "3", "--values", "now=[0]", "--set", "cost_ceiling_tokens=1"],
    "agent_loop": [
        *("--depth", "6", "--set", "max_attempts=2", "--values", f'arguments_hash=["{HASH}", "x"]'),
        *("--values", 'passed=[[], ["output_valid", "artifacts_present", "side_effects_resolved"]]'),
        *("--values", 'approver=["a", " "]', "--values", 'owner=["o", " "]'),
    ],
    "tool_breaker": [
        *("--depth", "4", "--set", "trip_after=1", "--set", "cooldown_ms=2", "--set", "max_cooldown_ms=2"),
        *("--set", "probe_ttl_ms=3", "--set", "half_open_max_ms=5", "--set", "recover_after=1"),
        *("--values", 'call_id=["a", "b"]', "--forget", "stats"),
        # the failure and slow rates trip before trip_after does; a probe success short of recover_after
        *("--variant", "trip_after=3,minimum_calls=2,slow_rate_percent=50", "--variant", "recover_after=2"),
    ],
    "fallback_breaker": [
        *("--depth", "5", "--set", "trip_after=1", "--set", "cooldown_ms=2", "--set", "max_cooldown_ms=2"),
        *("--set", "probe_ttl_ms=2", "--set", "recover_after=1", "--set", "fallback_fail_max=1", "--forget", "stats"),
        # a failure short of trip_after, a probe success short of recover_after
        *("--variant", "trip_after=2,recover_after=2"),
    ],
}
SLOW = {"engine_brain", "router_run", "agent_loop", "tool_breaker", "fallback_breaker"}


def test_every_shipped_machine_has_a_bound():
    assert set(BOUNDS) == {p.stem for p in MACHINES.glob("*.yaml")}


@pytest.mark.parametrize("machine", [pytest.param(m, marks=[pytest.mark.slow] if m in SLOW else []) for m in BOUNDS])
def test_the_generated_paths_take_every_row(tmp_path, capsys, machine):
    bound = BOUNDS[machine] + (_agent_starts(tmp_path) if machine == "agent_loop" else [])
    out = tmp_path / f"test_{machine}_paths.py"
    assert main(["paths", str(MACHINES / f"{machine}.yaml"), "-o", str(out), "-q", *bound]) == 0
    rows = [r for r in rows_of(loader.load(MACHINES / f"{machine}.yaml").source.doc) if r.excuse is None]
    assert f"paths taking {len(rows)} of {len(rows)} branches" in capsys.readouterr().err
    assert "Not reached" not in out.read_text()
    count, taken = run_generated_module(out)
    assert count >= 1
    assert [f"{r.kind} {r.name}" for r in rows if (r.kind, r.name) not in taken] == []
