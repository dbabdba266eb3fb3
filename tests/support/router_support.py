"""Driving the router in-process through its ASGI app and the real client (no sockets)."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from typing import Any

# Imports of the HTTP stack happen on first use: collecting this module must not grow the test process
# (a test measures the peak memory of processes it forks).

# A router process starts in a second or two on a quiet machine; under a heavily loaded CI host
# (parallel jobs on two cores) imports alone have taken over 30 s.  Waiting longer costs nothing
# when the process is healthy, and a process that exits is reported at once.
START_S = 180


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_up(url: str, proc: subprocess.Popen[Any], why: Callable[[], str] = lambda: "") -> None:
    """Poll ``url``/healthz until the router answers; fail at once if ``proc`` exits, else after START_S.

    ``why`` says what the process printed; it is asked only once the process has ended (a timeout
    kills it first), so reading a pipe cannot block.
    """
    import httpx

    deadline = time.monotonic() + START_S
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"router exited with {proc.returncode}: {why()}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() >= deadline:
            proc.kill()
            proc.wait()
            raise AssertionError(f"router did not come up in {START_S} s: {why()}")
        time.sleep(0.1)


TOOLS_SCRIPT = [
    {"text": "looking", "tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "echo hi"}}]},
    {
        "text": "writing",
        "tool_calls": [
            {"id": "c2", "name": "write_file", "arguments": {"path": "out.txt", "content": "written by the model\n"}}
        ],
    },
    {"text": "all done"},
]
PLAN_SCRIPT = [
    {"text": "here is my plan", "tool_calls": [{"id": "p1", "name": "submit_plan", "arguments": {"plan": "step one"}}]},
    {"text": "plan carried out"},
]


def stop(proc: subprocess.Popen[Any] | None) -> None:
    """Stop a router process politely, then for good: terminate, wait 10 s, kill."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def make(url: str, prefix: str, script: list[dict[str, Any]] | None = None, **kw: Any) -> tuple[Any, Any]:
    from starlette.testclient import TestClient

    from loopfsm.router.providers.scripted import ScriptedProvider
    from loopfsm.router import Router
    from loopfsm.router.http import create_app

    provider = kw.pop("provider", None) or (ScriptedProvider(script) if script is not None else None)
    router = Router(url, prefix=prefix, provider=provider, **kw)
    return router, TestClient(create_app(router))


def client(tc: Any, session: str, workspace: Any, approver: Any = None, **kw: Any) -> Any:
    from loopfsm.router.client import Client

    return Client(
        "http://testserver",
        session,
        workspace=str(workspace),
        http=tc,
        approver=approver or (lambda kind, info: "approved"),
        retry_delay_s=0.01,
        **kw,
    )
