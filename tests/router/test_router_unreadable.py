"""A paused run whose brain the deployed tables cannot read: the reason by name, and the user's escape hatches.

Seed 002: break and inject are the user's escape hatches, and a live run's
answer always allows break. A run whose router_run phase is readable but
whose engine brain was saved in a state the deployed table removed cannot
continue, but break and inject end it without reading the brain, so the
answer offers them (the phase machine unreadable is the deploy test's case:
nothing can be offered then).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loopfsm.core.catalog import load_machine
from loopfsm.machines.router_run import ROUTER_RUN
from loopfsm.router.store import records
from loopfsm.router.store.sweep import sweep
from loopfsm.router.service import context
from tests.support.router_support import PLAN_SCRIPT, make
from tests.support.store_support import store_url  # noqa: F401 - fixture

BRAIN = Path(load_machine("engine_brain").spec.file).read_text()


@pytest.fixture
def paused_for_the_plan(store_url, tmp_path, monkeypatch):  # noqa: F811
    """A run paused at its plan approval, then the engine brain's tables deployed with its state renamed."""
    url, prefix = store_url
    router, tc = make(url, prefix, PLAN_SCRIPT)
    first = tc.post("/v1/sessions/s/execute", json={"type": "execute", "request_id": "e1", "data": {"prompt": "go"}})
    assert first.json()["status"] == "awaiting_approval", first.json()
    edited = tmp_path / "engine_brain.yaml"
    edited.write_text(re.sub(r"\bAwaitingTools\b", "AwaitingToolz", BRAIN))
    monkeypatch.setattr(context, "LoopMachine", load_machine(str(edited)).Instance)
    yield router, tc, first.json()["data"]["approvals"][0]
    router.close()


def test_an_unreadable_brain_is_named_and_break_is_offered(paused_for_the_plan):
    router, tc, approval = paused_for_the_plan
    decision = {
        "approval_id": approval["approval_id"],
        "decision": "approved",
        "approver": "user",
        "args_hash": approval["args_hash"],
    }
    reply = tc.post(
        "/v1/sessions/s/continue",
        json={"type": "approval_decisions", "request_id": "a1", "data": {"decisions": [decision]}},
    ).json()
    assert reply["status"] == "error" and reply["data"]["code"] == "internal" and not reply["data"]["retryable"]
    assert "state 'AwaitingTools' no longer exists" in reply["data"]["error"]
    assert "kept as saved" in reply["data"]["error"]
    assert reply["allowed_continuations"] == ["inject", "break"]
    assert router.store().load("s").phase == "AwaitingApproval"  # nothing changed
    ended = tc.post("/v1/sessions/s/continue", json={"type": "break", "request_id": "b1"}).json()
    assert ended["status"] == "idle" and ended["data"]["ended"] == "user", ended
    assert router.store().load("s").phase == "Idle"


FAR = 10**15  # past any pause TTL


def test_the_sweep_ends_such_a_run_like_any_pause_past_its_ttl(paused_for_the_plan):
    router, tc, approval = paused_for_the_plan
    swept = sweep(router.store(), now_ms=FAR)
    assert swept.runs_expired == ["s"] and swept.unreadable == []
    assert router.store().load("s").phase == "Idle"


def test_a_phase_these_tables_cannot_read_is_kept_and_reported_by_the_sweep(
    paused_for_the_plan, tmp_path, monkeypatch, capsys
):
    router, tc, approval = paused_for_the_plan
    edited = tmp_path / "router_run.yaml"
    edited.write_text(re.sub(r"\bAwaitingApproval\b", "AwaitingApprovals", Path(ROUTER_RUN.spec.file).read_text()))
    monkeypatch.setattr(records, "ROUTER_RUN", load_machine(str(edited)))
    swept = sweep(router.store(), now_ms=FAR)
    assert swept.runs_expired == [] and swept.unreadable == ["s"]
    assert "1 run(s) these machine tables cannot read kept as saved (s; " in swept.summary()
    assert router.store().load("s").phase == "AwaitingApproval"
    reply = tc.post("/v1/sessions/s/continue", json={"type": "break", "request_id": "b1"}).json()
    assert reply["status"] == "error" and reply["allowed_continuations"] == []
    assert "state 'AwaitingApproval' no longer exists" in reply["data"]["error"]


def test_client_run_says_it_stopped_not_that_the_run_ended(paused_for_the_plan, tmp_path, monkeypatch, capsys):
    from loopfsm.cli.main import main
    from loopfsm.router import client as client_module

    router, tc, approval = paused_for_the_plan
    edited = tmp_path / "router_run.yaml"
    edited.write_text(re.sub(r"\bAwaitingApproval\b", "AwaitingApprovals", Path(ROUTER_RUN.spec.file).read_text()))
    monkeypatch.setattr(records, "ROUTER_RUN", load_machine(str(edited)))
    real = client_module.Client
    monkeypatch.setattr(client_module, "Client", lambda *a, **kw: real(*a, http=tc, retry_delay_s=0.01, **kw))
    code = main(
        ["client", "run", "--router", "http://testserver", "--session", "s", "--workspace", str(tmp_path), "hi"]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("client stopped: error internal this session's saved run cannot be read"), out
    assert "run ended" not in out
