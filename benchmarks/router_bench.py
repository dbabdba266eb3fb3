"""Benchmark: the router's execute -> completed turn over kept-alive loopback connections, against a bare handler.

Run ``python benchmarks/router_bench.py`` (``--quick`` for fewer turns;
``--pg URL`` to choose the PostgreSQL server, default the local test one; a
server that cannot be reached is reported and skipped).  How it measures:

* Two uvicorn processes on 127.0.0.1 and free ports: the router (scripted
  model answering at once, so every execute completes its run in one request:
  one plaintext scripted turn), and a bare Starlette app whose handler writes
  *the same rows* to the same kind of store in one transaction: the run-state
  row and every row the router wrote for one run (copied from a router run
  first, and counted afterwards, so the baseline is shown to do the same
  work).  The difference is what the machines, admission, the protocol checks
  and the turn loop cost.
* One client: sequential turns over one kept-alive connection (checked:
  every turn leaves from the same local port, as the reference client's do),
  a session taking 20 turns (20 runs, one after the other, its history
  growing) before the client starts another; p50 and p99 wall latency per
  turn, turns per second, the *server's* CPU time per turn (from
  /proc/PID/stat), and the client's own (the driver's process time: it runs
  on the same cores, so it bounds what more clients can add).
* 4 clients at once, each its own process, kept-alive connection and
  sessions: turns per second, and its ratio to one client's; against the
  router with 1 process, then with ``--workers 2`` and ``--workers 4``
  (server CPU counts the supervisor and every worker).  Beside it, the
  ceiling this machine allows: the server's and the clients' CPU per turn
  in that same run, all on the same cores, give at most
  ``cores / (server + client CPU per turn)`` turns per second, and so at
  most that over one client's rate as a ratio, whatever the router does.
* 100 concurrent sessions: 100 clients at once on fresh connections, one
  execute each; wall time for all of them and server CPU per request; an
  answer that is not ``completed`` is counted and its message printed.
* Last, where a turn's router CPU goes: ``router_turn_cpu.py --profile`` run for a plaintext and an
  encrypted turn, its breakdown printed (the store, the machines, crypto, JSON and protocol checks, the
  service layer).
* The same one-client turns with no HTTP: ``Router.handle`` called in the
  driver's process on a store of the same kind, in the same alternating
  rounds; its p50 against the p50 over HTTP is the goal "p50 over HTTP at
  most 1.5x the in-process turn".  Beside it, ``GET /healthz`` on the same
  kind of connection: what HTTP alone costs (uvicorn, Starlette, httpx and
  loopback), with no turn behind it.
* Router CPU per turn in process, plaintext and encrypted, on SQLite and
  PostgreSQL (``router_turn_cpu.py`` for each), beside the goals of 2 and 3 ms.
* Rounds alternate between router and baseline; latencies pool over rounds,
  rates and CPU keep each side's best round.  Each goal is printed beside
  its measurement, and the machine (CPU, cores, load when the run started,
  and how long an fsync takes on the disk the SQLite file is on: every
  commit waits for one).

The router processes run on the process's engine: ``LOOPFSM_ENGINE=interpreter python
benchmarks/router_bench.py`` measures them on the interpreter; the header names the engine.

It is a script to read, never a test: timing assertions are flaky by nature.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

QUICK = "--quick" in sys.argv
PG = sys.argv[sys.argv.index("--pg") + 1] if "--pg" in sys.argv else "postgresql://postgres@127.0.0.1:5432/test"
N_SEQ = 60 if QUICK else 400  # turns of one client, over all rounds
ROUNDS = 2 if QUICK else 4
CLIENTS = 4
WORKERS = (2, 4)  # router processes (``serve --workers``) the 4 clients are also measured against
SESSION_TURNS = 20  # turns a client's session takes before it starts another
CONCURRENT = 100
#: The goals of issue 20: p50 of one client's turn (ms) per store, and 4 clients' turns/s over one client's.
GOAL_P50_MS = {"SQLite (WAL)": 5.0, "PostgreSQL": 8.0}
GOAL_SCALING = 3.0
GOAL_HTTP_RATIO = 1.5  # p50 over HTTP against p50 of the same turn in process
GOAL_CPU_MS = {"SQLite (WAL)": 2.0, "PostgreSQL": 3.0}  # router CPU per turn, in process, plain and encrypted


# -- the baseline server: a bare handler writing the same rows ---------------------------------------------


def baseline_app(url: str, prefix: str, template: list[dict[str, Any]]) -> Any:
    import threading

    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from loopfsm.router.store import open_store

    local = threading.local()

    def write(session: str, body: dict[str, Any]) -> dict[str, Any]:
        store = getattr(local, "store", None)
        if store is None:
            store = local.store = open_store(url, prefix=prefix)
        b = store.backend
        rid = body["request_id"]
        resp = {"status": "completed", "data": {"message": "done", "run_id": rid}, "allowed_continuations": []}
        with b.transaction():
            b.run(
                f"INSERT INTO {prefix}run_state (session_id, phase, snapshot, version, last_request_id, "
                f"last_response, updated_at) VALUES (?, 'Idle', ?, 1, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE "
                f"SET version = {prefix}run_state.version + 1, last_request_id = excluded.last_request_id, "
                f"last_response = excluded.last_response, updated_at = excluded.updated_at",
                (session, json.dumps({"state": "Idle"}), rid, json.dumps(resp), int(time.time() * 1000)),
            )
            for i, row in enumerate(template):
                b.run(
                    f"INSERT INTO {prefix}rows (session_id, kind, row_id, run_id, step, ord, meta, body, sealed, "
                    f"written_fence) VALUES (?, ?, ?, ?, 1, ?, ?, ?, NULL, 1) ON CONFLICT (session_id, kind, row_id) "
                    f"DO UPDATE SET meta = excluded.meta, body = excluded.body",
                    (session, row["kind"], f"{row['row_id']}-{rid}", rid, i, row["meta"], row["body"]),
                )
        return resp

    async def execute(request: Request) -> JSONResponse:
        body = await request.json()
        return JSONResponse(await run_in_threadpool(write, request.path_params["session"], body))

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route("/v1/sessions/{session}/execute", execute, methods=["POST"]),
            Route("/healthz", health, methods=["GET"]),
        ]
    )


def serve_baseline() -> None:
    import uvicorn

    url, prefix, port, template = sys.argv[2], sys.argv[3], int(sys.argv[4]), json.loads(Path(sys.argv[5]).read_text())
    uvicorn.run(baseline_app(url, prefix, template), host="127.0.0.1", port=port, log_level="warning")


def serve_router() -> None:
    from loopfsm.router.providers.scripted import ScriptedProvider
    from loopfsm.router import Router
    from loopfsm.router.http import serve

    url, prefix, port = sys.argv[2], sys.argv[3], int(sys.argv[4])
    workers = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    script = [{"text": "done", "input_tokens": 10, "output_tokens": 2}]
    serve(
        Router(url, prefix=prefix, provider=ScriptedProvider(script), holder=f"bench-{port}", create=True),
        "127.0.0.1",
        port,
        workers=workers,
    )


# -- the driver ---------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and of its live children (a router's workers), user and system."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return own + sum(cpu_s(int(k)) for k in kids)


class Server:
    def __init__(self, mode: str, *args: str):
        import httpx

        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, __file__, mode, *args[:2], str(self.port), *args[2:]])
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(self.base + "/healthz", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"{mode} did not start") from None
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def execute_body() -> dict[str, Any]:
    return {"type": "execute", "request_id": uuid.uuid4().hex, "data": {"prompt": "hello"}}


def turns(h: Any, n: int) -> tuple[list[float], set[Any]]:
    """``n`` plaintext scripted turns, a new session every SESSION_TURNS: wall times, local addresses used."""
    lat, local, session = [], set(), ""
    for i in range(n):
        if i % SESSION_TURNS == 0:
            session = uuid.uuid4().hex[:16]
        took, addr = turn(h, session)
        lat.append(took)
        local.add(addr)
    return lat, local


def turn(h: Any, session: str) -> tuple[float, Any]:
    """One plaintext scripted turn (a run the model completes at once): its wall time, the local address used."""
    t = time.perf_counter()
    r = h.post(f"/v1/sessions/{session}/execute", json=execute_body())
    took = time.perf_counter() - t
    assert r.json()["status"] == "completed", r.text
    return took, r.extensions["network_stream"].get_extra_info("client_addr")


@dataclass
class Sequential:
    """One client's turns over one kept-alive connection."""

    latencies: list[float]
    turns_per_s: float
    cpu_per_turn_s: float
    client_cpu_per_turn_s: float  # this driver's own CPU (httpx), on the same cores as the server


