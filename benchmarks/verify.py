"""Benchmark: ``loopfsm verify`` on every shipped machine at its declared bound, against a naive search.

Run ``python benchmarks/verify.py`` (``--only tool_breaker,router_run`` for some machines).  For each
machine, with the bound its ``verify:`` section declares (depth, policy, values, starts, forgotten
fields):

* **verify**: the explorer, as ``loopfsm verify`` runs it (invariants asked of every configuration and
  step, every decision asked with every combination of its arguments, rows noted for coverage);
* **naive**: a plain breadth-first search over the public API, doing the same work: each configuration
  kept as its snapshot's JSON, restored afresh for every feed tried, fed, snapshotted and looked up, with
  the same argument values (``Domains``) and the same clock rule; the same invariants asked of every
  configuration and step (verify's ``Judge``), every feed tried where a step invariant is in scope (those
  the state refuses or ignores too, every value of each); every decision asked with every combination of its
  arguments through ``explain``; the rows taken heard by a plain trace sink.  It runs on the default
  engine, as a user's code does; the same search on the interpreter is printed too.

The searches are checked to agree, in every round: the same configurations (counted alike: the snapshot
and the largest time fed), the same rows taken, the same invariants broken.  Printed per machine:
configurations, CPU seconds of each, verify's configurations per CPU
minute, and the ratios.  CPU time (``time.process_time``), the searches alternating, best of ``ROUNDS``
each.  A script to read, never a test.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loopfsm.core.compiler import compile_file
from loopfsm.core.errors import LoopFsmError
from loopfsm.verification.verify import Explorer
from loopfsm.verification.verify_report import Options
from loopfsm.verification.verify_inputs import domains_for

ROUNDS = 1 if "--quick" in sys.argv else 3
ROOT = Path(__file__).resolve().parent.parent


class _Args:
    """The command line's options, none given: the machine's ``verify:`` section decides."""

    depth = max_states = time_limit = None
    start: list[str] = []
    set: list[str] = []
    values: list[str] = []
    forget: list[str] = []


def model_of(compiled: Any) -> Options:
    from loopfsm.cli.verify_commands import with_model

    return with_model(compiled, Options(progress=False), _Args())  # type: ignore[no-any-return]


def starts_of(compiled: Any, opts: Options) -> list[dict[str, Any]]:
    return list(opts.starts) or [compiled.new().snapshot()]


def run_verify(compiled: Any, opts: Options) -> tuple[int, frozenset[tuple[str, str]], frozenset[str]]:
    policy = compiled.policy(opts.policy)
    domains = domains_for(compiled.spec, policy, opts.values, compiled.registry.codecs, compiled.registry)
    explorer = Explorer(compiled, policy, domains, forget=opts.forget)
    res = explorer.run(starts_of(compiled, opts), opts.depth, opts.max_states, None)
    return res.configurations, frozenset(explorer.first_taken), frozenset(res.violations)


class _Rows:
    """A plain trace sink noting (kind, row) of every record, refusals included (as verify's does)."""

    wants_refusals = True

    def __init__(self) -> None:
        self.taken: set[tuple[str, str]] = set()

    def __call__(self, record: Any) -> None:
        from loopfsm.core import tracing

        if record.branch is not None:
            decision = record.kind == tracing.DECISION
            self.taken.add(("rule", f"{record.feed}/{record.branch}") if decision else ("branch", record.branch))


def _key(snap: dict[str, Any], clock: int, forget: frozenset[str]) -> str:
    data = {k: v for k, v in snap["data"].items() if k not in forget}
    return json.dumps([snap["state"], snap["state_data"], data, clock], sort_keys=True)


def run_naive(compiled: Any, opts: Options, engine: str) -> tuple[int, frozenset[tuple[str, str]], frozenset[str]]:
    """Breadth first over snapshots through the public API, doing verify's work: each configuration restored
    afresh for every feed tried, its invariants asked (the same ``Judge``), every decision asked with every
    combination of its arguments (``explain``), the rows taken heard by a trace sink."""
    from loopfsm.core import tracing
    from loopfsm.core.invariants import compile_invariants
    from loopfsm.verification.verify import Judge

    policy = compiled.policy(opts.policy)
    domains = domains_for(compiled.spec, policy, opts.values, compiled.registry.codecs, compiled.registry)
    judge = Judge(compile_invariants(compiled.spec, compiled.registry, policy), policy)
    heard = _Rows()
    broken: set[str] = set()

    def arrive(inst: Any, clock: int) -> None:
        broken.update(b.invariant for b in judge.configuration(inst))
        for name, d in compiled.spec.decisions.items():
            for ask in domains.combinations(name, d.args, inst, clock):
                try:
                    inst.explain(name, policy=policy, **ask.kwargs())
                except LoopFsmError:
                    pass

    seen: set[str] = set()
    frontier: list[tuple[dict[str, Any], int]] = []
    with tracing.global_sink(heard):
        for snap in starts_of(compiled, opts):
            inst = compiled.restore(snap, engine=engine)
            snap = inst.snapshot()
            key = _key(snap, 0, opts.forget)
            if key not in seen:
                seen.add(key)
                frontier.append((snap, 0))
                arrive(inst, 0)
        for _ in range(opts.depth):
            nxt = []
            for snap, clock in frontier:
                here = compiled.restore(snap, engine=engine)
                allowed = here.allowed_feeds()
                # a step invariant in scope is asked of every feed, those the state refuses or ignores too
                asks = any(inv.in_scope(here.state) for inv in judge.steps)
                steps_here = domains.steps(here, clock, tuple(compiled.events) if asks else allowed)
                for step in steps_here:
                    armed = judge.armed(here, step)
                    inst = compiled.restore(snap, engine=engine)
                    try:
                        inst.feed(step.feed, policy=policy, **step.kwargs())
                    except LoopFsmError:
                        continue
                    broken.update(b.invariant for b in judge.step(armed, here, inst))
                    if step.feed not in allowed:
                        continue  # ignored: nothing changed (its clock alone does not make a configuration)
                    now = step.clock()
                    nclock = clock if now is None or now < clock else now
                    nsnap = inst.snapshot()
                    key = _key(nsnap, nclock, opts.forget)
                    if key not in seen:
                        seen.add(key)
                        nxt.append((nsnap, nclock))
                        arrive(inst, nclock)
            frontier = nxt
            if not frontier:
                break
    return len(seen), frozenset(heard.taken), frozenset(broken)


def cpu(fn: Callable[[], Any]) -> tuple[float, Any]:
    """CPU seconds of one search: a search shorter than 0.2 s is repeated until 0.2 s and averaged, so a small
    machine's ratio is not one clock tick against another."""
    start = time.process_time()
    found = fn()
    runs = 1
    while (spent := time.process_time() - start) < 0.2:
        fn()
        runs += 1
    return spent / runs, found


def main() -> None:
    names = sorted(p.stem for p in (ROOT / "machines").glob("*.yaml"))
    if "--only" in sys.argv:
        names = sys.argv[sys.argv.index("--only") + 1].split(",")
    print(f"CPU seconds, best of {ROUNDS} alternating rounds; naive: the same work through the public API")
    print(
        f"{'machine':<18}{'configs':>9}{'verify s':>10}{'naive s':>9}{'naive/interp s':>16}"
        f"{'configs/min':>13}{'x naive':>9}{'x naive/interp':>16}"
    )
    for name in names:
        compiled = compile_file(ROOT / "machines" / f"{name}.yaml")
        opts = model_of(compiled)
        best = {"verify": float("inf"), "naive": float("inf"), "interp": float("inf")}
        counts = set()
        for _ in range(ROUNDS):
            for label, fn in (
                ("verify", lambda c=compiled, o=opts: run_verify(c, o)),
                ("naive", lambda c=compiled, o=opts: run_naive(c, o, "transitions")),
                ("interp", lambda c=compiled, o=opts: run_naive(c, o, "interpreter")),
            ):
                seconds, found = cpu(fn)
                best[label] = min(best[label], seconds)
                counts.add(found)
        # the three searches found the same configurations, took the same rows and broke the same invariants
        assert len(counts) == 1, (name, [(c[0], len(c[1]), sorted(c[2])) for c in counts])
        ((configs, _, _),) = counts
        v = best["verify"]
        print(
            f"{name:<18}{configs:>9,}{v:>10.2f}{best['naive']:>9.2f}{best['interp']:>16.2f}"
            f"{configs / v * 60:>13,.0f}{best['naive'] / v:>9.2f}{best['interp'] / v:>16.2f}"
        )


if __name__ == "__main__":
    main()
