"""Holder-id claims: one serving process per lock-holder id, so two routers started under one id never free
each other's locks in flight (loopfsm.router.store.claims), on both stores and with real processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from loopfsm.router.store import open_store
from loopfsm.router.store.claims import ClaimLost, HolderClaimed, claim, claims, read_claim, release, renew

from tests.router.test_router_workers import Client, Workers, started, wait_for  # noqa: F401 - started: fixture
from tests.support.router_support import START_S, free_port, stop, wait_until_up
from tests.support.store_support import store_url  # noqa: F401 - fixture

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "tests" / "support"
NOW = 10**12


def _never_runs(pid: int) -> bool:
    return False


def _always_runs(pid: int) -> bool:
    return True


def test_a_claimed_id_is_refused_to_another_process_naming_the_claimer(store_url):  # noqa: F811
    url, prefix = store_url
    with open_store(url, prefix=prefix, clock=lambda: NOW) as s:
        mine = claim(s, "r1", host="hostA", pid=100)
        assert (mine.holder, mine.host, mine.pid, mine.since, mine.expires_at) == ("r1", "hostA", 100, NOW, NOW + 30000)
        with pytest.raises(HolderClaimed) as refused:
            claim(s, "r1", host="hostB", pid=200)
        said = str(refused.value)
        assert "holder id 'r1' is claimed by a router that is serving (host hostA, pid 100, since 2001-09-09" in said
        assert "give this router its own --holder" in said
        # on the claimer's own host, a claimer that still runs keeps its id too
        with pytest.raises(HolderClaimed):
            claim(s, "r1", host="hostA", pid=101, alive=_always_runs)
        assert read_claim(s, "r1") == mine
        other = claim(s, "r2", host="hostB", pid=200)  # another id is another claim
        assert [c.holder for c in claims(s)] == ["r1", "r2"] and other.token != mine.token


def test_a_claim_is_taken_over_when_the_store_shows_its_claimer_dead(store_url):  # noqa: F811
    url, prefix = store_url
    clock = [NOW]
    with open_store(url, prefix=prefix, clock=lambda: clock[0]) as s:
        first = claim(s, "r1", host="hostA", pid=100)
        # gone from this host: same host name, its process no longer runs
        second = claim(s, "r1", host="hostA", pid=101, alive=_never_runs)
        assert (second.pid, second.since) == (101, NOW) and second.token != first.token
        # the one taken over can neither renew nor release it
        with pytest.raises(ClaimLost, match="holder id 'r1' was claimed by another process while this one stalled"):
            renew(s, first)
        assert release(s, first) is False and read_claim(s, "r1") == second
        # stale by the lease rule: not renewed for a lease, from any host
        clock[0] = NOW + 29_999
        with pytest.raises(HolderClaimed):
            claim(s, "r1", host="hostB", pid=200)
        second = renew(s, second)
        assert second.expires_at == NOW + 29_999 + 30_000
        clock[0] = second.expires_at
        third = claim(s, "r1", host="hostB", pid=200)
        assert (third.host, third.pid) == ("hostB", 200)
        # the claimer's token takes its own claim over (a supervisor's worker, started again)
        again = claim(s, "r1", token=third.token, host="hostB", pid=201)
        assert (again.pid, again.since, again.token) == (201, third.since, third.token)
        assert release(s, again) is True and read_claim(s, "r1") is None


ONE_ANSWER = [{"text": "only answer"}]


def _serve(url: str, prefix: str, holder: str, tmp_path: Path, *, workers: int, fault: str = "none"):
    """``serve`` in a process of its own under ``holder`` (tests/support/router_proc.py), its model answering
    once with text; its process, port and log."""
    port = free_port()
    log = tmp_path / f"router-{port}.log"
    args = [str(SUPPORT / "router_proc.py"), url, prefix, str(port), holder, json.dumps(ONE_ANSWER), fault]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SUPPORT), str(ROOT)]))
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, *args, str(workers)], stdout=out, stderr=out, env=env)
    return proc, port, log


@pytest.mark.slow  # router processes, started and stopped; the claim's rules are held quickly above
@pytest.mark.parametrize("workers", [1, 2])
def test_a_second_router_under_the_same_holder_is_refused_and_frees_no_lock_in_flight(
    store_url,  # noqa: F811
    started,  # noqa: F811
    tmp_path,
    workers,
):
    """The issue's case: ``router serve --holder samehost`` started twice (two supervisors, or two processes).
    The second stops at start naming the first; the first's turn in flight completes, with one model call."""
    url, prefix = store_url
    marker = tmp_path / "hang"
    marker.touch()
    if workers == 2:
        first = Workers(url, prefix, tmp_path, workers=2, script=ONE_ANSWER, fault=f"pause:{marker}")
        started.append(first)
        first_url, first_proc = first.url, first.proc
    else:
        first_proc, port, log = _serve(url, prefix, "r1", tmp_path, workers=1, fault=f"pause:{marker}")
        first_url = f"http://127.0.0.1:{port}"
        wait_until_up(first_url, first_proc, log.read_text)
    try:
        ws = tmp_path / "ws"
        ws.mkdir()
        c = Client(first_url, "inflight", workspace=ws)
        result: dict = {}
        t = threading.Thread(target=lambda: result.update(resp=c.run("one turn")), daemon=True)
        t.start()
        wait_for("the turn to reach its commit", lambda: Path(f"{marker}.reached").exists())
        with open_store(url, prefix=prefix) as s:
            held = s.load("inflight")
        assert held.holder in (("r1-w0", "r1-w1") if workers == 2 else ("r1",))

        second, _, second_log = _serve(url, prefix, "r1", tmp_path, workers=workers)
        assert second.wait(timeout=START_S) != 0
        said = second_log.read_text()
        taken = held.holder if workers == 1 else "r1-w0"
        host = socket.gethostname()
        assert f"HolderClaimed: holder id '{taken}' is claimed by a router that is serving (host {host}, pid " in said
        with open_store(url, prefix=prefix) as s:
            still = s.load("inflight")
            assert (still.holder, still.fence) == (held.holder, held.fence)  # not freed under the turn
            assert {c.holder for c in claims(s)} == ({"r1-w0", "r1-w1"} if workers == 2 else {"r1"})
        marker.unlink()
        t.join(timeout=START_S)
        assert not t.is_alive() and result["resp"]["status"] == "completed"
        c.close()
        with open_store(url, prefix=prefix) as s:
            rows = s.rows("inflight")
            assert [m.meta["role"] for m in rows if m.kind == "message"] == ["user", "assistant"]  # one model call
            assert [x.meta["event"] for x in rows if x.kind == "trace"].count("run.completed") == 1
    finally:
        stop(first_proc)
    with open_store(url, prefix=prefix) as s:  # a router that stops gives its claims up
        assert claims(s) == []


