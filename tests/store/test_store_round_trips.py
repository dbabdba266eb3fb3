"""What a turn costs the database in trips: counted on the real backends, each call that waits for the server.

A trip is a ``run`` (one statement), a ``run_many`` (a batch: pipelined on
PostgreSQL, so one round trip there), or a transaction's BEGIN and its
COMMIT.  On PostgreSQL every trip is a round trip to the server, so these
counts are what a turn waits for besides its own work.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from loopfsm.router.providers.scripted import ScriptedProvider
from loopfsm.router import Router
from loopfsm.router.store import Row, open_store
from loopfsm.router.store.backends import Backend, PostgresBackend, SqliteBackend, Statement

from tests.support.store_support import store_url  # noqa: F401  (fixture)


@dataclass
class Trips:
    """Every call of the store's backends that waits for the database, with the statements it sent."""

    calls: list[list[Statement]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.calls)

    def reset(self) -> None:
        self.calls.clear()


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> Iterator[Trips]:
    """Counts the calls of both real backends (they still run); BEGIN and COMMIT count one trip each."""
    seen = Trips()
    for cls in (SqliteBackend, PostgresBackend):
        run, run_many, transaction = cls.run, cls.run_many, cls.transaction

        def counted_run(self: Backend, sql: str, params: Any = (), _run: Any = run) -> Any:
            seen.calls.append([Statement(sql, params)])
            return _run(self, sql, params)

        def counted_many(self: Backend, statements: Any, _many: Any = run_many) -> None:
            seen.calls.append(list(statements))
            _many(self, statements)

        def counted_transaction(self: Backend, _transaction: Any = transaction) -> Any:
            seen.calls.append([Statement("BEGIN")])
            with _transaction(self):
                yield
            seen.calls.append([Statement("COMMIT")])

        monkeypatch.setattr(cls, "run", counted_run)
        monkeypatch.setattr(cls, "run_many", counted_many)
        monkeypatch.setattr(cls, "transaction", contextmanager(counted_transaction))
    yield seen


def _checkpoint_trips(url: str, prefix: str, trips: Trips, n_rows: int) -> int:
    with open_store(url, prefix=prefix) as s:
        session = f"s{n_rows}"
        s.ensure(session)
        a = s.admit(session, "execute", "q1", holder="A", now_ms=1000)
        assert a.lease is not None
        phase = a.record.phase_machine()
        phase.execute("r", "completed", False, 1001, {})
        rows = [Row("message", f"m/{i}", {"i": i}, body=f"row {i}") for i in range(n_rows)]
        trips.reset()
        s.checkpoint(a.lease, phase, request_id="q1", response={"ok": True}, rows=rows)
        n = len(trips)
        assert [r.meta["i"] for r in s.rows(session, "message")] == list(range(n_rows))
        return n


def test_a_steps_rows_cost_the_same_trips_however_many_it_writes(store_url, trips):  # noqa: F811
    """The rows go in two batches (the request id and the first row, then the rest), not a statement each."""
    url, prefix = store_url
    few, many = _checkpoint_trips(url, prefix, trips, 2), _checkpoint_trips(url, prefix, trips, 30)
    assert few == many == 5  # BEGIN, the run-state UPDATE, two batches, COMMIT


def test_admission_reads_the_run_and_its_used_request_ids_in_one_statement(store_url, trips):  # noqa: F811
    url, prefix = store_url
    with open_store(url, prefix=prefix) as s:
        s.ensure("s")
        trips.reset()
        a = s.admit("s", "execute", "q1", holder="A", now_ms=1000)
        assert a.outcome == "admitted"
        assert len(trips) == 2  # the read, then the conditional UPDATE taking the lock
        assert "requests" in trips.calls[0][0].sql


def test_a_used_request_id_is_still_refused_after_the_read_was_merged(store_url):  # noqa: F811
    url, prefix = store_url
    with open_store(url, prefix=prefix) as s:
        for rid in ("q1", "q2"):
            a = s.admit("s", "execute", rid, holder="A", now_ms=1000)
            assert a.lease is not None
            phase = a.record.phase_machine()
            phase.execute(f"r-{rid}", "completed", False, 1001, {})
            s.checkpoint(a.lease, phase, request_id=rid, response={"ok": rid})
        assert s.admit("s", "execute", "q1", holder="A", now_ms=1002).answer == "request_id_reused"
        assert s.admit("s", "execute", "q2", holder="A", now_ms=1002).outcome == "replayed"


def test_a_plaintext_turn_reads_its_history_row_once(store_url, trips):  # noqa: F811
    url, prefix = store_url
    script = [{"text": "done", "input_tokens": 10, "output_tokens": 2}]
    router = Router(url, prefix=prefix, provider=ScriptedProvider(script), holder="r")
    try:
        session = uuid.uuid4().hex[:16]
        for _ in range(2):  # the second turn has a history to read
            trips.reset()
            out = router.handle(session, {"type": "execute", "request_id": uuid.uuid4().hex, "data": {"prompt": "hi"}})
            assert out["status"] == "completed", out
        history_reads = [c for c in trips.calls if c[0].sql.startswith("SELECT") and "history" in tuple(c[0].params)]
        assert len(history_reads) == 1
        # admission (read, lock), the history, then the step (BEGIN, UPDATE, two batches, COMMIT)
        assert len(trips) == 8
    finally:
        router.close()


def test_a_failing_statement_in_a_batch_rolls_the_whole_step_back(store_url):  # noqa: F811
    """A batch is still one statement after the other in the caller's transaction: the first failure ends it."""
    url, prefix = store_url
    t = f"{prefix}meta"
    with open_store(url, prefix=prefix) as s:
        b = s.backend
        with pytest.raises(Exception), b.transaction():  # noqa: B017, PT011 - either driver's constraint error
            b.run_many(
                [
                    Statement(f"INSERT INTO {t} (key, value) VALUES (?, ?)", ("a", "1")),
                    Statement(f"INSERT INTO {t} (key, value) VALUES (?, ?)", ("a", "2")),  # the key again
                    Statement(f"INSERT INTO {t} (key, value) VALUES (?, ?)", ("b", "3")),
                ]
            )
        _, rows = b.run(f"SELECT key FROM {t} WHERE key IN ('a', 'b')")
        assert rows == []
        assert s.check_schema() > 0  # the connection is usable after the failed batch


def test_admission_of_a_new_session_creates_it_and_reads_it_once(store_url, trips):  # noqa: F811
    url, prefix = store_url
    with open_store(url, prefix=prefix) as s:
        trips.reset()
        a = s.admit("new", "execute", "q1", holder="A", now_ms=1000)
        assert a.outcome == "admitted" and a.record.phase == "Idle" and a.record.fence == 0
        assert len(trips) == 4  # the read finding nothing, the INSERT, the read, the lock
        assert s.load("new").fence == 1
