"""Tool calls: each call the model asks for is mediated, answered here or handed to the client, and its result taken.

The session's permissions and router_run's ``mediate`` table route a call:
denied and unknown calls are answered by the router, ``remember`` writes a
session memory row, ``submit_plan`` raises a plan approval
(:mod:`.approvals`), and every other call goes to the client (allow or
ask), with the diff a file-changing call proposes.  A call's result comes
back in ``tool_results`` and feeds the tool breakers and the brain.
"""

from __future__ import annotations

from typing import Any

from loopfsm.router.errors import ProtocolError
from ...machines.breaker_values import Allow
from ...machines.engine_brain import LoopMachine
from ...machines.messages import Message, ToolCall
from ...machines.tool_breaker import ToolHealth, ToolOutcome
from loopfsm.router.store import ids
from .. import protocol as P
from ..tools import ALL_TOOLS, CLIENT_TOOLS, FILE_CHANGING, MAX_MEMORY_CHARS, MEMORY_TOOL, PLAN_TOOL, proposed_change
from .approvals import Asked, new_approval, raise_gate
from .bundle import CallEntry, PendingCall, PlanCall
from .context import Ctx, Outcome, Resume, restore
from .sealing import pending_seal, take_seals, write_sealed

TOOL_NAMES = [t.name for t in ALL_TOOLS]
#: What a clear row of an encrypted session says for a tool the model named that the router does not offer.
UNKNOWN_TOOL_NAME = "(unknown tool)"


def mediate(ctx: Ctx, brain: LoopMachine, health: ToolHealth, aref: str) -> Outcome | None:
    """Mediate the brain's pending calls; None when every call was answered here (the loop goes on)."""
    run, policy = ctx.run, ctx.services.policy
    turn = run.turn
    resolved: list[dict[str, Any]] = []
    calls: list[PendingCall] = []
    gate: PlanCall | None = None
    pending = list(brain.data.pending_tools)
    for p in pending:
        call = p.call
        cid = ctx.rid(f"tool_call/{turn}/{call.id}")
        ref = f"tool_call:{cid}"
        run.history_refs.append(ref)
        ctx.event("tool.requested")
        # A name the router does not offer is the model's own words: in an encrypted session only the seal has it.
        name = call.name if not ctx.encrypted or call.name in TOOL_NAMES else UNKNOWN_TOOL_NAME
        base = {"call_id": call.id, "name": name, "turn": turn}
        answer: Message | None = p.answer
        route = "pre_answered"
        if answer is None and call.name == PLAN_TOOL.name:
            if len(pending) > 1 or gate is not None:
                answer = Message.tool_result(call.id, "submit_plan must be the only call of its turn", is_error=True)
            elif run.plan_approved:
                answer = Message.tool_result(call.id, "a plan was already approved for this run")
            else:
                gate = PlanCall(call, ref, p.generation)
                continue
        if answer is None and call.name == MEMORY_TOOL.name:
            med = ctx.phase.decide("mediate", policy=policy, permission=run.permissions.get(call.name))
            if med["route"] != "deny":
                answer, route = remember(ctx, call.id, call.arguments, turn), "memory"
        if answer is None:
            perm = run.permissions.get(call.name)
            known = call.name in CLIENT_TOOLS or call.name == MEMORY_TOOL.name
            med = ctx.phase.decide("mediate", policy=policy, permission=perm, known=known)
            ctx.event(med["trace"])
            if med["route"] != "deny":
                calls.append(_to_client(ctx, p.generation, call, cid, ref, base, med["route"]))
                continue
            route = "deny"
            answer = Message.tool_result(
                call.id, f"denied: this session's permissions deny '{call.name}'", is_error=True
            )
            if p.generation is not None:
                health.record(call.name, ctx.now, Allow(call.id, p.generation, tool=call.name), "ignored")
        # answered by the router: recorded as the call's result, visible to the model
        meta = dict(base, permission=route, status="answered", is_error=answer.is_error)
        if ctx.encrypted:
            ctx.put("tool_call", cid, meta)
            ctx.hold_for_seal(ref, P.message_text(answer.to_json()), meta)
        else:
            content = {"arguments": call.arguments, "result": answer.text, "is_error": answer.is_error}
            ctx.put("tool_call", cid, meta, content=content)
        resolved.append(answer.to_json())
    if not calls and gate is None:
        brain.tool_results([Message.from_json(r) for r in resolved])
        return None
    run.resolved = resolved
    run.brain, run.health = brain.snapshot(), health.snapshot()
    if gate is not None:
        return _plan_gate(ctx, brain, health, gate)
    run.calls = calls
    requests = [dict(c.entry.to_json(), name=c.call.name, arguments=c.call.arguments) for c in calls]
    return Outcome(
        "tools",
        pause={"calls": [c.entry.to_json() for c in calls], "assistant_ref": aref, "pending_seal": run.pending_refs()},
        data={"tool_requests": requests},
    )


