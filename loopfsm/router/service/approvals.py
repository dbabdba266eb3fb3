"""Standalone approvals: disclosure and cost gates before a model call, the plan gate, and their answers.

router_run.yaml decides (``disclosure_gate``, ``cost_gate``,
``approval_answer``, ``after_approval``); this module asks it, shows the
user what each approval is about, keeps the durable record (a trace row of
metadata only, rewritten as its status changes) and applies what an
approval grants.  A plan approval is raised by the tool-call mediation
(:mod:`.tool_calls`), answered here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopfsm.router.errors import ProtocolError
from ...machines.engine_brain import LoopMachine
from ...machines.messages import Message
from ...machines.tool_breaker import ToolHealth
from loopfsm.router.store import Row
from .. import protocol as P
from .bundle import Approval, Gate, PlanCall
from .context import Ctx, Outcome, Resume, restore
from .sealing import pending_seal, take_seals, write_sealed


@dataclass
class Asked:
    """One approval being raised: its record, what the client is shown, and the figures it gates."""

    approval: Approval
    shown: dict[str, Any]
    details: dict[str, Any]


def remote_providers(ctx: Ctx) -> list[str]:
    """Where a model call may send the conversation: the primary and the fallback, if remote.

    A provider is remote unless it says otherwise (``remote = False``), so an
    adapter that forgets to say is asked about, never silently trusted.
    """
    s = ctx.services
    return sorted(
        {str(getattr(p, "name", type(p).__name__)) for p in (s.provider, s.fallback) if getattr(p, "remote", True)}
    )


def new_approval(ctx: Ctx, kind: str, approval_id: str, args_hash: str, ref: str | None = None) -> Approval:
    """An approval record as the pause holds it, expiring ``approval_ttl_ms`` from now."""
    return Approval(approval_id, kind, args_hash, ctx.now + ctx.services.policy.approval_ttl_ms, ref)


def record_approval(ctx: Ctx, a: Approval, status: str, approver: str | None = None) -> None:
    """The approval's durable record: a trace row (metadata only) rewritten as its status changes."""
    meta = {
        "event": "approval.record",
        "approval_id": a.approval_id,
        "kind": a.kind,
        "args_hash": a.args_hash,
        "expires_at": a.expires_at,
        "status": status,
        "approver": approver,
        "at": ctx.now,
        "ref": a.ref,
    }
    # minted when the approval is raised, kept in the bundle so the decision rewrites the same row
    rid = ctx.run.approval_row(a.approval_id, ctx.rid(f"approval/{a.approval_id}"))
    ctx.rows.append(Row("trace", f"approval/{a.approval_id}", meta, row_id=rid))


def raise_gate(
    ctx: Ctx, brain: LoopMachine, health: ToolHealth, asked: list[Asked], plan: PlanCall | None = None
) -> Outcome:
    """Pause at AwaitingApproval on ``asked``."""
    run = ctx.run
    run.brain, run.health = brain.snapshot(), health.snapshot()
    records = [a.approval for a in asked]
    run.gate = Gate(records, {a.approval.approval_id: a.details for a in asked}, plan)
    for r in records:
        record_approval(ctx, r, "requested")
        ctx.event("approval.requested")
    return Outcome(
        "gate",
        pause={"approvals": [r.to_json() for r in records], "pending_seal": run.pending_refs()},
        data={"approvals": [a.shown for a in asked]},
    )


