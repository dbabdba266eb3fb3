"""Seals an encrypted session hands back: which refs a request must carry, their rows, the opened history.

In an encrypted session no content reaches a row in clear: router-authored
content rides the response's ``to_encrypt`` and comes back sealed with the
next request, which must carry exactly the refs the pause holds.  The
``decrypted`` and ``sealed`` continuations are the two steps that exist only
for this exchange.
"""

from __future__ import annotations

import json
from typing import Any

from loopfsm.router.errors import ProtocolError
from loopfsm.core.errors import FeedArgumentError, SnapshotError
from ...machines.engine_brain import LoopMachine
from ...machines.messages import Message
from ...machines.tool_breaker import ToolHealth
from loopfsm.router.store import Row
from .context import Ctx, Outcome, Resume


def take_seals(ctx: Ctx, required: list[str]) -> dict[str, Any]:
    """The request's sealed content, which must cover exactly ``required`` (nothing in a plaintext session)."""
    sealed = dict(ctx.req.data.get("encrypted") or {})
    if not ctx.encrypted:
        if sealed:
            raise ProtocolError("a plaintext session sends no sealed content")
        return {}
    missing = sorted(set(required) - set(sealed))
    unknown = sorted(set(sealed) - set(required))
    if missing:
        raise ProtocolError(f"sealed content missing for {len(missing)} reference(s), first {missing[0]}")
    if unknown:
        raise ProtocolError(f"sealed content for a reference this pause does not hold: {unknown[0]}")
    return sealed


def write_sealed(
    ctx: Ctx, sealed: dict[str, Any], refs: list[str], meta_of: dict[str, dict[str, Any]] | None = None
) -> None:
    """The sealed rows of an encrypted session, with the metadata kept for them (or given in ``meta_of``)."""
    if not ctx.encrypted:
        return
    run = ctx.run
    for ref in refs:
        kind, rid = ref.split(":", 1)
        meta = (meta_of or {}).get(ref) or run.meta.get(ref) or {}
        ctx.rows.append(Row(kind, f"{kind}/{rid}", meta, sealed=sealed[ref], row_id=rid))
        if run.pending is not None:
            run.pending.pop(ref, None)
    if refs:
        ctx.event("seal.persisted")


def pending_seal(ctx: Ctx) -> list[str]:
    """The refs the current pause awaits seals for."""
    return list(ctx.phase.state_data.get("pending_seal") or [])


def decrypted(ctx: Ctx) -> Resume:
    """The client opened the session's history: the brain is rebuilt from it and takes the held prompt."""
    run = ctx.run
    order = list(run.decrypt_order or [])
    plain = ctx.req.data["plaintext"]
    if set(plain) != set(order):
        raise ProtocolError("decrypted must return the plaintext of exactly the references in to_decrypt")
    take_seals(ctx, pending_seal(ctx))
    history = []
    for ref in order:
        try:
            history.append(Message.from_json(json.loads(plain[ref])))
        except (ValueError, RecursionError, FeedArgumentError):  # not JSON, nested past the parser, not a message
            raise ProtocolError(f"{ref}: the opened content is not a conversation message") from None
    brain = LoopMachine()
    brain.inject_many(history)
    brain.commit_pending()
    prompt, run.prompt = run.prompt, None
    if prompt is None:  # pragma: no cover - only a damaged bundle lacks the held prompt
        raise SnapshotError("the live run's bundle holds no prompt")
    brain.accept_input(prompt)
    ctx.event("context.resolved")
    return Resume(brain, ToolHealth())


def sealed(ctx: Ctx) -> Outcome:
    """A completed encrypted run's last seals: its rows are written and the run ends."""
    to_seal = ctx.phase.state_data.get("to_seal") or []
    refs = [t["ref"] for t in to_seal]
    write_sealed(ctx, take_seals(ctx, refs), refs, {t["ref"]: t["meta"] for t in to_seal})
    ctx.run.committed_refs = True
    return Outcome("sealed", data={"ended": "completed"})
