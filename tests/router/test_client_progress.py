"""Client progress from the router's event stream, through real uvicorn and the real client; and the fallback to
plain request/response when the stream is unavailable or breaks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time

import pytest

from loopfsm.router.providers.scripted import ScriptedProvider

from tests.support.router_support import TOOLS_SCRIPT, free_port, make, wait_until_up
from tests.support.store_support import store_url  # noqa: F401  (fixture)

LOOPFSM = [sys.executable, "-m", "loopfsm"]


class Uvicorn:
    """An ASGI app served by uvicorn on 127.0.0.1 in a thread of this process; stopped on exit."""

    def __init__(self, app):
        import uvicorn

        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Uvicorn:
        self.thread.start()
        deadline = time.monotonic() + 180
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "uvicorn did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


class SlowScript(ScriptedProvider):
    """The scripted model, taking ``delay_s`` per reply: long enough to see progress arrive before the response."""

    delay_s = 0.8

    def reply_at(self, index, request):
        time.sleep(self.delay_s)
        return super().reply_at(index, request)


def _client(url, session, ws, **kw):
    from loopfsm.router.client import Client

    return Client(
        url,
        session,
        workspace=str(ws),
        approver=lambda kind, info: "approved",
        retry_delay_s=0.01,
        **kw,
    )


@pytest.mark.slow
def test_progress_arrives_while_the_turn_runs(store_url, tmp_path):  # noqa: F811
    from loopfsm.router.http import create_app

    url, prefix = store_url
    router, _ = make(url, prefix, provider=SlowScript(TOOLS_SCRIPT))
    heard: list[tuple[float, str]] = []
    statuses: list[tuple[float, str]] = []
    with Uvicorn(create_app(router)) as srv:
        c = _client(
            srv.url,
            "live",
            tmp_path,
            on_trace=lambda name: heard.append((time.monotonic(), name)),
            on_progress=lambda what, info: statuses.append((time.monotonic(), what)),
        )
        resp = c.run("go", permissions={"shell": "allow", "write_file": "ask"})
        c.close()
    router.close()
    assert resp["status"] == "completed" and c.stream is True
    names = [n for _, n in heard]
    assert names.count("model.called") == 3 and names.count("model.responded") == 3  # the stream has every event
    assert names.index("model.called") < names.index("tool.requested") < names.index("diff.proposed")
    assert {"tool.requested", "tool.result", "diff.proposed", "diff.applied"} <= set(names)
    # the first model call was heard a model call's time before its turn's response arrived
    first_call = next(t for t, n in heard if n == "model.called")
    first_response = next(t for t, w in statuses if w == "awaiting_tool")
    assert first_response - first_call >= SlowScript.delay_s * 0.75
    assert [w for _, w in statuses if w not in ("tool",)] == [
        "awaiting_tool",
        "awaiting_tool",
        "completed",
    ]


def _without_stream(app):
    app.router.routes[:] = [r for r in app.router.routes if not getattr(r, "path", "").endswith("/stream")]
    return app


def _broken_stream(app):
    """/stream answers with one trace event and hangs up before the response, as a dying proxy would."""
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def cut(request):
        await request.body()

        async def events():
            yield "event: trace\ndata: lock.acquired\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    _without_stream(app).router.routes.append(Route("/v1/sessions/{session}/stream", cut, methods=["POST"]))
    return app


@pytest.mark.parametrize("breakage", [_without_stream, _broken_stream])
def test_falls_back_to_plain_requests_without_a_stream(store_url, tmp_path, breakage):  # noqa: F811
    from loopfsm.router.http import create_app

    url, prefix = store_url
    router, _ = make(url, prefix, TOOLS_SCRIPT)
    retries: list[dict] = []
    with Uvicorn(breakage(create_app(router))) as srv:
        c = _client(
            srv.url,
            "fb",
            tmp_path,
            on_progress=lambda w, i: retries.append(i) if w == "retry" else None,
        )
        resp = c.run("go", permissions={"shell": "allow", "write_file": "allow"})
        c.close()
    assert resp["status"] == "completed" and resp["data"]["message"] == "all done"
    why = "no event stream (HTTP 404)" if breakage is _without_stream else "the event stream ended before the response"
    assert c.stream is False and [r["why"] for r in retries] == [why]
    # the execute went out twice with one request_id (the second as a plain request), every later one once
    ids = [r["request_id"] for r in c.sent]
    assert ids[0] == ids[1] and len(set(ids)) == len(ids) - 1
    assert [r.meta["event"] for r in router.store().rows("fb", "trace")].count("run.started") == 1
    router.close()


def _serve(store, *extra):
    port = free_port()
    proc = subprocess.Popen(
        LOOPFSM
        + [
            "router",
            "serve",
            "--store",
            store,
            "--port",
            str(port),
            "--sweep-every",
            "0",
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until_up(f"http://127.0.0.1:{port}", proc, proc.stderr.read)
    return proc, f"http://127.0.0.1:{port}"


def _client_run(url, session, ws, *extra):
    return subprocess.run(
        LOOPFSM
        + [
            "client",
            "run",
            "--router",
            url,
            "--session",
            session,
            "--workspace",
            str(ws),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.slow
def test_client_run_shows_progress_and_keeps_json_and_quiet_clean(tmp_path):
    proc, url = _serve(f"sqlite:///{tmp_path / 'runs.db'}")
    ws = tmp_path / "ws"
    ws.mkdir()
    try:
        run = _client_run(url, "s1", ws, "--yes", "tidy up")
        assert run.returncode == 0, run.stderr
        assert run.stdout == "Done: I listed the workspace and wrote NOTES.md.\n"
        # the README's demo, in the order the turn ran (--yes says "approved: ..." where the demo asks)
        assert [line for line in run.stderr.splitlines() if not line.startswith("  approved: ")] == [
            "  model call started",
            "  tool call proposed",
            "- awaiting_tool: shell",
            "  running shell",
            "  model call started",
            "  tool call proposed",
            "  file change proposed",
            "- awaiting_tool: write_file",
            "  running write_file",
            "  file change applied",
            "  model call started",
            "- completed",
        ], run.stderr
        # --json: stdout is the response envelope alone, progress stays on stderr
        run = _client_run(url, "s2", ws, "--yes", "--json", "tidy up")
        assert run.returncode == 0 and json.loads(run.stdout)["status"] == "completed"
        assert "  model call started" in run.stderr.splitlines()
        # --quiet: no progress at all; the answer only
        run = _client_run(url, "s3", ws, "--yes", "--quiet", "tidy up")
        assert run.returncode == 0 and run.stdout == "Done: I listed the workspace and wrote NOTES.md.\n"
        assert "model call started" not in run.stderr and "running shell" not in run.stderr
        # an encrypted session: progress says sealing, and shows no model or prompt text
        run = _client_run(
            url,
            "s4",
            ws,
            "--yes",
            "--keyring",
            str(tmp_path / "keys.json"),
            "secret-prompt-text",
        )
        assert run.returncode == 0, run.stderr
        assert any(re.fullmatch(r"  sealing \d+ item\(s\) with your keyring", line) for line in run.stderr.splitlines())
        assert "secret-prompt-text" not in run.stderr and "Let me look at the workspace" not in run.stderr
        # --no-stream: progress per response only
        run = _client_run(url, "s5", ws, "--yes", "--no-stream", "tidy up")
        assert run.returncode == 0 and "- awaiting_tool: shell" in run.stderr and "model call started" not in run.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    assert "Traceback" not in proc.stderr.read()


def test_a_hostile_stream_puts_no_escape_sequence_on_the_terminal(tmp_path):
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    evil = "\x1b]0;owned\x07\x1b[2J"
    final = {
        "status": "completed",
        "data": {"message": "fine", "run_id": None},
        "allowed_continuations": [],
    }

    async def stream(request):
        await request.body()

        async def events():
            yield f"event: trace\ndata: {evil}\n\n"
            yield "event: trace\ndata: model.called\n\n"
            yield ": keep-alive\n\n"
            yield f"event: response\ndata: {json.dumps(final)}\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/sessions/{session}/stream", stream, methods=["POST"])])
    with Uvicorn(app) as srv:
        run = _client_run(srv.url, "h", tmp_path, "--yes", "go")
    assert run.returncode == 0 and run.stdout == "fine\n", run.stderr
    assert "\x1b" not in run.stderr and "\x07" not in run.stderr
    assert run.stderr.splitlines() == ["  model call started", "- completed"]


def test_progress_lines_show_names_only():
    from loopfsm.cli.router_commands import progress_line

    assert progress_line("awaiting_tool", {"tool_requests": [{"name": "shell"}, {"name": "\x1b[2Jx"}]}) == (
        "- awaiting_tool: shell, ?"
    )
    assert progress_line("idle", {"ended": "expired"}) == "- idle (run ended: expired)"
    assert progress_line("error", {"code": "busy"}) == "- error: busy"
    assert progress_line("\x1b[31m", {}) == "- ?"


@pytest.mark.slow
def test_the_stream_keeps_a_long_turn_alive(store_url, tmp_path, monkeypatch):  # noqa: F811
    import httpx

    from loopfsm.router import http

    monkeypatch.setattr(http, "KEEPALIVE_S", 0.2)
    url, prefix = store_url
    router, _ = make(url, prefix, provider=SlowScript([{"text": "slow answer"}]))
    with Uvicorn(http.create_app(router)) as srv:
        body = {"type": "execute", "request_id": "r1", "data": {"prompt": "hi"}}
        with httpx.stream("POST", f"{srv.url}/v1/sessions/k/stream", json=body, timeout=10) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            assert r.headers["cache-control"] == "no-cache"
            lines = list(r.iter_lines())
    router.close()
    assert ": keep-alive" in lines
    assert lines.index(": keep-alive") < lines.index("event: response")


@pytest.mark.slow
def test_an_unreachable_router_is_one_line_then_an_error_that_says_what_to_do(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    run = _client_run(url, "s1", tmp_path, "--yes", "tidy up")
    assert run.returncode == 1 and run.stdout == ""
    lines = run.stderr.splitlines()
    assert lines == [
        "  router unreachable, re-sending execute (attempt 2 of 21)",
        f"loopfsm client: no router answers at {url} (21 attempts); start one with "
        "`loopfsm router serve --store sqlite:///runs.db`, or give the address of the one you run",
    ], run.stderr
    run = _client_run(url, "s1", tmp_path, "--yes", "--quiet", "tidy up")
    assert run.returncode == 1 and run.stderr.splitlines() == lines[1:]


@pytest.mark.slow
def test_on_a_terminal_the_unreachable_line_is_rewritten_in_place(tmp_path):
    """stderr on a real pseudo-terminal: one line, rewritten attempt by attempt, then the error on its own line."""
    import os
    import pty

    url = f"http://127.0.0.1:{free_port()}"
    main_fd, side_fd = pty.openpty()
    try:
        proc = subprocess.Popen(
            LOOPFSM + ["client", "run", "--router", url, "--session", "s1", "--workspace", str(tmp_path), "go"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=side_fd,
        )
        os.close(side_fd)
        chunks = []
        while True:
            try:
                chunk = os.read(main_fd, 4096)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=300) == 1
    finally:
        os.close(main_fd)
    shown = b"".join(chunks).decode().replace("\r\n", "\n")  # the terminal turns each \n into \r\n
    rewrites = [f"\r\x1b[K  router unreachable, re-sending execute (attempt {n} of 21)" for n in range(2, 22)]
    assert (
        shown == "".join(rewrites) + f"\nloopfsm client: no router answers at {url} (21 attempts); start one with "
        "`loopfsm router serve --store sqlite:///runs.db`, or give the address of the one you run\n"
    )


def test_the_client_gives_up_naming_the_address_without_its_password(tmp_path):
    import httpx

    from loopfsm.router.client import Client
    from loopfsm.router.errors import ClientError

    port = free_port()
    events = []
    c = Client(
        f"http://alice:hunter2@127.0.0.1:{port}/t0ken/?token=abc",
        "s1",
        workspace=tmp_path,
        retries=2,
        retry_delay_s=0,
        on_progress=lambda what, info: events.append((what, info)),
    )
    with pytest.raises(ClientError) as err:
        c.run("hi")
    assert str(err.value).startswith(f"no router answers at http://127.0.0.1:{port} (3 attempts); start one")
    assert not any(secret in str(err.value) for secret in ("hunter2", "alice", "t0ken", "abc"))
    assert [info["attempt"] for what, info in events if what == "retry"] == [2, 3]  # none after the last attempt
    failing = httpx.Client(base_url="http://router.test", transport=httpx.MockTransport(lambda r: httpx.Response(502)))
    c = Client("http://router.test", "s1", workspace=tmp_path, http=failing, retries=1, retry_delay_s=0, stream=False)
    with pytest.raises(
        ClientError, match=r"^the router at http://router.test answered HTTP 5xx \(a server error\) to all 2 attempts$"
    ):
        c.run("hi")
