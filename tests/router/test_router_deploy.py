"""A deploy of edited machine tables does not strand the router's paused runs (real processes, SQLite and PostgreSQL).

Runs are paused in each phase a client answers (approval, tools, sealing,
decrypting); the router is stopped, edited copies of machine files are put in
the directory ``LOOPFSM_MACHINES`` names (a policy default of router_run, a
guard parameter of the engine brain), the router is started again, and every
run continues and completes.  A run paused
in a state the new table removed, without a migration, is answered with an
error naming the reason, never a 5xx and never a reset.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import loopfsm
from loopfsm.core.resources import machine_path
from loopfsm.router.crypto import Keyring
from loopfsm.router.store import open_store

from tests.support.router_support import START_S, free_port, stop, wait_until_up
from tests.support.store_support import store_url  # noqa: F401  (fixture)

SUPPORT = Path(__file__).resolve().parents[1] / "support"  # router_proc.py
# Real router processes, stopped and started around an edit of the machine files.
pytestmark = pytest.mark.slow
ROOT = Path(loopfsm.__file__).resolve().parents[1]
PLAN = {"id": "p1", "name": "submit_plan", "arguments": {"plan": "step one"}}
SHELL = {"id": "c1", "name": "shell", "arguments": {"command": "echo hi"}}
# The router asks for reply n at a run's n-th model call (kept with the run, so a restart changes
# nothing): a plan to approve, a tool call, then the answer.
SCRIPT = [{"text": "plan", "tool_calls": [PLAN]}, {"text": "run it", "tool_calls": [SHELL]}, {"text": "done"}] * 3
WAIT_S = 120


def Client(*args: Any, **kw: Any) -> Any:  # noqa: N802 - the client class, imported on first use
    from loopfsm.router.client import Client as _Client

    return _Client(*args, **kw)


class Deployment:
    """One router process on one port, run with ``LOOPFSM_MACHINES`` naming a directory of edited machine files.

    That is how docs/router.md tells an operator to deploy edited tables: the
    installed package is left alone, and a file not in the directory is the
    shipped one.
    """

    def __init__(self, tmp_path: Path, url: str, prefix: str):
        self.machines = tmp_path / "machines"
        self.machines.mkdir()
        self.store_url, self.prefix = url, prefix
        self.port = free_port()
        self.log = tmp_path / "router.log"
        self.args = [
            sys.executable,
            str(SUPPORT / "router_proc.py"),
            url,
            prefix,
            str(self.port),
            "r1",
            json.dumps(SCRIPT),
        ]
        self.env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(ROOT), str(SUPPORT)]),
            LOOPFSM_CACHE_DIR=str(tmp_path / "cache"),
            LOOPFSM_MACHINES=str(self.machines),
        )
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([*self.args, "none"], stdout=out, stderr=out, env=self.env)
        wait_until_up(self.url, self.proc, lambda: self.log.read_text()[-2000:])

    def stop(self) -> None:
        stop(self.proc)

    def _table(self, machine: str) -> Path:
        """The deployed copy of a machine file, made from the shipped one on its first edit."""
        path = self.machines / f"{machine}.yaml"
        if not path.exists():
            shutil.copy(machine_path(machine), path)
        return path

    def edit(self, machine: str, old: str, new: str, count: int = 1) -> None:
        path = self._table(machine)
        text = path.read_text()
        assert text.count(old) >= count, (machine, old)
        path.write_text(text.replace(old, new, count))

    def rename_state(self, machine: str, old: str, new: str) -> None:
        path = self._table(machine)
        path.write_text(re.sub(rf"\b{old}\b", new, path.read_text()))


@pytest.fixture
def deployment(store_url, tmp_path):  # noqa: F811
    url, prefix = store_url
    d = Deployment(tmp_path, url, prefix)
    yield d
    d.stop()


class PausedRun(threading.Thread):
    """One client run; at its first pause in state ``pause_at`` it says so and waits for the deploy before answering."""

    def __init__(self, d: Deployment, session: str, deployed: threading.Event, **kw: Any):
        super().__init__(daemon=True)
        self.paused = threading.Event()
        self.deployed, self.kw = deployed, kw
        self.first_pause: str | None = None
        self.pauses: list[str] = []
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self.client = Client(
            d.url,
            session,
            workspace=kw.pop("workspace"),
            keyring=kw.pop("keyring", None),
            approver=lambda kind, info: "approved",
            interrupt=self.at_pause,
            retries=int(START_S / 0.1),
            retry_delay_s=0.1,
            stream=False,
        )

    def at_pause(self, state: str, resp: dict[str, Any]) -> None:
        self.pauses.append(state)
        if self.first_pause is None and state == self.kw.get("pause_at"):
            self.first_pause = state
            self.paused.set()
            assert self.deployed.wait(WAIT_S), "the deploy never came"

    def run(self) -> None:
        try:
            self.result = self.client.run("go", permissions=self.kw.get("permissions"))
        except BaseException as err:  # noqa: BLE001 - reported by the test
            self.error = err
        finally:
            self.paused.set()  # also when it ended without pausing: the test says so
            self.client.close()


def pause_one(d: Deployment, session: str, deployed: threading.Event, **kw: Any) -> PausedRun:
    run = PausedRun(d, session, deployed, **kw)
    run.start()
    assert run.paused.wait(WAIT_S) and run.error is None and run.first_pause is not None, (run.pauses, run.result)
    return run


def test_paused_runs_continue_after_a_policy_deploy(deployment, tmp_path):
    d = deployment
    d.start()
    ws = tmp_path / "ws"
    ws.mkdir()
    deployed = threading.Event()
    kr = Keyring.generate()
    # An encrypted session with one finished run: its next run first asks the client to decrypt.
    first = PausedRun(d, "decrypting", deployed, workspace=ws, keyring=kr, permissions={"shell": "allow"})
    first.run()
    assert first.result is not None and first.result["status"] == "idle", first.error
    allow, ask = {"shell": "allow"}, {"shell": "ask"}
    runs = [
        pause_one(d, "approving", deployed, workspace=ws, permissions=ask, pause_at="Approving"),
        pause_one(d, "tools", deployed, workspace=ws, permissions=allow, pause_at="RunningTools"),
        pause_one(d, "sealing", deployed, workspace=ws, keyring=kr, permissions=allow, pause_at="Sealing"),
        pause_one(d, "decrypting", deployed, workspace=ws, keyring=kr, permissions=allow, pause_at="Decrypting"),
    ]
    assert [r.first_pause for r in runs] == ["Approving", "RunningTools", "Sealing", "Decrypting"]
    d.stop()
    d.edit("router_run", "    default: 86400000\n", "    default: 86400001\n")  # a policy default
    d.edit("engine_brain", "percent: 95, inclusive: true", "percent: 94, inclusive: true")  # a guard parameter
    d.start()
    deployed.set()
    for r in runs:
        r.join(WAIT_S)
        assert not r.is_alive() and r.error is None, r.error
        assert r.result is not None and r.result["status"] in ("completed", "idle"), r.result
    with open_store(d.store_url, prefix=d.prefix) as s:
        assert {s.load(r.client.session_id).phase for r in runs} == {"Idle"}
    assert "Traceback" not in d.log.read_text()


def test_a_run_in_a_removed_state_is_answered_with_the_reason(deployment, tmp_path):
    import httpx

    d = deployment
    d.start()
    ws = tmp_path / "ws"
    ws.mkdir()
    deployed = threading.Event()
    run = pause_one(d, "stranded", deployed, workspace=ws, permissions={"shell": "ask"}, pause_at="Approving")
    assert run.first_pause == "Approving"
    d.stop()
    d.rename_state("router_run", "AwaitingApproval", "AwaitingApprovals")  # no migration
    d.start()
    with httpx.Client(base_url=d.url, timeout=30) as h:
        for body in (
            {"type": "break", "request_id": "stranded-break"},
            {"type": "execute", "request_id": "stranded-exec", "data": {"prompt": "again"}},
        ):
            reply = h.post("/v1/sessions/stranded/" + ("continue" if body["type"] == "break" else "execute"), json=body)
            assert reply.status_code == 200
            data = reply.json()
            assert data["status"] == "error" and data["data"]["code"] == "internal", data
            assert data["data"]["retryable"] is False and data["allowed_continuations"] == []
            assert "state 'AwaitingApproval' no longer exists" in data["data"]["error"]
            assert "kept as saved" in data["data"]["error"]
    with open_store(d.store_url, prefix=d.prefix) as s:
        assert s.load("stranded").phase == "AwaitingApproval"  # never reset
    deployed.set()
    run.join(WAIT_S)
    assert "Traceback" not in d.log.read_text()
