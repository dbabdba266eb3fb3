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


def session_feeds(session_id: str, rows: Sequence[StoredRow]) -> list[PhaseFeed]:
    """The feeds kept in a session's ``trace`` rows, in history order (the rows as ``RunStore.rows`` gives them).

    A ``phase.fed`` row not of the shape :meth:`PhaseFeed.meta` writes (a store edited by hand) is refused.
    """
    out = []
    for r in rows:
        if r.kind != "trace" or r.meta.get("event") != FED:
            continue
        feed, args, state = r.meta.get("feed"), r.meta.get("args"), r.meta.get("state")
        if not (isinstance(feed, str) and isinstance(args, dict) and isinstance(state, str)) or "policy" in args:
            raise SessionTraceError(
                f"session {session_id!r}: trace row {r.row_id} is not a feed as the router keeps it"
            )
        out.append(PhaseFeed(feed, dict(args), state))
    return out


def session_run(session_id: str, saved: Mapping[str, Any], rows: Sequence[StoredRow]) -> list[PhaseFeed]:
    """A session's kept feeds, checked to be its whole run: from a new router_run they end where ``saved`` is.

    The feeds are fed to a new instance, and they are given only if that ends where the session's
    saved snapshot ``saved`` is (state, state data and data): a session whose earliest steps were
    written before feeds were kept, or whose rows were changed, is refused with the first feed that
    parts ways rather than read back as a run that would mislead a reviewer.
    """
    from loopfsm.machines.router_run import ROUTER_RUN  # noqa: PLC0415 - compiled on first use, not at import

    feeds = session_feeds(session_id, rows)
    run = ROUTER_RUN.new()
    for i, f in enumerate(feeds, 1):
        try:
            run.feed(f.feed, **f.args)
        except LoopFsmError as err:
            raise SessionTraceError(
                f"session {session_id!r}: kept feed {i} ({f.feed}) is refused by router_run from a new run: "
                f"{type(err).__name__}; its earlier steps were written without their feeds"
            ) from None
        if run.state != f.state:
            raise SessionTraceError(
                f"session {session_id!r}: kept feed {i} ({f.feed}) leads to {run.state}, the store says {f.state}"
            )
    got = json.loads(json.dumps(run.snapshot()))  # as the store keeps it: JSON
    if any(got.get(k) != saved.get(k) for k in ("state", "state_data", "data")):
        raise SessionTraceError(
            f"session {session_id!r}: its {len(feeds)} kept feeds from a new run end in {got.get('state')}, "
            f"not where the store has it ({saved.get('state')} and its data); steps written without their "
            f"feeds (by an earlier loopfsm) cannot be read back"
        )
    return feeds
