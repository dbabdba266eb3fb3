"""The store under real processes, on SQLite and PostgreSQL: races, kill -9 at every point, a frozen holder."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

import pytest

from loopfsm import FencedOut
from loopfsm.router.store import Row, open_store
from loopfsm.router.store.serve import Outcome, serve

from tests.support.router_helpers import pause_for
from tests.support.store_support import store_url  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow  # real processes racing, killed and frozen

CTX = mp.get_context("fork")
PROCS, ROUNDS = 8, 50


def _racer(url, prefix, idx, barrier, q):
    with open_store(url, prefix=prefix) as s:
        for r in range(ROUNDS):
            barrier.wait()
            adm = s.admit("race", "execute", f"p{idx}-r{r}", holder=f"p{idx}")
            barrier.wait()  # every process has asked before the winner lets go
            if adm.outcome == "admitted":
                phase = adm.record.phase_machine()
                phase.execute(f"run{r}", "completed", False, s.now(), {})
                s.checkpoint(
                    adm.lease,
                    phase,
                    request_id=f"p{idx}-r{r}",
                    response={"r": r},
                    rows=[Row("message", "assistant", {"by": idx})],
                )
                q.put(("win", r, idx, adm.lease.fence))
            else:
                q.put(("lose", r, idx, adm.answer))
            barrier.wait()


def _run(target, n, *args):
    q = CTX.Queue()
    procs = [CTX.Process(target=target, args=(*args, i, q)) for i in range(n)]
    for p in procs:
        p.start()
    return q, procs


def _join(procs, timeout=120):
    for p in procs:
        p.join(timeout)
        assert p.exitcode == 0, f"worker exited with {p.exitcode}"


def test_eight_processes_race_one_run_one_winner_per_round(store_url):  # noqa: F811
    url, prefix = store_url
    with open_store(url, prefix=prefix) as s:
        s.ensure("race")
    barrier = CTX.Barrier(PROCS)
    q = CTX.Queue()
    procs = [CTX.Process(target=_racer, args=(url, prefix, i, barrier, q)) for i in range(PROCS)]
    for p in procs:
        p.start()
    results = [q.get(timeout=120) for _ in range(PROCS * ROUNDS)]
    _join(procs)
    wins = sorted((r, fence) for kind, r, idx, fence in results if kind == "win")
    assert [r for r, _ in wins] == list(range(ROUNDS))  # exactly one winner per round
    fences = [f for _, f in wins]
    assert fences == sorted(set(fences)) and fences == list(range(1, ROUNDS + 1))  # strictly increasing
    assert {a for kind, _, _, a in results if kind == "lose"} == {"busy"}
    with open_store(url, prefix=prefix) as s:
        rec = s.load("race")
        assert (rec.version, rec.fence, rec.holder) == (ROUNDS, ROUNDS, None)


def _grinder(url, prefix, counter, wins_each, idx, q):
    """Win ``wins_each`` turns on one contended run; inside each, a read-sleep-write on a plain file."""
    with open_store(url, prefix=prefix) as s:
        won, attempt = 0, 0
        while won < wins_each:
            attempt += 1
            adm = s.admit("grind", "execute", f"g{idx}-{attempt}", holder=f"g{idx}")
            if adm.outcome != "admitted":
                time.sleep(0.0005)
                continue
            enter = time.monotonic_ns()
            with open(counter, "r+") as f:  # deliberately not atomic: only mutual exclusion keeps it right
                n = int(f.read() or 0)
                time.sleep(0.0003)
                f.seek(0)
                f.write(str(n + 1))
                f.truncate()
            leave = time.monotonic_ns()
            phase = adm.record.phase_machine()
            phase.execute(f"run-{idx}-{attempt}", "completed", False, s.now(), {})
            s.checkpoint(adm.lease, phase, request_id=f"g{idx}-{attempt}", response={})
            q.put((adm.lease.fence, enter, leave))
            won += 1


def test_critical_sections_never_overlap(store_url, tmp_path):  # noqa: F811
    url, prefix = store_url
    with open_store(url, prefix=prefix) as s:
        s.ensure("grind")
    counter = tmp_path / "counter"
    counter.write_text("0")
    each = 12
    q, procs = _run(_grinder, PROCS, url, prefix, str(counter), each)
    got = sorted(q.get(timeout=120) for _ in range(PROCS * each))
    _join(procs)
    assert [f for f, _, _ in got] == list(range(1, PROCS * each + 1))
    for (_, _, prev_leave), (_, enter, _) in zip(got, got[1:], strict=False):
        assert enter > prev_leave  # by fence order, each section starts after the previous one ended
    assert int(counter.read_text()) == PROCS * each


# -- kill -9 at each point of a step, then restart and the client's re-send ----------------------

POINTS = ["after_admit", "before_transaction", "between_rows", "before_commit", "after_commit"]
ROWS = [
    Row("message", "assistant", {"role": "assistant"}, body="the answer"),
    Row("tool_call", "tool_call/0", {"name": "shell"}, body={"args": {}}),
]
STEP = Outcome("tools", pause=pause_for("AwaitingTool"), rows=ROWS)


def _doomed(url, prefix, point, _i, q):
    def fault(where):
        if where == point:
            os.kill(os.getpid(), signal.SIGKILL)

    def process(lease):
        fault("after_admit")
        return STEP

    with open_store(url, prefix=prefix, fault=fault) as s:
        serve(s, "k", "execute", "req-1", holder="router-1", process=process)


def _shape(store, sid):
    """A session's rows as they would be written again; a kept feed's clock and run id are the step's own."""
    return [(r.kind, r.step, r.ord, _clockless(r.meta), r.body, r.written_fence > 0) for r in store.rows(sid)]


