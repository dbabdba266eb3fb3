"""Connections: SQLite (stdlib, WAL, ``BEGIN IMMEDIATE``) and PostgreSQL (psycopg 3), behind one small shape.

Everything above this module speaks one SQL text with ``?`` placeholders;
a backend only knows how to connect, run a statement and hold a write
transaction.  No transaction is ever held open across anything but the
statements of one step.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from loopfsm.router.errors import StoreError
from loopfsm.core.errors import shown
from .sql import POSTGRES, SQLITE, Dialect


@dataclass(frozen=True)
class Statement:
    """One SQL statement (``?`` placeholders) and its parameters."""

    sql: str
    params: Sequence[Any] = ()


class Backend:
    dialect: Dialect
    url: str

    def run(self, sql: str, params: Sequence[Any] = ()) -> tuple[int, list[tuple[Any, ...]]]:
        """Run one statement; its rowcount and any rows it returned."""
        raise NotImplementedError

    def run_unsynced(self, sql: str, params: Sequence[Any] = ()) -> tuple[int, list[tuple[Any, ...]]]:
        """Run one statement whose commit need not outlive a power loss (a lease): see SqliteBackend's."""
        return self.run(sql, params)

    def run_many(self, statements: Sequence[Statement]) -> None:
        """Run statements whose results nobody reads, in order; where the server is remote, in one round trip."""
        for s in statements:
            self.run(s.sql, s.params)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        raise NotImplementedError
        yield  # pragma: no cover

    def close(self) -> None:
        raise NotImplementedError


class SqliteBackend(Backend):
    """One connection in autocommit mode; write transactions begin IMMEDIATE.

    A deferred transaction that reads and then writes can fail with "database
    is locked" without waiting for busy_timeout; IMMEDIATE takes the write lock
    up front, so concurrent writers queue instead.  WAL lets readers run
    beside the writer; it needs every process on one host (shared memory).
    """

    dialect = SQLITE

    def __init__(self, path: str, *, create: bool = True, busy_timeout_ms: int = 10000):
        self.url = f"sqlite:///{path}"
        if not create and path != ":memory:" and not os.path.exists(path):
            raise StoreError(f"no SQLite database at {path!r}: run `loopfsm store init URL` first")
        if path != ":memory:" and os.path.exists(path) and not os.path.isfile(path):
            # a device, a pipe or a directory: SQLite would fail mid-write ("disk I/O error") or hang
            raise StoreError(f"cannot open SQLite database {path!r}: not a regular file; a SQLite store is a file")
        try:
            self.conn = sqlite3.connect(
                path, isolation_level=None, timeout=busy_timeout_ms / 1000, check_same_thread=False
            )
            self.conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            if path != ":memory:":
                self.conn.execute("PRAGMA journal_mode=WAL")
            # FULL: a committed step survives a power loss, not only a killed process.
            self.conn.execute("PRAGMA synchronous=FULL")
            # Defence in depth for what a step overwrites or deletes (an ended run's bundle): freed space
            # is zeroed, and the WAL is cut back to nothing whenever it restarts, not left holding old frames.
            self.conn.execute("PRAGMA secure_delete=ON")
            self.conn.execute("PRAGMA journal_size_limit=0")
        except sqlite3.Error as err:
            raise StoreError(f"cannot open SQLite database {path!r}: {err}") from None
        self._depth = 0

    def run(self, sql: str, params: Sequence[Any] = ()) -> tuple[int, list[tuple[Any, ...]]]:
        cur = self.conn.execute(sql, tuple(params))
        rows = cur.fetchall()
        return cur.rowcount, rows

    def run_unsynced(self, sql: str, params: Sequence[Any] = ()) -> tuple[int, list[tuple[Any, ...]]]:
        """One statement committed with ``synchronous=NORMAL``: its commit does not wait for an fsync.

        Used only for taking a lease.  In WAL mode a commit appends to the
        WAL in order, and the next commit at FULL (the step's checkpoint, or
        a release) fsyncs the WAL with every frame before it, so a step that
        is on disk has its lease on disk too.  What a power loss can take is
        a lease no step has committed under yet, whose holder died with the
        power: the lock is free after the restart, as ``recover`` would make
        it, and the fence goes back only to a number nothing was written under.
        Every other statement commits at FULL.
        """
        self.conn.execute("PRAGMA synchronous=NORMAL")
        try:
            return self.run(sql, params)
        finally:
            self.conn.execute("PRAGMA synchronous=FULL")

    def run_many(self, statements: Sequence[Statement]) -> None:
        """One after the other on this connection (SQLite is in-process: there is no round trip to save)."""
        for s in statements:
            self.conn.execute(s.sql, tuple(s.params))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


