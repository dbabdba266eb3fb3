"""Proof with real processes on 127.0.0.1: uvicorn serving the router, the real client over sockets.

Every process a test starts is stopped by the test; ports are chosen free;
every wait is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import loopfsm

from loopfsm.router.crypto import Keyring
from loopfsm.router.store import open_store

from tests.support.router_support import START_S, TOOLS_SCRIPT, free_port, stop, wait_until_up
from tests.support.store_support import store_url  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow  # real router processes over sockets, and a schemathesis run against one

SUPPORT = Path(__file__).resolve().parents[1] / "support"  # router_proc.py


def Client(*args, **kw):  # noqa: N802 - the client class, imported on first use (see router_support)
    from loopfsm.router.client import Client as _Client

    return _Client(*args, **kw)


@pytest.fixture
def store_at(store_url):  # noqa: F811
    return store_url


class RouterProcess:
    def __init__(
        self,
        url: str,
        prefix: str,
        *,
        script: list,
        holder: str = "r1",
        fault: str = "none",
        port: int | None = None,
        log: Path | None = None,
    ):
        self.port = port or free_port()
        self.args = [
            sys.executable,
            str(SUPPORT / "router_proc.py"),
            url,
            prefix,
            str(self.port),
            holder,
            json.dumps(script),
            fault,
        ]
        self.log = log
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RouterProcess:
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL
        # the child imports the very loopfsm this test imported (a checkout beside an installed copy included)
        path = os.pathsep.join([str(SUPPORT), str(Path(loopfsm.__file__).resolve().parents[1])])
        self.proc = subprocess.Popen(self.args, stdout=out, stderr=out, env=dict(os.environ, PYTHONPATH=path))
        wait_until_up(self.url, self.proc)
        return self

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        stop(self.proc)


@pytest.fixture
def routers():
    started: list[RouterProcess] = []
    yield started
    for r in started:
        r.stop()


def spawn(routers, *args, **kw) -> RouterProcess:
    r = RouterProcess(*args, **kw)
    routers.append(r)
    return r.start()


def test_plaintext_and_encrypted_sessions_through_uvicorn(store_at, routers, tmp_path):
    url, prefix = store_at
    r = spawn(routers, url, prefix, script=TOOLS_SCRIPT, log=tmp_path / "router.log")
    ws = tmp_path / "ws"
    ws.mkdir()
    asked = []
    c = Client(r.url, "plain", workspace=ws, approver=lambda kind, info: asked.append(info["name"]) or "approved")
    resp = c.run("first prompt", permissions={"shell": "ask", "write_file": "ask"})
    c.close()
    assert resp["status"] == "completed" and resp["data"]["message"] == "all done"
    assert asked == ["shell", "write_file"] and (ws / "out.txt").read_text() == "written by the model\n"
    kr = Keyring.generate()
    c = Client(r.url, "sealed", workspace=ws, keyring=kr, approver=lambda kind, info: "rejected")
    resp = c.run("encrypted-secret-prompt", permissions={"shell": "allow", "write_file": "ask"})
    c.close()
    assert resp["status"] == "idle" and resp["data"]["ended"] == "completed" and c.last_message == "all done"
    with open_store(url, prefix=prefix) as s:
        diffs = {row.meta["status"] for row in s.rows("plain", "diff")} | {
            row.meta["status"] for row in s.rows("sealed", "diff")
        }
        assert diffs == {"applied", "rejected"}
        _, rows = s.backend.run(f"SELECT * FROM {prefix}rows WHERE session_id = 'sealed'")
        _, state = s.backend.run(f"SELECT * FROM {prefix}run_state WHERE session_id = 'sealed'")
        dump = json.dumps([[str(v) for v in row] for row in rows + state])
        for secret in ("encrypted-secret-prompt", "written by the model", "echo hi", "all done", "looking"):
            assert secret not in dump
    assert "Traceback" not in (tmp_path / "router.log").read_text()


def test_kill_9_mid_turn_then_resend_writes_every_row_once(store_at, routers, tmp_path):
    url, prefix = store_at
    marker = tmp_path / "hang"
    marker.touch()
    script = [{"text": "only answer"}]
    r = spawn(routers, url, prefix, script=script, fault=f"hang:{marker}")
    ws = tmp_path / "ws"
    ws.mkdir()
    # The client keeps re-sending for as long as a restart may take (START_S).
    c = Client(r.url, "crash", workspace=ws, retries=int(START_S / 0.05), retry_delay_s=0.05)
    result: dict = {}
    t = threading.Thread(target=lambda: result.update(resp=c.run("survive the crash")), daemon=True)
    t.start()
    deadline = time.monotonic() + START_S
    while not Path(str(marker) + ".reached").exists():
        assert time.monotonic() < deadline, "the router never reached its commit"
        time.sleep(0.05)
    r.kill9()
    marker.unlink()
    with open_store(url, prefix=prefix) as s:
        rec = s.load("crash")
        assert rec.holder == "r1" and rec.phase == "Idle" and s.rows("crash") == []  # locked, nothing written
    r.start()  # same holder and port: startup recovery frees its stale lock
    t.join(timeout=START_S)
    assert not t.is_alive()
    c.close()
    assert result["resp"]["status"] == "completed" and result["resp"]["data"]["message"] == "only answer"
    rids = {x["request_id"] for x in c.sent}
    assert len(rids) == 1 and len(c.sent) > 1  # the same request, re-sent
    with open_store(url, prefix=prefix) as s:
        rows = s.rows("crash")
        msgs = [x for x in rows if x.kind == "message"]
        assert [m.meta["role"] for m in msgs] == ["user", "assistant"]
        events = [x.meta["event"] for x in rows if x.kind == "trace"]
        assert events.count("lock.released") == 1 and events.count("run.completed") == 1
        assert s.load("crash").version == 1


def test_two_routers_on_one_postgres_never_both_process_a_run(routers, tmp_path):
    from tests.support.store_support import PG_URL, need_pg

    need_pg()
    import uuid

    prefix = f"t_two_{uuid.uuid4().hex[:8]}_"
    with open_store(PG_URL, prefix=prefix, create=True):
        pass
    log = tmp_path / "commits.log"
    try:
        a = spawn(routers, PG_URL, prefix, script=[{"text": "done"}], holder="A", fault=f"log:{log}")
        b = spawn(routers, PG_URL, prefix, script=[{"text": "done"}], holder="B", fault=f"log:{log}")
        answers: list[str] = []
        import httpx

        def fire(base: str, tag: str, n: int) -> None:
            """Complete n runs through one router, re-sending a refused (busy) request; bounded."""
            done, i = 0, 0
            deadline = time.monotonic() + 90
            with httpx.Client(base_url=base, timeout=30) as h:
                while done < n and time.monotonic() < deadline:
                    body = {"type": "execute", "request_id": f"{tag}-{i}", "data": {"prompt": "go"}}
                    status = h.post("/v1/sessions/shared/execute", json=body).json()["status"]
                    answers.append(status)
                    if status == "completed":
                        done, i = done + 1, i + 1
                    else:
                        time.sleep(0.02)

        threads = [threading.Thread(target=fire, args=(x.url, f"t{k}", 3)) for k, x in enumerate((a, b, a, b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert answers.count("completed") == 12, answers  # all served
        assert "error" in answers, answers  # and contention was refused, not queued
        spans = sorted((float(s), float(e), p) for p, s, e in (ln.split() for ln in log.read_text().splitlines()))
        assert len(spans) == answers.count("completed"), spans
        for (_, e1, _), (s2, _, _) in zip(spans, spans[1:], strict=False):
            assert s2 >= e1, f"two routers processed the session at once: {spans}"
        assert len({p for _, _, p in spans}) == 2
        with open_store(PG_URL, prefix=prefix) as s:
            users = [x for x in s.rows("shared", "message") if x.meta["role"] == "user"]
            assert len(users) == answers.count("completed")
    finally:
        with open_store(PG_URL, prefix=prefix) as s:
            s.drop()


def test_openapi_fuzzed_with_schemathesis_no_5xx_and_answers_as_described(routers, tmp_path):
    """No 5xx, and every answer has the status, content type, headers and schema the OpenAPI document gives it.

    That includes each server-sent event of /stream (its ``itemSchema``, a response's data parsed as JSON).
    ``negative_data_rejection`` is left out: a request the protocol refuses is answered HTTP 200 with an
    ``error`` envelope by design, where schemathesis expects a 4xx.
    """
    url, prefix = f"sqlite:///{tmp_path / 'fuzz.db'}", "loopfsm_"
    log = tmp_path / "router.log"
    r = spawn(routers, url, prefix, script=TOOLS_SCRIPT, log=log)
    st = Path(sys.executable).with_name("schemathesis")
    if not st.exists():
        pytest.skip("schemathesis is not installed (pip install 'loopfsm[test]')")
    proc = subprocess.run(
        [
            str(st),
            "run",
            r.url + "/openapi.json",
            "--checks",
            "all",
            "--exclude-checks",
            "negative_data_rejection",
            "--max-examples",
            "15",
            "--seed",
            "1",
            "--workers",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=500,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "Traceback" not in log.read_text()
