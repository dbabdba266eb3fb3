"""What one turn does once: work the router used to repeat on every request, counted (never timed)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from loopfsm.router.providers.scripted import ScriptedProvider
from loopfsm.router.service import Router
from loopfsm.router.store.records import RunRecord


def _router(tmp_path: Path) -> Router:
    script = [{"text": "done", "input_tokens": 10, "output_tokens": 2}]
    return Router(f"sqlite:///{tmp_path / 'r.db'}", provider=ScriptedProvider(script), create=True)


def _execute(router: Router, session: str) -> dict[str, Any]:
    return router.handle(session, {"type": "execute", "request_id": uuid.uuid4().hex, "data": {"prompt": "hello"}})


def test_an_admitted_request_restores_the_saved_phase_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    router = _router(tmp_path)
    assert _execute(router, "s1")["status"] == "completed"
    restores = 0
    original = RunRecord.phase_machine

    def counted(self: RunRecord) -> Any:
        nonlocal restores
        restores += 1
        return original(self)

    monkeypatch.setattr(RunRecord, "phase_machine", counted)
    assert _execute(router, "s1")["status"] == "completed"
    assert restores == 1
    router.close()


def test_a_request_on_a_live_run_restores_the_saved_phase_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    router = Router(f"sqlite:///{tmp_path / 'r.db'}", create=True)  # the demo script pauses for a tool call
    first = _execute(router, "s1")
    assert first["status"] == "awaiting_tool"
    restores = 0
    original = RunRecord.phase_machine

    def counted(self: RunRecord) -> Any:
        nonlocal restores
        restores += 1
        return original(self)

    monkeypatch.setattr(RunRecord, "phase_machine", counted)
    injected = router.handle("s1", {"type": "inject", "request_id": uuid.uuid4().hex, "data": {"message": "stop"}})
    assert injected["status"] != "error", injected
    assert injected["data"]["run_id"] != first["data"]["run_id"]
    assert restores == 1
    # the old run's bundle was emptied when the inject replaced it
    row = router.store().row("s1", "input", f"b-{first['data']['run_id']}")
    assert row is not None and row.body is None
    router.close()
