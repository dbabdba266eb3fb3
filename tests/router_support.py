"""Driving the router in-process through its ASGI app and the real client (no sockets)."""

from __future__ import annotations

from typing import Any

# Imports of the HTTP stack happen on first use: collecting this module must not grow the test process
# (a test measures the peak memory of processes it forks).

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


def make(url: str, prefix: str, script: list[dict[str, Any]] | None = None, **kw: Any) -> tuple[Any, Any]:
    from starlette.testclient import TestClient

    from loopfsm.providers.scripted import ScriptedProvider
    from loopfsm.router import Router
    from loopfsm.router.http import create_app

    provider = kw.pop("provider", None) or (ScriptedProvider(script) if script is not None else None)
    router = Router(url, prefix=prefix, provider=provider, **kw)
    return router, TestClient(create_app(router))


def client(tc: Any, session: str, workspace: Any, approver: Any = None, **kw: Any) -> Any:
    from loopfsm.client import Client

    return Client(
        "http://testserver",
        session,
        workspace=str(workspace),
        http=tc,
        approver=approver or (lambda kind, info: "approved"),
        retry_delay_s=0.01,
        **kw,
    )