@pytest.mark.slow  # router processes, one killed
def test_a_router_killed_is_followed_at_once_by_its_successor_on_the_same_host(store_url, tmp_path):  # noqa: F811
    """kill -9 leaves the claim in the store; the next router under the id sees its claimer gone from this host
    and starts without waiting for the lease, freeing the lock the killed one held."""
    url, prefix = store_url
    marker = tmp_path / "hang"
    marker.touch()
    proc, port, log = _serve(url, prefix, "r1", tmp_path, workers=1, fault=f"pause:{marker}")
    base = f"http://127.0.0.1:{port}"
    wait_until_up(base, proc, log.read_text)
    ws = tmp_path / "ws"
    ws.mkdir()
    c = Client(base, "killed", workspace=ws, retries=0)
    t = threading.Thread(target=lambda: _quietly(c.run, "cut short"), daemon=True)
    t.start()
    wait_for("the turn to reach its commit", lambda: Path(f"{marker}.reached").exists())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    marker.unlink()
    with open_store(url, prefix=prefix) as s:
        dead = read_claim(s, "r1")
        assert dead is not None and dead.pid == proc.pid and s.load("killed").holder == "r1"
    again, port2, log2 = _serve(url, prefix, "r1", tmp_path, workers=1)
    try:
        wait_until_up(f"http://127.0.0.1:{port2}", again, log2.read_text)
        with open_store(url, prefix=prefix) as s:
            now = read_claim(s, "r1")
            assert now is not None and now.pid == again.pid
            assert s.load("killed").holder is None  # its lock freed at start, long before the 30 s lease
    finally:
        stop(again)
        c.close()


def _quietly(fn, *args) -> None:
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - the router under it was killed: the test looks at the store
        pass


def test_router_serve_refused_says_what_docs_router_md_shows_and_serves_nothing(tmp_path, monkeypatch, capsys):
    """The command's one line, as docs/router.md shows it (host, pid and time aside), and no "serving" line."""
    import re

    from loopfsm.cli.main import main

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    with open_store(url, create=True) as s:
        claim(s, "router-web1-8787", host="web1", pid=4242)  # another machine's router, serving
    port = free_port()
    assert main(["router", "serve", "--store", url, "--port", str(port), "--holder", "router-web1-8787"]) == 1
    said = capsys.readouterr().err
    assert "serving on" not in said
    page = (ROOT / "docs/router.md").read_text()
    shown = next(line for line in page.splitlines() if line.startswith("loopfsm router: holder id "))
    pattern = re.escape(shown)
    for varying in ("4242", "2026-12-04 09:12:03"):
        pattern = pattern.replace(re.escape(varying), ".+")
    assert re.fullmatch(pattern, said.strip()), (shown, said)
    with socket.socket() as again:  # the port was let go
        again.bind(("127.0.0.1", port))


def test_the_keeper_renews_the_claim_says_when_it_is_lost_and_gives_it_up_at_stop(store_url):  # noqa: F811
    from loopfsm.router.store.claims import ClaimKeeper

    url, prefix = store_url
    clock = [NOW]

    def opened():
        return open_store(url, prefix=prefix, clock=lambda: clock[0])

    with opened() as s:
        mine = claim(s, "k1", host="hostA", pid=1)
        kept = ClaimKeeper(opened, mine, every_s=0.02).start()
        clock[0] = NOW + 5_000
        wait_for("a renewal", lambda: kept.renewals > 0, timeout=30)
        assert read_claim(s, "k1").expires_at == NOW + 5_000 + 30_000
        kept.stop()
        assert read_claim(s, "k1") is None  # given up at stop
        mine = claim(s, "k2", host="hostA", pid=1)
        lost: list[ClaimLost] = []
        keeper = ClaimKeeper(opened, mine, every_s=0.02, on_lost=lost.append)
        clock[0] = mine.expires_at  # it stalled a lease: another host takes the id over
        claim(s, "k2", host="hostB", pid=2)
        keeper.start()
        wait_for("the loss to be noticed", lambda: lost, timeout=30)
        keeper.stop()
        assert "holder id 'k2' was claimed by another process" in str(lost[0])
        assert read_claim(s, "k2").host == "hostB"  # stopping did not give up another's claim
