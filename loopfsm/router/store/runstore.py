"""The run-state store: one saved row per session (phase + lock), the rows each step writes, one API.

How a request is served against it (the seed's acquire / process / release):

1. ``admit`` reads the row, asks router_run's ``admit`` decision, and applies
   the answer as one conditional UPDATE against exactly the row it read
   (same fence, same version, lock free or expired unless it preempts).  Of
   any number of concurrent requests at most one such UPDATE matches: the
   winner holds a :class:`Lease` with a fence one higher than before.
2. The holder processes (model, tools ...) with no transaction open; it may
   ``renew`` its lease.
3. ``checkpoint`` writes the step's rows, the next phase and the stored
   response, and frees the lock, in one transaction whose first statement
   checks the fence.  A holder that was taken over or preempted gets
   :class:`FencedOut` and nothing it sent is written.

Time is read from ``clock`` (ms) unless a call passes ``now_ms``.  Safety never
depends on clocks agreeing: the fence alone decides whose writes land; a
clock only decides when an unresponsive holder's lease may be taken over.

The values it reads and writes (:class:`RunRecord`, :class:`Lease`,
:class:`Admission`, :class:`Row`, :class:`StoredRow`) are in
:mod:`loopfsm.router.store.records`, and are importable from here too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from loopfsm.machines.errors import FencedOut
from loopfsm.router.errors import StoreError
from loopfsm.machines.router_run import ROUTER_RUN
from . import ids
from .backends import Backend, Statement, connect
from .records import (
    ROW_COLS,
    STATE_COLS,
    Admission,
    Lease,
    Row,
    RunRecord,
    StoredRow,
    dump,
    run_record,
    stored_row,
    wall_clock_ms,
)
from .sql import ROW_KINDS, SCHEMA_VERSION, check_prefix, ddl, drop

__all__ = [
    "REQUESTS",
    "Admission",
    "Lease",
    "Row",
    "RunRecord",
    "RunStore",
    "StoredRow",
    "open_store",
    "wall_clock_ms",
]

REQUESTS = ("execute", "decrypted", "approval_decisions", "tool_results", "sealed", "inject", "break")


class RunStore:
    """The run-state store on one backend; see :func:`open_store`.

    One instance holds one connection and is meant for one thread; each
    router process (or worker thread) opens its own.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        prefix: str = "loopfsm_",
        clock: Callable[[], int] = wall_clock_ms,
        lease_ms: int | None = None,
        admit_retries: int = 8,
        fault: Callable[[str], None] | None = None,
    ):
        self.backend = backend
        self.prefix = check_prefix(prefix)
        self.clock = clock
        self.lease_ms = lease_ms if lease_ms is not None else ROUTER_RUN.default_policy.lease_ms
        self.admit_retries = admit_retries
        # Fault injection for crash tests: called with the name of each point of a step.
        self._fault = fault or (lambda point: None)
        p = self.prefix
        self._t_state, self._t_rows, self._t_meta = f"{p}run_state", f"{p}rows", f"{p}meta"
        self._t_requests = f"{p}requests"

    # -- schema -----------------------------------------------------------------------------
    def init(self) -> int:
        """Create the tables if missing and record the schema version; returns it.  Idempotent.

        An older store is upgraded in place.  Version 4 adds the holder-id
        claims (:mod:`.claims`), an empty table.  Version 3 adds when each request
        id was used (``used_at``, which the sweep's retention reads); the ids
        kept before count as used at the upgrade.  Version 2 added the requests
        table, which the DDL has just created, filled with the request ids
        the old tables still name: each session's last one, and every
        execute or inject whose prompt row (``message:u-<request_id>``) is
        stored.  Those are the requests that start a run and write a row
        named by their id, so none of them can run again and overwrite it;
        an older continuation's id is not recorded anywhere and stays free.
        """
        recorded = self._recorded_version()
        upgrading = recorded in ("1", "2")  # version 4 only adds a table, which the DDL makes
        now = self.now() if upgrading else 0  # the clock is read only by an upgrade (a model's may not run yet)
        with self.backend.transaction():
            for stmt in ddl(self.backend.dialect, self.prefix):
                self.backend.run(stmt)
            if recorded == "2":  # version 3 records when each request id was used
                self.backend.run(f"ALTER TABLE {self._t_requests} ADD COLUMN used_at {self.backend.dialect.integer}")
            if recorded == "1":
                self._backfill_requests()
            if upgrading:
                # Ids kept before the upgrade count as used now: each is kept a whole retention from here.
                self.backend.run(f"UPDATE {self._t_requests} SET used_at = ? WHERE used_at IS NULL", (now,))
            # After the upgrade's ALTER (a version-2 table has no used_at before it): the sweep's pruning reads it.
            self.backend.run(f"CREATE INDEX IF NOT EXISTS {self._t_requests}_used_at ON {self._t_requests} (used_at)")
            self.backend.run(
                f"INSERT INTO {self._t_meta} (key, value) VALUES ('schema_version', ?) ON CONFLICT (key) DO NOTHING",
                (str(SCHEMA_VERSION),),
            )
            self.backend.run(
                f"UPDATE {self._t_meta} SET value = ? WHERE key = 'schema_version' AND value IN ('1', '2', '3')",
                (str(SCHEMA_VERSION),),
            )
        return self.check_schema()

    def _recorded_version(self) -> str | None:
        """The schema version the meta table records, None before there is one (read outside a transaction)."""
        try:
            _, rows = self.backend.run(f"SELECT value FROM {self._t_meta} WHERE key = 'schema_version'")
        except Exception:  # noqa: BLE001 - either driver's "no such table": a new store
            return None
        return str(rows[0][0]) if rows else None

    def _backfill_requests(self) -> None:
        """The request ids a version-1 store still names (see :meth:`init`), as used by their step."""
        self.backend.run(
            f"INSERT INTO {self._t_requests} (session_id, request_id, step) "
            f"SELECT session_id, substr(row_id, 3), MIN(step) FROM {self._t_rows} "
            f"WHERE kind = 'message' AND substr(row_id, 1, 2) = 'u-' GROUP BY session_id, row_id "
            f"ON CONFLICT (session_id, request_id) DO NOTHING"
        )
        self.backend.run(
            f"INSERT INTO {self._t_requests} (session_id, request_id, step) "
            f"SELECT session_id, last_request_id, version FROM {self._t_state} WHERE last_request_id IS NOT NULL "
            f"ON CONFLICT (session_id, request_id) DO NOTHING"
        )

    def check_schema(self) -> int:
        """The recorded schema version; StoreError when the tables are missing or of another version."""
        try:
            _, rows = self.backend.run(f"SELECT value FROM {self._t_meta} WHERE key = 'schema_version'")
        except Exception:
            self._reset_after_error()
            raise StoreError(
                f"no loopfsm store at {self._where()} (prefix {self.prefix!r}): run `loopfsm store init URL` first"
            ) from None
        if not rows:
            raise StoreError(f"store at {self._where()} records no schema version: run `loopfsm store init URL`")
        version = int(rows[0][0])
        if version < SCHEMA_VERSION:
            raise StoreError(
                f"store at {self._where()} has schema version {version}; this loopfsm reads version {SCHEMA_VERSION}: "
                "upgrade it in place with `loopfsm store init URL` (or start `loopfsm router serve`, which does "
                'the same); docs/router.md, "Upgrading the store"'
            )
        if version != SCHEMA_VERSION:
            raise StoreError(
                f"store at {self._where()} has schema version {version}, written by a newer loopfsm; this one reads "
                f"version {SCHEMA_VERSION}: run that loopfsm (or a newer one) against it"
            )
        return version

    def drop(self) -> None:
        """Remove this prefix's tables (tests and tear-down)."""
        with self.backend.transaction():
            for stmt in drop(self.prefix):
                self.backend.run(stmt)

    def _where(self) -> str:
        return self.backend.dialect.name

    def _reset_after_error(self) -> None:
        conn = getattr(self.backend, "conn", None)
        if self.backend.dialect.name == "postgresql" and conn is not None:
            try:
                conn.rollback()
            except Exception:  # noqa: BLE001 - best effort; the error raised next says what happened
                pass

    # -- reading ----------------------------------------------------------------------------
    def now(self, now_ms: int | None = None) -> int:
        return self.clock() if now_ms is None else now_ms

    def load(self, session_id: str) -> RunRecord | None:
        _, rows = self.backend.run(f"SELECT {STATE_COLS} FROM {self._t_state} WHERE session_id = ?", (session_id,))
        return run_record(rows[0]) if rows else None

    def ensure(self, session_id: str, *, now_ms: int | None = None) -> RunRecord:
        """The session's row, created Idle with a free lock if it does not exist yet."""
        rec = self.load(session_id)
        if rec is not None:
            return rec
        self._create(session_id, now_ms)
        rec = self.load(session_id)
        assert rec is not None
        return rec

    def _create(self, session_id: str, now_ms: int | None) -> None:
        """The session's row, Idle with a free lock, unless it exists already (then nothing changes)."""
        self.backend.run(
            f"INSERT INTO {self._t_state} (session_id, phase, snapshot, updated_at) "
            f"VALUES (?, 'Idle', ?, ?) ON CONFLICT (session_id) DO NOTHING",
            (session_id, dump(ROUTER_RUN.new().snapshot()), self.now(now_ms)),
        )

    def rows(self, session_id: str, kind: str | None = None) -> list[StoredRow]:
        """The session's rows in history order (step, then order within the step)."""
        sql = f"SELECT {ROW_COLS} FROM {self._t_rows} WHERE session_id = ?"
        params: list[Any] = [session_id]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        _, rows = self.backend.run(sql + " ORDER BY step, ord, kind, row_id", params)
        return [stored_row(r) for r in rows]

    def row(self, session_id: str, kind: str, row_id: str) -> StoredRow | None:
        """One stored row by its id, or None."""
        _, rows = self.backend.run(
            f"SELECT {ROW_COLS} FROM {self._t_rows} WHERE session_id = ? AND kind = ? AND row_id = ?",
            (session_id, kind, row_id),
        )
        if not rows:
            return None
        return stored_row(rows[0])

    def rows_by_ref(self, session_id: str, refs: Sequence[str]) -> dict[str, StoredRow]:
        """The stored rows of ``refs`` (``kind:row_id``), those that exist, in one query per kind and 500 ids.

        An encrypted session's next run reads its whole sealed history this way:
        one query per message made a 20-turn session's run read 40 rows one by one.
        """
        wanted: dict[str, list[str]] = {}
        for ref in refs:
            kind, rid = ref.split(":", 1)
            wanted.setdefault(kind, []).append(rid)
        found: dict[str, StoredRow] = {}
        for kind, row_ids in wanted.items():
            for at in range(0, len(row_ids), 500):
                chunk = row_ids[at : at + 500]
                _, rows = self.backend.run(
                    f"SELECT {ROW_COLS} FROM {self._t_rows} WHERE session_id = ? AND kind = ? "
                    f"AND row_id IN ({', '.join('?' * len(chunk))})",
                    (session_id, kind, *chunk),
                )
                for r in rows:
                    row = stored_row(r)
                    found[f"{row.kind}:{row.row_id}"] = row
        return found

    def prune_requests(self, older_than_ms: int) -> int:
        """Forget request ids used before ``older_than_ms`` (the sweep's retention); how many were forgotten.

        A session's last request id stays in its state row (a re-send of it is answered from the saved
        response), so only older ids go: one of them re-sent after this would run again.
        """
        with self.backend.transaction():
            _, rows = self.backend.run(
                f"DELETE FROM {self._t_requests} WHERE used_at < ? RETURNING request_id", (older_than_ms,)
            )
        return len(rows)

    def request_used(self, session_id: str, request_id: str) -> bool:
        """Whether a committed step of the session used ``request_id`` (the last one or an older one)."""
        _, rows = self.backend.run(
            f"SELECT 1 FROM {self._t_requests} WHERE session_id = ? AND request_id = ?", (session_id, request_id)
        )
        return bool(rows)

    # -- admission --------------------------------------------------------------------------
    def admit(
        self,
        session_id: str,
        request: str,
        request_id: str,
        *,
        holder: str,
        now_ms: int | None = None,
        lease_ms: int | None = None,
    ) -> Admission:
        """Decide ``request`` against the saved row and, if admitted, take the lock in one conditional UPDATE.

        The decision is router_run's ``admit`` chain (the rebuilt admission
        table); if the row changed between the read and the UPDATE, the
        request is decided again against the new row, up to
        ``admit_retries`` times, then answered busy.
        """
        if request not in REQUESTS:
            raise ValueError(f"unknown request type {request!r} (one of {', '.join(REQUESTS)})")
        lease = self.lease_ms if lease_ms is None else lease_ms
        rec, used = self._admission_read(session_id, request_id, now_ms)
        for _ in range(self.admit_retries):
            now = self.now(now_ms)
            lock = rec.lock_state(now)
            phase = rec.phase_machine()
            since = rec.snapshot["state_data"].get("since")
            replay = request_id == rec.last_request_id
            rule, answer = phase.explain(
                "admit",
                request=request,
                lock=lock,
                replay=replay,
                reused=not replay and used,
                pause_age_ms=max(0, now - since) if isinstance(since, int) else 0,
            )
            if answer == "replay":
                return Admission("replayed", answer, rule, rec, response=rec.last_response)
            if answer not in ("admit", "preempt", "expire"):
                retry = max(0, (rec.lease_expires_at or now) - now) if answer == "busy" else None
                return Admission(
                    "refused",
                    answer,
                    rule,
                    rec,
                    retry_after_ms=retry,
                    allowed_continuations=phase.decide("continuations"),
                )
            only_if_free = "" if answer == "preempt" else " AND (holder IS NULL OR lease_expires_at <= ?)"
            params: list[Any] = [holder, now, now + lease, now, session_id, rec.fence, rec.version]
            if only_if_free:
                params.append(now)
            # The lease's commit is not waited for on disk (SQLite; see run_unsynced): the step's is.
            n, _ = self.backend.run_unsynced(
                f"UPDATE {self._t_state} SET holder = ?, fence = fence + 1, started_at = ?, "
                f"lease_expires_at = ?, cancel_requested = NULL, updated_at = ? "
                f"WHERE session_id = ? AND fence = ? AND version = ?{only_if_free}",
                params,
            )
            if n == 1:
                granted = Lease(session_id, holder, rec.fence + 1, rec.version, now, now + lease)
                return Admission(
                    "admitted",
                    answer,
                    rule,
                    rec,
                    lease=granted,
                    took_over=lock == "expired" and answer == "admit",
                    preempted=answer == "preempt" and lock != "free",
                    phase=phase,
                )
            rec, used = self._admission_read(session_id, request_id, now_ms)
        now = self.now(now_ms)
        return Admission(
            "refused",
            "busy",
            "contended",
            rec,
            retry_after_ms=max(0, (rec.lease_expires_at or now) - now),
            allowed_continuations=rec.phase_machine().decide("continuations"),
        )

    def _admission_read(self, session_id: str, request_id: str, now_ms: int | None) -> tuple[RunRecord, bool]:
        """The session's row (created Idle if missing) and whether a committed step used ``request_id``.

        One statement, so admission costs one read (a round trip on PostgreSQL), not two.
        """
        sql = (
            f"SELECT {STATE_COLS}, EXISTS (SELECT 1 FROM {self._t_requests} WHERE session_id = ? AND request_id = ?) "
            f"FROM {self._t_state} WHERE session_id = ?"
        )
        _, rows = self.backend.run(sql, (session_id, request_id, session_id))
        if not rows:  # a new session: created, then read as any other
            self._create(session_id, now_ms)
            _, rows = self.backend.run(sql, (session_id, request_id, session_id))
        return run_record(rows[0][:12]), bool(rows[0][12])

    # -- holding the lock -------------------------------------------------------------------
    def renew(self, lease: Lease, *, now_ms: int | None = None, lease_ms: int | None = None) -> Lease:
        """Extend the lease; raises FencedOut if it is no longer current.  The result shows a pending cancel."""
        now = self.now(now_ms)
        until = now + (self.lease_ms if lease_ms is None else lease_ms)
        n, rows = self.backend.run(
            f"UPDATE {self._t_state} SET lease_expires_at = ?, updated_at = ? "
            f"WHERE session_id = ? AND holder = ? AND fence = ? RETURNING cancel_requested",
            (until, now, lease.session_id, lease.holder, lease.fence),
        )
        if not rows:
            raise self._fenced(lease, "renew")
        return Lease(lease.session_id, lease.holder, lease.fence, lease.version, lease.started_at, until, rows[0][0])

    def request_cancel(self, session_id: str, kind: Literal["break", "inject"]) -> bool:
        """Ask the running turn to stop at its next renew; False when no turn is running."""
        n, _ = self.backend.run(
            f"UPDATE {self._t_state} SET cancel_requested = ? WHERE session_id = ? AND holder IS NOT NULL",
            (kind, session_id),
        )
        return n == 1

    def checkpoint(
        self,
        lease: Lease,
        phase: Any,
        *,
        request_id: str,
        response: Any,
        rows: Sequence[Row] = (),
        trace: Sequence[str | Mapping[str, Any]] = (),
        now_ms: int | None = None,
        replayable: bool = True,
        run_id: str | None = None,
    ) -> RunRecord:
        """Commit a step: its rows, the next phase (a router_run instance), the response, and release; atomically.

        Row ids are derived from (session, run, step, slot), so re-running a
        step after a crash writes the same ids and overwrites.  Trace event
        names become ``trace`` rows (meta only, no payload).  The stored
        response is replayed to a re-sent request with the same request_id;
        with ``replayable=False`` (an encrypted session, whose responses carry
        plaintext for the client to seal) nothing of it is stored and a re-send
        is told its response is lost.
        ``run_id`` names the run the rows belong to when the phase does not (a turn that
        failed before its run reached a checkpoint leaves the phase Idle).
        """
        for r in rows:
            if r.kind not in ROW_KINDS:
                raise ValueError(f"unknown row kind {r.kind!r} (one of {', '.join(ROW_KINDS)})")
            if r.body is not None and r.sealed is not None:
                raise ValueError(f"row {r.kind}:{r.slot} has both body and sealed content")
        now = self.now(now_ms)
        snap = phase.snapshot()
        stored = dump(response) if replayable else None  # once: the row, and the record returned below
        run_id = run_id or phase.data.run_id or phase.data.last_run_id or ""
        all_rows = list(rows) + [
            Row("trace", f"trace/{i}", dict(e) if isinstance(e, Mapping) else {"event": e}) for i, e in enumerate(trace)
        ]
        self._fault("before_transaction")
        with self.backend.transaction():
            _, got = self.backend.run(
                f"UPDATE {self._t_state} SET phase = ?, snapshot = ?, version = version + 1, holder = NULL, "
                f"started_at = NULL, lease_expires_at = NULL, cancel_requested = NULL, last_request_id = ?, "
                f"last_response = ?, updated_at = ? WHERE session_id = ? AND holder = ? AND fence = ? "
                f"AND version = ? RETURNING version",
                (
                    phase.state,
                    dump(snap),
                    request_id,
                    stored,
                    now,
                    lease.session_id,
                    lease.holder,
                    lease.fence,
                    lease.version,
                ),
            )
            if not got:
                raise self._fenced(lease, "checkpoint")
            step = got[0][0]
            # A plain INSERT: admission refuses a used request_id, so a conflict here is a bug, and it is loud.
            # The step's rows go in two batches (one round trip each on PostgreSQL): the request id and
            # the first row, then the rest; the crash tests stop the process between the two.
            writes = [
                Statement(
                    f"INSERT INTO {self._t_requests} (session_id, request_id, step, used_at) VALUES (?, ?, ?, ?)",
                    (lease.session_id, request_id, step, now),
                )
            ]
            writes += [
                self._row_statement(lease.session_id, run_id, step, order, r, lease.fence)
                for order, r in enumerate(all_rows)
            ]
            self.backend.run_many(writes[:2])
            if len(writes) > 2:
                self._fault("between_rows")
                self.backend.run_many(writes[2:])
            self._fault("before_commit")
        self._fault("after_commit")
        # The row as just committed, without reading it back.
        return RunRecord(
            lease.session_id,
            phase.state,
            snap,
            step,
            lease.fence,
            None,
            None,
            None,
            None,
            request_id,
            None if stored is None else json.loads(stored),
            now,
        )

    @property
    def state_table(self) -> str:
        """The run-state table's name (with the store's prefix), for the sweeper's statements."""
        return self._t_state

    @property
    def rows_table(self) -> str:
        """The rows table's name (with the store's prefix), for the sweeper's statements."""
        return self._t_rows

    def put_row(self, session_id: str, run_id: str, step: int, order: int, r: Row, fence: int) -> None:
        """Write (or overwrite) one row inside the caller's transaction; its id derives from its slot.

        Public for the sweeper, which writes the rows that end a run inside its own transaction.
        """
        s = self._row_statement(session_id, run_id, step, order, r, fence)
        self.backend.run(s.sql, s.params)

    def _row_statement(self, session_id: str, run_id: str, step: int, order: int, r: Row, fence: int) -> Statement:
        """The statement writing (or overwriting) one row; its id derives from its slot."""
        rid = r.row_id or ids.row_id(session_id, run_id, step, r.slot)
        return Statement(
            f"INSERT INTO {self._t_rows} (session_id, kind, row_id, run_id, step, ord, meta, body, sealed, "
            f"written_fence) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, kind, row_id) "
            f"DO UPDATE SET run_id = excluded.run_id, step = excluded.step, ord = excluded.ord, "
            f"meta = excluded.meta, body = excluded.body, sealed = excluded.sealed, "
            f"written_fence = excluded.written_fence",
            (
                session_id,
                r.kind,
                rid,
                run_id,
                step,
                order,
                dump(r.meta),
                None if r.body is None else dump(r.body),
                None if r.sealed is None else dump(r.sealed),
                fence,
            ),
        )

    def release(self, lease: Lease, *, now_ms: int | None = None) -> None:
        """Give the lock back without a checkpoint (a transient failure): the phase stays as it was."""
        n, _ = self.backend.run(
            f"UPDATE {self._t_state} SET holder = NULL, started_at = NULL, lease_expires_at = NULL, "
            f"cancel_requested = NULL, updated_at = ? WHERE session_id = ? AND holder = ? AND fence = ?",
            (self.now(now_ms), lease.session_id, lease.holder, lease.fence),
        )
        if n != 1:
            raise self._fenced(lease, "release")

    def _fenced(self, lease: Lease, what: str) -> FencedOut:
        return FencedOut(
            f"{what} refused: session {lease.session_id!r} lock fence {lease.fence} held by "
            f"{lease.holder!r} is no longer current"
        )

    # -- recovery ---------------------------------------------------------------------------
    def recover(self, holder: str, *, now_ms: int | None = None) -> list[str]:
        """Startup of router ``holder``: free the locks its previous incarnation held; their runs resume from phase.

        Locks of other routers are left alone: they are taken over only once
        their lease expires.  Returns the sessions freed.
        """
        _, rows = self.backend.run(
            f"UPDATE {self._t_state} SET holder = NULL, started_at = NULL, lease_expires_at = NULL, "
            f"cancel_requested = NULL, updated_at = ? WHERE holder = ? RETURNING session_id",
            (self.now(now_ms), holder),
        )
        return sorted(r[0] for r in rows)

    def recover_all(self, *, now_ms: int | None = None) -> list[str]:
        """The seed's startup rule: free every lock.  Only safe when one router process uses the store."""
        _, rows = self.backend.run(
            f"UPDATE {self._t_state} SET holder = NULL, started_at = NULL, lease_expires_at = NULL, "
            f"cancel_requested = NULL, updated_at = ? WHERE holder IS NOT NULL RETURNING session_id",
            (self.now(now_ms),),
        )
        return sorted(r[0] for r in rows)

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(
    url: str,
    *,
    prefix: str = "loopfsm_",
    create: bool = False,
    clock: Callable[[], int] = wall_clock_ms,
    lease_ms: int | None = None,
    fault: Callable[[str], None] | None = None,
) -> RunStore:
    """Open the store a URL names: ``sqlite:///runs.db`` (the embedded default) or ``postgresql://...``.

    With ``create`` the tables are made if missing (what ``loopfsm store init``
    does); otherwise a missing or other-version schema raises StoreError.
    """
    store = RunStore(connect(url, create=create), prefix=prefix, clock=clock, lease_ms=lease_ms, fault=fault)
    try:
        if create:
            store.init()
        else:
            store.check_schema()
    except BaseException:
        store.close()
        raise
    return store
