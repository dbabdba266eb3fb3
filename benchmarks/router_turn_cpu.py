"""Benchmark: the CPU time of one router turn in this process, ``Router.handle`` alone (no HTTP, no server).

Run ``python benchmarks/router_turn_cpu.py`` (``--pg URL`` for a PostgreSQL
store instead of a temporary SQLite file; ``--turns N`` per round, default
200).  Each turn is a plaintext ``execute`` the scripted model completes at
once, 20 turns to a session, as ``router_bench.py`` sends them; it prints the
best of three rounds, CPU and wall milliseconds per turn.

To compare two versions of the code, run it alternately with ``PYTHONPATH``
pointing at each checkout, a few times each: the machine's noise is larger
than a tenth. On PostgreSQL the tables are made under a fresh prefix and
dropped at the end.
"""

from __future__ import annotations

import sys
import tempfile
import time
import uuid

from loopfsm.router.providers.scripted import ScriptedProvider
from loopfsm.router.service import Router
from loopfsm.router.store import open_store

PG = sys.argv[sys.argv.index("--pg") + 1] if "--pg" in sys.argv else None
TURNS = int(sys.argv[sys.argv.index("--turns") + 1]) if "--turns" in sys.argv else 200
SESSION_TURNS = 20


def main() -> None:
    url = PG or f"sqlite:///{tempfile.mkdtemp()}/turns.db"
    prefix = f"turncpu_{uuid.uuid4().hex[:6]}_"
    script = [{"text": "done", "input_tokens": 10, "output_tokens": 2}]
    router = Router(url, prefix=prefix, provider=ScriptedProvider(script), create=True)

    def turn(session: str) -> None:
        out = router.handle(session, {"type": "execute", "request_id": uuid.uuid4().hex, "data": {"prompt": "hello"}})
        assert out["status"] == "completed", out

    try:
        for i in range(2 * SESSION_TURNS):  # warm: compiled tables, validators, the store's statements
            turn(f"warm-{i // SESSION_TURNS}")
        rounds = []
        for r in range(3):
            cpu, wall = time.process_time(), time.perf_counter()
            for i in range(TURNS):
                turn(f"r{r}-{i // SESSION_TURNS}")
            rounds.append(((time.process_time() - cpu) / TURNS * 1e3, (time.perf_counter() - wall) / TURNS * 1e3))
        best_cpu, best_wall = min(rounds)
        print(f"{'PostgreSQL' if PG else 'SQLite (WAL)'}: Router.handle, {TURNS} turns x 3 rounds, best round")
        print(f"CPU / turn (ms)   {best_cpu:.3f}")
        print(f"wall / turn (ms)  {best_wall:.3f}")
    finally:
        router.close()
        if PG:
            with open_store(url, prefix=prefix) as s:
                for table in ("meta", "requests", "rows", "run_state"):
                    s.backend.run(f"DROP TABLE IF EXISTS {prefix}{table}")


if __name__ == "__main__":
    main()
