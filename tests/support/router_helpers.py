"""Pause payloads and a helper that walks router_run to any phase."""

from __future__ import annotations

from typing import Any

from loopfsm.machines.router_run import RouterRun

PAUSES: dict[str, dict[str, Any]] = {
    "AwaitingDecrypt": {"to_decrypt": ["message:m1"], "input_ref": "input:i1", "pending_seal": []},
    "AwaitingApproval": {
        "approvals": [{"approval_id": "a1", "kind": "cost_ceiling", "args_hash": "sha256:ab", "expires_at": 5000}],
        "pending_seal": [],
    },
    "AwaitingTool": {
        "calls": [{"call_id": "c1", "ref": "tool_call:t1", "requires_approval": "ask", "args_hash": "sha256:cd"}],
        "assistant_ref": "message:m2",
        "pending_seal": [],
    },
    "AwaitingEncrypt": {"to_seal": [{"ref": "message:m3", "meta": {"role": "assistant"}}]},
}
OUTCOME_OF = {
    "AwaitingDecrypt": "needs_decrypt",
    "AwaitingApproval": "gate",
    "AwaitingTool": "tools",
    "AwaitingEncrypt": "completed",
}


def pause_for(state: str) -> dict[str, Any]:
    return PAUSES.get(state, {})


def at(phase: str, *, encrypted: bool = True) -> Any:
    """A router_run instance in ``phase`` (an encrypted run unless told otherwise)."""
    m = RouterRun()
    if phase != "Idle":
        m.execute("r1", OUTCOME_OF[phase], encrypted, 10, pause_for(phase))
    assert m.state == phase
    return m
