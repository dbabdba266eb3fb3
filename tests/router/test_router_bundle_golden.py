"""The run-input bundle and the rows a run writes stay what they were: golden files from a fixed set of runs.

Each scenario drives the real router through its ASGI app and the reference
client, on SQLite, with a fixed clock, fixed request ids and a zero-latency
monotonic clock.  Every bundle the router hands to the store (before it is
sealed) and every row of the session at the end are compared with
``data/router_golden.json``; sealed envelopes, whose nonces are random, are
compared as ``<sealed>``.  A change of the persisted encoding shows here as a
diff, so a refactor of the service cannot change what old rows hold or how
they are read without this test saying so.  ``LOOPFSM_WRITE_GOLDEN=1``
rewrites the file (only on purpose, with the reason in the commit).
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest

from loopfsm.router.client import Client
from loopfsm.router.crypto import Keyring
from loopfsm.router.providers.scripted import ScriptedProvider
from loopfsm.router.atrest import SealedState

from tests.support.router_support import PLAN_SCRIPT, TOOLS_SCRIPT, client, make

GOLDEN = Path(__file__).parent / "data" / "router_golden.json"
CLOCK = 1_700_000_000_000

MEMORY_SCRIPT = [
    {"text": "noting", "tool_calls": [{"id": "m1", "name": "remember", "arguments": {"key": "k", "value": "v"}}]},
    {"text": "unknown", "tool_calls": [{"id": "u1", "name": "no_such_tool", "arguments": {}}]},
    {"text": "noted", "input_tokens": 7, "output_tokens": 3},
]
COST_SCRIPT = [
    {
        "text": "looking",
        "tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "echo hi"}}],
        "input_tokens": 100,
        "output_tokens": 20,
    },
    {"text": "final", "input_tokens": 150, "output_tokens": 10},
]


def _normal(value: Any) -> Any:
    """JSON with every sealed envelope (random nonce) replaced by a placeholder."""
    if isinstance(value, dict):
        if "ciphertext" in value or "nonce" in value:
            return "<sealed>"
        return {k: _normal(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _scenario(name: str, url: str, prefix: str, tmp_path: Path) -> dict[str, Any]:
    clock = [CLOCK]
    key = Keyring.generate()
    encrypted = name.startswith("encrypted")
    kr = Keyring.generate() if encrypted else None
    perms: dict[str, str] | None = None
    gates: dict[str, Any] = {}
    approve: Any = "approved"
    script: list[dict[str, Any]] = TOOLS_SCRIPT
    remote = False
    prompts = ["do it"]
    if name.endswith("deny"):
        perms, approve = {"shell": "deny"}, "rejected"
    elif name.endswith("plan"):
        script = PLAN_SCRIPT
    elif name.endswith("memory"):
        script, perms = MEMORY_SCRIPT, {"remember": "allow"}
    elif name.endswith("gates"):
        script, remote, perms = COST_SCRIPT, True, {"shell": "allow"}
        gates = {"disclosure": "first_call", "cost_ceiling_tokens": 150}
    elif name.endswith("two_runs"):
        script = TOOLS_SCRIPT + [{"text": "second run"}]
        prompts = ["do it", "and again"]
    provider = ScriptedProvider(script, remote=remote)
    router, tc = make(
        url, prefix, provider=provider, clock=lambda: clock[0], monotonic=lambda: 0.0, key=key, create=True
    )
    c = client(tc, "g", tmp_path, approver=lambda kind, info: approve, keyring=kr)
    responses = [c.run(p, permissions=perms, gates=gates or None) for p in prompts]
    rows = [
        {"kind": r.kind, "row_id": r.row_id, "meta": r.meta, "body": r.body, "sealed": r.sealed is not None}
        for r in router.store().rows("g")
    ]
    router.close()
    return _normal({"responses": responses, "rows": sorted(rows, key=lambda r: (r["kind"], r["row_id"]))})


SCENARIOS = [
    "plaintext_ask",
    "plaintext_deny",
    "plaintext_plan",
    "plaintext_memory",
    "plaintext_gates",
    "plaintext_two_runs",
    "encrypted_ask",
    "encrypted_plan",
    "encrypted_memory",
    "encrypted_gates",
    "encrypted_two_runs",
]


def test_bundles_and_rows_match_the_golden_file(tmp_path, monkeypatch):
    bundles: list[Any] = []
    real = SealedState.bundle_row

    def spy(self: SealedState, session_id: str, run_id: str, bundle: Any, *, encrypted: bool) -> Any:
        bundles.append(json.loads(json.dumps(bundle, sort_keys=True)))
        return real(self, session_id, run_id, bundle, encrypted=encrypted)

    monkeypatch.setattr(SealedState, "bundle_row", spy)
    got: dict[str, Any] = {}
    for name in SCENARIOS:
        counter = itertools.count(1)
        monkeypatch.setattr(Client, "_rid", lambda self, n=counter: f"rq{next(n)}")
        bundles.clear()
        work = tmp_path / name
        work.mkdir()
        url = f"sqlite:///{tmp_path / f'{name}.db'}"
        out = _scenario(name, url, "g_", work)
        out["bundles"] = _normal(list(bundles))
        got[name] = out
    text = json.dumps(got, indent=1, sort_keys=True) + "\n"
    if os.environ.get("LOOPFSM_WRITE_GOLDEN") == "1":
        GOLDEN.write_text(text)
    expected = json.loads(GOLDEN.read_text())
    for name in SCENARIOS:
        assert got[name]["bundles"] == expected[name]["bundles"], name
        assert got[name]["rows"] == expected[name]["rows"], name
        assert got[name]["responses"] == expected[name]["responses"], name
    assert got == expected


@pytest.mark.parametrize("name", ["plaintext_ask", "encrypted_gates"])
def test_the_golden_file_is_not_trivial(name):
    """The file holds paused runs' bundles (brain snapshots, pending calls), not just empty rows.  A run waiting
    for its seals (AwaitingEncrypt: the response allows only `sealed` and `break`) holds no brain or breakers:
    nothing after the seals reads them, and the snapshot was the whole conversation again."""
    expected = json.loads(GOLDEN.read_text())[name]
    bundles = expected["bundles"]
    assert len(bundles) >= 2 and all("brain" in b for b in bundles[1:] if b.get("calls"))
    sealing = [b for b in bundles if b.get("response", {}).get("allowed_continuations") == ["sealed", "break"]]
    assert all("brain" not in b and "health" not in b for b in sealing)
    assert bool(sealing) == name.startswith("encrypted")
    assert any(b.get("calls") for b in expected["bundles"]) or any(b.get("gate") for b in expected["bundles"])