def sequential(server: Server, n: int) -> Sequential:
    import httpx

    with httpx.Client(base_url=server.base, timeout=30) as h:
        h.get("/healthz")  # the connection every turn then reuses
        c0, t0, own0 = cpu_s(server.proc.pid), time.perf_counter(), time.process_time()
        lat, local = turns(h, n)
        wall, own = time.perf_counter() - t0, time.process_time() - own0
        assert len(local) == 1, "the client opened a new connection between turns"
        return Sequential(lat, n / wall, (cpu_s(server.proc.pid) - c0) / n, own / n)


class InProcess:
    """The same turns as ``sequential`` with no HTTP: ``Router.handle`` called in this process, a store of the
    same kind under a prefix of its own.  ``handle`` is timed alone (wall, and this thread's CPU)."""

    def __init__(self, url: str, prefix: str):
        from loopfsm.router.providers.scripted import ScriptedProvider
        from loopfsm.router import Router

        script = [{"text": "done", "input_tokens": 10, "output_tokens": 2}]
        self.router = Router(url, prefix=prefix, provider=ScriptedProvider(script), create=True)

    def turns(self, n: int) -> Sequential:
        lat, cpu, session = [], 0.0, ""
        t0 = time.perf_counter()
        for i in range(n):
            if i % SESSION_TURNS == 0:
                session = uuid.uuid4().hex[:16]
            c, t = time.thread_time(), time.perf_counter()
            out = self.router.handle(session, execute_body())
            lat.append(time.perf_counter() - t)
            cpu += time.thread_time() - c
            assert out["status"] == "completed", out
        return Sequential(lat, n / (time.perf_counter() - t0), cpu / n, cpu / n)


