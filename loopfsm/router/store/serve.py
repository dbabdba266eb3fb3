"""One protocol step against the store, with the processing supplied by the caller.

``serve`` is the seed's acquire / process / release for one request: admit
against the saved row, run ``process`` with no transaction open, feed the
router_run phase machine the request and its outcome, and checkpoint rows,
phase and response in one transaction.  A router service wraps it with model
calls and tool mediation; tests, the scripted run and the benchmarks drive it
with canned outcomes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from loopfsm.machines.errors import FencedOut
from loopfsm.core.errors import LoopFsmError
from . import ids
from .phase_feeds import PhaseFeeds, broken_events
from .runstore import Admission, Lease, Row, RunStore


@dataclass(frozen=True)
class Outcome:
    """What processing a request ended with: the phase machine's feed arguments and the rows to write."""

    outcome: str = "completed"  # needs_decrypt, gate, tools, completed
    encrypted: bool = False
    pause: dict[str, Any] = field(default_factory=dict)
    aborted: bool = False
    reason: str = "user"  # for break
    rows: Sequence[Row] = ()
    data: dict[str, Any] = field(default_factory=dict)  # the response's data


@dataclass(frozen=True)
class Served:
    response: dict[str, Any]
    admission: Admission
    events: list[str]
    lease: Lease | None = None


def error_response(code: str, allowed: list[str], *, retry_after_ms: int | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"code": code, "retryable": code in ("busy", "interrupted")}
    if retry_after_ms is not None:
        data["retry_after_ms"] = retry_after_ms
    return {"status": "error", "data": data, "allowed_continuations": allowed}


def feed_phase(feed: PhaseFeeds, session_id: str, request: str, request_id: str, out: Outcome, now: int) -> list[str]:
    """Feed router_run the request and its outcome (kept by ``feed``); returns the trace events it recorded."""
    if request in ("execute", "inject"):
        run = ids.run_id(session_id, request_id)
        return feed(request, run_id=run, outcome=out.outcome, encrypted=out.encrypted, now=now, pause=out.pause)
    if request == "break":
        return feed("break_run", now=now, reason=out.reason)
    if request == "sealed":
        return feed("sealed", now=now)
    if request == "approval_decisions":
        return feed("approval_decisions", outcome=out.outcome, now=now, pause=out.pause, aborted=out.aborted)
    return feed(request, outcome=out.outcome, now=now, pause=out.pause)


def serve(
    store: RunStore,
    session_id: str,
    request: str,
    request_id: str,
    *,
    holder: str,
    process: Callable[[Lease], Outcome] | Outcome = Outcome(),
    now_ms: int | None = None,
) -> Served:
    """Serve one request; never raises for a refusal (it is the response), raises FencedOut only to a zombie."""
    adm = store.admit(session_id, request, request_id, holder=holder, now_ms=now_ms)
    if adm.outcome == "replayed":
        if adm.response is None:  # an encrypted session's response is never stored
            return Served(error_response("response_lost", adm.record.phase_machine().decide("continuations")), adm, [])
        return Served(adm.response, adm, [])
    if adm.outcome == "refused":
        if adm.answer == "idle":
            phase = adm.record.phase_machine()
            return Served(dict(phase.decide("respond", ended="user"), data={}), adm, [])
        return Served(error_response(adm.answer, adm.allowed_continuations, retry_after_ms=adm.retry_after_ms), adm, [])
    lease = adm.lease
    assert lease is not None
    phase = adm.record.phase_machine()
    feed = PhaseFeeds(phase)
    try:
        out = process(lease) if callable(process) else process
        now = store.now(now_ms)
        if adm.answer == "expire":
            fed = feed("break_run", now=now, reason="expired")
        elif request == "break" and phase.state == "Idle":
            fed = list(broken_events())  # it preempted a turn that never reached a checkpoint: nothing to undo
        else:
            fed = feed_phase(feed, session_id, request, request_id, out, now)
    except FencedOut:
        raise
    except LoopFsmError as err:
        # The request's content does not fit the pause (or processing failed): nothing changes,
        # the lock is given back, and the client may correct and re-send.
        store.release(lease, now_ms=now_ms)
        resp = error_response("invalid", adm.record.phase_machine().decide("continuations"))
        resp["data"]["message"] = str(err)
        return Served(resp, adm, [], lease)
    lock_events = ["lock.preempted" if adm.preempted else "lock.taken_over" if adm.took_over else "lock.acquired"]
    events = lock_events + fed + ["lock.released"]
    ended = (
        ("user" if request == "break" and adm.answer != "expire" else phase.data.ended)
        if phase.state == "Idle"
        else None
    )
    data = dict(out.data, run_id=phase.data.run_id or phase.data.last_run_id)
    if ended is not None:
        data["ended"] = ended
    response = dict(phase.decide("respond", ended=ended), data=data)
    store.checkpoint(
        lease,
        phase,
        request_id=request_id,
        response=response,
        rows=out.rows,
        trace=[*events, *(f.meta() for f in feed.fed)],
        now_ms=now_ms,
        replayable=not phase.data.encrypted,
    )
    return Served(response, adm, events, lease)


__all__ = ["Outcome", "Served", "serve", "feed_phase", "error_response", "FencedOut"]
