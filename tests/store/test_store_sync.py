"""SQLite: which commits wait for an fsync.  A lease's does not; a step's, a release's and a renewal's do."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopfsm.router.store import Row, open_store


WRITES = {
    "fence = fence + 1": "lease",
    "SET lease_expires_at": "renew",
    "SET holder = NULL": "release",
    "COMMIT": "step",
}


def _sync_of_each_write(statements: list[str]) -> dict[str, set[str]]:
    """For each kind of write traced, the ``synchronous`` settings it ran under (FULL unless NORMAL was set)."""
    level, seen = "FULL", {}
    for sql in statements:
        if sql.startswith("PRAGMA synchronous="):
            level = sql.split("=", 1)[1]
            continue
        for marker, name in WRITES.items():
            if marker in sql and (name != "release" or "phase =" not in sql):
                seen.setdefault(name, set()).add(level)
    return seen


def test_only_the_lease_commits_without_waiting_for_the_disk(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'r.db'}", create=True) as s:
        traced: list[str] = []
        s.backend.conn.set_trace_callback(traced.append)  # type: ignore[attr-defined]
        s.ensure("s")
        a = s.admit("s", "execute", "q1", holder="A", now_ms=1000)
        assert a.lease is not None
        lease = s.renew(a.lease, now_ms=1001)
        phase = a.record.phase_machine()
        phase.execute("r", "completed", False, 1002, {})
        s.checkpoint(lease, phase, request_id="q1", response={}, rows=[Row("message", "m", {}, body="hi")])
        b = s.admit("s", "execute", "q2", holder="A", now_ms=1003)
        assert b.lease is not None
        s.release(b.lease, now_ms=1004)
        levels = _sync_of_each_write(traced)
        assert levels == {"lease": {"NORMAL"}, "renew": {"FULL"}, "step": {"FULL"}, "release": {"FULL"}}
        assert s.backend.run("PRAGMA synchronous")[1] == [(2,)]  # FULL again for whatever comes next


def test_a_failed_lease_statement_leaves_the_connection_at_full(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'r.db'}", create=True) as s:
        with pytest.raises(Exception):  # noqa: B017, PT011 - sqlite3's "no such table"
            s.backend.run_unsynced("UPDATE no_such_table SET x = 1")
        assert s.backend.run("PRAGMA synchronous")[1] == [(2,)]
