"""The router's store connections: borrowed per request from a pool, never one per thread that served.

A server runs requests on worker threads that come and go (uvicorn's thread
pool lets an idle worker end after 10 s), so a connection kept per thread
piled up with every new worker: after a few quiet spells a router on
PostgreSQL held dozens of connections it never used again, until the server
refused new ones.  Here every request runs on a fresh thread, as after such a
spell, and the connections the database sees are counted.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

from loopfsm.router.providers.scripted import ScriptedProvider
from loopfsm.router import Router

from tests.support.store_support import need_pg, store_url  # noqa: F401  (fixture)

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def _execute(router: Router, session: str) -> dict[str, Any]:
    return router.handle(session, {"type": "execute", "request_id": uuid.uuid4().hex, "data": {"prompt": "hi"}})


def _on_new_thread(fn: Any, *args: Any) -> Any:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn(*args)))
    t.start()
    t.join()
    return out[0]


def _pg_connections(app: str) -> int:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app,)).fetchone()
    assert row is not None
    return int(row[0])


def test_sequential_requests_on_fresh_threads_reuse_one_connection(store_url):  # noqa: F811
    url, prefix = store_url
    app = f"loopfsm_conn_{uuid.uuid4().hex[:8]}"
    if url.startswith("postgresql"):
        url = f"{url}?application_name={app}"
    router = Router(url, prefix=prefix, provider=ScriptedProvider([{"text": "done"}]))
    try:
        assert router.recover() == [] and router.connections() == 1  # a start takes one from the pool and back
        statuses = [_on_new_thread(_execute, router, f"s{i}")["status"] for i in range(12)]
        assert statuses == ["completed"] * 12
        assert router.connections() == 1
        if url.startswith("postgresql"):
            assert _pg_connections(app) == 1
    finally:
        router.close()
    if url.startswith("postgresql"):
        assert _pg_connections(app) == 0


def test_bursts_of_concurrent_requests_on_new_threads_hold_no_more_than_one_burst(store_url):  # noqa: F811
    url, prefix = store_url
    app = f"loopfsm_conn_{uuid.uuid4().hex[:8]}"
    if url.startswith("postgresql"):
        url = f"{url}?application_name={app}"
    router = Router(url, prefix=prefix, provider=ScriptedProvider([{"text": "done"}]))
    width = 6
    try:
        for burst in range(4):
            results: list[str] = []

            def one(session: str, out: list[str] = results) -> None:
                out.append(_execute(router, session)["status"])

            threads = [threading.Thread(target=one, args=(f"b{burst}-{i}",)) for i in range(width)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert sorted(results) == ["completed"] * width
            assert 1 <= router.connections() <= width
        if url.startswith("postgresql"):
            assert 1 <= _pg_connections(app) <= width
    finally:
        router.close()


def test_a_connection_the_database_dropped_is_closed_and_replaced():
    """PostgreSQL ends the router's session (a restart, an admin): one request says so, the next reconnects."""
    need_pg()
    import psycopg

    from loopfsm.router.store import open_store

    prefix = f"t_conn_{uuid.uuid4().hex[:10]}_"
    app = f"loopfsm_conn_{uuid.uuid4().hex[:8]}"
    router = Router(
        f"{PG_URL}?application_name={app}", prefix=prefix, create=True, provider=ScriptedProvider([{"text": "done"}])
    )
    try:
        assert _on_new_thread(_execute, router, "d1")["status"] == "completed"
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (app,))
        lost = _on_new_thread(_execute, router, "d2")
        assert lost["status"] == "error" and "re-send" in lost["data"]["error"]
        assert router.connections() == 0
        assert _on_new_thread(_execute, router, "d2")["status"] == "completed"
        assert router.connections() == 1 and _pg_connections(app) == 1
    finally:
        router.close()
        with open_store(PG_URL, prefix=prefix) as s:
            s.drop()


def test_the_client_carries_its_run_on_when_the_database_drops_the_routers_connection(tmp_path):
    """A PostgreSQL restart between two requests: the router says so (internal, retryable), the client re-sends."""
    need_pg()
    import psycopg

    from loopfsm.router.store import open_store

    from tests.support.router_support import TOOLS_SCRIPT, client, make

    prefix = f"t_conn_{uuid.uuid4().hex[:10]}_"
    app = f"loopfsm_conn_{uuid.uuid4().hex[:8]}"
    router, tc = make(f"{PG_URL}?application_name={app}", prefix, TOOLS_SCRIPT, create=True)
    dropped: list[str] = []

    def drop_the_routers_connections(state: str, resp: dict[str, Any]) -> None:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (app,))
        dropped.append(state)

    retries: list[dict[str, Any]] = []
    try:
        c = client(tc, "s", tmp_path, interrupt=drop_the_routers_connections)
        resp = c.run("go", permissions={"shell": "allow", "write_file": "allow"})
        assert resp["status"] == "completed" and c.last_message == "all done"
        assert len(dropped) == 2  # both tool pauses
        retries = [r for r in c.sent if c.sent.count(r) > 1]
        assert retries, "no request was re-sent: the dropped connection was never noticed"
        assert router.connections() == 1
    finally:
        router.close()
        with open_store(PG_URL, prefix=prefix) as s:
            s.drop()
