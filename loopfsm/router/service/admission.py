"""Admission: what the store's ``admit`` answered, said to the client; a replayed response; the run a request serves.

The store admits a request against the saved row (router_run's ``admit``
table).  A refused one is answered here without touching the run; an
admitted one gets the live run's bundle, or, for ``execute`` and ``inject``,
a new run: the prompt's row, and either the brain (a plaintext history is
clear in the history row) or a pause asking the client to open an encrypted
session's history first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from loopfsm.core.errors import FeedArgumentError, SnapshotError, shown
from loopfsm.router.crypto import Envelope
from loopfsm.router.errors import DamagedHistory, ProtocolError, SealError
from ...machines.engine_brain import LoopMachine
from ...machines.messages import Message
from loopfsm.machines.router_run import ROUTER_RUN
from ...machines.tool_breaker import ToolHealth
from loopfsm.router.store import ids
from loopfsm.router.store.records import Admission
from .. import protocol as P
from ..atrest import SealedStateError
from .bundle import RunBundle
from .context import Ctx, Outcome, Resume, Services

#: What a refused request is told, by the admission table's answer.
REFUSALS = {
    "busy": "another request of this session is being processed; re-send it",
    "run_live": "a run is live: answer its pause, or break / inject",
    "request_id_reused": "an earlier step of this session used this request_id and only the latest "
    "request is replayed: send a new request_id",
}


def continuations(services: Services, session_id: str, valid: bool) -> list[str]:
    """What the session allows next, as its saved phase says (a fresh session's when ``valid`` is False)."""
    rec = services.store().load(session_id) if valid else None
    try:
        phase = rec.phase_machine() if rec is not None else ROUTER_RUN.new()
    except SnapshotError:  # a run these tables cannot read accepts nothing until tables that can are deployed
        return []
    return list(phase.decide("continuations"))


def unreadable(err: SnapshotError, escapes: Sequence[str] = ()) -> dict[str, Any]:
    """The answer for a paused run these tables cannot read: why, by name, and that the run is kept as saved.

    Never a reset: deploying the tables it was saved under, or a migration
    that reads it, resumes it; the message names machines, states and fields
    only, never content.  ``escapes`` are the break and inject the saved phase
    still allows when only the run's brain or breakers are unreadable: they end
    the run without reading what it kept, and the user can always stop a run
    (seed 002).  A phase these tables cannot read allows nothing.
    """
    escape = f", or {' or '.join(escapes)} to end it without reading it (the user's escape hatches)" if escapes else ""
    return P.error(
        "internal",
        f"this session's saved run cannot be read by this router's machine tables ({err}); "
        f"it is kept as saved: deploy the tables it was saved under or a migration that reads it{escape}",
        list(escapes),
        retryable=False,
    )


def refused(adm: Admission, request_type: str) -> dict[str, Any]:
    """The response to a request the admission table refused."""
    if adm.answer == "idle":
        return P.envelope("idle", {"run_id": adm.record.phase_machine().data.last_run_id}, [])
    if adm.answer == "not_allowed":
        msg = f"{request_type} is not an allowed continuation now"
    else:
        msg = REFUSALS.get(adm.answer, adm.answer)
    return P.error(adm.answer, msg, adm.allowed_continuations, retry_after_ms=adm.retry_after_ms)


def replay(services: Services, session_id: str, stored: Any, allowed: Callable[[], list[str]]) -> dict[str, Any]:
    """A re-sent request_id: its stored response, or an encrypted run's from the sealed bundle's copy."""
    if isinstance(stored, dict) and isinstance(stored.get("data"), dict) and stored["data"].get("replay_bundle"):
        row = services.store().row(session_id, "input", stored["data"]["replay_bundle"])
        try:
            bundle = services.sealed_state.read_bundle(session_id, row)
        except SealedStateError as err:
            return P.error("internal", str(err), allowed())
        if bundle is not None and isinstance(bundle.get("response"), dict):
            return dict(bundle["response"])
        return P.error("expired", "the run this request belonged to has ended", allowed())
    if isinstance(stored, dict):
        return dict(stored)
    return P.error("response_lost", "this request was processed; its response was not kept", allowed())


def load_bundle(ctx: Ctx, run_id: str) -> RunBundle:
    """The live run's bundle; a sealed one that does not open fails the request, except a ``break``."""
    row = ctx.services.store().row(ctx.session_id, "input", f"b-{run_id}")
    try:
        body = ctx.services.sealed_state.read_bundle(ctx.session_id, row)
    except SealedStateError:
        if ctx.req.type != "break":
            raise
        return RunBundle(mode="encrypted")  # only a sealed bundle fails to open: break ends the run without it
    if body is None:
        raise ProtocolError("the live run's bundle is missing")  # pragma: no cover - only a damaged store
    return RunBundle.from_json(body)


def start(ctx: Ctx, prior: RunBundle | None) -> Outcome | Resume:
    """``execute`` or ``inject``: a new run, its prompt row, and its brain (or a pause to open the history)."""
    req = ctx.req
    history = ctx.history_row()
    if req.type == "execute":
        mode = req.data.get("mode", "plaintext")
        perms = req.data.get("permissions")
        gates = dict(req.data.get("gates") or {})
        text = req.data["prompt"]
    else:
        mode = (prior.mode if prior is not None else None) or history.get("mode") or "plaintext"
        perms = prior.permissions if prior is not None else None
        gates = dict(prior.gates) if prior is not None else {}
        text = req.data["message"]
    if history.get("mode") not in (None, mode):
        raise ProtocolError(f"this session is {history['mode']}: its mode is fixed by its first run")
    sealed = req.data.get("encrypted") or {}
    ref = P.prompt_ref(req.request_id)
    if mode == "encrypted" and set(sealed) != {ref}:
        raise ProtocolError(f"an encrypted session's prompt travels sealed under {ref} (and nothing else)")
    if mode == "plaintext" and sealed:
        raise ProtocolError("a plaintext session sends no sealed content")
    ctx.run_id = ids.run_id(ctx.session_id, req.request_id)
    ctx.bundle = RunBundle(
        mode=mode,
        permissions=dict(ctx.services.permissions if perms is None else perms),
        gates=gates,
        prompt_ref=ref,
        history_refs=[ref],
    )
    prompt_id = ref.split(":", 1)[1]
    meta = {"role": "user", "run": "prompt"}
    ctx.put("message", prompt_id, meta, content=Message.user(text).to_json(), sealed=sealed.get(ref))
    if mode == "encrypted" and history.get("refs"):
        refs = history["refs"]  # their shape checked as the row was read (Ctx.history_row)
        stored = ctx.services.store().rows_by_ref(ctx.session_id, refs)
        to_decrypt = {}
        for r in refs:
            row = stored.get(r)
            if row is None or not _an_envelope(row.sealed):  # what the client is sent to open
                raise DamagedHistory(
                    f"this session's history names {shown(r, 80)}, which the store does not hold sealed "
                    "(a row deleted or changed by hand): the session cannot go on from this store"
                )
            to_decrypt[r] = row.sealed
        ctx.bundle.prompt = text  # clear, short-lived: the run-input bundle
        ctx.bundle.decrypt_order = list(to_decrypt)
        return Outcome(
            "needs_decrypt",
            pause={"to_decrypt": list(to_decrypt), "input_ref": f"input:b-{ctx.run_id}", "pending_seal": []},
            data={"to_decrypt": to_decrypt},
        )
    brain = LoopMachine()
    brain.inject_many(_history_messages(history.get("messages", [])))
    brain.commit_pending()
    brain.accept_input(text)
    return Resume(brain, ToolHealth())


def _history_messages(saved: object) -> list[Message]:
    """A plaintext session's conversation as its history row holds it; an entry the router did not write is loud."""
    if not isinstance(saved, list):
        raise DamagedHistory("this session's history row holds no list of messages (changed by hand)")
    out = []
    for i, m in enumerate(saved):
        try:
            out.append(Message.from_json(m))
        except FeedArgumentError:
            raise DamagedHistory(
                f"entry {i} of this session's history row is not a conversation message (changed by hand): "
                "the session cannot go on from this store"
            ) from None
    return out


def _an_envelope(sealed: object) -> bool:
    """Whether a stored row's sealed column is an envelope, as the client is sent it to open."""
    try:
        Envelope.from_json(sealed)
    except SealError:
        return False
    return True
