"""The store fixtures: every store test runs on SQLite (a file, WAL) and on the local PostgreSQL.

PostgreSQL is at LOOPFSM_PG_URL (default: the machine's trust-auth server,
database test).  Each test gets its own table prefix and drops its tables.
Outside CI an unreachable server skips the PostgreSQL half, loudly; under CI it
fails, so a broken database can never turn the proof into a skip.
"""

from __future__ import annotations

import os
import uuid

import pytest

from loopfsm.router.store import open_store

PG_URL = os.environ.get("LOOPFSM_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def pg_reachable() -> str | None:
    try:
        import psycopg

        with psycopg.connect(PG_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
        return None
    except Exception as err:  # noqa: BLE001 - any failure means "not reachable", reported below
        return f"{type(err).__name__}: {err}"


def need_pg() -> None:
    problem = pg_reachable()
    if problem is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL at {PG_URL} is unreachable under CI ({problem}); .ci/run starts it")
    pytest.skip(f"PostgreSQL at {PG_URL} unreachable ({problem}); set CI=1 to make this a failure")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """(url, prefix) of a fresh, initialised store; dropped afterwards."""
    prefix = f"t_router_{uuid.uuid4().hex[:10]}_"
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'runs.db'}"
    else:
        need_pg()
        url = PG_URL
    with open_store(url, prefix=prefix, create=True):
        pass
    yield url, prefix
    with open_store(url, prefix=prefix) as s:
        s.drop()