def _to_client(
    ctx: Ctx, generation: int | None, call: ToolCall, cid: str, ref: str, base: dict[str, Any], permission: str
) -> PendingCall:
    """A call the client runs (allow or ask): its row, the diff it proposes, its entry in the pause."""
    h = P.args_hash(call.name, call.arguments)
    entry = CallEntry(call.id, ref, permission, h)
    meta = dict(base, permission=permission, status="requested", args_hash=h)
    ctx.put("tool_call", cid, meta, content={"arguments": call.arguments})
    change = proposed_change(call.name, call.arguments) if call.name in FILE_CHANGING else None
    if change is not None:
        did = ctx.rid(f"diff/{ctx.run.turn}/{call.id}")
        entry.diff_ref = f"diff:{did}"
        dmeta = {"call_id": call.id, "status": "proposed"}
        if not ctx.encrypted:  # a path is content too: in an encrypted session only the seal has it
            dmeta["path"] = change["path"]
        ctx.put("diff", did, dmeta, content=change)
        if ctx.encrypted:
            ctx.hold_for_seal(f"diff:{did}", P.canonical(change), dmeta)
        ctx.event("diff.proposed")
    return PendingCall(entry, call, generation)


def _plan_gate(ctx: Ctx, brain: LoopMachine, health: ToolHealth, gate: PlanCall) -> Outcome:
    """``submit_plan``: the plan's row and its approval; the call waits for the answer."""
    turn, call = ctx.run.turn, gate.call
    args = call.arguments
    raw = args.get("plan")
    plan = raw if isinstance(raw, str) else P.canonical(args)
    pid = ctx.rid(f"plan/{turn}/{call.id}")
    approval = new_approval(
        ctx, "plan", f"plan-{turn}-{call.id}"[:200], P.args_hash(PLAN_TOOL.name, args), f"plan:{pid}"
    )
    pmeta = {"approval_id": approval.approval_id, "status": "requested"}
    if ctx.encrypted:
        ctx.hold_for_seal(f"plan:{pid}", plan, pmeta)
    else:
        ctx.put("plan", pid, pmeta, content={"plan": plan})
    shown = dict(approval.to_json(), summary="" if ctx.encrypted else plan)
    return raise_gate(ctx, brain, health, [Asked(approval, shown, {})], plan=gate)


def remember(ctx: Ctx, call_id: str, arguments: dict[str, Any], turn: int) -> Message:
    """The remember tool: a session memory row under an id of (session, key); the answer the model sees."""
    key, value = arguments.get("key"), arguments.get("value")
    if not (isinstance(key, str) and 0 < len(key) <= 128 and isinstance(value, str)):
        return Message.tool_result(call_id, "remember needs a key (1-128 characters) and a string value", is_error=True)
    if len(value) > MAX_MEMORY_CHARS:
        return Message.tool_result(
            call_id, f"a remembered value holds at most {MAX_MEMORY_CHARS} characters", is_error=True
        )
    rid = ids.row_id(ctx.session_id, "", 0, f"memory/{key}")
    meta = {"call_id": call_id, "turn": turn, "status": "remembered"}
    content = {"key": key, "value": value}
    if ctx.encrypted:
        ctx.hold_for_seal(f"memory:{rid}", P.canonical(content), meta)
    else:
        ctx.put("memory", rid, meta, content=content)
    ctx.event("memory.written")
    return Message.tool_result(call_id, f"remembered {key}")


