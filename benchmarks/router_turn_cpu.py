"""Benchmark: the CPU time of one router turn in this process, ``Router.handle`` alone (no HTTP, no server).

Run ``python benchmarks/router_turn_cpu.py`` (``--pg URL`` for a PostgreSQL
store instead of a temporary SQLite file; ``--turns N`` per round, default
200; ``--encrypted`` for end-to-end encrypted sessions; ``--profile`` for
where the time goes).  Each turn is an ``execute`` the scripted model
completes at once, 20 turns to a session, as ``router_bench.py`` sends them;
it prints the best of three rounds, CPU and wall milliseconds per turn.

A plaintext turn is one request.  An encrypted turn is what the reference
client sends for one prompt in an encrypted session: the execute, then the
``decrypted`` and ``sealed`` continuations the router asks for; the client's
own work (its crypto) runs in this process too, so the router's CPU is
counted on this thread inside ``Router.handle`` only (``time.thread_time``).

``--deep`` instead takes one session to 200 turns and prints the CPU of
its turns around the 1st, 20th, 100th and 200th (the least of five turns
around each): a run rebuilds the engine brain from the session's whole
history (one ``inject_many`` feed, each message decoded and checked) and
reads and rewrites the history row, which holds every message; an
encrypted run sends the whole sealed history to the client and back, so a
turn's cost grows with the conversation.

``--profile`` runs one more round under cProfile, again inside
``Router.handle`` only, and prints its own time grouped by what it is: the
store (loopfsm's store package, sqlite3, psycopg), the machines (loopfsm's
core and machines, ``transitions``), crypto (libsodium through PyNaCl, the
router's sealing), JSON and the protocol checks, the router's service
layer, and the rest; cProfile slows calls unevenly, so read the shares, not
the milliseconds.  HTTP is not in this number: ``router_bench.py`` measures
the same turn over loopback, and the difference is what HTTP costs.

To compare two versions of the code, run it alternately with ``PYTHONPATH``
pointing at each checkout, a few times each: the machine's noise is larger
than a tenth. On PostgreSQL the tables are made under a fresh prefix and
dropped at the end.

Where other jobs share the machine, count instructions instead, which they
do not move: ``Router.handle`` is called through ``operator.call``, a C
function nothing else on the path calls, so callgrind can count inside it
alone (the client's work and the driver left out).  Run
``valgrind --tool=callgrind --collect-atstart=no --toggle-collect=_operator_call
python benchmarks/router_turn_cpu.py --encrypted --turns N`` for two values of
N; the difference of the two counts over ``3 * (N2 - N1)`` is the router's
instructions a turn (the warm-up and start-up cancel out).  It leaves out what
the kernel does (an fsync, a PostgreSQL round trip), which the CPU figures
above include.
"""

from __future__ import annotations

import cProfile
import json
import operator
import pstats
import sys
import tempfile
import time
import uuid
from collections import Counter
from typing import Any

from loopfsm.router.providers.scripted import ScriptedProvider
from loopfsm.router.service import Router
from loopfsm.router.store import open_store

PG = sys.argv[sys.argv.index("--pg") + 1] if "--pg" in sys.argv else None
TURNS = int(sys.argv[sys.argv.index("--turns") + 1]) if "--turns" in sys.argv else 200
ENCRYPTED = "--encrypted" in sys.argv
PROFILE = "--profile" in sys.argv
DEEP = "--deep" in sys.argv
DEPTHS = (1, 20, 100, 200)
SESSION_TURNS = 20

#: (what, path fragments of the functions counted as it), first match wins.
GROUPS = (
    ("store", ("loopfsm/router/store/", "sqlite3", "psycopg")),
    ("crypto", ("nacl/", "loopfsm/router/crypto", "loopfsm/router/atrest", "loopfsm/router/service/sealing")),
    ("JSON and protocol checks", ("json/", "loopfsm/router/protocol", "fastjsonschema", "jsonschema")),
    ("machines", ("loopfsm/core/", "loopfsm/machines/", "transitions/")),
    ("router service", ("loopfsm/router/",)),
)


class _Counted:
    """Router.handle with this thread's CPU time inside it summed, and a profiler enabled inside it when given."""

    def __init__(self, router: Router):
        self.router, self.cpu, self.profiler = router, 0.0, None

    def __call__(self, session: str, request: dict[str, Any]) -> dict[str, Any]:
        began = time.thread_time()
        if self.profiler is not None:
            self.profiler.enable()
        try:
            return operator.call(self.router.handle, session, request)  # for callgrind's toggle: see above
        finally:
            if self.profiler is not None:
                self.profiler.disable()
            self.cpu += time.thread_time() - began