def empty_requests(server: Server, n: int) -> Sequential:
    """``GET /healthz`` over one kept-alive connection: what HTTP alone costs here, with no turn behind it."""
    import httpx

    with httpx.Client(base_url=server.base, timeout=30) as h:
        h.get("/healthz")
        lat, c0, own0, t0 = [], cpu_s(server.proc.pid), time.process_time(), time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            assert h.get("/healthz").status_code == 200
            lat.append(time.perf_counter() - t)
        wall, own = time.perf_counter() - t0, time.process_time() - own0
        return Sequential(lat, n / wall, (cpu_s(server.proc.pid) - c0) / n, own / n)


def machine_cpu() -> tuple[float, float]:
    """Seconds of CPU time the whole machine has spent busy and in all, over every core (/proc/stat)."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(ticks[:8]) - idle) / hz, sum(ticks[:8]) / hz


def postgres_cpu_s() -> float:
    """CPU seconds of every PostgreSQL server process on this machine (0 when there is none, as for SQLite)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # ended meanwhile
            continue
        if text.split("(", 1)[1].startswith("postgres)"):
            fields = text.rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


@dataclass
class Parallel:
    """Several clients at once, each a process of its own: turns per second, and CPU per turn on each side."""

    turns_per_s: float
    cpu_per_turn_s: float  # the server's: the supervisor and every worker
    client_cpu_per_turn_s: float  # every client process's own
    db_cpu_per_turn_s: float  # PostgreSQL's server processes (0 on SQLite, which runs inside the router)
    busy: float  # how busy the machine's cores were during the run, 0 to 1, whoever used them
    spread: list[int]  # how many of the clients' connections each answering process took, most first

    def ceiling(self) -> float:
        """The most turns per second these CPU costs allow when router, clients and database share the cores."""
        return (os.cpu_count() or 1) / self.cpu_s()

    def cpu_s(self) -> float:
        """CPU seconds a turn costs the router, the clients and the database together."""
        return self.cpu_per_turn_s + self.client_cpu_per_turn_s + self.db_cpu_per_turn_s

    def ours(self) -> float:
        """The share of the machine's cores the router, the clients and the database used during the run."""
        return self.turns_per_s * self.cpu_s() / (os.cpu_count() or 1)


