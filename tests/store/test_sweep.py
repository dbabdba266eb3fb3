"""The sweep on SQLite and PostgreSQL: expired leases freed, abandoned pauses ended with their clear bundle emptied,
by the machines' rules, idempotently, and safely when several sweepers and routers share one database."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest

from loopfsm import FencedOut
from loopfsm.router.crypto import Keyring
from loopfsm.machines.router_run import ROUTER_RUN
from loopfsm.machines.run_lock import RunLock
from loopfsm.router.store import Row, RunRecord, ids, open_store
from loopfsm.router.store.serve import Outcome, serve
from loopfsm.router.store.sweep import PeriodicSweep, sweep

from tests.support.router_helpers import OUTCOME_OF, pause_for
from tests.support.router_support import TOOLS_SCRIPT, client, free_port, make, wait_until_up
from tests.support.store_support import store_url  # noqa: F401  (fixture)

LIVE = ["AwaitingDecrypt", "AwaitingApproval", "AwaitingTool", "AwaitingEncrypt"]
TTL = ROUTER_RUN.default_policy.pause_ttl_ms
LEASE = ROUTER_RUN.default_policy.lease_ms


@pytest.fixture
def store(store_url):  # noqa: F811
    url, prefix = store_url
    with open_store(url, prefix=prefix) as s:
        yield s


def abandon(store, sid, phase="AwaitingTool", *, now=1000, secret="the-clear-secret"):
    """An encrypted run paused at ``phase`` at ``now`` with a clear run-input bundle, then left alone."""
    run = ids.run_id(sid, f"{sid}-start")
    bundle = Row("input", "bundle", {"run_id": run}, body={"prompt": secret}, row_id=f"b-{run}")
    out = Outcome(OUTCOME_OF[phase], encrypted=True, pause=pause_for(phase), rows=[bundle])
    serve(store, sid, "execute", f"{sid}-start", holder="A", process=out, now_ms=now)
    assert store.load(sid).phase == phase
    return run


def events(store, sid):
    """The step's trace events, without the phase's kept feeds (tests/store/test_phase_feeds.py reads those)."""
    return [r.meta["event"] for r in store.rows(sid, "trace") if r.meta["event"] != "phase.fed"]


@pytest.mark.parametrize("phase", LIVE)
def test_a_pause_past_its_ttl_is_ended_and_its_bundle_emptied(store, phase):
    # An earlier completed run left the session's history: the sweep of a later run must keep it.
    keep = Row("input", "history", {"mode": "encrypted"}, body={"refs": ["message:kept"]}, row_id="history")
    serve(store, "s", "execute", "first", holder="A", process=Outcome(rows=[keep]), now_ms=500)
    run = abandon(store, "s", phase)
    before = store.load("s")
    assert sweep(store, now_ms=1000 + TTL - 1).runs_expired == []  # one ms short of the TTL: kept
    assert store.load("s") == before and store.row("s", "input", f"b-{run}").body == {"prompt": "the-clear-secret"}
    swept = sweep(store, now_ms=1000 + TTL)  # the boundary instant counts, as for admission
    assert (swept.runs_expired, swept.leases_freed, swept.bundles_emptied) == (["s"], [], 1)
    rec = store.load("s")
    assert rec.phase == "Idle" and rec.version == before.version + 1 and rec.holder is None
    assert rec.phase_machine().data.ended == "expired" and rec.phase_machine().data.last_run_id == run
    gone = store.row("s", "input", f"b-{run}")
    assert gone.body is None and gone.meta == {"run_id": run, "ended": True}
    assert store.row("s", "input", "history").body == {"refs": ["message:kept"]}
    assert events(store, "s")[-2:] == ["run.expired", "run.broken"]
    # idempotent: nothing left to do, nothing written
    rows = store.rows("s")
    again = sweep(store, now_ms=1000 + 3 * TTL)
    assert again.runs_expired == again.leases_freed == [] and again.bundles_emptied == 0
    assert store.load("s") == rec and store.rows("s") == rows


def test_an_expired_lease_is_freed_and_its_holder_fenced_out(store):
    adm = store.admit("d", "execute", "r1", holder="dead-router", now_ms=1000)
    lease = adm.lease
    assert sweep(store, now_ms=1000 + LEASE - 1).leases_freed == []
    assert store.load("d").holder == "dead-router"
    swept = sweep(store, now_ms=1000 + LEASE)
    assert (swept.leases_freed, swept.runs_expired) == (["d"], [])
    rec = store.load("d")
    assert rec.holder is None and rec.lease_expires_at is None and rec.phase == "Idle"
    assert rec.fence == lease.fence  # freeing grants nothing; the next grant bumps the fence
    assert events(store, "d") == ["lock.expired"]
    with pytest.raises(FencedOut):
        store.renew(lease, now_ms=1000 + LEASE + 1)
    with pytest.raises(FencedOut):
        store.checkpoint(lease, rec.phase_machine(), request_id="r1", response={}, now_ms=1000 + LEASE + 1)
    fresh = store.admit("d", "execute", "r2", holder="live-router", now_ms=1000 + LEASE + 2)
    assert fresh.outcome == "admitted" and fresh.lease.fence == lease.fence + 1 and not fresh.took_over
    assert sweep(store, now_ms=1000 + LEASE + 3).leases_freed == []  # a live lease is left alone


def test_a_running_turn_is_never_swept_and_its_lease_expiry_ends_both_at_once(store):
    run = abandon(store, "t")
    adm = store.admit("t", "tool_results", "r2", holder="slow-router", now_ms=1000 + TTL - 10)
    assert adm.outcome == "admitted"
    late = 1000 + TTL + 5  # the pause is past its TTL, but the turn's lease is live
    assert sweep(store, now_ms=late).runs_expired == [] and store.load("t").holder == "slow-router"
    swept = sweep(store, now_ms=adm.lease.lease_expires_at)
    assert (swept.leases_freed, swept.runs_expired) == (["t"], ["t"])
    assert events(store, "t")[-3:] == ["lock.expired", "run.expired", "run.broken"]
    assert store.row("t", "input", f"b-{run}").body is None
    with pytest.raises(FencedOut):
        store.checkpoint(adm.lease, adm.record.phase_machine(), request_id="r2", response={})


def test_lock_state_is_run_locks_rule():
    lock = RunLock()
    lock.acquire(1000, "h", 500)
    for now in (1000, 1499, 1500, 1501, 99999):
        rec = RunRecord("s", "Idle", {}, 0, 1, "h", 1000, 1500, None, None, None, 1000)
        assert rec.lock_state(now) == ("expired" if lock.can("acquire", now, "x", 1) else "held")
    assert RunRecord("s", "Idle", {}, 0, 1, None, None, None, None, None, None, 1000).lock_state(5) == "free"


def _expired_count(store, sid):
    return events(store, sid).count("run.expired")


@pytest.mark.slow
def test_concurrent_sweepers_on_one_database_each_end_a_run_once(store_url):  # noqa: F811
    url, prefix = store_url
    sids = [f"p{i}" for i in range(12)]
    dead = [f"l{i}" for i in range(4)]
    with open_store(url, prefix=prefix) as s:
        for sid in sids:
            abandon(s, sid)
        for sid in dead:
            s.admit(sid, "execute", "r", holder="dead", now_ms=1000)
    results: list = []
    barrier = threading.Barrier(4)

    def sweeper() -> None:
        with open_store(url, prefix=prefix) as s:
            barrier.wait(timeout=30)
            results.append(sweep(s, now_ms=1000 + TTL))

    threads = [threading.Thread(target=sweeper) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(results) == 4
    expired = [sid for r in results for sid in r.runs_expired]
    freed = [sid for r in results for sid in r.leases_freed]
    assert sorted(expired) == sorted(sids) and sorted(freed) == sorted(dead)  # each once, by exactly one sweeper
    assert sum(r.bundles_emptied for r in results) == len(sids)
    with open_store(url, prefix=prefix) as s:
        assert all(_expired_count(s, sid) == 1 and s.load(sid).version == 2 for sid in sids)
        assert all(s.load(sid).holder is None and events(s, sid) == ["lock.expired"] for sid in dead)
        assert sweep(s, now_ms=1000 + 2 * TTL).runs_expired == []


@pytest.mark.slow
def test_sweep_processes_beside_a_router_serving_the_same_sessions(store_url):  # noqa: F811
    """Three `loopfsm store sweep` processes race each other and a router answering some of the abandoned runs."""
    url, prefix = store_url
    sids = [f"q{i}" for i in range(10)]
    with open_store(url, prefix=prefix) as s:
        for sid in sids:
            abandon(s, sid)
    answered: dict[str, str] = {}

    def router() -> None:  # answers every other run's pause as the sweepers run
        with open_store(url, prefix=prefix) as s:
            for sid in sids[::2]:
                out = Outcome("completed", encrypted=True)
                r = serve(s, sid, "tool_results", f"{sid}-answer", holder="router", process=out)
                answered[sid] = r.admission.answer

    cmd = [sys.executable, "-m", "loopfsm", "store", "sweep", "--store", url, "--prefix", prefix]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    t = threading.Thread(target=router)
    t.start()
    outs = [p.communicate(timeout=300) for p in procs]
    t.join(timeout=120)
    assert all(p.returncode == 0 for p in procs), outs
    assert all("Traceback" not in err for _, err in outs)
    counted = sum(int(re.search(r"(\d+) paused run\(s\) expired", out).group(1)) for out, _ in outs)
    with open_store(url, prefix=prefix) as s:
        per = {sid: _expired_count(s, sid) for sid in sids}
        assert all(n in (0, 1) for n in per.values()) and counted == sum(per.values())
        for sid in sids:
            rec = s.load(sid)
            assert rec.phase == "Idle" and rec.holder is None
            ended = rec.phase_machine().data.ended
            # each run ended exactly one way: by a sweeper, or by the router's request (which then found it
            # expired too, since the pause is decades old by the wall clock)
            assert (per[sid] == 1) == (answered.get(sid) != "expire"), (sid, per[sid], answered.get(sid))
            assert ended == "expired"
            if per[sid]:  # the sweeper emptied the bundle (store-level serve leaves rows to its caller)
                assert all(r.body is None for r in s.rows(sid, "input"))


def test_store_sweep_needs_one_url(tmp_path, capsys):
    from loopfsm.cli.main import main

    assert main(["store", "sweep"]) == 2
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert main(["store", "sweep", url, "--store", url]) == 2
    assert main(["store", "init", url]) == 0
    capsys.readouterr()
    assert main(["store", "sweep", "--store", url]) == 0
    assert capsys.readouterr().out.strip() == (
        "swept: 0 paused run(s) expired, 0 expired lease(s) freed, 0 clear bundle row(s) emptied"
    )


def _scan(store, needles):
    hits = []
    for table in ("run_state", "rows", "meta"):
        _, rows = store.backend.run(f"SELECT * FROM {store.prefix}{table}")
        for row in rows:
            text = json.dumps([str(v) for v in row])
            hits += [(table, n) for n in needles if n in text]
    return hits


class _Walk(Exception):
    """The user walks away from the run."""


def test_an_abandoned_encrypted_run_leaves_no_plaintext_after_a_sweep(store_url, tmp_path):  # noqa: F811
    url, prefix = store_url
    clock = {"now": 10_000}
    router, tc = make(url, prefix, TOOLS_SCRIPT, clock=lambda: clock["now"])
    kr = Keyring.generate()

    def walk_away(state, resp):
        raise _Walk

    c = client(tc, "enc", tmp_path, keyring=kr, interrupt=walk_away)
    with pytest.raises(_Walk):
        c.run("secret-abandoned-prompt", permissions={"shell": "ask"})
    needles = ["secret-abandoned-prompt", "echo hi", "looking"]
    s = router.store()
    # The paused run keeps its bundle sealed under the router key (nothing in clear); the sweep empties it.
    assert _scan(s, needles) == []
    [bundle] = s.rows("enc", "input")
    assert bundle.sealed is not None and bundle.body is None
    assert sweep(s, now_ms=clock["now"] + TTL - 1).runs_expired == []
    last = c.sent[-1]  # the execute that paused: re-sent, it is replayed from the sealed bundle
    replayed = tc.post("/v1/sessions/enc/execute", json=last).json()
    assert replayed["status"] == "awaiting_tool" and replayed["data"]["tool_requests"][0]["name"] == "shell"
    swept = sweep(s, now_ms=clock["now"] + TTL)
    assert swept.runs_expired == ["enc"] and swept.bundles_emptied == 1
    assert _scan(s, needles) == []
    # re-sent after the sweep, its response is gone with the bundle: docs/machines/router_run.md's error `expired`
    gone = tc.post("/v1/sessions/enc/execute", json=last).json()
    assert gone["status"] == "error" and gone["data"]["code"] == "expired"
    assert gone["allowed_continuations"] == ["execute", "inject"]
    emptied = s.row("enc", "input", bundle.row_id)
    assert emptied is not None and emptied.sealed is None and emptied.body is None
    # the client that comes back finds the run ended, and the session works on
    clock["now"] += TTL + 1
    late = {"type": "tool_results", "request_id": "late", "data": {"results": []}}
    back = tc.post("/v1/sessions/enc/continue", json=late).json()
    assert back["status"] == "error" and back["data"]["code"] == "not_allowed"
    assert back["allowed_continuations"] == ["execute", "inject"]
    resp = client(tc, "enc", tmp_path, keyring=kr).run("again", permissions={"shell": "allow", "write_file": "allow"})
    assert resp["data"]["ended"] == "completed"
    router.close()


def _serve(url, prefix, *extra):
    port = free_port()
    cmd = [sys.executable, "-m", "loopfsm", "router", "serve", "--store", url, "--prefix", prefix]
    proc = subprocess.Popen(
        cmd + ["--port", str(port), *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    wait_until_up(f"http://127.0.0.1:{port}", proc, proc.stderr.read)
    return proc


def _stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    return proc.stderr.read()


@pytest.mark.slow
def test_router_serve_sweeps_periodically(store_url):  # noqa: F811
    url, prefix = store_url
    with open_store(url, prefix=prefix) as s:
        abandon(s, "old")  # paused at t=1000 ms: decades past its TTL by the wall clock
    proc = _serve(url, prefix, "--sweep-every", "0.2")
    try:
        deadline = time.monotonic() + 120
        with open_store(url, prefix=prefix) as s:
            while time.monotonic() < deadline and s.load("old").phase != "Idle":
                time.sleep(0.1)
            phase = s.load("old").phase
    finally:
        err = _stop(proc)
    assert "Traceback" not in err
    assert phase == "Idle"


@pytest.mark.slow
@pytest.mark.parametrize("every", [None, 0.05])
def test_the_apps_sweep_runs_only_when_asked(store_url, every):  # noqa: F811
    from starlette.testclient import TestClient

    from loopfsm.router.http import create_app

    url, prefix = store_url
    with open_store(url, prefix=prefix) as s:
        abandon(s, "old")
    router, _ = make(url, prefix, TOOLS_SCRIPT)
    with TestClient(create_app(router, sweep_every_s=every)) as tc:
        assert tc.get("/healthz").status_code == 200
        deadline = time.monotonic() + (120 if every else 0.5)
        while time.monotonic() < deadline and router.store().load("old").phase != "Idle":
            time.sleep(0.05)
        running = [t.name for t in threading.enumerate() if t.name == "loopfsm-sweep"]
        assert router.store().load("old").phase == ("Idle" if every else "AwaitingTool")
        assert running == (["loopfsm-sweep"] if every else [])
    assert not [t for t in threading.enumerate() if t.name == "loopfsm-sweep"]  # stopped with the app


@pytest.mark.slow
def test_periodic_sweep_survives_a_store_that_goes_away(store_url):  # noqa: F811
    url, prefix = store_url
    seen: list = []
    sweeper = PeriodicSweep(url, prefix=prefix + "gone_", interval_s=0.05, on_sweep=seen.append).start()
    try:
        time.sleep(0.3)  # no tables under that prefix: every pass fails, the thread goes on
        assert sweeper._thread.is_alive() and seen == []
        with open_store(url, prefix=prefix + "gone_", create=True) as s:
            abandon(s, "x")
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not any(sw.runs_expired for sw in seen):
                time.sleep(0.05)
            assert any(sw.runs_expired == ["x"] for sw in seen)
            s.drop()
    finally:
        sweeper.stop()
    assert not sweeper._thread.is_alive()
    with pytest.raises(ValueError):
        PeriodicSweep(url, interval_s=0)


def test_router_serve_refuses_a_bad_sweep_interval(tmp_path, capsys):
    from loopfsm.cli.main import main

    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert main(["router", "serve", "--store", url, "--sweep-every", "-1"]) == 1
    assert "--sweep-every" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "r.db")  # refused before anything was opened


def test_every_store_command_takes_the_url_as_store_too(tmp_path, capsys):
    """``store init`` / ``show`` / ``sweep`` take ``--store URL`` as ``router serve`` does, or the URL first; once."""
    from loopfsm.cli.main import main

    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert main(["store", "init", "--store", url]) == 0
    with open_store(url) as s:
        serve(s, "s1", "execute", "r1", holder="router", process=Outcome("completed"))
    capsys.readouterr()
    assert main(["store", "show", "--store", url, "s1"]) == 0
    by_option = capsys.readouterr().out
    assert main(["store", "show", url, "s1"]) == 0
    assert by_option == capsys.readouterr().out and by_option.startswith("session s1: phase Idle, version 1,")
    assert main(["store", "show", "s1", "--store", url]) == 0 and capsys.readouterr().out == by_option
    for action in (["init"], ["show", "s1"]):
        assert main(["store", *action]) == 2  # no URL
        assert "needs the store's URL, once: --store URL" in capsys.readouterr().err
        assert main(["store", action[0], url, *action[1:], "--store", url]) == 2  # two
        assert "takes the store's URL once: got --store" in capsys.readouterr().err


def test_a_url_given_twice_is_named_both_ways(tmp_path, capsys):
    """``store sweep --store URL extra`` read 'extra' as a second URL: the message says so, not that none was given."""
    from loopfsm.cli.main import main

    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert main(["store", "sweep", "--store", url, "extra"]) == 2
    err = capsys.readouterr().err
    assert f"store sweep takes the store's URL once: got --store {url} and the argument 'extra'" in err, err


def test_store_sweep_takes_a_request_id_retention_in_days(tmp_path, capsys):
    import pytest as _pytest

    from loopfsm.cli.main import main

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["store", "init", url]) == 0
    assert main(["store", "sweep", url, "--request-retention-days", "30"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("swept: 0 paused run(s) expired")
    for wrong in ("0", "x", "4000"):
        with _pytest.raises(SystemExit) as stopped:
            main(["store", "sweep", url, "--request-retention-days", wrong])
        assert stopped.value.code == 2
        assert "must be a whole number of days from 1 to 3650" in capsys.readouterr().err
