"""Starting a router: it listens before it recovers, turns Nagle off on what it accepts, and refuses a body nested
past json's depth without a 5xx."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from loopfsm.core.errors import ConfigError
from loopfsm.router import Router
from loopfsm.router.http import serve
from loopfsm.router.store import open_store

from tests.support.router_support import START_S, free_port


def test_a_router_that_cannot_listen_frees_no_locks(tmp_path):
    """A second router started on a taken port (same holder id) must not free the serving router's locks."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    holder = f"router-127.0.0.1-{port}"
    router = Router(url, create=True, holder=holder)
    store = open_store(url)
    assert store.admit("s1", "execute", "r1", holder=holder).outcome == "admitted"
    now = int(time.time() * 1000)
    assert store.load("s1").lock_state(now) == "held"
    heard: list[str] = []
    try:
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
            serve(router, "127.0.0.1", port, on_listening=lambda port: heard.append("listening"))
    finally:
        busy.close()
    assert heard == [] and store.load("s1").lock_state(now) == "held"


def _own_socket_connected_to(peer: tuple[str, int]) -> socket.socket | None:
    """This process's socket whose far end is ``peer`` (a copy of it: the caller closes it), found by its fd."""
    for fd in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            sock = socket.socket(fileno=os.dup(int(fd)))
        except OSError:  # closed since it was listed
            continue
        try:
            if sock.getpeername() == peer:
                return sock
        except OSError:  # a listening or unconnected socket
            pass
        sock.close()
    return None


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="finds the server's socket through /proc")
def test_the_served_side_of_a_connection_sends_without_nagle(tmp_path, monkeypatch):
    """Each reply on a kept-alive connection waited ~40 ms: Nagle held it until the client's delayed ACK.

    asyncio sets TCP_NODELAY on an accepted socket only when its proto is IPPROTO_TCP, which it inherits
    from the listening socket ``serve`` binds; this reads the option on the router's side of a real one.
    """
    import uvicorn

    servers: list[uvicorn.Server] = []
    run = uvicorn.Server.run

    def run_and_keep(self: uvicorn.Server, sockets: list[socket.socket] | None = None) -> None:
        servers.append(self)  # the handle the test stops it with
        run(self, sockets=sockets)

    monkeypatch.setattr(uvicorn.Server, "run", run_and_keep)
    port = free_port()
    router = Router(f"sqlite:///{tmp_path / 'runs.db'}", create=True)
    thread = threading.Thread(target=serve, args=(router, "127.0.0.1", port), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_S
        while not (servers and servers[0].started):
            assert thread.is_alive() and time.monotonic() < deadline, "the router did not start"
            time.sleep(0.05)
        with socket.create_connection(("127.0.0.1", port), timeout=60) as client:
            for _ in range(2):  # the same connection, kept alive
                client.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                reply = b""
                while not reply.endswith(b"}"):  # the end of the JSON body
                    chunk = client.recv(4096)
                    assert chunk, f"connection closed mid-reply: {reply[:40]!r}"
                    reply += chunk
                assert reply.startswith(b"HTTP/1.1 200"), reply[:40]
            served = _own_socket_connected_to(client.getsockname())
            assert served is not None, "the router's side of the connection was not found"
            with served:
                assert served.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        if servers:
            servers[0].should_exit = True
        thread.join(timeout=60)
    assert not thread.is_alive()


def test_a_body_nested_past_jsons_depth_is_a_400_not_a_500(tmp_path):
    from starlette.testclient import TestClient

    from loopfsm.router.http import create_app

    app = create_app(Router(f"sqlite:///{tmp_path / 'runs.db'}", create=True))
    with TestClient(app, raise_server_exceptions=True) as http:
        for path in ("/v1/sessions/h1/execute", "/v1/sessions/h1/continue", "/v1/sessions/h1/stream"):
            reply = http.post(path, content=b"[" * 5000 + b"]" * 5000)
            assert reply.status_code == 400, (path, reply.status_code)
            assert reply.json()["data"]["error"] == "request body is nested too deeply"


def test_the_router_bounds_nesting_itself_the_same_on_every_interpreter(tmp_path):
    """json.loads goes ~1,000 levels deep on CPython 3.11 and ~10,000 on 3.13; the router's bound is its own."""
    from starlette.testclient import TestClient

    from loopfsm.router.http import create_app
    from loopfsm.router.protocol import MAX_REQUEST_DEPTH

    def nested(levels: int) -> bytes:
        return b'{"type": "execute", "x": ' + b"[" * (levels - 1) + b"]" * (levels - 1) + b"}"

    app = create_app(Router(f"sqlite:///{tmp_path / 'runs.db'}", create=True))
    with TestClient(app, raise_server_exceptions=True) as http:
        at_limit = http.post("/v1/sessions/h1/execute", content=nested(MAX_REQUEST_DEPTH)).json()
        assert at_limit["data"].get("error") != "request body is nested too deeply", at_limit
        for path in ("/v1/sessions/h1/execute", "/v1/sessions/h1/continue", "/v1/sessions/h1/stream"):
            reply = http.post(path, content=nested(MAX_REQUEST_DEPTH + 1))
            assert reply.status_code == 400, (path, reply.status_code)
            assert reply.json()["data"]["error"] == "request body is nested too deeply"


def _post_scope(path: str) -> dict:
    """The ASGI scope of a JSON POST to ``path``, for driving the app one message at a time."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }


def test_a_client_gone_before_its_body_is_answered_without_an_exception(tmp_path):
    """Each dropped upload used to log a ClientDisconnect traceback: a client could flood the log."""
    import asyncio

    from loopfsm.router.http import create_app

    app = create_app(Router(f"sqlite:///{tmp_path / 'runs.db'}", create=True))
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    for path in ("/v1/sessions/h1/execute", "/v1/sessions/h1/stream"):
        sent.clear()
        asyncio.run(app(_post_scope(path), receive, send))
        assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 400, path


def test_a_body_that_stalls_is_answered_408_when_its_time_is_up(tmp_path, monkeypatch):
    import asyncio

    import loopfsm.router.http as http
    from loopfsm.router.http import create_app

    monkeypatch.setattr(http, "BODY_TIMEOUT_S", 0.2)
    app = create_app(Router(f"sqlite:///{tmp_path / 'runs.db'}", create=True))
    sent: list[dict] = []
    parts = iter([{"type": "http.request", "body": b'{"type": "exe', "more_body": True}])

    async def receive() -> dict:
        part = next(parts, None)
        if part is None:
            await asyncio.sleep(60)  # the rest never comes
        return part

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(asyncio.wait_for(app(_post_scope("/v1/sessions/h1/execute"), receive, send), timeout=10))
    assert sent[0]["status"] == 408


def test_port_0_says_the_port_it_took_and_holds_locks_under_it(tmp_path):
    """``--port 0`` lets the system choose: the start line names the port taken, and the default holder id is
    made from it, so two such routers on one store never share a holder id (and free each other's locks)."""
    import re
    import subprocess
    import sys
    import urllib.request

    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    cmd = [sys.executable, "-m", "loopfsm", "router", "serve", "--store", f"sqlite:///{tmp_path / 'runs.db'}"]
    proc = subprocess.Popen([*cmd, "--port", "0"], stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"serving on http://127\.0\.0\.1:(\d+) \(store sqlite, holder (\S+);", line)
        assert found is not None, line
        port = int(found[1])
        assert port != 0 and found[2] == f"router-{socket.gethostname()}-{port}", line
        deadline = time.monotonic() + START_S
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as reply:
                    assert f'"holder":"router-{socket.gethostname()}-{port}"' in reply.read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline, "the router did not answer"
                time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
