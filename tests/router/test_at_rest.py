"""No plaintext of an encrypted session in any file the store writes, while a run pauses or after it ends.

A real ``loopfsm router serve`` process and the real client carry an
encrypted session through every kind of content: both prompts, assistant
texts, a plan, tool arguments and results, a diff, a memory value, a denied
shell argument, the name of a tool the router does not offer, and the
prompts of a run ended by inject and of one ended by break.  Every piece
carries a unique marker; at every pause, after the last run and after the
router stops, the raw bytes of every file of the store are
searched for them: the SQLite database with its ``-wal`` and ``-shm`` files,
or, after ``CHECKPOINT``, every file under PostgreSQL's data directory
(relation files and ``pg_wal``).  PostgreSQL compresses long values, which
could hide a marker from a byte search, so the test turns compression off for
its own tables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from loopfsm.router.crypto import Keyring
from loopfsm.router.store import open_store

from tests.support.router_support import free_port, stop, wait_until_up
from tests.support.store_support import store_url  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]


def _marker(name: str) -> str:
    return f"mk{name}{uuid.uuid4().hex[:16]}"


class Markers:
    """One unique marker per kind of content the session carries."""

    def __init__(self) -> None:
        names = (
            "prompt1 prompt2 inject assist1 assist2 assist3 final plan toolarg result "
            "diffpath diffbody memkey memval denied unktool unkarg"
        )
        self.by_name = {n: _marker(n) for n in names.split()}

    def __getattr__(self, name: str) -> str:
        return self.by_name[name]

    def found_in(self, data: bytes) -> list[str]:
        return sorted(n for n, m in self.by_name.items() if m.encode() in data)


def _script(m: Markers) -> list[dict[str, Any]]:
    return [
        {
            "text": m.assist1,
            "tool_calls": [
                {"id": "c1", "name": "read_file", "arguments": {"path": f"{m.toolarg}.txt"}},
                {"id": "c2", "name": "shell", "arguments": {"command": f"echo {m.denied}"}},
                {"id": "c3", "name": "remember", "arguments": {"key": m.memkey, "value": m.memval}},
                # a tool the router does not offer: its name is the model's words, so it is content too
                {"id": "c9", "name": m.unktool, "arguments": {"x": m.unkarg}},
            ],
        },
        {"text": m.assist2, "tool_calls": [{"id": "p1", "name": "submit_plan", "arguments": {"plan": m.plan}}]},
        {
            "text": m.assist3,
            "tool_calls": [
                {"id": "c4", "name": "write_file", "arguments": {"path": f"{m.diffpath}.txt", "content": m.diffbody}}
            ],
        },
        {"text": m.final},
    ]


class StoreFiles:
    """Every file the store writes, read raw: SQLite's three files, or PostgreSQL's data directory."""

    def __init__(self, url: str, prefix: str):
        self.url, self.prefix = url, prefix
        if url.startswith("sqlite:///"):
            self.db = Path(url[len("sqlite:///") :])
            self.pg_dir: Path | None = None
        else:
            import psycopg

            with psycopg.connect(url, autocommit=True) as conn:
                self.pg_dir = Path(conn.execute("SHOW data_directory").fetchone()[0])
                # Long values are compressed in place (pglz), which can split a marker: store them as written.
                for table, cols in (
                    ("rows", ("meta", "body", "sealed")),
                    ("run_state", ("snapshot", "last_response")),
                ):
                    for col in cols:
                        conn.execute(f"ALTER TABLE {prefix}{table} ALTER COLUMN {col} SET STORAGE EXTERNAL")

    def files(self) -> list[Path]:
        if self.pg_dir is None:
            return [p for p in (self.db, Path(f"{self.db}-wal"), Path(f"{self.db}-shm")) if p.exists()]
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
        return [Path(root) / f for root, _, names in os.walk(self.pg_dir) for f in names]

    def leaks(self, markers: Markers) -> dict[str, list[str]]:
        """Marker names found, by file name; a file that vanishes while listed (a temp file) is skipped."""
        found: dict[str, list[str]] = {}
        paths = self.files()
        assert paths, "no store file to search"
        for p in paths:
            try:
                data = p.read_bytes()
            except (FileNotFoundError, PermissionError, IsADirectoryError):
                continue
            hit = markers.found_in(data)
            if hit:
                found[str(p.name)] = hit
        return found


@pytest.fixture
def served(store_url, tmp_path):  # noqa: F811
    url, prefix = store_url
    markers = Markers()
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": _script(markers)}))
    port = free_port()
    log = tmp_path / "router.log"
    args = [
        sys.executable,
        "-m",
        "loopfsm",
        "router",
        "serve",
        "--store",
        url,
        "--prefix",
        prefix,
        "--port",
        str(port),
        "--script",
        str(script),
        "--sweep-every",
        "0",
        "--key-file",
        str(tmp_path / "router.key"),
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    made = subprocess.run(
        [sys.executable, "-m", "loopfsm", "router", "keygen", str(tmp_path / "router.key")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "router.key").stat().st_mode & 0o777 == 0o600
    with open(log, "ab") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=out, env=env, cwd=tmp_path)
    try:
        wait_until_up(f"http://127.0.0.1:{port}", proc, lambda: log.read_text()[-2000:])
        yield url, prefix, f"http://127.0.0.1:{port}", markers, proc, log
    finally:
        stop(proc)


@pytest.mark.slow
def test_no_plaintext_of_an_encrypted_session_in_any_store_file(served, tmp_path):
    from loopfsm.router.client import Client

    url, prefix, router_url, m, proc, log = served
    files = StoreFiles(url, prefix)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / f"{m.toolarg}.txt").write_text(m.result)
    pauses: list[str] = []
    escapes: list[Any] = []  # what the next tool pauses answer with (inject, then break)

    def at_pause(state: str, resp: dict[str, Any]) -> Any:
        leaked = files.leaks(m)
        assert not leaked, f"plaintext at pause {len(pauses) + 1} ({state}): {leaked}"
        pauses.append(state)
        if state == "RunningTools" and escapes:
            return escapes.pop(0)
        return None

    perms = {"read_file": "allow", "shell": "deny", "write_file": "ask", "remember": "allow"}
    c = Client(
        router_url,
        "sealed",
        workspace=ws,
        keyring=Keyring.generate(),
        approver=lambda kind, info: "approved",
        interrupt=at_pause,
        retry_delay_s=0.05,
    )
    try:
        first = c.run(m.prompt1, permissions=perms)
        assert first["data"].get("ended") == "completed" and c.last_message == m.final
        assert (ws / f"{m.diffpath}.txt").read_text() == m.diffbody
        assert pauses == ["RunningTools", "Approving", "RunningTools", "Sealing"]
        # The second prompt opens the first run's history; its run is ended by an inject, whose run is broken.
        escapes.extend([("inject", m.inject), "break"])
        second = c.run(m.prompt2, permissions=perms)
        assert second["status"] == "idle" and second["data"].get("ended") == "user"
        assert pauses[4:] == ["Decrypting", "RunningTools", "Decrypting", "RunningTools"]
    finally:
        c.close()
    with open_store(url, prefix=prefix) as s:
        kinds = {r.kind for r in s.rows("sealed") if r.sealed is not None}
        assert {"message", "tool_call", "diff", "plan", "memory"} <= kinds
    assert not files.leaks(m), "plaintext after the runs ended"
    proc.terminate()
    proc.wait(timeout=10)
    assert not files.leaks(m), "plaintext after the router stopped"
    assert "Traceback" not in log.read_text()


def test_sqlite_keeps_no_old_copy_of_what_a_step_overwrote(tmp_path):
    """Defence in depth on SQLite: an overwritten value is zeroed in the database and cut from the WAL."""
    from loopfsm.router.store import Row

    db = tmp_path / "r.db"
    marker = _marker("overwritten").encode()
    with open_store(f"sqlite:///{db}", create=True) as s:
        for value in (marker.decode() * 2000, "", "unrelated"):  # a large clear value, emptied, then another write
            with s.backend.transaction():
                s.put_row("s1", "run", 1, 0, Row("input", "bundle", {}, body={"v": value}, row_id="b-run"), 1)
            if value == "":
                s.backend.run("PRAGMA wal_checkpoint(PASSIVE)")
        assert (db.parent / "r.db-wal").exists()
        left = {p.name for p in tmp_path.iterdir() if p.name.startswith("r.db") and marker in p.read_bytes()}
        assert left == set()


# Slow because it must run alone: VACUUM FULL keeps a row version any transaction open on the database may
# still see, so a test beside it (the quick loop's other process) can hold the clear copy in the files.
@pytest.mark.slow
def test_a_clear_bundle_an_older_loopfsm_left_on_postgresql_is_gone_from_its_tables_after_vacuum_full(tmp_path):
    """The upgrade advice holds: once the run's next step sealed the bundle, VACUUM FULL leaves no clear copy.

    An older loopfsm kept an encrypted run's bundle in clear.  The next step
    writes it back sealed, but PostgreSQL keeps the clear row version (a dead
    tuple) in the table's files; ``VACUUM FULL`` of the rows table rewrites
    them, and then no relation file holds the prompt.
    """
    from tests.support.store_support import PG_URL, need_pg

    from tests.support.router_support import TOOLS_SCRIPT, client, make

    need_pg()
    prefix = f"t_v1clear_{uuid.uuid4().hex[:10]}_"
    with open_store(PG_URL, prefix=prefix, create=True):
        pass
    files = StoreFiles(PG_URL, prefix)
    m = Markers()
    key = Keyring.generate()
    router, tc = make(PG_URL, prefix, TOOLS_SCRIPT, key=key)
    planted: list[str] = []

    def as_an_older_router_wrote_it(state: str, resp: dict[str, Any]) -> None:
        if planted:
            return
        with open_store(PG_URL, prefix=prefix) as s:
            [row] = s.rows("s1", "input")
            body = json.loads(key.open_at_rest(row.sealed, session_id="s1", row=f"input:{row.row_id}"))
            s.backend.run(
                f"UPDATE {prefix}rows SET body = ?, sealed = NULL WHERE session_id = 's1' AND row_id = ?",
                (json.dumps(body), row.row_id),
            )
        planted.append(state)

    def relation_leaks() -> dict[str, list[str]]:
        return {n: hit for n, hit in files.leaks(m).items() if not n.startswith("0000")}  # pg_wal segments aside

    try:
        c = client(tc, "s1", tmp_path, keyring=Keyring.generate(), interrupt=as_an_older_router_wrote_it)
        resp = c.run(m.prompt1, permissions={"shell": "allow", "write_file": "allow"})
        assert resp["data"]["ended"] == "completed" and planted
        with open_store(PG_URL, prefix=prefix) as s:
            assert all(r.body is None for r in s.rows("s1", "input") if r.row_id.startswith("b-"))  # emptied
            s.backend.run(f"VACUUM FULL {prefix}rows")
        assert relation_leaks() == {}
    finally:
        router.close()
        with open_store(PG_URL, prefix=prefix) as s:
            s.drop()