def parallel(server: Server, clients: int, n: int) -> Parallel:
    """``clients`` clients at once, each ``n`` turns over its own kept-alive connection from a process of its own.

    Processes, not threads: client threads would share one interpreter lock and bound the rate themselves.
    """
    import multiprocessing

    import httpx

    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(clients + 1)
    out: Any = ctx.Queue()

    def client() -> None:
        try:
            with httpx.Client(base_url=server.base, timeout=60) as h:
                holder = h.get("/healthz").json().get("holder", "")  # the process this connection landed on
                start.wait()
                own0, t0 = time.process_time(), time.perf_counter()
                _, local = turns(h, n)
                t1 = time.perf_counter()
                assert len(local) == 1, "a client opened a new connection between turns"
                out.put((t0, t1, time.process_time() - own0, holder))
        except BaseException as err:  # said at once, not after the parent's ten-minute wait
            start.abort()
            out.put(("failed", f"{type(err).__name__}: {str(err)[:300]}"))
            raise

    procs = [ctx.Process(target=client) for _ in range(clients)]
    for p in procs:
        p.start()
    c0, db0, m0 = cpu_s(server.proc.pid), postgres_cpu_s(), machine_cpu()
    try:
        start.wait()
    except threading.BrokenBarrierError:
        pass  # a client failed before the start: its message is in the queue
    got = [out.get(timeout=600) for _ in procs]
    failed = [g[1] for g in got if g[0] == "failed"]
    if failed:
        for p in procs:
            p.terminate()
        raise SystemExit(f"a client failed: {failed[0]}")
    c1, db1, m1 = cpu_s(server.proc.pid), postgres_cpu_s(), machine_cpu()
    for p in procs:
        p.join()
    assert all(p.exitcode == 0 for p in procs), "a client failed"
    wall = max(g[1] for g in got) - min(g[0] for g in got)
    total = clients * n
    holders = [g[3] for g in got]
    spread = sorted((holders.count(x) for x in set(holders)), reverse=True)
    busy = (m1[0] - m0[0]) / max(m1[1] - m0[1], 1e-9)
    return Parallel(total / wall, (c1 - c0) / total, sum(g[2] for g in got) / total, (db1 - db0) / total, busy, spread)


@dataclass
class Burst:
    """``n`` sessions at once on fresh connections: wall time, server CPU per request, and what did not complete."""

    wall_s: float
    cpu_per_request_s: float
    not_completed: list[str]  # each answer that was not ``completed``: its status, code and message


def concurrent(server: Server, n: int) -> Burst:
    import httpx

    failed: list[str] = []

    async def go() -> float:
        limits = httpx.Limits(max_connections=n)
        async with httpx.AsyncClient(base_url=server.base, timeout=60, limits=limits) as h:

            async def one() -> None:
                reply = await h.post(f"/v1/sessions/{uuid.uuid4().hex[:16]}/execute", json=execute_body())
                if reply.status_code != 200:  # the baseline has no error handling: a 500 is its failure
                    failed.append(f"HTTP {reply.status_code}")
                    return
                r = reply.json()
                if r["status"] != "completed":  # reported beside the figures, not hidden in them
                    failed.append(f"{r['status']} {r['data'].get('code', '')}: {r['data'].get('error', '')}")

            t = time.perf_counter()
            await asyncio.gather(*(one() for _ in range(n)))
            return time.perf_counter() - t

    c0 = cpu_s(server.proc.pid)
    wall = asyncio.run(go())
    return Burst(wall, (cpu_s(server.proc.pid) - c0) / n, failed)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


GOALS: list[str] = []


