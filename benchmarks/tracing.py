"""Benchmark: what the tracing hook costs a feed, as ratios against the same feed without it.

Run ``python benchmarks/tracing.py``.  The baseline is an instance class whose
``feed`` is the runtime's feed minus the tracing check, so the only difference
measured is the hook.  CPU time, rounds alternate between contenders, best of
each is kept; a script to read, never a test.
"""

from __future__ import annotations

import time
from typing import Any

from loopfsm.core import tracing
from loopfsm.machines.turnstile import Turnstile

ROUNDS = 7
N = 20_000


class Untraced(Turnstile):
    """The turnstile with the runtime's feed path minus the tracing check."""

    __slots__ = ()
    compiled = Turnstile.compiled

    def feed(self, event: str, *args: Any, policy: Any = None, **kwargs: Any) -> Any:
        c = self.compiled
        ev, bind = c.feed_table[event]
        bound = bind(args, kwargs) if bind is not None else c.binders[event](args, kwargs) if args or kwargs else {}
        return ev.run(self, bound, c.default_policy if policy is None else c.policy(policy)).reply


def drive(t: Turnstile) -> tuple[str, int]:
    coin, push = t.coin, t.push
    for _ in range(N // 2):
        coin()
        push()
    return t.state, t.data.passages


def cpu(fn: Any, *args: Any) -> float:
    start = time.process_time()
    fn(*args)
    return time.process_time() - start


def main() -> None:
    # Each contender first shown to do the same work.
    assert drive(Untraced()) == drive(Turnstile()) == ("locked", N // 2)
    records: list[tracing.TransitionRecord] = []
    traced = Turnstile()
    with tracing.attached(traced, records.append):
        assert drive(traced) == ("locked", N // 2)
    assert len(records) == N and not tracing.ACTIVE

    best = {"untraced": float("inf"), "no sink": float("inf"), "list sink": float("inf")}
    for _ in range(ROUNDS):
        best["untraced"] = min(best["untraced"], cpu(drive, Untraced()))
        best["no sink"] = min(best["no sink"], cpu(drive, Turnstile()))
        records.clear()
        t = Turnstile()
        with tracing.attached(t, records.append):
            best["list sink"] = min(best["list sink"], cpu(drive, t))
    base = best["untraced"]
    print(f"tracing hook, turnstile feed (best of {ROUNDS} rounds of {N} feeds, CPU time)")
    for name, seconds in best.items():
        print(f"  {name:<10} {seconds / N * 1e9:8.0f} ns/feed   {seconds / base:5.2f}x untraced")


if __name__ == "__main__":
    main()
