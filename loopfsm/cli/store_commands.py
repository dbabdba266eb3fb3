"""``loopfsm store``: create a run-state store, show a session, read a session back as a trace file, sweep.

Every action takes the store's URL as its first argument or as ``--store URL``
(as ``router serve`` does), once.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from loopfsm.cli.common import EXIT_INVALID, EXIT_OK, _UsageError, write_file


def add_commands(sub: Any) -> None:
    s = sub.add_parser("store", help="create or inspect a run-state store (sqlite:///PATH or postgresql://...)")
    store_sub = s.add_subparsers(dest="store_command", required=True, metavar="ACTION")
    t = store_sub.add_parser("init", help="create the store's tables (idempotent) and record the schema version")
    t.add_argument("url", nargs="?", help="sqlite:///runs.db or postgresql://user@host/db (or --store)")
    t.add_argument("--store", dest="store_url", metavar="URL", help="the store to create")
    t.add_argument("--prefix", default="loopfsm_", help="table name prefix (default: loopfsm_)")
    t = store_sub.add_parser("show", help="print a session's saved phase, lock and row count")
    t.add_argument("url", nargs="?", help="sqlite:///runs.db or postgresql://user@host/db (or --store)")
    t.add_argument("session", help="session id")
    t.add_argument("--store", dest="store_url", metavar="URL", help="the store to read")
    t.add_argument("--prefix", default="loopfsm_", help="table name prefix (default: loopfsm_)")
    t = store_sub.add_parser(
        "trace",
        help="write a session's router_run feeds as a trace file (for loopfsm replay and the review site)",
    )
    t.add_argument("url", nargs="?", help="sqlite:///runs.db or postgresql://user@host/db (or --store)")
    t.add_argument("session", help="session id")
    t.add_argument("--store", dest="store_url", metavar="URL", help="the store to read")
    t.add_argument("--prefix", default="loopfsm_", help="table name prefix (default: loopfsm_)")
    t.add_argument("-o", "--output", metavar="FILE", help="write the trace file here (default: standard output)")
    t = store_sub.add_parser(
        "sweep",
        help="free expired leases and end paused runs whose pause expired (emptying their clear bundle); "
        "safe beside running routers",
    )
    t.add_argument("url", nargs="?", help="sqlite:///runs.db or postgresql://user@host/db (or --store)")
    t.add_argument("--store", dest="store_url", metavar="URL", help="the store to sweep")
    t.add_argument("--prefix", default="loopfsm_", help="table name prefix (default: loopfsm_)")
    t.add_argument(
        "--request-retention-days",
        type=_retention_days,
        default=7,
        metavar="DAYS",
        help="forget request ids used more than DAYS days ago; a re-send of one inside this is refused, never run "
        "twice (default: 7)",
    )
    s.set_defaults(func=cmd_store)


def _retention_days(text: str) -> int:
    """``--request-retention-days``: a whole number of days, 1 to 3650."""
    try:
        days = int(text)
    except ValueError:
        days = 0
    if not 1 <= days <= 3650:
        raise argparse.ArgumentTypeError(f"must be a whole number of days from 1 to 3650, got {text[:50]!r}")
    return days


def cmd_store(args: argparse.Namespace) -> int:
    """``store init URL`` creates (or checks) the schema; ``store show URL SESSION`` prints a saved row and
    ``store trace URL SESSION`` its run as a trace file (:mod:`loopfsm.router.store.phase_feeds`);
    ``store sweep --store URL`` ends what nobody will come back for (see :mod:`loopfsm.router.store.sweep`).

    Every action takes the store's URL as its first argument or as ``--store URL`` (as ``router serve`` does), once.
    """
    from loopfsm.router.errors import DamagedRow, StoreError
    from loopfsm.router.store import SCHEMA_VERSION, open_store, sweep

    if args.url is not None and args.store_url is not None:
        raise _UsageError(
            f"store {args.store_command} takes the store's URL once: got --store {args.store_url[:200]} "
            f"and the argument {args.url[:200]!r}"
        )
    if args.url is None and args.store_url is None:
        raise _UsageError(f"store {args.store_command} needs the store's URL, once: --store URL (or as an argument)")
    url = args.url or args.store_url
    if args.store_command == "sweep":
        with open_store(url, prefix=args.prefix) as store:
            print(f"swept: {sweep(store, request_retention_ms=args.request_retention_days * 86_400_000).summary()}")
        return EXIT_OK
    if args.store_command == "init":
        with open_store(url, prefix=args.prefix, create=True) as store:
            print(f"{store.backend.dialect.name} store ready (prefix {args.prefix!r}, schema version {SCHEMA_VERSION})")
        return EXIT_OK
    try:
        if args.store_command == "trace":
            return _store_trace(url, args)
        return _store_show(url, args)
    except DamagedRow as err:  # a row's JSON, named by the store
        raise StoreError(
            f"store {args.store_command}: the store holds a row loopfsm did not write: {err}; nothing was written"
        ) from None
    except (ValueError, RecursionError) as err:  # the schema version, or anything else not as loopfsm writes it
        raise StoreError(
            f"store {args.store_command}: the store holds a row loopfsm did not write ({type(err).__name__}); "
            f"nothing was written"
        ) from None
    except _database_errors() as err:  # a table dropped or changed by hand: said by its class, never its SQL
        raise StoreError(
            f"store {args.store_command}: the database refused a read ({type(err).__name__}); are its tables "
            f"as `loopfsm store init` made them?"
        ) from None


def _database_errors() -> tuple[type[BaseException], ...]:
    """The drivers' error classes: SQLite's always, PostgreSQL's when psycopg is installed."""
    import sqlite3

    found: list[type[BaseException]] = [sqlite3.Error]
    try:
        import psycopg
    except ImportError:
        return tuple(found)
    return (*found, psycopg.Error)