def _clockless(meta):
    return dict(meta, args=dict(meta["args"], now=None, run_id=None)) if meta.get("event") == "phase.fed" else meta


@pytest.mark.parametrize("point", POINTS)
def test_kill_9_at_each_point_then_restart_and_resend(store_url, point):  # noqa: F811
    url, prefix = store_url
    with open_store(url, prefix=prefix) as s:
        clean = serve(s, "clean", "execute", "req-1", holder="router-1", process=STEP)
        s.ensure("k")
    p = CTX.Process(target=_doomed, args=(url, prefix, point, 0, None))
    p.start()
    p.join(60)
    assert p.exitcode == -signal.SIGKILL
    with open_store(url, prefix=prefix) as s:  # the router restarts
        rec = s.load("k")
        committed = point == "after_commit"
        assert rec.phase == ("AwaitingTool" if committed else "Idle")
        assert len(s.rows("k")) == (len(_shape(s, "clean")) if committed else 0)
        assert s.recover("router-1") == ([] if committed else ["k"])
        again = serve(s, "k", "execute", "req-1", holder="router-1", process=STEP)  # the client re-sends
        assert again.admission.outcome == ("replayed" if committed else "admitted")
        assert again.response["status"] == clean.response["status"] == "awaiting_tool"
        assert _shape(s, "k") == _shape(s, "clean")  # nothing lost, nothing duplicated
        assert s.load("k").version == 1


# -- a holder frozen past its lease ------------------------------------------------------------


def _frozen(url, prefix, go, _i, q):
    with open_store(url, prefix=prefix) as s:
        adm = s.admit("z", "execute", "slow", holder="A", lease_ms=300)
        q.put(("admitted", adm.lease.fence))
        go.wait(30)
        phase = adm.record.phase_machine()
        phase.execute("run-a", "completed", False, s.now(), {})
        results = []
        for call in (
            lambda: s.renew(adm.lease),
            lambda: s.checkpoint(
                adm.lease, phase, request_id="slow", response={"from": "A"}, rows=[Row("message", "a", {"by": "A"})]
            ),
            lambda: s.release(adm.lease),
        ):
            try:
                call()
                results.append("written")
            except FencedOut:
                results.append("fenced")
        q.put(("after", results))


def test_sigstop_past_the_lease_takeover_sigcont_writes_refused(store_url):  # noqa: F811
    url, prefix = store_url
    with open_store(url, prefix=prefix) as s:
        s.ensure("z")
    go = CTX.Event()
    q = CTX.Queue()
    p = CTX.Process(target=_frozen, args=(url, prefix, go, 0, q))
    p.start()
    assert q.get(timeout=30) == ("admitted", 1)
    os.kill(p.pid, signal.SIGSTOP)
    try:
        with open_store(url, prefix=prefix) as s:
            early = s.admit("z", "execute", "b1", holder="B")
            assert early.answer == "busy" and 0 < early.retry_after_ms <= 300
            time.sleep(0.35)
            b = serve(s, "z", "execute", "b1", holder="B", process=Outcome("completed"))
            assert b.admission.took_over and b.lease.fence == 2
    finally:
        os.kill(p.pid, signal.SIGCONT)
    go.set()
    assert q.get(timeout=30) == ("after", ["fenced", "fenced", "fenced"])
    p.join(30)
    with open_store(url, prefix=prefix) as s:
        rec = s.load("z")
        assert (rec.last_request_id, rec.last_response["status"], rec.fence) == ("b1", "completed", 2)
        assert all(r.meta.get("by") != "A" for r in s.rows("z"))
