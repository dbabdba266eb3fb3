"""A session's router_run feeds, kept as trace rows, so the session reads back as a trace file.

The trace events a step stores (``lock.acquired``, ``run.started`` ...) say what
happened but not what the phase machine was fed, so a session could not be
replayed or stepped through.  Every feed the router gives a session's phase (a
request's outcome, a break, an expiry, the sweep's) is therefore kept beside
the step's events, as a ``trace`` row (event ``phase.fed``) holding the
feed's name, its arguments and the state it left.  The arguments are router_run's own: a run id,
an outcome, a flag, the clock and the pause's refs, hashes and approval kinds,
which the saved snapshot holds too; never a message, a tool's arguments or its
result, so an encrypted session's trace rows carry no content either.

:func:`session_run` reads a session's feeds back, checked against its saved
state; ``loopfsm store trace URL SESSION`` writes them as a trace file that
``loopfsm replay`` and the review site's "Step through a trace file" take.
"""

from __future__ import annotations

import functools
import json

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loopfsm.core.errors import LoopFsmError
from loopfsm.router.errors import SessionTraceError
from .records import StoredRow


#: The trace event a kept feed's row names (every trace row names one).
FED = "phase.fed"


@dataclass(frozen=True)
class PhaseFeed:
    """One feed of a session's phase machine: what a trace file's step holds."""

    feed: str
    args: dict[str, Any]
    state: str  # the state the feed left the phase in

    def meta(self) -> dict[str, Any]:
        return {"event": FED, "feed": self.feed, "args": self.args, "state": self.state}


class PhaseFeeds:
    """Feeds one step's router_run instance by name and keeps each feed it took, for the step's checkpoint.

    A feed the machine refuses raises as ``phase.feed`` does and is not kept (it
    changed nothing, and the step is not checkpointed).
    """

    def __init__(self, phase: Any) -> None:
        self.phase = phase
        self.fed: list[PhaseFeed] = []

    def __call__(self, feed: str, **args: Any) -> list[str]:
        """Feed ``feed`` with ``args``; the trace events it emitted."""
        events = list(self.phase.feed(feed, **args) or [])
        self.fed.append(PhaseFeed(feed, dict(args), self.phase.state))
        return events


def _emitted(spec: Any, feeds: Sequence[str] | None = None) -> list[str]:
    """The trace events router_run's table emits (its ``emit`` actions), on ``feeds`` or on every feed."""
    names: dict[str, None] = {}
    for ev in spec.events.values():
        if feeds is not None and ev.name not in feeds:
            continue
        for branches in ev.sources.values():
            for b in branches:
                for act in (*ev.before, *b.actions):
                    if act.name == "emit":
                        names.update(dict.fromkeys(str(e) for e in act.params.get("events", ())))
    return list(names)


@functools.cache
def broken_events() -> tuple[str, ...]:
    """What router_run's ``break_run`` emits (``run.broken``, named in its YAML): the router writes the same
    itself for a break that finds the phase Idle, where there is nothing to feed."""
    from loopfsm.machines.router_run import ROUTER_RUN  # noqa: PLC0415 - compiled on first use, not at import

    return tuple(_emitted(ROUTER_RUN.spec, ["break_run"]))


def _fed_events(spec: Any) -> frozenset[str]:
    """The trace events only a router_run feed emits: a step whose rows name one moved the phase, so it kept
    its feed.  :func:`broken_events` are left out: the router also writes them itself."""
    return frozenset(_emitted(spec)) - set(broken_events())


def session_feeds(
    session_id: str, rows: Sequence[StoredRow], fed_events: frozenset[str] = frozenset()
) -> list[PhaseFeed]:
    """The feeds kept in a session's ``trace`` rows, in history order (the rows as ``RunStore.rows`` gives them).

    A trace row not as the router writes it, or a ``phase.fed`` row not of the shape :meth:`PhaseFeed.meta`
    writes (a store edited by hand), is refused; so is a step whose events include one of ``fed_events`` but
    that kept no feed (written by loopfsm 0.1.0, before feeds were kept, or its feed row deleted).
    """
    out = []
    kept: set[int] = set()
    moved: dict[int, str] = {}
    for r in rows:
        if r.kind != "trace":
            continue
        meta = r.meta
        if not isinstance(meta, Mapping) or not isinstance(meta.get("event"), str):
            raise SessionTraceError(f"session {session_id!r}: trace row {r.row_id!r} is not as the router writes it")
        if meta["event"] in fed_events:
            moved.setdefault(r.step, meta["event"])
        if meta["event"] != FED:
            continue
        feed, args, state = meta.get("feed"), meta.get("args"), meta.get("state")
        if not (isinstance(feed, str) and isinstance(args, dict) and isinstance(state, str)) or "policy" in args:
            raise SessionTraceError(
                f"session {session_id!r}: trace row {r.row_id!r} is not a feed as the router keeps it"
            )
        kept.add(r.step)
        out.append(PhaseFeed(feed, dict(args), state))
    missing = sorted(step for step in moved if step not in kept)
    if missing:
        first = missing[0]
        raise SessionTraceError(
            f"session {session_id!r}: step {first} moved the run ({moved[first]}) but kept no feed"
            + (f", as do {len(missing) - 1} more" if len(missing) > 1 else "")
            + ": steps written by loopfsm 0.1.0, before feeds were kept, cannot be read back"
        )
    return out


def session_run(session_id: str, saved: Any, rows: Sequence[StoredRow]) -> list[PhaseFeed]:
    """A session's kept feeds, checked to be its whole run: from a new router_run they end where ``saved`` is.

    Every step whose events say the phase moved must have kept its feed, and the feeds, fed to a new
    instance, must take the states they recorded and end where the session's saved snapshot ``saved``
    is (state, state data and data).  A session whose earlier steps were written before feeds were kept
    is refused with the first step that kept none, rather than read back as a run that stops short.
    These checks are against a store an older loopfsm wrote, not against one edited by hand: whoever
    can write the database can write any run.
    """
    from loopfsm.machines.router_run import ROUTER_RUN  # noqa: PLC0415 - compiled on first use, not at import

    if not isinstance(saved, Mapping):
        raise SessionTraceError(f"session {session_id!r}: its saved run state is not a snapshot")
    feeds = session_feeds(session_id, rows, _fed_events(ROUTER_RUN.spec))
    run = ROUTER_RUN.new()
    for i, f in enumerate(feeds, 1):
        try:
            run.feed(f.feed, **f.args)
        except LoopFsmError as err:
            raise SessionTraceError(
                f"session {session_id!r}: kept feed {i} ({f.feed!r}) is refused by router_run from a new run "
                f"({type(err).__name__}): a row not as the router wrote it, or steps before it written by "
                f"loopfsm 0.1.0, without their feeds"
            ) from None
        if run.state != f.state:
            raise SessionTraceError(
                f"session {session_id!r}: kept feed {i} ({f.feed!r}) leads to {run.state}, the store says {f.state!r}"
            )
    got = json.loads(json.dumps(run.snapshot()))  # as the store keeps it: JSON
    if any(got.get(k) != saved.get(k) for k in ("state", "state_data", "data")):
        raise SessionTraceError(
            f"session {session_id!r}: its {len(feeds)} kept feeds from a new run end in {got.get('state')}, "
            f"not where the store has it ({str(saved.get('state'))[:60]!r} and its data); steps written "
            f"without their feeds (by loopfsm 0.1.0) cannot be read back"
        )
    return feeds