def _store_show(url: str, args: argparse.Namespace) -> int:
    """``store show``: a session's saved phase, lock and row count."""
    from loopfsm.router.store import open_store

    with open_store(url, prefix=args.prefix) as store:
        rec = store.load(args.session)
        if rec is None:
            print(f"no run state for session {args.session[:200]!r}", file=sys.stderr)
            return EXIT_INVALID
        lock = "free" if rec.holder is None else f"held by {rec.holder} until {rec.lease_expires_at}"
        print(
            f"session {rec.session_id}: phase {rec.phase}, version {rec.version}, fence {rec.fence}, lock {lock}, "
            f"{len(store.rows(args.session))} rows"
        )
    return EXIT_OK


def session_trace(store: Any, session_id: str) -> Any:
    """A session's router_run run as a trace file (:class:`~loopfsm.verification.tracefile.Trace`), or None.

    None when the store has no such session; :class:`~loopfsm.router.errors.SessionTraceError` when its
    kept feeds are not its whole run (:func:`loopfsm.router.store.phase_feeds.session_run`).
    """
    from loopfsm.router.store.phase_feeds import session_run
    from loopfsm.verification import tracefile
    from loopfsm.verification.verify_inputs import Step

    rec = store.load(session_id)
    if rec is None:
        return None
    feeds = session_run(rec.session_id, rec.snapshot, store.rows(rec.session_id, "trace"))
    steps = tuple(tracefile.TraceStep(Step(f.feed, tuple(f.args.items())), f.state, False) for f in feeds)
    note = f"session {rec.session_id[:200]!r}: {len(steps)} router_run feeds, read back from the store"
    return tracefile.Trace("router_run", {}, None, steps, note)


def _store_trace(url: str, args: argparse.Namespace) -> int:
    """``store trace``: the session's kept router_run feeds as a trace file, checked against its saved state first."""
    from loopfsm.machines.router_run import ROUTER_RUN
    from loopfsm.router.store import open_store
    from loopfsm.verification import tracefile

    with open_store(url, prefix=args.prefix) as store:
        trace = session_trace(store, args.session)
    if trace is None:
        print(f"no run state for session {args.session[:200]!r}", file=sys.stderr)
        return EXIT_INVALID
    text = tracefile.dump(trace, ROUTER_RUN)
    if len(text.encode()) > tracefile.MAX_TRACE_BYTES:
        print(
            f"session {args.session[:200]!r}: its trace would be {len(text.encode()) // 2**20} MiB, over the "
            f"{tracefile.MAX_TRACE_BYTES // 2**20} MiB replay and the review site read; nothing written",
            file=sys.stderr,
        )
        return EXIT_INVALID
    if args.output is None:
        sys.stdout.write(text)
    else:
        write_file(Path(args.output), text)
        said = f"wrote {args.output[:200]!r}: {len(trace.steps)} router_run feeds of session {args.session[:200]!r}"
        print(said, file=sys.stderr)
    return EXIT_OK
