"""Benchmark: the run-state store's step round trip and throughput, beside plain SQL doing the same statements.

Run ``python benchmarks/store.py`` (``--quick`` for fewer rounds; ``--pg URL``
for another PostgreSQL than the local test database).

* Round trip = what one protocol step costs the router: admission (read the
  row, look the request id up, ask router_run's admit chain, one conditional
  UPDATE) then the checkpoint transaction (fenced UPDATE of phase and
  release, the request id recorded, two content rows and four trace rows
  upserted).  Timed per step in wall time, since a
  database round trip is mostly waiting; p50 and p99 over every step.
* The baseline runs the very same SQL statements with the same parameters
  through the same driver, with no machines and no decision chain: what a
  hand-written store would pay at least.  Before timing, both are run on one
  session each and shown to leave identical rows.
* Baseline and store alternate in every round; each side's steps are pooled.
* Throughput: 8 processes, each serving steps on its own session (distinct
  runs) or all on one session (contended: the losers get busy and retry).

It is a script to read, never a test: timing assertions are flaky by nature.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from loopfsm.machines.router_run import ROUTER_RUN
from loopfsm.router.store import Row, open_store
from loopfsm.router.store.serve import Outcome, serve

QUICK = "--quick" in sys.argv
PG = sys.argv[sys.argv.index("--pg") + 1] if "--pg" in sys.argv else "postgresql://postgres@127.0.0.1:5432/test"
ROUNDS, STEPS = (3, 100) if QUICK else (5, 300)
THROUGHPUT_S = 1.5 if QUICK else 4.0
ROWS = [
    Row("message", "assistant", {"role": "assistant"}, body="the answer"),
    Row("tool_call", "tool_call/0", {"name": "shell"}, body={"arguments": {}}),
]
STEP = Outcome("completed", rows=ROWS)


def ours(store: Any, sid: str, i: int) -> None:
    r = serve(store, sid, "execute", f"q{i}", holder="bench", process=STEP)
    assert r.admission.outcome == "admitted"


def plain(store: Any, sid: str, i: int) -> None:
    """The same statements, hand-written: read, conditional UPDATE, then the step's transaction."""
    b, p = store.backend, store.prefix
    now = store.now()
    _, rows = b.run(
        f"SELECT session_id, phase, snapshot, version, fence, holder, started_at, lease_expires_at, "
        f"cancel_requested, last_request_id, last_response, updated_at FROM {p}run_state "
        f"WHERE session_id = ?",
        (sid,),
    )
    version, fence = rows[0][3], rows[0][4]
    b.run(f"SELECT 1 FROM {p}requests WHERE session_id = ? AND request_id = ?", (sid, f"q{i}"))
    n, _ = b.run(
        f"UPDATE {p}run_state SET holder = ?, fence = fence + 1, started_at = ?, lease_expires_at = ?, "
        f"cancel_requested = NULL, updated_at = ? WHERE session_id = ? AND fence = ? AND version = ? "
        f"AND (holder IS NULL OR lease_expires_at <= ?)",
        ("bench", now, now + 30000, now, sid, fence, version, now),
    )
    assert n == 1
    snap = json.dumps(PLAIN_SNAPSHOT, sort_keys=True, separators=(",", ":"))
    with b.transaction():
        _, got = b.run(
            f"UPDATE {p}run_state SET phase = ?, snapshot = ?, version = version + 1, holder = NULL, "
            f"started_at = NULL, lease_expires_at = NULL, cancel_requested = NULL, last_request_id = ?, "
            f"last_response = ?, updated_at = ? WHERE session_id = ? AND holder = ? AND fence = ? "
            f"AND version = ? RETURNING version",
            ("Idle", snap, f"q{i}", '{"status":"completed"}', now, sid, "bench", fence + 1, version),
        )
        step = got[0][0]
        b.run(f"INSERT INTO {p}requests (session_id, request_id, step) VALUES (?, ?, ?)", (sid, f"q{i}", step))
        slots = [(r.kind, r.slot, r.meta, r.body) for r in ROWS] + [
            ("trace", f"trace/{k}", {"event": e}, None)
            for k, e in enumerate(("lock.acquired", "run.started", "run.completed", "lock.released"))
        ]
        for order, (kind, slot, meta, body) in enumerate(slots):
            b.run(
                f"INSERT INTO {p}rows (session_id, kind, row_id, run_id, step, ord, meta, body, sealed, "
                f"written_fence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, kind, row_id) "
                f"DO UPDATE SET run_id = excluded.run_id, step = excluded.step, ord = excluded.ord, "
                f"meta = excluded.meta, body = excluded.body, sealed = excluded.sealed, "
                f"written_fence = excluded.written_fence",
                (
                    sid,
                    kind,
                    f"{sid}-{step}-{slot}",
                    f"run-{i}",
                    step,
                    order,
                    json.dumps(meta),
                    None if body is None else json.dumps(body),
                    None,
                    fence + 1,
                ),
            )


PLAIN_SNAPSHOT = ROUTER_RUN.new().snapshot()


