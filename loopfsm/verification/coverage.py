"""Transition coverage: which YAML branches and decision rules a run exercised.

Line coverage of the guards' Python says little about a table: one guard
function serves a dozen rows.  What a reviewer wants to know is whether every
row of the table was taken at least once, by its stable name (the branch's
``name:`` or ``feed/source[index]``, the rule's ``name``), and which never
were.  The tracing hook already reports each branch and rule taken; this
module collects those records and sets them against the rows a file declares.

A row that cannot sensibly be reached by a test can be excused in the YAML,
with a reason that the report prints::

    - guard: clock_went_backwards
      stay: true
      untested: only reachable with a clock that runs backwards; covered by the property test

Excused rows leave the denominator; an excused row that is taken anyway is
reported, so stale excuses do not pile up.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from loopfsm.core.spec import tried_in
from loopfsm.core.tracing import DECISION, FEED, REFUSAL, TransitionRecord, branch_name


@dataclass(frozen=True)
class Row:
    """One branch or rule of a machine file: its stable name, where it is, and any excuse."""

    kind: str  # "branch" or "rule"
    name: str
    line: int
    excuse: str | None


@dataclass
class MachineCoverage:
    machine: str
    file: str
    rows: list[Row]
    taken: set[tuple[str, str]] = field(default_factory=set)  # (kind, name)

    def _is_taken(self, r: Row) -> bool:
        return (r.kind, r.name) in self.taken

    @property
    def counted(self) -> list[Row]:
        return [r for r in self.rows if r.excuse is None]

    @property
    def missed(self) -> list[Row]:
        return [r for r in self.counted if not self._is_taken(r)]

    @property
    def excused(self) -> list[Row]:
        return [r for r in self.rows if r.excuse is not None]

    @property
    def excused_but_taken(self) -> list[Row]:
        return [r for r in self.excused if self._is_taken(r)]

    def hit(self) -> int:
        return len(self.counted) - len(self.missed)

    def percent(self) -> float:
        return 100.0 if not self.counted else 100.0 * self.hit() / len(self.counted)


def rows_of(doc: dict[str, Any], line_of: Any = None) -> list[Row]:
    """Every branch and rule a (schema-valid) machine document declares, in file order."""
    rows: list[Row] = []
    line = line_of or (lambda path: 0)
    for feed, ev in (doc.get("events") or {}).items():
        first: list[tuple[dict[str, Any], tuple[Any, ...]]] = [
            (b, ("events", feed, "first", i)) for i, b in enumerate(ev.get("first") or [])
        ]
        for source, branches in (ev.get("from") or {}).items():
            # A `first:` branch is a row of every state it is tried in, ahead of the state's own.
            own: list[tuple[dict[str, Any], tuple[Any, ...]]] = [
                (b, ("events", feed, "from", source, i)) for i, b in enumerate(branches)
            ]
            shared = [(b, p) for b, p in first if tried_in(b, source)]
            for i, (b, p) in enumerate(shared + own):
                rows.append(Row("branch", branch_name(feed, source, i, b.get("name")), line(p), b.get("untested")))
    for dname, d in (doc.get("decisions") or {}).items():
        for i, r in enumerate(d.get("rules") or []):
            rows.append(
                Row(
                    "rule",
                    f"{dname}/{r.get('name') or f'rule_{i}'}",
                    line(("decisions", dname, "rules", i)),
                    r.get("untested"),
                )
            )
    return rows


class Collector:
    """A trace sink counting, per machine, the branches and rules taken.  Thread-safe, bounded by the tables."""

    wants_refusals = True  # a refuse: branch taken is a row taken, though ordinary sinks do not hear it
    wants_attributes = False  # only which row was taken

    def __init__(self) -> None:
        self.taken: dict[str, set[tuple[str, str]]] = {}
        self._lock = threading.Lock()

    def __call__(self, record: TransitionRecord) -> None:
        if record.branch is None:
            return
        key = (
            ("branch", record.branch)
            if record.kind in (FEED, REFUSAL)
            else ("rule", f"{record.feed}/{record.branch}")
            if record.kind == DECISION
            else None
        )
        if key is None:
            return
        with self._lock:
            self.taken.setdefault(record.machine, set()).add(key)


def measure(machines: Iterable[tuple[str, str, list[Row]]], collector: Collector) -> list[MachineCoverage]:
    """Set the collected names against each machine's rows; ``machines`` holds (name, file, rows)."""
    return [
        MachineCoverage(
            name, file, rows, {k for k in collector.taken.get(name, set()) if any((r.kind, r.name) == k for r in rows)}
        )
        for name, file, rows in machines
    ]


def total_percent(report: list[MachineCoverage]) -> float:
    counted = sum(len(m.counted) for m in report)
    return 100.0 if not counted else 100.0 * sum(m.hit() for m in report) / counted


def format_report(report: list[MachineCoverage], *, show_missed: bool = True) -> list[str]:
    lines = []
    width = max([len("total")] + [len(m.machine) for m in report])
    for m in report:
        excused = f", {len(m.excused)} excused" if m.excused else ""
        lines.append(f"{m.machine:<{width}}  {m.hit():>3}/{len(m.counted):<3} {m.percent():5.1f}%{excused}")
        if show_missed:
            for r in m.missed:
                lines.append(f"    never taken: {r.kind} {r.name}  ({m.file}:{r.line})")
        for r in m.excused_but_taken:
            lines.append(f"    excused but taken, drop the excuse: {r.kind} {r.name}  ({m.file}:{r.line})")
    lines.append(f"{'total':<{width}}  {total_percent(report):.1f}% of branches and rules taken")
    return lines
