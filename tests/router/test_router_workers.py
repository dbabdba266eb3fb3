"""``router serve --workers N``: several router processes on one socket, with real processes on SQLite and PostgreSQL.

Each worker is found through /proc (the supervisor's children); every process a
test starts is stopped by the test, and every wait is bounded.
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
from loopfsm.router.store import open_store

from tests.support.router_support import START_S, TOOLS_SCRIPT, free_port, stop, wait_until_up
from tests.support.store_support import store_url  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow  # real router processes over sockets

ROOT = Path(loopfsm.__file__).resolve().parents[1]
SUPPORT = ROOT / "tests" / "support"


def Client(*args, **kw):  # noqa: N802 - the client class, imported on first use (see router_support)
    from loopfsm.router.client import Client as _Client

    return _Client(*args, **kw)


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (Linux: /proc/PID/task/PID/children)."""
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(x) for x in text.split()]


def running(pid: int) -> bool:
    """True while ``pid`` is a process that has not ended (a zombie has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for(what: str, check, timeout: float = START_S):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def holders_seen(url: str, tries: int = 200) -> set[str]:
    """The holder ids that answer /healthz on fresh connections, ten at a time, until two differ (or ``tries``)."""
    import httpx

    seen: set[str] = set()

    def ask(replies: list[str]) -> None:
        with httpx.Client(timeout=30) as h:
            replies.append(h.get(url + "/healthz").json()["holder"])

    for _ in range(tries // 10):
        replies: list[str] = []
        threads = [threading.Thread(target=ask, args=(replies,)) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seen.update(replies)
        if len(seen) > 1:
            break
    return seen


class Workers:
    """``serve(..., workers=N)`` in a process of its own (tests/support/router_proc.py), holder ``r1``."""

    def __init__(self, url: str, prefix: str, tmp_path: Path, *, workers: int, script: list, fault: str = "none"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / "router.log"
        args = [str(SUPPORT / "router_proc.py"), url, prefix, str(self.port), "r1", json.dumps(script), fault]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SUPPORT), str(ROOT)]))
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, *args, str(workers)], stdout=out, stderr=out, env=env)
        wait_until_up(self.url, self.proc, lambda: self.log.read_text())
        pid = self.proc.pid
        self.workers = wait_for(f"{workers} workers", lambda: len(children(pid)) == workers and children(pid))

    def stop(self) -> None:
        stop(self.proc)


@pytest.fixture
def started():
    procs: list[Workers] = []
    yield procs
    for p in procs:
        p.stop()


def test_two_workers_serve_two_clients_at_once_and_sigterm_stops_every_child(store_url, started, tmp_path):  # noqa: F811
    url, prefix = store_url
    w = Workers(url, prefix, tmp_path, workers=2, script=TOOLS_SCRIPT)
    started.append(w)
    assert len(set(w.workers)) == 2
    assert holders_seen(w.url) == {"r1-w0", "r1-w1"}  # two processes answer the one port, each its own holder id
    results: dict[str, dict] = {}

    def run(session: str) -> None:
        ws = tmp_path / session
        ws.mkdir()
        c = Client(w.url, session, workspace=ws, approver=lambda kind, info: "approved")
        try:
            results[session] = c.run(f"prompt of {session}", permissions={"shell": "allow", "write_file": "allow"})
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(s,), daemon=True) for s in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=START_S)
    assert {s: r["status"] for s, r in results.items()} == {"one": "completed", "two": "completed"}
    assert all(r["data"]["message"] == "all done" for r in results.values())
    with open_store(url, prefix=prefix) as s:
        for session in ("one", "two"):
            rec = s.load(session)
            assert rec.phase == "Idle" and rec.holder is None
            assert [m.meta["role"] for m in s.rows(session, "message")][0] == "user"
    w.proc.send_signal(signal.SIGTERM)
    assert w.proc.wait(timeout=60) == 0  # the supervisor ends once its children have
    wait_for("every worker to end", lambda: not any(running(pid) for pid in w.workers), timeout=10)
    assert "Traceback" not in w.log.read_text()


def test_a_worker_killed_mid_turn_is_started_again_and_the_other_serves_meanwhile(store_url, started, tmp_path):  # noqa: F811
    url, prefix = store_url
    marker = tmp_path / "hang"
    marker.touch()
    w = Workers(url, prefix, tmp_path, workers=2, script=[{"text": "only answer"}], fault=f"hang:{marker}")
    started.append(w)
    ws = tmp_path / "ws"
    ws.mkdir()
    c = Client(w.url, "crash", workspace=ws, retries=int(START_S / 0.05), retry_delay_s=0.05)
    result: dict = {}
    t = threading.Thread(target=lambda: result.update(resp=c.run("survive the crash")), daemon=True)
    t.start()
    reached = Path(f"{marker}.reached")
    victim = int(wait_for("a worker to reach its commit", lambda: reached.exists() and reached.read_text()))
    assert victim in w.workers
    survivor = next(pid for pid in w.workers if pid != victim)
    os.kill(victim, signal.SIGKILL)
    with open_store(url, prefix=prefix) as s:
        held = s.load("crash")
    held_by = held.holder
    assert held_by in ("r1-w0", "r1-w1")  # the killed worker's own holder id
    marker.unlink()
    # the other worker goes on serving while the killed one is started again
    other = Client(w.url, "meanwhile", workspace=ws)
    assert other.run("still here")["status"] == "completed"
    other.close()
    replaced = wait_for(
        "the killed worker to be started again",
        lambda: len(kids := children(w.proc.pid)) == 2 and victim not in kids and kids,
    )
    assert survivor in replaced and running(survivor)
    t.join(timeout=START_S)
    assert not t.is_alive()
    c.close()
    assert result["resp"]["status"] == "completed" and result["resp"]["data"]["message"] == "only answer"
    with open_store(url, prefix=prefix) as s:
        rows = s.rows("crash")
        assert [m.meta["role"] for m in rows if m.kind == "message"] == ["user", "assistant"]
        assert [x.meta["event"] for x in rows if x.kind == "trace"].count("run.completed") == 1
        done = s.load("crash")
        assert done.holder is None
        # served again before the killed worker's lease ran out (30 s): its successor freed the lock on starting
        assert held.lease_expires_at is not None and done.updated_at < held.lease_expires_at
    log = w.log.read_text()
    assert f"worker {held_by[-1]} (pid {victim}) was killed by SIGKILL; starting it again" in log


def test_workers_end_when_the_supervisor_is_killed(tmp_path, started):
    """SIGKILL leaves the supervisor no chance to pass a signal on: each worker notices its parent is gone."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    w = Workers(url, "loopfsm_", tmp_path, workers=2, script=TOOLS_SCRIPT)
    started.append(w)
    w.proc.kill()
    w.proc.wait(timeout=10)
    wait_for("the orphaned workers to end", lambda: not any(running(pid) for pid in w.workers), timeout=30)


