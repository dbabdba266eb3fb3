"""``loopfsm verify``'s report: explore one machine to the bound asked for, and say what was covered.

The explorer (:mod:`.verify`) finds configurations, findings and rows; this
module turns one run into the verdict a policy author reads: how far the
search went and why it stopped, the states and rows never reached (with a
hint), and per invariant whether it holds, is violated (with its shortest
counterexample, written as a trace file), or was never exercised.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from loopfsm.core.binding import Call

from loopfsm.verification.verify import NO_CRASH, Explorer, Result


def progress_line(out: TextIO, machine: str = "") -> Callable[[Result, int], None]:
    def show(res: Result, level: int) -> None:
        rate = res.configurations / res.seconds if res.seconds else 0.0
        print(
            f"verify{' ' + machine if machine else ''}: depth {level}, {res.configurations:,} configurations, "
            f"{res.transitions:,} transitions, {rate:,.0f} configurations/s",
            file=out,
            flush=True,
        )

    return show


#: What ``loopfsm verify`` explores to when neither the command line nor the machine's ``verify:`` says.
DEFAULT_DEPTH = 6
DEFAULT_MAX_STATES = 200_000
DEFAULT_TIME_LIMIT = 60.0  # seconds of CPU per machine


@dataclass(frozen=True)
class Options:
    """What ``loopfsm verify`` was asked: bounds, policy numbers, argument values, starting snapshots."""

    depth: int = DEFAULT_DEPTH
    max_states: int = DEFAULT_MAX_STATES
    policy: dict[str, Any] = field(default_factory=dict)
    values: dict[str, list[Any]] = field(default_factory=dict)
    starts: tuple[dict[str, Any], ...] = ()  # snapshots; none: a new instance
    traces: Any = None  # a folder (pathlib.Path) to write counterexamples into, or None for none
    progress: bool = True
    forget: frozenset[str] = frozenset()  # data fields left out when telling configurations apart
    time_limit: float | None = DEFAULT_TIME_LIMIT  # seconds of CPU; None: none
    unexercised: dict[str, str] = field(default_factory=dict)  # invariant -> why the bound does not exercise it
    source: str = "the command line's defaults"  # where the bound came from, for the report


_STOPPED = {
    "max_states": "the configuration limit (max_states {max_states:,})",
    "time_limit": "the time limit ({time_limit:g} s of CPU)",
    "interrupt": "an interrupt (Ctrl-C)",
}


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _hint(compiled: Any, row: Any, opts: Options, res: Result, policy: Any) -> str:
    """Why a row was never taken, as far as the table tells: its state never reached, or what its guards read."""
    if row.kind != "branch":
        return ""
    feed, _, rest = row.name.partition("/")
    state = rest.split("[", 1)[0]
    if state in compiled.spec.states and state not in res.states_reached:
        return f"; state {state} is never reached"
    event = compiled.events.get(feed)
    branch = next((b for bs in (event.branches.values() if event else ()) for b in bs if b.name == row.name), None)
    if branch is None:
        return ""
    reads: list[str] = []
    stack = list(branch.guards)
    while stack:
        g = stack.pop(0)
        if isinstance(g, Call):
            reads += [f"policy {p.field} ({getattr(policy, p.field)!r})" for p in g.from_policy]
            reads += [f"argument {a}" + (" (values given)" if a in opts.values else "") for a in sorted(g.reads or ())]
        else:
            stack.extend(x for option in g.options for x in option)
    return f"; its guards read {', '.join(dict.fromkeys(reads))}" if reads else ""


def verify_machine(compiled: Any, opts: Options, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Explore ``compiled``, print the report; 0 every invariant holds and is exercised within the whole bound,
    1 otherwise (one is violated, a goal or an invariant's states are never reached, the search stopped early)."""
    out = out or sys.stdout
    err = err or sys.stderr
    from loopfsm.verification.tracefile import dump  # noqa: PLC0415
    from loopfsm.verification.verify_inputs import domains_for  # noqa: PLC0415

    policy = compiled.policy(opts.policy)
    domains = domains_for(compiled.spec, policy, opts.values, compiled.registry.codecs, compiled.registry)
    unknown = sorted(opts.forget - set(compiled.spec.data))
    if unknown:
        from loopfsm.verification.errors import ReviewError  # noqa: PLC0415

        raise ReviewError(f"{compiled.name}: --forget {unknown[0]}: the machine has no data field of that name")
    name = compiled.name
    explorer = Explorer(
        compiled, policy, domains, progress=progress_line(err, name) if opts.progress else None, forget=opts.forget
    )
    starts = list(opts.starts) or [compiled.new().snapshot()]
    res = explorer.run(starts, opts.depth, opts.max_states, opts.time_limit)
    status = 0
    if res.complete:
        bound = f"every reachable configuration (no run longer than {_plural(res.depth, 'feed')} reaches a new one)"
    elif res.truncated:
        status = 1
        why = _STOPPED[res.stopped_by or "interrupt"].format(max_states=opts.max_states, time_limit=opts.time_limit)
        bound = f"every run of up to {_plural(res.depth, 'feed')}, NOT the bound of {opts.depth}: stopped by {why}"
    else:
        bound = (
            f"every run of up to {_plural(res.depth, 'feed')}; the space is not exhausted "
            "(longer runs reach new configurations)"
        )
    print(
        f"{name}: {_plural(res.configurations, 'configuration')}, {_plural(res.transitions, 'transition')} "
        f"({_plural(res.refused, 'refused feed')}) in {res.cpu_seconds:.1f}s of CPU; explored {bound}; "
        f"bound from {opts.source}",
        file=out,
    )
    if res.truncated:
        print(f"  INCOMPLETE   nothing below is proven beyond runs of {_plural(res.depth, 'feed')}", file=out)
    never = [s for s in compiled.spec.states if s not in res.states_reached]
    reached = len(compiled.spec.states) - len(never)
    print(
        f"  states reached: {reached}/{len(compiled.spec.states)}" + (f"; never: {', '.join(never)}" if never else ""),
        file=out,
    )
    cov = res.coverage
    print(f"  branches and decision rules taken: {cov.hit()}/{len(cov.counted)}", file=out)
    for row in cov.missed:
        hint = _hint(compiled, row, opts, res, policy)
        print(f"    never taken: {row.kind} {row.name} ({compiled.spec.file}:{row.line}){hint}", file=out)
    invariants = compiled.spec.invariants
    for inv in invariants.values():
        if inv.kind == "reach":
            found = res.reached.get(inv.name)
            if found is None:
                status = 1
                print(f"  NOT REACHED  {inv.name}: {inv.description.strip()} (no run within the bound)", file=out)
            else:
                print(f"  reached      {inv.name} in {_plural(len(found.steps), 'feed')}", file=out)
        elif inv.name in res.violations:
            status = 1
            print(f"  VIOLATED     {inv.name}: {inv.description.strip()}", file=out)
        elif inv.name not in res.exercised:
            where = f"its states ({', '.join(inv.states)}) were never reached" if inv.states else "it was never asked"
            if inv.kind == "step":
                fed = f" of {', '.join(inv.feeds)}" if inv.feeds else ""
                where = f"no feed{fed} met its 'when' in its states"
            accepted = opts.unexercised.get(inv.name)
            if accepted is None:
                status = 1
                print(f"  NOT EXERCISED {inv.name}: {where}; nothing was proven of it", file=out)
            else:
                print(f"  not exercised {inv.name} (accepted: {accepted})", file=out)
        else:
            print(f"  holds        {inv.name}", file=out)
    if NO_CRASH in res.violations:
        status = 1
        print(f"  VIOLATED     {NO_CRASH}: a guard or action raised instead of answering", file=out)
    else:
        print(f"  holds        {NO_CRASH}", file=out)
    for finding in res.violations.values():
        description = invariants[finding.invariant].description.strip() if finding.invariant in invariants else ""
        print(f"\n{name}: {finding.invariant} violated: {finding.why}", file=out)
        if description:
            print(f"  ({description})", file=out)
        trace = explorer.trace_of(finding, opts.policy, f"{name}: counterexample to {finding.invariant}: {finding.why}")
        print(f"  shortest counterexample, {_plural(len(trace.steps), 'feed')}:", file=out)
        start = compiled.restore(trace.start) if trace.start is not None else compiled.new()
        print(f"    start: {start.state}", file=out)
        for i, ts in enumerate(trace.steps, 1):
            after = "refused" if ts.refused else (ts.state or "crashed")
            print(f"    {i:>3}  {ts.step.shown()}  -> {after}", file=out)
        snap = explorer.last_instance.snapshot()
        data = {k: v for k, v in snap["data"].items() if k not in opts.forget}
        shown = json.dumps({"state_data": snap["state_data"], "data": data}, sort_keys=True)
        print(f"  configuration at the end: {shown if len(shown) <= 600 else shown[:600] + '...'}", file=out)
        if opts.traces is not None:
            path = opts.traces / f"{name}.{finding.invariant}.trace.yaml"
            if path.is_symlink():
                from loopfsm.verification.errors import ReviewError  # noqa: PLC0415

                raise ReviewError(f"refusing to write {path}: it is a symlink")
            path.write_text(dump(trace, compiled), encoding="utf-8")
            print(f"  written to {path} (loopfsm replay {compiled.spec.file} {path})", file=out)
    return status
