"""The typed run-input bundle reads every bundle row the router has written and writes it back byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopfsm.machines.messages import ToolCall
from loopfsm.router.service.bundle import Approval, CallEntry, Gate, PendingCall, PlanCall, RunBundle

GOLDEN = Path(__file__).parent / "data" / "router_golden.json"


def _dump(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))  # as the store writes a row


def golden_bundles() -> list[tuple[str, dict]]:
    out = []
    for name, scenario in json.loads(GOLDEN.read_text()).items():
        for i, b in enumerate(scenario["bundles"]):
            b = dict(b)
            b.pop("response", None)  # added to an encrypted run's row at release, not part of the run's state
            out.append((f"{name}-{i}", b))
    return out


@pytest.mark.parametrize("body", [b for _, b in golden_bundles()], ids=[n for n, _ in golden_bundles()])
def test_every_stored_bundle_reads_and_writes_back_the_same_bytes(body):
    assert _dump(RunBundle.from_json(body).to_json()) == _dump(body)


def test_the_golden_bundles_cover_the_keys_written_only_sometimes():
    """A paused gate answered (``gate: null``), seals taken (``pending: {}``), calls answered, a held prompt."""
    bodies = [b for _, b in golden_bundles()]
    assert any("gate" in b and b["gate"] is None for b in bodies)
    assert any(b.get("pending") == {} for b in bodies)
    assert any(b.get("calls") == [] for b in bodies)
    assert any("prompt" in b for b in bodies)
    assert any(b.get("approval_rows") for b in bodies)


def test_a_key_never_set_is_not_written():
    fresh = RunBundle(mode="plaintext", prompt_ref="message:u-r1", history_refs=["message:u-r1"])
    assert sorted(fresh.to_json()) == [
        "gates",
        "history_refs",
        "meta",
        "mode",
        "model_calls",
        "permissions",
        "prompt_ref",
        "turn",
    ]
    fresh.add_tokens(12, 40)
    assert fresh.to_json()["tokens"] == 12 and fresh.to_json()["context_tokens"] == 40


def test_an_answered_gate_is_written_as_null_once_an_approval_was_raised():
    b = RunBundle()
    assert "gate" not in b.to_json()
    b.gate = Gate([Approval("a1", "plan", "sha256:x", 5, "plan:p1")], {"a1": {}}, PlanCall(ToolCall("p1", "x"), "r", 0))
    assert b.approval_row("a1", "row-1") == "row-1" and b.approval_row("a1", "row-2") == "row-1"
    assert b.to_json()["gate"]["plan"]["call"]["id"] == "p1"
    b.gate = None
    assert "gate" in b.to_json() and b.to_json()["gate"] is None


def test_typed_parts_round_trip():
    call = PendingCall(CallEntry("c1", "tool_call:t1", "ask", "sha256:y", "diff:d1"), ToolCall("c1", "write_file"), 3)
    assert PendingCall.from_json(call.to_json()) == call
    assert "diff_ref" not in CallEntry("c1", "r", "allow", "h").to_json()
    assert (
        Approval.from_json({"approval_id": "a", "kind": "cost_ceiling", "args_hash": "h", "expires_at": 9}).ref is None
    )


def test_an_older_row_lacking_keys_reads_with_defaults():
    b = RunBundle.from_json({"mode": "encrypted"})
    assert b.encrypted and b.turn == 0 and b.calls is None and b.gate is None and b.pending_refs() == []