def test_serve_forks_with_no_store_connection_open_and_workers_accepting_one_connection_each(tmp_path, monkeypatch):
    """The parent frees its holder's locks, then closes every connection before the workers are forked."""
    from loopfsm.router import Router
    from loopfsm.router import workers as workers_module
    from loopfsm.router.http import serve

    monkeypatch.delenv("UV_TCP_SINGLE_ACCEPT", raising=False)
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    router = Router(url, holder="r1", create=True)
    at_fork: list[tuple[int, int]] = []
    monkeypatch.setattr(workers_module, "supervise", lambda n, child: at_fork.append((n, router.connections())))
    serve(router, "127.0.0.1", free_port(), workers=3)
    assert at_fork == [(3, 0)]
    # the workers inherit it: under uvloop each accepts one waiting connection per wake-up, so they spread
    assert os.environ["UV_TCP_SINGLE_ACCEPT"] == "1"


def test_a_worker_that_fails_says_why_in_one_line_and_is_started_again(tmp_path):
    """No traceback: the supervisor's log says which worker stopped and why, and starts it again until told to stop."""
    code = (
        "import os, signal, threading\n"
        "from loopfsm.router.workers import supervise\n"
        "def child(index):\n"
        "    raise RuntimeError(f'cannot reach the store (worker {index})')\n"
        "threading.Timer(2.5, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()\n"
        "supervise(1, child)\n"
        "print('supervisor returned')\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "supervisor returned\n", done.stderr
    lines = done.stderr.splitlines()
    stopped = "loopfsm router: worker 0 stopped: RuntimeError: cannot reach the store (worker 0)"
    assert lines.count(stopped) >= 2  # started again after RESTART_DELAY_S, and failed again
    assert "loopfsm router: worker 0 (pid " in done.stderr and "exited with status 1; starting it again" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_worker_that_ignores_sigterm_is_killed_once_the_stop_time_is_up():
    """A turn that never ends cannot keep the router from stopping: past STOP_S the worker is killed."""
    code = (
        "import os, signal, threading, time\n"
        "from loopfsm.router import workers\n"
        "workers.STOP_S = 1.0\n"
        "def child(index):\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "    print(os.getpid(), flush=True)\n"
        "    time.sleep(600)\n"
        "threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()\n"
        "workers.supervise(1, child)\n"
        "print('supervisor returned', flush=True)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    child, returned = done.stdout.splitlines()
    assert done.returncode == 0 and returned == "supervisor returned", done.stderr
    assert not running(int(child))
    assert "starting it again" not in done.stderr  # a worker ended while stopping is not started again
    assert f"loopfsm router: worker 0 (pid {child}) still running 1 s after the stop: killed" in done.stderr


def test_sigterm_while_the_workers_start_stops_them_at_once():
    """A stop right after the start (a service manager's) is not a 30-second wait and a kill: the worker forked as
    the signal came is told to stop too, and none is started after it."""
    code = (
        "import os, signal, time\n"
        "from loopfsm.router import workers\n"
        "workers.STOP_S = 20.0\n"
        "start = workers._start\n"
        "def start_and_stop(index, run_child):\n"
        "    pid = start(index, run_child)\n"
        "    if index == 0:\n"
        "        os.kill(os.getpid(), signal.SIGTERM)  # handled before the supervisor has recorded the child\n"
        "    return pid\n"
        "workers._start = start_and_stop\n"
        "def child(index):\n"
        "    print(index, flush=True)\n"
        "    time.sleep(600)\n"
        "t = time.monotonic()\n"
        "workers.supervise(3, child)\n"
        "print(f'supervisor returned after {time.monotonic() - t:.0f} s', flush=True)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    took = lines[-1].removeprefix("supervisor returned after ").removesuffix(" s")
    assert int(took) < 10, done.stdout  # not the 20 s of STOP_S: every worker was told at once
    assert "1" not in lines and "2" not in lines  # no worker started once the supervisor was told to stop