def gate_before_call(ctx: Ctx, brain: LoopMachine, health: ToolHealth) -> Outcome | None:
    """Ask router_run's disclosure_gate and cost_gate about the next model call; a gate if either asks."""
    run, policy = ctx.run, ctx.services.policy
    turn, gates = run.turn, run.gates
    remote = remote_providers(ctx)
    messages = [m.to_json() for m in brain.full_history()]
    disclose = ctx.phase.decide(
        "disclosure_gate",
        policy=policy,
        remote=bool(remote),
        session=gates.get("disclosure"),
        first_call=turn == 0,
        approved=run.disclosed_turn == turn,
    )
    granted = int(run.granted_tokens or 0)
    estimate = max(int(run.context_tokens or 0), len(P.canonical(messages)) // 4)
    cost = ctx.phase.decide(
        "cost_gate",
        policy=policy,
        spent_tokens=int(run.tokens or 0),
        next_tokens=estimate,
        session_ceiling=int(gates.get("cost_ceiling_tokens", 0)),
        granted_tokens=granted,
    )
    asked: list[Asked] = []
    if disclose == "ask":
        args = {"providers": remote, "turn": turn, "messages": len(messages)}
        a = new_approval(ctx, "disclosure", f"disclosure-{turn}", P.args_hash("disclosure", args))
        n = len(messages)
        summary = (
            f"send the conversation ({n} message{'' if n == 1 else 's'}) to the remote model "
            f"{', '.join(remote)} (model call {turn + 1} of this run)"
        )
        asked.append(Asked(a, dict(a.to_json(), summary=summary, details=args), args))
    if cost["gate"] == "ask":
        args = {k: cost[k] for k in ("ceiling_tokens", "spent_tokens", "next_tokens")}
        args["turn"] = turn
        a = new_approval(ctx, "cost_ceiling", f"cost-{turn}-{granted}", P.args_hash("cost_ceiling", args))
        summary = (
            f"this run has used {args['spent_tokens']} tokens; the next model call (about "
            f"{args['next_tokens']} more) would pass the ceiling of {args['ceiling_tokens']} tokens"
        )
        asked.append(Asked(a, dict(a.to_json(), summary=summary, details=args), args))
    if not asked:
        return None
    return raise_gate(ctx, brain, health, asked)


def answer(ctx: Ctx) -> Outcome | Resume:
    """after_approval: check the answers against the pending approvals, then continue, abort or expire."""
    run = ctx.run
    gate = run.gate or Gate([], {})
    pending = list(gate.approvals)
    by_id = {a.approval_id: a for a in pending}
    decisions = ctx.req.data["decisions"]
    got = [d["approval_id"] for d in decisions]
    if sorted(got) != sorted(by_id):
        raise ProtocolError(
            f"approval_decisions must decide each pending approval exactly once (pending {len(by_id)}, got {len(got)})"
        )
    for d in decisions:
        if d.get("args_hash") not in (None, by_id[d["approval_id"]].args_hash):
            raise ProtocolError(f"approval {d['approval_id'][:40]!r}: the decision was made for other arguments")
    seals = pending_seal(ctx)
    sealed = take_seals(ctx, seals)
    answers: dict[str, str] = {}
    approver: dict[str, str] = {}
    for d in decisions:
        a = by_id[d["approval_id"]]
        answers[a.approval_id] = ctx.phase.decide(
            "approval_answer", policy=ctx.services.policy, answer=d["decision"], now=ctx.now, expires_at=a.expires_at
        )
        approver[a.approval_id] = d["approver"]
        record_approval(ctx, a, answers[a.approval_id], d["approver"])
        ctx.event("approval.decided")
    verdict = ctx.phase.decide(
        "after_approval",
        policy=ctx.services.policy,
        expired="expired" in answers.values(),
        rejected="rejected" in answers.values(),
    )
    plan = gate.plan
    plan_approval = next((a for a in pending if a.kind == "plan"), None) if plan is not None else None
    meta_of: dict[str, dict[str, Any]] = {}
    if plan is not None and plan_approval is not None and plan_approval.ref is not None:
        pmeta = {
            "approval_id": plan_approval.approval_id,
            "approver": approver[plan_approval.approval_id],
            "args_hash": plan_approval.args_hash,
            "expires_at": plan_approval.expires_at,
            "status": answers[plan_approval.approval_id],
        }
        meta_of[plan_approval.ref] = pmeta
        if not ctx.encrypted:
            content = {"plan": plan.call.arguments.get("plan")}
            ctx.put("plan", plan_approval.ref.split(":", 1)[1], pmeta, content=content)
    write_sealed(ctx, sealed, seals, meta_of)
    if verdict == "expired":
        ctx.event("approval.expired")
        return Outcome("expired", data={"ended": "expired"})
    if verdict == "aborted":
        return Outcome("aborted", data={"ended": "aborted"})
    brain, health = restore(run)
    for a in pending:  # what each approval grants the gated step
        args = gate.details.get(a.approval_id) or {}
        if a.kind == "disclosure":
            run.disclosed_turn = args["turn"]
        elif a.kind == "cost_ceiling":
            run.granted_tokens = args["spent_tokens"] + args["next_tokens"]
    run.gate = None
    if plan is None or plan_approval is None:  # a gate before a model call: the call goes ahead
        return Resume(brain, health)
    run.plan_approved = True
    answered = _answer_plan(ctx, plan, plan_approval, approver[plan_approval.approval_id])
    brain.tool_results([Message.from_json(m) for m in run.resolved or []] + [answered])
    run.resolved = []
    return Resume(brain, health)


def _answer_plan(ctx: Ctx, plan: PlanCall, approval: Approval, approver: str) -> Message:
    """The approved ``submit_plan`` call's row (answered, approved, by whom); the answer the model sees."""
    answer = Message.tool_result(plan.call.id, f"plan approved by {approver}")
    cid = plan.ref.split(":", 1)[1]
    meta = {
        "call_id": plan.call.id,
        "name": plan.call.name,
        "status": "answered",
        "decision": "approved",
        "approver": approver,
        "args_hash": approval.args_hash,
        "is_error": False,
    }
    if ctx.encrypted:
        ctx.put("tool_call", cid, meta)
        ctx.hold_for_seal(plan.ref, P.message_text(answer.to_json()), meta)
    else:
        content = {"arguments": plan.call.arguments, "result": answer.text, "is_error": False}
        ctx.put("tool_call", cid, meta, content=content)
    return answer
