"""A router process for the process tests: ``loopfsm router serve`` plus a crash/timing hook on the store.

    python router_proc.py URL PREFIX PORT HOLDER SCRIPT_JSON FAULT [WORKERS]

FAULT is ``none``; ``hang:MARKER`` (while the file MARKER exists, a checkpoint stops just before its commit,
writes its pid to MARKER.reached and waits until MARKER is removed, so the test can kill -9 the process
mid-turn); ``pause:MARKER`` (the same, before the checkpoint's transaction begins: the lock is held, the model
called, and no SQLite write lock is held, so another process may write meanwhile); or ``log:FILE`` (each
checkpoint appends ``pid start end`` of its transaction, up to just before its commit, to FILE, holding it open
for 0.2 s, so overlapping processing by two routers would show).  WORKERS (default 1) is ``router serve
--workers``.
"""

from __future__ import annotations

import json
import os
import sys
import time

from loopfsm.router.providers.scripted import ScriptedProvider
from loopfsm.router.http import serve
from loopfsm.router.service import Router


def main() -> None:
    url, prefix, port, holder, script, fault = sys.argv[1:7]
    hook = None
    if fault.startswith(("hang:", "pause:")):
        marker = fault.split(":", 1)[1]
        where = "before_commit" if fault.startswith("hang:") else "before_transaction"

        def hook(point: str) -> None:
            if point == where and os.path.exists(marker):
                with open(marker + ".reached", "w") as fh:
                    fh.write(str(os.getpid()))
                while os.path.exists(marker):  # until the test removes it (or kills this process)
                    time.sleep(0.05)
    elif fault.startswith("log:"):
        log = fault[4:]
        started: dict[str, float] = {}

        def hook(point: str) -> None:
            if point == "before_transaction":
                started["t"] = time.time()
                time.sleep(0.2)
            elif point == "before_commit":  # still inside the lock: the next holder cannot have started yet
                with open(log, "a") as fh:
                    fh.write(f"{os.getpid()} {started['t']} {time.time()}\n")

    router = Router(
        url, prefix=prefix, holder=holder, provider=ScriptedProvider(json.loads(script)), store_fault=hook, create=True
    )
    serve(router, "127.0.0.1", int(port), workers=int(sys.argv[7]) if len(sys.argv) > 7 else 1)


if __name__ == "__main__":
    main()
