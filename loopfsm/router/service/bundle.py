"""The run-input bundle: what a paused run keeps between two requests, as named, typed fields.

No run is held in memory between requests; everything the next request of a
live run needs is this one ``input`` row (``b-<run>``), clear JSON in a
plaintext session, sealed under the router key in an encrypted one
(:mod:`loopfsm.router.atrest`).  :meth:`RunBundle.to_json` writes exactly the
keys the row has always held (a key that was never set is left out, as the
string-keyed dict this replaces left it out), so rows written before and
after this type read the same; ``tests/router/data/router_golden.json`` pins that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...machines.messages import ToolCall


@dataclass
class Approval:
    """A standalone approval as the pause holds it: refs and non-secret metadata only."""

    approval_id: str
    kind: str  # disclosure, cost_ceiling, plan
    args_hash: str
    expires_at: int
    ref: str | None = None  # the plan row a plan approval is about

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "approval_id": self.approval_id,
            "kind": self.kind,
            "args_hash": self.args_hash,
            "expires_at": self.expires_at,
        }
        if self.ref is not None:
            out["ref"] = self.ref
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Approval:
        return cls(d["approval_id"], d["kind"], d["args_hash"], int(d["expires_at"]), d.get("ref"))


@dataclass
class CallEntry:
    """A tool call handed to the client, as the AwaitingTool pause and the response name it."""

    call_id: str
    ref: str  # tool_call:<row id>
    requires_approval: str  # allow or ask
    args_hash: str
    diff_ref: str | None = None  # diff:<row id> when the call changes a file

    def to_json(self) -> dict[str, Any]:
        out = {
            "call_id": self.call_id,
            "ref": self.ref,
            "requires_approval": self.requires_approval,
            "args_hash": self.args_hash,
        }
        if self.diff_ref is not None:
            out["diff_ref"] = self.diff_ref
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CallEntry:
        return cls(d["call_id"], d["ref"], d["requires_approval"], d["args_hash"], d.get("diff_ref"))


@dataclass
class PendingCall:
    """A call the client runs: its entry, the model's call, and the tool breaker's generation (None: no breaker)."""

    entry: CallEntry
    call: ToolCall
    generation: int | None

    def to_json(self) -> dict[str, Any]:
        return {"entry": self.entry.to_json(), "call": self.call.to_json(), "generation": self.generation}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PendingCall:
        return cls(CallEntry.from_json(d["entry"]), ToolCall.from_json(d["call"]), d.get("generation"))


@dataclass
class PlanCall:
    """The ``submit_plan`` call a plan approval holds back until it is answered."""

    call: ToolCall
    ref: str  # tool_call:<row id>
    generation: int | None

    def to_json(self) -> dict[str, Any]:
        return {"call": self.call.to_json(), "ref": self.ref, "generation": self.generation}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PlanCall:
        return cls(ToolCall.from_json(d["call"]), d["ref"], d.get("generation"))


@dataclass
class Gate:
    """The approvals a run waits on at AwaitingApproval, with the figures each one grants."""

    approvals: list[Approval]
    details: dict[str, dict[str, Any]]  # approval id -> the gated figures (turn, tokens)
    plan: PlanCall | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "approvals": [a.to_json() for a in self.approvals],
            "details": self.details,
            "plan": self.plan.to_json() if self.plan is not None else None,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Gate:
        plan = d.get("plan")
        return cls(
            [Approval.from_json(a) for a in d.get("approvals") or []],
            dict(d.get("details") or {}),
            PlanCall.from_json(plan) if plan is not None else None,
        )


@dataclass
class RunBundle:
    """One run's state between requests.  None in an optional field: never set in this run (not written)."""

    mode: str = "plaintext"  # plaintext or encrypted, fixed by the session's first run
    permissions: dict[str, str] = field(default_factory=dict)  # tool name -> allow / ask / deny
    gates: dict[str, Any] = field(default_factory=dict)  # the session's approval rules (disclosure, cost ceiling)
    model_calls: dict[str, int] = field(default_factory=dict)  # route -> calls made (a script answers by position)
    turn: int = 0  # model replies so far
    prompt_ref: str = ""
    history_refs: list[str] = field(default_factory=list)  # every row of the run's conversation, in order
    meta: dict[str, dict[str, Any]] = field(default_factory=dict)  # "kind:row id" -> the row's metadata
    #: Clear prompt of an encrypted run waiting for its history to be opened (short-lived).
    prompt: str | None = None
    decrypt_order: list[str] | None = None  # the history refs handed out to decrypt, in conversation order
    pending: dict[str, dict[str, Any]] | None = None  # ref -> metadata of content awaiting the client's seal
    tokens: int | None = None  # tokens the run's model calls used
    context_tokens: int | None = None  # the last reply's context size
    brain: dict[str, Any] | None = None  # the engine brain's snapshot at the pause
    health: dict[str, Any] | None = None  # the run's tool breakers at the pause
    resolved: list[dict[str, Any]] | None = None  # answers the router gave this turn (messages, in order)
    calls: list[PendingCall] | None = None  # calls the client runs
    gate: Gate | None = None  # what AwaitingApproval waits on (None once answered)
    plan_approved: bool | None = None
    disclosed_turn: int | None = None  # the model call the user consented to disclose to
    granted_tokens: int | None = None  # the token ceiling the user raised the run to
    committed: list[dict[str, Any]] | None = None  # a completed plaintext run's conversation
    committed_refs: bool | None = None  # an encrypted run's seals were written
    approval_rows: dict[str, str] | None = None  # approval id -> its trace row's id, minted when raised

    # -- fields the run fills as it goes --------------------------------------------------
    @property
    def encrypted(self) -> bool:
        return self.mode == "encrypted"

    def pending_seals(self) -> dict[str, dict[str, Any]]:
        if self.pending is None:
            self.pending = {}
        return self.pending

    def pending_refs(self) -> list[str]:
        """The refs awaiting a seal, sorted, as the pause lists them."""
        return sorted(self.pending or {})

    def add_tokens(self, used: int, context: int) -> None:
        self.tokens = (self.tokens or 0) + used
        self.context_tokens = context

    def approval_row(self, approval_id: str, mint: str) -> str:
        """The trace row id of an approval: ``mint`` the first time, the same id on every later write."""
        if self.approval_rows is None:
            self.approval_rows = {}
        return self.approval_rows.setdefault(approval_id, mint)

    # -- the row --------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mode": self.mode,
            "permissions": self.permissions,
            "gates": self.gates,
            "model_calls": self.model_calls,
            "turn": self.turn,
            "prompt_ref": self.prompt_ref,
            "history_refs": self.history_refs,
            "meta": self.meta,
        }
        optional: dict[str, Any] = {
            "prompt": self.prompt,
            "decrypt_order": self.decrypt_order,
            "pending": self.pending,
            "tokens": self.tokens,
            "context_tokens": self.context_tokens,
            "brain": self.brain,
            "health": self.health,
            "resolved": self.resolved,
            "calls": [c.to_json() for c in self.calls] if self.calls is not None else None,
            "gate": self.gate.to_json() if self.gate is not None else None,
            "plan_approved": self.plan_approved,
            "disclosed_turn": self.disclosed_turn,
            "granted_tokens": self.granted_tokens,
            "committed": self.committed,
            "committed_refs": self.committed_refs,
            "approval_rows": self.approval_rows,
        }
        out.update((k, v) for k, v in optional.items() if v is not None)
        if self.approval_rows is not None and self.gate is None:
            # A run that raised an approval has held a gate since; an answered one is written as null.
            out["gate"] = None
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunBundle:
        """A bundle row's body; keys it does not know are ignored, keys it lacks take their defaults."""
        calls, gate = d.get("calls"), d.get("gate")
        return cls(
            mode=d.get("mode") or "plaintext",
            permissions=dict(d.get("permissions") or {}),
            gates=dict(d.get("gates") or {}),
            model_calls=dict(d.get("model_calls") or {}),
            turn=int(d.get("turn", 0)),
            prompt_ref=d.get("prompt_ref", ""),
            history_refs=list(d.get("history_refs") or []),
            meta=dict(d.get("meta") or {}),
            prompt=d.get("prompt"),
            decrypt_order=d.get("decrypt_order"),
            pending=d.get("pending"),
            tokens=d.get("tokens"),
            context_tokens=d.get("context_tokens"),
            brain=d.get("brain"),
            health=d.get("health"),
            resolved=d.get("resolved"),
            calls=[PendingCall.from_json(c) for c in calls] if calls is not None else None,
            gate=Gate.from_json(gate) if gate is not None else None,
            plan_approved=d.get("plan_approved"),
            disclosed_turn=d.get("disclosed_turn"),
            granted_tokens=d.get("granted_tokens"),
            committed=d.get("committed"),
            committed_refs=d.get("committed_refs"),
            approval_rows=d.get("approval_rows"),
        )
