"""Several router processes on one listening socket: the pre-fork supervisor behind ``router serve --workers N``.

Why: one router process runs its Python on one core at a time (the GIL), so
more clients than one cannot get more turns per second out of it than that
core gives.  N processes serve the same socket, each with its own store
connections; the store's per-session lock keeps them apart exactly as it keeps
two routers on one store apart.

Why pre-fork and not uvicorn's ``--workers``: uvicorn's supervisor starts its
children with ``multiprocessing``'s spawn, which re-imports the app from an
import string; the router is an object built from the command's options
(model client, key, tables).  Here the parent binds the socket and builds the
router with no store connection open; each child, after the fork, takes its
own lock-holder id (``HOLDER-wI``), frees the locks its previous incarnation
held, and only then opens store connections of its own, and serves.

The parent only supervises: a child that dies is started again under the same
index (so its successor frees the locks it held); SIGTERM or SIGINT to the
parent is passed on to every child, which finish the requests they are
serving, and a child still running after ``STOP_S`` is killed.  A child whose
parent is gone (killed with SIGKILL) notices within a second and stops as on SIGTERM.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable

#: Seconds the children have, after the parent is told to stop, to finish their requests before they are killed.
STOP_S = 30.0

#: Seconds the supervisor waits before starting again a child that died (a child that cannot start is not a busy loop).
RESTART_DELAY_S = 1.0

#: The signals that tell the supervisor to stop its workers.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

#: How often (seconds) the supervisor looks for children that ended, and a child for a parent that is gone.
POLL_S = 0.1


def worker_holder(holder: str, index: int) -> str:
    """The lock-holder id of worker ``index`` of a router whose holder id is ``holder``."""
    return f"{holder}-w{index}"


def _say(text: str) -> None:
    print(f"loopfsm router: {text}", file=sys.stderr, flush=True)


def _watch_parent(parent: int) -> None:
    """In a child: stop this process (as SIGTERM does) once the parent that supervised it is gone."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="loopfsm-parent-watch", daemon=True).start()


def _start(index: int, run_child: Callable[[int], None]) -> int:
    """Fork child ``index``; in the child, run ``run_child(index)`` and end the process, never returning."""
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    # Held across the fork: a stop signal the child got before it dropped the parent's handlers would run them.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    pid = os.fork()
    if pid:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        return pid
    code = 1
    try:  # the child: the parent's handlers are not its own; uvicorn installs its own while it serves
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        _watch_parent(parent)
        run_child(index)
        code = 0
    except SystemExit as stop:  # uvicorn's way to say it could not start
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException as err:  # noqa: BLE001 - the child says why it ended, in a line, then ends; another starts
        _say(f"worker {index} stopped: {type(err).__name__}: {str(err)[:300]}")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def supervise(workers: int, run_child: Callable[[int], None]) -> None:
    """Run ``workers`` children, each ``run_child(index)`` in a forked process, until SIGTERM or SIGINT.

    Returns once every child has ended: those still running ``STOP_S`` after the
    signal are killed.  Call it with no store connection and no thread of the
    caller's open: a fork copies neither correctly.
    """
    children: dict[int, int] = {}  # pid -> index
    stopping: list[float] = []  # when the stop signal came, once it came
    told: set[int] = set()  # the children sent SIGTERM
    killed: set[int] = set()  # the children sent SIGKILL, STOP_S after the stop

    def tell() -> None:
        for pid in set(children) - told:
            told.add(pid)
            _signal(pid, signal.SIGTERM)

    def on_signal(signum: int, frame: object) -> None:
        if not stopping:
            stopping.append(time.monotonic())
            tell()

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    try:
        for index in range(workers):
            if stopping:  # told to stop while starting them: start no more
                break
            children[_start(index, run_child)] = index
        restart: dict[int, float] = {}  # index -> when to start it again
        while children or (restart and not stopping):
            if stopping:  # a child forked as the signal came was not among those the handler told
                tell()
            pid, status = os.waitpid(-1, os.WNOHANG) if children else (0, 0)
            if pid in children:
                index = children.pop(pid)
                if not stopping:
                    _say(f"worker {index} (pid {pid}) {_ended(status)}; starting it again")
                    restart[index] = time.monotonic() + RESTART_DELAY_S
                continue
            now = time.monotonic()
            for index, when in sorted(restart.items()):
                if when <= now and not stopping:
                    del restart[index]
                    children[_start(index, run_child)] = index
            if stopping and now - stopping[0] > STOP_S:
                for pid in set(children) - killed:
                    killed.add(pid)
                    _say(f"worker {children[pid]} (pid {pid}) still running {STOP_S:g} s after the stop: killed")
                    _signal(pid, signal.SIGKILL)
            time.sleep(POLL_S)
    finally:
        for pid in children:  # the supervisor itself failed: leave no child behind
            _signal(pid, signal.SIGKILL)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:  # already ended, not yet reaped
        pass
