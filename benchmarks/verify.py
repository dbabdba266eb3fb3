"""Benchmark: how fast ``loopfsm verify`` explores the tool breaker, against a plain restore-and-feed loop.

Run ``python benchmarks/verify.py``.  The explorer runs to the bound the
shipped breaker is proven to (tests/test_verify_shipped.py); the baseline,
timed in the same run, restores a snapshot and feeds it one ``acquire`` as
many times as the explorer fed transitions, which is the least any explorer
of the real machine must do per transition.  Printed: configurations per
minute, transitions per minute, and the explorer's transitions per second as
a ratio of the baseline's feeds per second.  CPU time, best of ``ROUNDS``; a
script to read, never a test.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from loopfsm.core.compiler import compile_file
from loopfsm.review.verify import Explorer, Result
from loopfsm.review.verify_inputs import domains_for

ROUNDS = 3
ROOT = Path(__file__).resolve().parent.parent
POLICY = {
    "trip_after": 1,
    "cooldown_ms": 2,
    "max_cooldown_ms": 2,
    "probe_ttl_ms": 3,
    "half_open_max_ms": 5,
    "recover_after": 1,
}
DEPTH = 5


def explore(compiled: Any) -> tuple[float, Result]:
    policy = compiled.policy(POLICY)
    explorer = Explorer(
        compiled, policy, domains_for(compiled.spec, policy, {"call_id": ["a"]}), forget=frozenset({"stats"})
    )
    start = time.process_time()
    res = explorer.run([compiled.new().snapshot()], DEPTH, 10_000_000)
    return time.process_time() - start, res


def baseline(compiled: Any, n: int) -> float:
    policy = compiled.policy(POLICY)
    snap = compiled.new().snapshot()
    restore = compiled.restore
    start = time.process_time()
    for i in range(n):
        restore(snap).feed("acquire", now=i, call_id="a", policy=policy)
    return time.process_time() - start


def main() -> None:
    compiled = compile_file(ROOT / "machines" / "tool_breaker.yaml")
    best_explore, best_base, res = float("inf"), float("inf"), Result()
    for _ in range(ROUNDS):
        seconds, res = explore(compiled)
        best_explore = min(best_explore, seconds)
        best_base = min(best_base, baseline(compiled, res.transitions))
    per_min = res.configurations / best_explore * 60
    print(
        f"tool breaker, every run of up to {DEPTH} feeds: {res.configurations:,} configurations, "
        f"{res.transitions:,} transitions"
    )
    print(
        f"  verify:   {per_min:>12,.0f} configurations/min"
        f"  {res.transitions / best_explore * 60:>12,.0f} transitions/min"
    )
    print(f"  baseline: {res.transitions / best_base * 60:>12,.0f} restore+feed/min")
    print(
        f"  ratio:    {best_base / best_explore:.2f} "
        "(verify's transitions per second / the baseline's feeds per second)"
    )


if __name__ == "__main__":
    main()
