"""The sweep: end what nobody will come back for, by the machines' own rules.

Without it an abandoned run waits for its session's next request: a lease of a
router that died holding it stays on the row, and a paused run keeps its clear
run-input bundle until a request finds the pause too old (``pause_ttl_ms``,
24 h by default).  A sweep visits every row that holds a lock or a pause and
asks the machines, never a rule restated here:

- run_lock's ``expire`` feed (the ``lease_expired`` guard) says whether the
  lease ran out; if it did the lock is freed (``lock.expired``).
- router_run's ``admit`` decision is asked what a new prompt arriving now
  would be answered, with the lock as the sweep leaves it; ``expire`` (rule 7,
  a pause that waited ``pause_ttl_ms``) ends the run with ``break_run`` reason
  ``expired`` and empties its ``input`` rows (its bundle, clear or sealed), exactly what
  that request would have done.  A live lease answers ``busy``: a running turn
  is never touched.

Each session is one transaction whose first statement is a conditional UPDATE
against the very row the sweep read (same fence and version, and the lease
still expired unless the lock was free).  Two sweepers, or a sweeper and a
router, racing on one row: at most one UPDATE matches, the other changes
nothing and is counted as a conflict (the next sweep looks again).  A sweep
that finds nothing to do writes nothing, so sweeping is idempotent.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loopfsm.core.errors import SnapshotError
from .phase_feeds import PhaseFeeds
from .records import Row, RunRecord, wall_clock_ms

if TYPE_CHECKING:  # pragma: no cover
    from .runstore import RunStore

log = logging.getLogger("loopfsm.sweep")


@dataclass(frozen=True)
class Swept:
    """What one sweep did, by session id (each list sorted)."""

    now: int
    leases_freed: list[str] = field(default_factory=list)
    runs_expired: list[str] = field(default_factory=list)
    bundles_emptied: int = 0
    conflicts: list[str] = field(default_factory=list)  # rows that changed under the sweep; looked at again next time
    # Runs whose saved phase these machine tables cannot read: kept as saved, and said, so an operator
    # who deployed an edit that strands them hears of it from the sweep too.
    unreadable: list[str] = field(default_factory=list)
    requests_forgotten: int = 0  # request ids used longer ago than the retention, no longer remembered

    def summary(self) -> str:
        shown = ", ".join(self.unreadable[:5]) + (", ..." if len(self.unreadable) > 5 else "")
        return (
            f"{len(self.runs_expired)} paused run(s) expired, {len(self.leases_freed)} expired lease(s) freed, "
            f"{self.bundles_emptied} clear bundle row(s) emptied"
            + (
                f", {self.requests_forgotten} request id(s) past the retention forgotten"
                if self.requests_forgotten
                else ""
            )
            + (f", {len(self.conflicts)} row(s) changed under the sweep" if self.conflicts else "")
            + (
                f", {len(self.unreadable)} run(s) these machine tables cannot read kept as saved ({shown}; "
                "`loopfsm router serve` answers them with the reason)"
                if self.unreadable
                else ""
            )
        )


#: How long a used request id is remembered (a re-send of it inside this is refused, never run again):
#: seven days, far past any client's re-sends (the reference client's last is seconds after the first).
REQUEST_RETENTION_MS = 7 * 24 * 3_600_000


def sweep(store: RunStore, *, now_ms: int | None = None, request_retention_ms: int = REQUEST_RETENTION_MS) -> Swept:
    """One pass over the store as of ``now_ms`` (the store's clock when None): free expired leases, end
    paused runs whose pause expired, emptying their clear bundle, and forget request ids used more than
    ``request_retention_ms`` ago.

    Safe beside routers and other sweepers on the same database, and idempotent.
    """
    now = store.now(now_ms)
    if request_retention_ms < 0:
        raise ValueError(f"the request id retention must be at least 0 ms, got {request_retention_ms!r}")
    forgotten = store.prune_requests(now - request_retention_ms)
    _, rows = store.backend.run(
        f"SELECT session_id FROM {store.state_table} WHERE holder IS NOT NULL OR phase <> 'Idle' ORDER BY session_id"
    )
    freed: list[str] = []
    expired: list[str] = []
    conflicts: list[str] = []
    unreadable: list[str] = []
    emptied = 0
    for (session_id,) in rows:
        rec = store.load(session_id)
        if rec is None:  # pragma: no cover - rows are never deleted but by drop()
            continue
        done = _sweep_one(store, rec, now)
        if done.conflict:
            conflicts.append(session_id)
        if done.unreadable:
            unreadable.append(session_id)
        if done.lease_freed:
            freed.append(session_id)
        if done.run_expired:
            expired.append(session_id)
        emptied += done.emptied
    return Swept(now, freed, expired, emptied, conflicts, unreadable, forgotten)


@dataclass(frozen=True)
class _Done:
    lease_freed: bool = False
    run_expired: bool = False
    emptied: int = 0
    conflict: bool = False
    unreadable: bool = False


def _sweep_one(store: RunStore, rec: RunRecord, now: int) -> _Done:
    """Sweep one row as read: what was done (nothing when the row changed since, which is a conflict)."""
    lock = rec.lock_state(now)
    if lock == "held":
        return _Done()  # a turn is running: its lease has to run out first
    events: list[str] = []
    if lock == "expired":
        events += list(rec.lock_machine().expire(now) or [])
    try:
        phase = rec.phase_machine()
    except SnapshotError:
        return _Done(unreadable=True)  # saved in a shape these tables cannot read: kept as saved, never reset
    since = rec.snapshot["state_data"].get("since")
    answer = phase.decide(
        "admit",
        request="execute",
        lock="free",  # as the sweep leaves it
        replay=False,
        pause_age_ms=max(0, now - since) if isinstance(since, int) else 0,
    )
    run_id = phase.data.run_id or phase.data.last_run_id or ""
    run_expired = answer == "expire"
    feed = PhaseFeeds(phase)
    if run_expired:
        events += ["run.expired", *feed("break_run", now=now, reason="expired")]
    if not events:
        return _Done()
    only_if_free = " AND (holder IS NULL OR lease_expires_at <= ?)"
    params: list[object] = [phase.state, json.dumps(phase.snapshot(), sort_keys=True, separators=(",", ":")), now]
    params += [rec.session_id, rec.fence, rec.version, now]
    emptied = 0
    with store.backend.transaction():
        _, got = store.backend.run(
            f"UPDATE {store.state_table} SET phase = ?, snapshot = ?, version = version + 1, holder = NULL, "
            f"started_at = NULL, lease_expires_at = NULL, cancel_requested = NULL, updated_at = ? "
            f"WHERE session_id = ? AND fence = ? AND version = ?{only_if_free} RETURNING version",
            params,
        )
        if not got:
            return _Done(conflict=True)
        step = int(got[0][0])
        order = 0
        if run_expired:
            # The run's bundle (clear, or sealed in an encrypted session) goes with it, as when a request ends it.
            _, clear = store.backend.run(
                f"SELECT kind, row_id, meta FROM {store.rows_table} "
                f"WHERE session_id = ? AND kind = 'input' AND run_id = ? "
                f"AND (body IS NOT NULL OR sealed IS NOT NULL) ORDER BY row_id",
                (rec.session_id, run_id),
            )
            for kind, row_id, meta in clear:
                gone = Row(kind, f"{kind}/{row_id}", dict(json.loads(meta), ended=True), row_id=row_id)
                store.put_row(rec.session_id, run_id, step, order, gone, rec.fence)
                order += 1
                emptied += 1
        traced: list[dict[str, Any]] = [{"event": e} for e in events] + [f.meta() for f in feed.fed]
        for i, meta in enumerate(traced):
            store.put_row(rec.session_id, run_id, step, order, Row("trace", f"trace/{i}", meta), rec.fence)
            order += 1
    return _Done(lease_freed=lock == "expired", run_expired=run_expired, emptied=emptied)


class PeriodicSweep:
    """A sweep every ``interval_s`` seconds on its own thread and connection, until :meth:`stop`.

    The first pass runs at start.  A pass that fails (the database restarted,
    the tables are gone) is logged by its error's type only and retried on the
    next tick with a fresh connection; it never stops the process hosting it.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "loopfsm_",
        interval_s: float = 60.0,
        clock: Callable[[], int] = wall_clock_ms,
        on_sweep: Callable[[Swept], None] | None = None,
    ):
        if not 0 < interval_s <= threading.TIMEOUT_MAX:
            raise ValueError(f"sweep interval must be a positive number of seconds, got {interval_s!r}")
        self.url, self.prefix, self.interval_s, self.clock = url, prefix, interval_s, clock
        self.on_sweep = on_sweep or (lambda swept: None)
        self.passes = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> PeriodicSweep:
        self._thread = threading.Thread(target=self._loop, name="loopfsm-sweep", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        from .runstore import open_store

        store: RunStore | None = None
        while True:
            try:
                if store is None:
                    store = open_store(self.url, prefix=self.prefix, clock=self.clock)
                swept = sweep(store)
                self.passes += 1
                if swept.leases_freed or swept.runs_expired or swept.conflicts:
                    log.info("sweep: %s", swept.summary())
                self.on_sweep(swept)
            except Exception as err:  # noqa: BLE001 - a failed pass is retried; the router keeps serving
                log.warning("sweep failed (%s); retrying in %.1f s", type(err).__name__, self.interval_s)
                if store is not None:
                    with contextlib.suppress(Exception):
                        store.close()
                store = None
            if self._stop.wait(self.interval_s):
                break
        if store is not None:
            store.close()


__all__ = ["REQUEST_RETENTION_MS", "Swept", "sweep", "PeriodicSweep"]