class PostgresBackend(Backend):
    """One psycopg 3 connection in autocommit mode; a step is one explicit transaction.

    READ COMMITTED is enough: a conditional UPDATE blocked by another's row
    lock re-checks its WHERE on the committed row, so two admissions of one
    run can never both match.  lock_timeout and
    idle_in_transaction_session_timeout keep a hung process from holding a
    row lock.
    """

    dialect = POSTGRES

    def __init__(self, url: str, *, connect_timeout_s: int = 5):
        try:
            import psycopg
        except ImportError:  # pragma: no cover - the extra is installed in CI
            raise StoreError("PostgreSQL needs psycopg 3: pip install 'loopfsm[postgres]'") from None
        self.url = url
        try:
            self.conn = psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout_s)
            self.conn.execute("SET lock_timeout = '5s'")
            self.conn.execute("SET idle_in_transaction_session_timeout = '30s'")
        except psycopg.Error as err:
            raise StoreError(f"cannot connect to PostgreSQL at {_where(url)}: {_why(err, url)}") from None

    def run(self, sql: str, params: Sequence[Any] = ()) -> tuple[int, list[tuple[Any, ...]]]:
        cur = self.conn.execute(sql.replace("?", "%s"), tuple(params))
        rows = cur.fetchall() if cur.description is not None else []
        return cur.rowcount, rows

    def run_many(self, statements: Sequence[Statement]) -> None:
        """Pipelined: every statement is sent before any answer is awaited, so the batch costs one round trip.

        The server still runs them one after the other, in this order and in
        the caller's transaction; the first that fails raises here (at the
        pipeline's sync) and the ones after it are not run.
        """
        with self.conn.pipeline():
            for s in statements:
                self.conn.execute(s.sql.replace("?", "%s"), tuple(s.params))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.conn.transaction():
            yield

    def close(self) -> None:
        self.conn.close()


def _where(url: str) -> str:
    """``host:port`` of a PostgreSQL URL for a message, even when the URL does not parse."""
    try:
        parts = urlsplit(url)
        return f"{parts.hostname or 'local socket'}:{parts.port or 5432}"
    except ValueError:  # '[::1' or a port that is not a number: psycopg refused it already
        return "an address that does not parse"


def _why(err: Exception, url: str) -> str:
    """The driver's first line (which database, which user, which setting), never the URL's password."""
    line = (str(err).strip().splitlines() or [""])[0].replace(url, "<the store URL>")
    line = re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", line)  # any other spelling of a user:password@
    try:
        secret = urlsplit(url).password
    except ValueError:
        secret = None
    if secret:
        line = line.replace(secret, "***")
    line = line[:200]
    return f"{type(err).__name__}: {line}" if line else type(err).__name__


def connect(url: str, *, create: bool = True) -> Backend:
    """``sqlite:///runs.db`` (relative), ``sqlite:////abs/runs.db``, ``sqlite:///:memory:``, or ``postgresql://...``."""
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        if not path:
            raise StoreError("sqlite URL has no path: use sqlite:///runs.db")
        return SqliteBackend(path, create=create)
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresBackend(url)
    scheme = url.split(":", 1)[0] if ":" in url else url
    if scheme == "sqlite":  # sqlite://runs.db or sqlite:runs.db: the scheme is right, the slashes are not
        raise StoreError("a sqlite URL has three slashes before its path: sqlite:///runs.db, sqlite:////abs/runs.db")
    raise StoreError(f"unknown store URL scheme {shown(scheme)}: use sqlite:///PATH or postgresql://...")
