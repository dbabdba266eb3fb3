"""The store's tables and the few places SQLite and PostgreSQL spell them differently."""

from __future__ import annotations

import re
from dataclasses import dataclass

from loopfsm.core.errors import ConfigError

# 2 added the requests table; 3 when each request id was used (pruned after a retention); 4 the holder-id claims
SCHEMA_VERSION = 4
PHASES = ("Idle", "AwaitingDecrypt", "AwaitingApproval", "AwaitingTool", "AwaitingEncrypt")
ROW_KINDS = ("message", "tool_call", "diff", "plan", "memory", "trace", "input")
_PREFIX = re.compile(r"[a-z][a-z0-9_]{0,40}")


def check_prefix(prefix: str) -> str:
    if not _PREFIX.fullmatch(prefix):
        raise ConfigError(f"table prefix {prefix!r} must be lower-case letters, digits and _ (at most 41)")
    return prefix


@dataclass(frozen=True)
class Dialect:
    name: str
    param: str  # placeholder
    integer: str
    text_json: str


SQLITE = Dialect("sqlite", "?", "INTEGER", "TEXT")
POSTGRES = Dialect("postgresql", "%s", "BIGINT", "TEXT")


def ddl(d: Dialect, p: str) -> list[str]:
    """CREATE statements for prefix ``p`` (idempotent)."""
    i, j = d.integer, d.text_json
    phases = ", ".join(f"'{x}'" for x in PHASES)
    kinds = ", ".join(f"'{x}'" for x in ROW_KINDS)
    return [
        f"CREATE TABLE IF NOT EXISTS {p}meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"""CREATE TABLE IF NOT EXISTS {p}run_state (
            session_id       TEXT PRIMARY KEY,
            phase            TEXT NOT NULL CHECK (phase IN ({phases})),
            snapshot         {j} NOT NULL,
            version          {i} NOT NULL DEFAULT 0,
            fence            {i} NOT NULL DEFAULT 0,
            holder           TEXT,
            started_at       {i},
            lease_expires_at {i},
            cancel_requested TEXT CHECK (cancel_requested IN ('break', 'inject')),
            last_request_id  TEXT,
            last_response    {j},
            updated_at       {i} NOT NULL,
            CHECK ((holder IS NULL) = (lease_expires_at IS NULL))
        )""",
        f"""CREATE TABLE IF NOT EXISTS {p}rows (
            session_id    TEXT NOT NULL,
            kind          TEXT NOT NULL CHECK (kind IN ({kinds})),
            row_id        TEXT NOT NULL,
            run_id        TEXT NOT NULL,
            step          {i} NOT NULL,
            ord           {i} NOT NULL,
            meta          {j} NOT NULL,
            body          {j},
            sealed        {j},
            written_fence {i} NOT NULL,
            PRIMARY KEY (session_id, kind, row_id),
            CHECK (body IS NULL OR sealed IS NULL)
        )""",
        # Every request_id a committed step used, so an older one re-sent is refused, never run again.
        f"""CREATE TABLE IF NOT EXISTS {p}requests (
            session_id TEXT NOT NULL,
            request_id TEXT NOT NULL,
            step       {i} NOT NULL,
            used_at    {i},
            PRIMARY KEY (session_id, request_id)
        )""",
        # The process serving under each lock-holder id, while it serves (loopfsm.router.store.claims).
        f"""CREATE TABLE IF NOT EXISTS {p}holders (
            holder     TEXT PRIMARY KEY,
            host       TEXT NOT NULL,
            pid        {i} NOT NULL,
            since      {i} NOT NULL,
            expires_at {i} NOT NULL,
            token      TEXT NOT NULL
        )""",
        f"CREATE INDEX IF NOT EXISTS {p}rows_history ON {p}rows (session_id, step, ord)",
        f"CREATE INDEX IF NOT EXISTS {p}run_state_holder ON {p}run_state (holder)",
    ]


def drop(p: str) -> list[str]:
    return [
        f"DROP TABLE IF EXISTS {p}holders",
        f"DROP TABLE IF EXISTS {p}requests",
        f"DROP TABLE IF EXISTS {p}rows",
        f"DROP TABLE IF EXISTS {p}run_state",
        f"DROP TABLE IF EXISTS {p}meta",
    ]