def same_work(store: Any) -> None:
    for fn, sid in ((ours, "same-a"), (plain, "same-b")):
        store.ensure(sid)
        for i in range(3):
            fn(store, sid, i)
    a, b = store.load("same-a"), store.load("same-b")
    assert (a.phase, a.version, a.fence, a.holder) == (b.phase, b.version, b.fence, b.holder) == ("Idle", 3, 3, None)
    ra, rb = store.rows("same-a"), store.rows("same-b")
    assert [(r.kind, r.step, r.ord, r.meta, r.body) for r in ra] == [
        (r.kind, r.step, r.ord, r.meta, r.body) for r in rb
    ]


def timed(fn: Callable[[Any, str, int], None], store: Any, sid: str, start: int, n: int) -> tuple[list[float], float]:
    """Wall time of each step, and this process's CPU time per step (what the Python side costs)."""
    out = []
    c0 = time.process_time()
    for i in range(start, start + n):
        t0 = time.perf_counter()
        fn(store, sid, i)
        out.append(time.perf_counter() - t0)
    return out, (time.process_time() - c0) / n


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def round_trip(name: str, url: str) -> dict[str, float]:
    prefix = f"bench_{uuid.uuid4().hex[:8]}_"
    with open_store(url, prefix=prefix, create=True) as store:
        try:
            same_work(store)
            store.ensure("ours")
            store.ensure("plain")
            mine: list[float] = []
            base: list[float] = []
            cpu_mine = cpu_base = float("inf")
            timed(ours, store, "ours", 0, STEPS // 5)  # warm
            timed(plain, store, "plain", 0, STEPS // 5)
            for r in range(ROUNDS):
                start = (r + 1) * STEPS
                walls, cpu = timed(plain, store, "plain", start, STEPS)
                base += walls
                cpu_base = min(cpu_base, cpu)
                walls, cpu = timed(ours, store, "ours", start, STEPS)
                mine += walls
                cpu_mine = min(cpu_mine, cpu)
        finally:
            store.drop()
    res = {"p50": pct(mine, 0.5), "p99": pct(mine, 0.99), "base_p50": pct(base, 0.5), "base_p99": pct(base, 0.99)}
    print(
        f"  {name:<11} store p50 {res['p50'] * 1e3:6.2f} ms  p99 {res['p99'] * 1e3:6.2f} ms   "
        f"plain SQL p50 {res['base_p50'] * 1e3:6.2f} ms  p99 {res['base_p99'] * 1e3:6.2f} ms   "
        f"= {res['p50'] / res['base_p50']:4.2f}x at p50"
    )
    print(
        f"  {'':<11} client CPU per step: store {cpu_mine * 1e3:6.3f} ms  plain SQL {cpu_base * 1e3:6.3f} ms"
        f"   = {cpu_mine / cpu_base:4.2f}x"
    )
    return res


def _worker(url: str, prefix: str, sid: str, idx: int, stop_at: float, q: Any) -> None:
    with open_store(url, prefix=prefix) as store:
        done = busy = 0
        i = 0
        while time.time() < stop_at:
            i += 1
            r = serve(store, sid, "execute", f"w{idx}-{i}", holder=f"w{idx}", process=STEP)
            if r.admission.outcome == "admitted":
                done += 1
            else:
                busy += 1
                time.sleep(0.001)  # a client waits before re-sending (retry_after_ms, capped here)
        q.put((done, busy))


def throughput(name: str, url: str, *, contended: bool) -> float:
    ctx = mp.get_context("fork")
    prefix = f"bench_{uuid.uuid4().hex[:8]}_"
    with open_store(url, prefix=prefix, create=True) as store:
        for k in range(8):
            store.ensure("one" if contended else f"s{k}")
    q = ctx.Queue()
    stop_at = time.time() + 0.3 + THROUGHPUT_S
    procs = [
        ctx.Process(target=_worker, args=(url, prefix, "one" if contended else f"s{k}", k, stop_at, q))
        for k in range(8)
    ]
    t0 = time.time()
    for p in procs:
        p.start()
    got = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join()
    elapsed = time.time() - t0
    with open_store(url, prefix=prefix) as store:
        steps = sum(store.load("one" if contended else f"s{k}").version for k in range(1 if contended else 8))
        store.drop()
    done = sum(d for d, _ in got)
    assert done == steps, (done, steps)  # every admitted step committed exactly once
    busy = sum(b for _, b in got)
    kind = "one contended run " if contended else "8 distinct runs   "
    print(f"  {name:<11} {kind} {done / elapsed:8.0f} steps/s  ({busy} busy answers)")
    return done / elapsed


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        backends = [("SQLite", f"sqlite:///{tmp}/bench.db"), ("PostgreSQL", PG)]
        print(
            f"step round trip (admit + checkpoint with 6 rows + release), {ROUNDS} x {STEPS} steps each side, "
            "wall time per step:"
        )
        for name, url in backends:
            round_trip(name, url)
        print(f"throughput, 8 processes for {THROUGHPUT_S:g} s on 2 cores:")
        for name, url in backends:
            throughput(name, url, contended=False)
            throughput(name, url, contended=True)


if __name__ == "__main__":
    main()