def bench(name: str, url: str) -> None:
    from loopfsm.router.store import open_store

    p_router, p_base = f"bench_r_{uuid.uuid4().hex[:6]}_", f"bench_b_{uuid.uuid4().hex[:6]}_"
    for p in (p_router, p_base):
        open_store(url, prefix=p, create=True).close()
    p_inproc = f"bench_i_{uuid.uuid4().hex[:6]}_"
    inproc = InProcess(url, p_inproc)
    inproc.turns(2 * SESSION_TURNS)  # warm: compiled tables, validators, the store's statements
    router = Server("--serve-router", url, p_router)
    try:
        # one router run, whose rows become the baseline's template
        import httpx

        body = execute_body()
        assert httpx.post(f"{router.base}/v1/sessions/template/execute", json=body).json()["status"] == "completed"
        with open_store(url, prefix=p_router) as s:
            rows = s.rows("template")
        template = [
            {
                "kind": r.kind,
                "row_id": r.row_id,
                "meta": json.dumps(r.meta),
                "body": None if r.body is None else json.dumps(r.body),
            }
            for r in rows
        ]
        tfile = Path(tempfile.mkdtemp()) / "template.json"
        tfile.write_text(json.dumps(template))
        base = Server("--serve-baseline", url, p_base, str(tfile))
        try:
            # the baseline does the same work: the same number of rows per request
            assert httpx.post(f"{base.base}/v1/sessions/template/execute", json=body).json()["status"] == "completed"
            with open_store(url, prefix=p_base) as s:
                assert len(s.rows("template")) == len(rows), "baseline writes other rows than the router"
            seq: dict[str, list[Sequential]] = {"router": [], "baseline": [], "in process": []}
            par: dict[str, list[Parallel]] = {
                "router": [],
                "baseline": [],
                **{f"router, {w} workers": [] for w in WORKERS},
            }
            con: dict[str, list[Burst]] = {"router": [], "baseline": []}
            empty: list[Sequential] = []
            per_round = N_SEQ // ROUNDS
            for _ in range(ROUNDS):
                seq["in process"].append(inproc.turns(per_round))
                empty.append(empty_requests(router, 500))  # /proc counts 10 ms ticks: 500 resolve 0.02 ms
                for label, srv in (("baseline", base), ("router", router)):
                    seq[label].append(sequential(srv, per_round))
                    par[label].append(parallel(srv, CLIENTS, per_round // CLIENTS))
                    con[label].append(concurrent(srv, CONCURRENT))
            inproc.router.close()  # its store connection too: PostgreSQL's 100 are otherwise all but taken
            # the same 4 clients against the router in several processes (the baseline stays in one)
            for w in WORKERS:
                many = Server("--serve-router", url, p_router, str(w))
                try:
                    parallel(many, CLIENTS * w, 5)  # warm every worker up (its first turns compile what it caches)
                    for _ in range(ROUNDS):
                        par[f"router, {w} workers"].append(parallel(many, CLIENTS, per_round // CLIENTS))
                finally:
                    many.stop()
        finally:
            base.stop()
    finally:
        router.stop()
        inproc.router.close()
        for p in (p_router, p_base, p_inproc):
            with open_store(url, prefix=p) as s:
                s.drop()
    print(f"\n{name}: {len(rows)} rows per run (router and baseline alike)")
    print(f"{'':34}{'router':>10}{'baseline':>10}{'ratio':>8}")
    vals = {}
    for label in ("router", "baseline"):
        lat = [x for r in seq[label] for x in r.latencies]
        one = max(r.turns_per_s for r in seq[label])
        vals[label] = {
            "p50 turn, 1 client (ms)": 1000 * statistics.median(lat),
            "p99 turn, 1 client (ms)": 1000 * pct(lat, 0.99),
            "turns/s, 1 client": one,
            f"turns/s, {CLIENTS} clients": max(p.turns_per_s for p in par[label]),
            f"{CLIENTS} clients / 1 client": max(p.turns_per_s for p in par[label]) / one,
            "server CPU / turn (ms)": 1000 * min(r.cpu_per_turn_s for r in seq[label]),
            "client CPU / turn (ms)": 1000 * min(r.client_cpu_per_turn_s for r in seq[label]),
            f"{CONCURRENT} concurrent, wall (ms)": 1000 * min(b.wall_s for b in con[label]),
            f"{CONCURRENT} concurrent, CPU/req (ms)": 1000 * min(b.cpu_per_request_s for b in con[label]),
            f"{CONCURRENT} concurrent, not completed": sum(len(b.not_completed) for b in con[label]),
        }
    goals = {
        "p50 turn, 1 client (ms)": (
            f"goal <= {GOAL_P50_MS[name]:g} ms",
            vals["router"]["p50 turn, 1 client (ms)"] <= GOAL_P50_MS[name],
        ),
    }
    for key in vals["router"]:
        r, b = vals["router"][key], vals["baseline"][key]
        if isinstance(r, int):  # a count, not a figure to divide
            line = f"{key:34}{r:10d}{b:10d}"
        else:
            line = f"{key:34}{r:10.2f}{b:10.2f}{r / b if b else float('nan'):8.2f}"
        if key in goals:
            goal, met = goals[key]
            line += f"  {goal}  {'met' if met else 'MISSED'}"
            GOALS.append(f"{name}, {key}: {r:.2f}  {goal}  {'met' if met else 'MISSED'}")
        print(line)
    http_p50 = vals["router"]["p50 turn, 1 client (ms)"]
    in_lat = [x for r in seq["in process"] for x in r.latencies]
    in_p50 = 1000 * statistics.median(in_lat)
    in_cpu = 1000 * min(r.cpu_per_turn_s for r in seq["in process"])
    ratio = http_p50 / in_p50
    met = "met" if ratio <= GOAL_HTTP_RATIO else "MISSED"
    print(f"{'p50 turn, in process (ms)':34}{in_p50:10.2f}{'':10}{'':8}  (Router.handle in the driver, no HTTP)")
    print(f"{'router CPU / turn, in process (ms)':34}{in_cpu:10.2f}")
    print(f"{'p50 over HTTP / in process':34}{ratio:10.2f}{'':18}  goal <= {GOAL_HTTP_RATIO:g}x  {met}")
    e_p50 = 1000 * statistics.median([x for r in empty for x in r.latencies])
    e_server = 1000 * min(r.cpu_per_turn_s for r in empty)
    e_client = 1000 * min(r.client_cpu_per_turn_s for r in empty)
    print(
        f"{'p50 GET /healthz (ms)':34}{e_p50:10.2f}{'':18}  HTTP alone, no turn: "
        f"{e_server:.2f} ms server CPU, {e_client:.2f} ms client CPU (httpx)"
    )
    GOALS.append(
        f"{name}, p50 over HTTP / in process: {http_p50:.2f} / {in_p50:.2f} ms = {ratio:.2f}x  "
        f"goal <= {GOAL_HTTP_RATIO:g}x  {met}"
    )
    one = vals["router"]["turns/s, 1 client"]
    print(f"\n{CLIENTS} clients (each a process) against the router in 1 and more processes (`serve --workers N`):")
    print(
        f"{'processes':>10}{'turns/s':>9}{'/ 1 client':>11}{'CPU per turn: router':>22}{'clients':>9}{'database':>10}"
        f"{'cores busy':>12}{'ours':>6}{'ceiling':>9}{'allows':>8}  connections"
    )
    for w, runs in [(1, par["router"])] + [(w, par[f"router, {w} workers"]) for w in WORKERS]:
        best = max(runs, key=lambda p: p.turns_per_s)
        ratio, allows = best.turns_per_s / one, best.ceiling() / one
        met = "met" if ratio >= GOAL_SCALING else "MISSED"
        print(
            f"{w:>10}{best.turns_per_s:9.1f}{ratio:10.2f}x{1000 * best.cpu_per_turn_s:19.2f} ms"
            f"{1000 * best.client_cpu_per_turn_s:6.2f} ms{1000 * best.db_cpu_per_turn_s:7.2f} ms"
            f"{100 * best.busy:11.0f}%{100 * best.ours():5.0f}%{best.ceiling():9.1f}{allows:7.2f}x"
            f"  {'+'.join(map(str, best.spread)):<8}"
            f"  goal >= {GOAL_SCALING:g}x  {met}"
        )
        GOALS.append(
            f"{name}, {CLIENTS} clients / 1 client, {w} router process{'es' if w > 1 else ''}: {ratio:.2f}  "
            f"goal >= {GOAL_SCALING:g}x  {met}  (this machine allows at most {allows:.2f}x)"
        )
    print(
        f"  ceiling = {os.cpu_count()} cores / (router + clients + database CPU per turn, all measured in that run): "
        "the most turns/s the cores give them; allows = ceiling / 1 client's turns/s; cores busy: the whole "
        "machine's, other jobs included, ours: the router's, clients' and database's share of it; "
        "connections: how many of the clients' connections each process took"
    )
    for label in ("router", "baseline"):
        why = sorted({w for b in con[label] for w in b.not_completed})
        if why:
            print(f"  {label}, not completed under {CONCURRENT} concurrent sessions: {'; '.join(why)}")


def fsync_ms(directory: str) -> float:
    """p50 of 50 fsyncs of a 4 KiB write in ``directory``: what each SQLite commit waits for (synchronous=FULL)."""
    took = []
    fd, path = tempfile.mkstemp(dir=directory)
    try:
        for _ in range(50):
            os.write(fd, b"x" * 4096)
            t = time.perf_counter()
            os.fsync(fd)
            took.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        os.unlink(path)
    return 1000 * statistics.median(took)


def machine() -> str:
    """The machine the run is on: CPU model, cores, Python, and how loaded it was when the run started."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    py = f"python {platform.python_version()} on {platform.system()}"
    engine = os.environ.get("LOOPFSM_ENGINE") or "transitions (the default)"
    return f"{model}, {os.cpu_count()} cpus, load average {load} when the run started; {py}; engine {engine}"


def stack() -> str:
    """What serves and stores, where a C implementation could stand in for pure Python: uvicorn picks httptools
    and uvloop when they are installed (``uvicorn[standard]``), psycopg its C libpq binding with ``[binary]``."""
    import importlib.util

    def have(name: str) -> bool:
        return importlib.util.find_spec(name) is not None

    http = "httptools" if have("httptools") else "h11 (pure Python)"
    loop = "uvloop" if have("uvloop") else "asyncio"
    try:
        import psycopg

        pg = f"psycopg {psycopg.__version__} ({psycopg.pq.__impl__} implementation)"
    except ImportError:
        pg = "no psycopg"
    return f"uvicorn with {http}, {loop}; {pg}"


def main() -> None:
    print(machine())
    print(stack())
    print(
        f"router turn over kept-alive loopback connections; {N_SEQ} turns of 1 client, then of {CLIENTS} clients, "
        f"{CONCURRENT} concurrent on fresh connections; x {ROUNDS} alternating rounds; then {CLIENTS} clients against "
        f"--workers {' and '.join(map(str, WORKERS))}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        print(f"fsync of 4 KiB where the SQLite file lives: p50 {fsync_ms(tmp):.2f} ms")
        bench("SQLite (WAL)", f"sqlite:///{tmp}/bench.db")
    try:
        import psycopg

        psycopg.connect(PG, connect_timeout=3).close()
    except Exception as err:  # noqa: BLE001 - report and skip, this is a script
        print(f"\nPostgreSQL at {PG} unreachable ({type(err).__name__}); skipped")
    else:
        bench("PostgreSQL", PG)
    here = Path(__file__).resolve().parent / "router_turn_cpu.py"
    turns = ["--turns", "60"] if QUICK else []
    print("\nrouter CPU per turn in process (benchmarks/router_turn_cpu.py; best of three rounds):")
    for name, store in (("SQLite (WAL)", []), ("PostgreSQL", ["--pg", PG])):
        for extra in ([], ["--encrypted"]):
            done = subprocess.run([sys.executable, str(here), *store, *turns, *extra], capture_output=True, text=True)
            figure = next((ln.split()[-1] for ln in done.stdout.splitlines() if ln.startswith("router CPU")), None)
            kind = "encrypted (execute, decrypted, sealed)" if extra else "plaintext (execute)"
            if figure is None:
                print(f"  {name}, {kind}: not measured ({(done.stderr or done.stdout).strip().splitlines()[-1:]})")
                continue
            met = "met" if float(figure) <= GOAL_CPU_MS[name] else "MISSED"
            print(f"  {name}, {kind}: {float(figure):.2f} ms")
            goal = f"goal <= {GOAL_CPU_MS[name]:g} ms"
            GOALS.append(f"{name}, router CPU / turn, {kind}: {float(figure):.2f} ms  {goal}  {met}")
    print("\ngoals (router):")
    for line in GOALS:
        print(f"  {line}")
    print("\nwhere one turn's router CPU goes, in process (benchmarks/router_turn_cpu.py --profile):")
    for extra in ([], ["--encrypted"]):
        done = subprocess.run([sys.executable, str(here), "--profile", *turns, *extra], capture_output=True, text=True)
        print(f"  {'encrypted' if extra else 'plaintext'} turns, SQLite:")
        print("\n".join("    " + line for line in (done.stdout or done.stderr).splitlines()))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-baseline":
        serve_baseline()
    elif len(sys.argv) > 1 and sys.argv[1] == "--serve-router":
        serve_router()
    else:
        main()
