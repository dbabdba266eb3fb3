"""The reference client re-sends every answer the protocol marks retryable, the same request again.

The router in front of the client is the real one (ASGI, SQLite store, scripted model); one of its answers is
replaced, on the way out, by an error it gives in real runs: `busy` (the run's lock is held), `interrupted` (a
break or inject preempted the request, or its lease expired), `internal` with `retryable: true` (its store
failed mid-request). The client must send that same request again and finish the run; an answer marked not
retryable is never re-sent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from loopfsm.router import protocol as P

from tests.support.router_support import TOOLS_SCRIPT, client


def _router_answering_once(tmp_path: Any, nth: int, answer: dict[str, Any]) -> Any:
    """A test client over the real router app whose ``nth`` POST is answered ``answer`` instead (unprocessed)."""
    from starlette.testclient import TestClient

    from loopfsm.router import Router
    from loopfsm.router.http import create_app
    from loopfsm.router.providers.scripted import ScriptedProvider

    router = Router(
        f"sqlite:///{tmp_path / 'runs.db'}", prefix="t_", provider=ScriptedProvider(TOOLS_SCRIPT), create=True
    )
    app = create_app(router)
    posts = [0]

    async def replacing(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and "/v1/sessions/" in scope["path"]:
            posts[0] += 1
            if posts[0] == nth:
                while (await receive()).get("more_body"):
                    pass
                body = json.dumps(answer).encode()
                await send(
                    {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
                )
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return TestClient(replacing)


RETRYABLE = {
    "busy": P.error("busy", "another request holds this run", [], retry_after_ms=10),
    "interrupted": P.error("interrupted", "this request was preempted by a break or inject", []),
    "internal, retryable": P.error("internal", "router unavailable (OperationalError)", [], retryable=True),
}


@pytest.mark.parametrize("nth", [1, 2], ids=["execute", "tool_results"])
@pytest.mark.parametrize("name", list(RETRYABLE))
def test_every_retryable_answer_is_sent_again_and_the_run_completes(tmp_path, name, nth):
    tc = _router_answering_once(tmp_path, nth, RETRYABLE[name])
    c = client(tc, "s1", tmp_path, stream=False)
    assert c.run("run the tools")["status"] == "completed"
    sent = c.sent
    assert sent[nth - 1] == sent[nth]  # the very request again: same type, same request_id
    types = [r["type"] for r in sent]
    del types[nth]  # without the re-send, the run's requests as in any run of this script
    assert types == ["execute", "tool_results", "tool_results"]
    assert (tmp_path / "out.txt").read_text() == "written by the model\n"


def test_an_answer_marked_not_retryable_is_not_sent_again(tmp_path):
    tc = _router_answering_once(tmp_path, 1, P.error("internal", "a table these machines cannot read", []))
    c = client(tc, "s1", tmp_path, stream=False)
    answer = c.run("run the tools")
    assert answer["status"] == "error" and answer["data"]["retryable"] is False
    assert len(c.sent) == 1


def test_the_protocol_marks_exactly_these_answers_retryable():
    assert {
        code
        for code in ("busy", "interrupted", "internal", "invalid", "run_live")
        if P.error(code, "", [])["data"]["retryable"]
    } == {"busy", "interrupted"}
