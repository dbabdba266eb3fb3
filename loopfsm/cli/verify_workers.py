"""``loopfsm verify --workers N``: the machines of one run verified in N processes at once.

Each machine is explored in a process of its own, forked from the command
(so its compiled machine and registries need no pickling); its report is
written to a buffer and printed whole, in the machines' order, so reports
never interleave (progress lines go to stderr as they come, each names its
machine).  The search of one machine is not split: a single machine takes
as long as with one worker.  Ctrl-C reaches every process: each stops at
once and reports what it explored (INCOMPLETE), as a single process does.
Where processes cannot be forked (not Linux or macOS), the machines run one
after another.
"""

from __future__ import annotations

import io
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import NamedTuple

#: One machine's verification, run in a worker: its exit status, given the stream its report goes to.
Job = Callable[[io.StringIO], int]


class Done(NamedTuple):
    """What a worker hands back: the exit status and the report it printed."""

    status: int
    report: str


_JOBS: Sequence[Job] = ()  # set before the workers fork: they inherit it, nothing is pickled


def _run(index: int) -> Done:
    out = io.StringIO()
    status = _JOBS[index](out)
    return Done(status, out.getvalue())


def usable_workers(asked: int, machines: int) -> int:
    """The processes to use: at most one per machine and one per CPU this process may run on."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(asked, machines, cpus))


def run_all(jobs: Sequence[Job], workers: int, emit: Callable[[str], None], interrupted: int) -> list[int]:
    """Run ``jobs`` in ``workers`` forked processes; ``emit`` each report in order; their exit statuses.

    A worker that died (killed, out of memory) counts as ``interrupted`` and says so.
    """
    global _JOBS
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        statuses = []
        for job in jobs:
            out = io.StringIO()
            statuses.append(job(out))
            emit(out.getvalue())
        return statuses
    _JOBS = jobs
    statuses = []
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            futures: list[Future[Done]] = [pool.submit(_run, i) for i in range(len(jobs))]
            for future in futures:
                statuses.append(_wait(future, emit, interrupted))
    finally:
        _JOBS = ()
    return statuses


def _wait(future: Future[Done], emit: Callable[[str], None], interrupted: int) -> int:
    while True:
        try:
            done = future.result()
        except KeyboardInterrupt:
            continue  # the workers heard Ctrl-C too: each stops and reports what it explored
        except BrokenProcessPool as err:
            emit(f"  a verify worker stopped before reporting: {err}\n")
            return interrupted
        emit(done.report)
        return done.status


def workers_option(text: str) -> int:
    """``--workers``: a whole number of processes, at least 1."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        import argparse  # noqa: PLC0415

        raise argparse.ArgumentTypeError(f"must be a whole number of processes, at least 1, got {text!r}")
    return n
