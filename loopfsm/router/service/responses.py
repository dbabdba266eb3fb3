"""Release: feed the phase what processing ended with, build the response, checkpoint the step in one transaction.

Everything a request wrote waits in its :class:`~.context.Ctx` until here:
the rows, the session's history row when a run ends, the bundle row (the
live run's, sealed in an encrypted session, or emptied when the run ended),
the trace (its events, and the phase's feeds as
:mod:`~loopfsm.router.store.phase_feeds` keeps them), and the response the
store keeps for a re-sent request_id.  An encrypted session's stored response
is a content-free stub pointing at the sealed bundle, which holds the real one.
"""

from __future__ import annotations

from typing import Any

from loopfsm.router.store import Row
from loopfsm.router.store.phase_feeds import PhaseFeeds, broken_events
from loopfsm.router.store.serve import Outcome as StoreOutcome, feed_phase
from .. import protocol as P
from .context import Ctx, Outcome

#: Why a run that ended this way ended, as the phase's break_run and the response say it.
_ENDED = {"broken": "user", "failed": "failed", "expired": "expired"}


def _feed(ctx: Ctx, out: Outcome, feed: PhaseFeeds) -> tuple[list[str], str | None]:
    """Feed router_run the outcome (kept by ``feed``); the events it traced and why the run ended (None: it did not)."""
    phase, req = ctx.phase, ctx.req
    if out.kind in _ENDED:
        reason = _ENDED[out.kind]
        if phase.state != "Idle":
            return feed("break_run", now=ctx.now, reason=reason), reason
        return (list(broken_events()) if out.kind == "broken" else []), reason
    if out.kind == "aborted":
        return feed("approval_decisions", outcome="completed", now=ctx.now, aborted=True), "aborted"
    if out.kind == "sealed":
        return feed("sealed", now=ctx.now), None
    outcome = StoreOutcome(outcome=out.kind, encrypted=ctx.encrypted, pause=out.pause)
    fed = feed_phase(feed, ctx.session_id, req.type, req.request_id, outcome, ctx.now)
    return fed, phase.data.ended if phase.state == "Idle" else None


def _history(ctx: Ctx, out: Outcome) -> Row | None:
    """The session's history row when a run ended: its conversation (refs when encrypted), else just its mode."""
    run = ctx.bundle
    if out.kind in ("completed", "sealed"):
        h = ctx.history_row()
        mode = run.mode if run is not None else "plaintext"
        if mode == "encrypted":
            refs = list(h.get("refs", [])) + list(run.history_refs if run is not None else [])
            history: dict[str, Any] = {"mode": mode, "refs": refs}
        else:
            history = {"mode": mode, "messages": (run.committed if run is not None else None) or []}
        return Row("input", "history", {"mode": mode}, body=history, row_id="history")
    if run is not None and not ctx.history_row():
        return Row("input", "history", {"mode": run.mode}, body={"mode": run.mode}, row_id="history")
    return None


def finish(ctx: Ctx, out: Outcome) -> dict[str, Any]:
    """Checkpoint the step (rows, phase, response, trace, lock released) and return the response."""
    phase, req = ctx.phase, ctx.req
    was_idle = phase.state == "Idle"
    feed = PhaseFeeds(phase)
    fed, ended = _feed(ctx, out, feed)
    run_ended = phase.state == "Idle"
    run_id = ctx.run_id or phase.data.run_id or phase.data.last_run_id
    rows = list(ctx.rows)
    if run_ended:
        history = _history(ctx, out)
        if history is not None:
            rows.append(history)
    # the response: the phase's envelope, the step's data
    decided = phase.decide("respond", ended=None if out.kind == "sealed" else ended if run_ended else None)
    data: dict[str, Any] = dict(out.data, run_id=run_id)
    if ctx.to_encrypt and not run_ended:
        data["to_encrypt"] = dict(ctx.to_encrypt)
    data["trace_id"] = f"trace:{run_id}"
    response = P.envelope(decided["status"], data, decided["allowed_continuations"])
    stored: dict[str, Any] = response
    old = None if was_idle else ctx.saved_run_id
    if old and old != run_id:  # an inject ended the old run: its bundle goes with it
        rows.append(Row("input", "bundle", {"run_id": old, "ended": True}, body=None, row_id=f"b-{old}"))
    if run_ended:
        if ctx.bundle is not None:
            rows.append(Row("input", "bundle", {"run_id": run_id, "ended": True}, body=None, row_id=f"b-{run_id}"))
    elif ctx.bundle is not None:
        bundle = ctx.bundle.to_json()
        if ctx.encrypted:
            bundle["response"] = response
            stub = {"run_id": run_id, "replay_bundle": f"b-{run_id}"}
            stored = P.envelope(decided["status"], stub, decided["allowed_continuations"])
        rows.append(ctx.services.sealed_state.bundle_row(ctx.session_id, run_id, bundle, encrypted=ctx.encrypted))
    trace = [*ctx.events, *fed, "lock.released", *(f.meta() for f in feed.fed)]
    ctx.services.store().checkpoint(
        ctx.lease, phase, request_id=req.request_id, response=stored, rows=rows, trace=trace, run_id=run_id
    )
    return response