def take_results(ctx: Ctx) -> Resume:
    """``tool_results``: each pending call answered once, its rows and breaker updated, the brain fed."""
    run = ctx.run
    calls = run.calls or []
    by_id = {c.entry.call_id: c for c in calls}
    results = ctx.req.data["results"]
    got = [r["call_id"] for r in results]
    if sorted(got) != sorted(by_id):
        raise ProtocolError(
            f"tool_results must answer each pending call exactly once (pending {len(by_id)}, got {len(got)})"
        )
    refs = [c.entry.ref for c in calls]
    seals = pending_seal(ctx)
    sealed = take_seals(ctx, refs + seals)
    brain, health = restore(run)
    answers: dict[str, dict[str, Any]] = {}
    meta_of: dict[str, dict[str, Any]] = {}
    for r in results:
        c = by_id[r["call_id"]]
        e, call = c.entry, c.call
        decision = r.get("decision")
        _check_result(r, e, decision)
        ok = decision != "rejected" and not r["is_error"]
        if c.generation is not None:
            outcome: ToolOutcome = "ignored" if decision == "rejected" else "success" if ok else "failure"
            health.record(call.name, ctx.now, Allow(call.id, c.generation, tool=call.name), outcome)
        meta = {
            "call_id": call.id,
            "name": call.name,
            "turn": run.turn,
            "permission": e.requires_approval,
            "status": "answered",
            "args_hash": e.args_hash,
            "is_error": r["is_error"],
            "decision": decision or "allowed",
            "approver": r.get("approver") if decision else None,
        }
        if decision:
            ctx.event("approval.decided")
        ctx.event("tool.result")
        ctx.services.metrics.tool_result("rejected" if decision == "rejected" else "error" if r["is_error"] else "ok")
        if ctx.span is not None:
            since = ctx.record.snapshot["state_data"].get("since")
            ctx.span.tool_ran(call.name, call.id, since if isinstance(since, int) else None, ctx.now, not ok)
        if ctx.encrypted:
            meta_of[e.ref] = meta
        else:
            content = {"arguments": call.arguments, "result": r["content"], "is_error": r["is_error"]}
            ctx.put("tool_call", e.ref.split(":", 1)[1], meta, content=content)
        if e.diff_ref is not None:
            status = "applied" if ok else "rejected"
            dmeta = dict(run.meta.get(e.diff_ref, {}), status=status)
            ctx.event(f"diff.{status}")
            if ctx.encrypted:
                meta_of[e.diff_ref] = dmeta
            else:
                change = proposed_change(call.name, call.arguments)
                ctx.put("diff", e.diff_ref.split(":", 1)[1], dmeta, content=change)
        answers[call.id] = P.tool_result_message(call.id, r["content"], r["is_error"])
    write_sealed(ctx, sealed, refs + seals, meta_of)
    ordered = [Message.from_json(m) for m in run.resolved or []]
    ordered += [Message.from_json(answers[c.call.id]) for c in calls]
    brain.tool_results(ordered)
    run.calls, run.resolved = [], []
    return Resume(brain, health)


def _check_result(r: dict[str, Any], e: CallEntry, decision: Any) -> None:
    """A result must fit its call: an ask call carries a decision, an allowed one is not rejected."""
    if e.requires_approval == "ask" and decision is None:
        raise ProtocolError(f"call {r['call_id'][:40]!r} is an ask call: its result carries the decision")
    if e.requires_approval == "allow" and decision == "rejected":
        raise ProtocolError(f"call {r['call_id'][:40]!r} is allowed: it cannot be rejected")
    if r.get("args_hash") not in (None, e.args_hash):
        raise ProtocolError(f"call {r['call_id'][:40]!r}: the decision was made for other arguments")
    if decision == "rejected" and not r["is_error"]:
        raise ProtocolError(f"call {r['call_id'][:40]!r}: a rejected call's result is an error")