class _Wire:
    """What the reference client's ``http`` needs (``post``, ``close``), answered by the counted handle."""

    def __init__(self, handle: _Counted):
        self.handle = handle

    def post(self, path: str, json: dict[str, Any]) -> Any:
        session = path.split("/")[3]
        answer = self.handle(session, json)
        body = _dumps(answer)
        return type("Reply", (), {"status_code": 200, "read": lambda self: body})()

    def close(self) -> None:
        pass


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


def main() -> None:
    url = PG or f"sqlite:///{tempfile.mkdtemp()}/turns.db"
    prefix = f"turncpu_{uuid.uuid4().hex[:6]}_"
    script = [{"text": "done", "input_tokens": 10, "output_tokens": 2}]
    router = Router(url, prefix=prefix, provider=ScriptedProvider(script), create=True)
    counted = _Counted(router)
    keyring = None
    if ENCRYPTED:
        from loopfsm.router.client import Client
        from loopfsm.router.crypto import Keyring

        keyring = Keyring.generate()
        workspace = tempfile.mkdtemp()

    def turn(session: str) -> None:
        if keyring is None:
            out = counted(session, {"type": "execute", "request_id": uuid.uuid4().hex, "data": {"prompt": "hello"}})
            assert out["status"] == "completed", out
            return
        c = Client(
            "http://in-process", session, workspace=workspace, keyring=keyring, http=_Wire(counted), stream=False
        )
        out = c.run("hello")
        assert out["status"] in ("completed", "idle") and c.last_message == "done", out

    try:
        if DEEP:
            deep(turn, counted)
            return
        for i in range(2 * SESSION_TURNS):  # warm: compiled tables, validators, the store's statements
            turn(f"warm-{i // SESSION_TURNS}")
        rounds = []
        for r in range(3):
            counted.cpu, wall = 0.0, time.perf_counter()
            for i in range(TURNS):
                turn(f"r{r}-{i // SESSION_TURNS}")
            rounds.append((counted.cpu / TURNS * 1e3, (time.perf_counter() - wall) / TURNS * 1e3))
        best_cpu, best_wall = min(rounds)
        kind = "encrypted sessions (execute, decrypted, sealed)" if ENCRYPTED else "plaintext"
        print(f"{'PostgreSQL' if PG else 'SQLite (WAL)'}, {kind}: Router.handle, {TURNS} turns x 3 rounds, best round")
        print(f"router CPU / turn (ms)  {best_cpu:.3f}")
        print(f"wall / turn (ms)        {best_wall:.3f}" + ("  (the client's work included)" if ENCRYPTED else ""))
        if PROFILE:
            counted.profiler = cProfile.Profile()
            for i in range(TURNS):
                turn(f"p-{i // SESSION_TURNS}")
            print(breakdown(pstats.Stats(counted.profiler)))
    finally:
        router.close()
        if PG:
            with open_store(url, prefix=prefix) as s:
                s.drop()


def deep(turn: Any, counted: _Counted) -> None:
    """One session's turns one after the other: the CPU of the turns around each of ``DEPTHS``."""
    for _ in range(SESSION_TURNS):
        turn("warm")
    cpu: list[float] = []
    for _ in range(DEPTHS[-1] + 2):
        before = counted.cpu
        turn("deep")
        cpu.append(counted.cpu - before)
    kind = "encrypted sessions" if ENCRYPTED else "plaintext"
    store = "PostgreSQL" if PG else "SQLite (WAL)"
    print(f"{store}, {kind}: one session's turns, router CPU (least of five around each)")
    for d in DEPTHS:
        around = cpu[max(0, d - 3) : d + 2]
        print(f"turn {d:<4} {1000 * min(around):7.3f} ms")


def breakdown(stats: pstats.Stats) -> str:
    """Own time per group, as shares of the profiled total."""
    own: Counter[str] = Counter()
    for (path, _, function), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{path}:{function}"
        group = next((name for name, parts in GROUPS if any(p in where for p in parts)), "the rest (Python, uuid...)")
        own[group] += tottime
    total = sum(own.values()) or 1.0
    lines = ["where the router's time goes (own time under cProfile, share of the total):"]
    lines += [f"  {name:<28}{100 * t / total:5.1f}%" for name, t in own.most_common()]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
