"""The router's OpenAPI document: valid OpenAPI 3.2, and /stream's events are what it says they are."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from loopfsm.router.client import sse_events
from loopfsm.router.http import openapi

from tests.support.router_support import TOOLS_SCRIPT, client, make

STREAM = "/v1/sessions/{session}/stream"


def _events_media() -> dict[str, Any]:
    return openapi()["paths"][STREAM]["post"]["responses"]["200"]["content"]["text/event-stream"]


def _check(schema: Any, value: Any) -> None:
    """Validate ``value`` against ``schema`` whose ``#/components/...`` references point into the document."""
    root = {"components": openapi()["components"], "allOf": [schema]}
    jsonschema.Draft202012Validator(root).validate(value)


def check_stream(body: str) -> list[tuple[str, str]]:
    """Check one /stream body against the document: each event, each JSON data line, and the stream as a whole."""
    media = _events_media()
    events = list(sse_events(body.splitlines()))
    items = [{"event": e, "data": d} for e, d in events]
    _check(media["schema"], items)
    for item in items:
        _check(media["itemSchema"], item)
        (branch,) = [b for b in media["itemSchema"]["oneOf"] if b["properties"]["event"]["const"] == item["event"]]
        data = branch["properties"]["data"]
        if data.get("contentMediaType") == "application/json":  # annotations the validator does not apply itself
            _check(data["contentSchema"], json.loads(item["data"]))
    assert events[-1][0] == "response", "the response comes last, as the document says"
    return events


class Recording:
    """The test client, keeping the body of every event stream the router answers with."""

    def __init__(self, http: Any):
        self.http = http
        self.bodies: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.http, name)

    @contextlib.contextmanager
    def stream(self, *args: Any, **kw: Any) -> Iterator[Any]:
        with self.http.stream(*args, **kw) as reply:
            reply.read()
            if reply.headers.get("content-type", "").startswith("text/event-stream"):
                self.bodies.append(reply.text)
            yield reply


def test_the_document_is_valid_openapi_3_2():
    from openapi_spec_validator import OpenAPIV32SpecValidator, validate

    validate(openapi(), cls=OpenAPIV32SpecValidator)


def test_every_event_of_a_run_with_tools_matches_the_document(tmp_path):
    _, tc = make(f"sqlite:///{tmp_path / 'runs.db'}", "loopfsm_", TOOLS_SCRIPT, create=True)
    ws = tmp_path / "ws"
    ws.mkdir()
    rec = Recording(tc)
    with tc:
        c = client(rec, "s1", ws)
        assert c.run("go")["status"] == "completed"
    assert len(rec.bodies) == 3  # execute, then the results of each of the two tool calls
    names = [d for body in rec.bodies for e, d in check_stream(body) if e == "trace"]
    seen = ("lock.acquired", "model.called", "tool.requested", "tool.mediated", "diff.proposed", "diff.applied")
    assert set(seen) <= set(names), names


def test_a_refused_request_streams_an_error_envelope_the_document_describes(tmp_path):
    _, tc = make(f"sqlite:///{tmp_path / 'runs.db'}", "loopfsm_", TOOLS_SCRIPT, create=True)
    with tc:
        reply = tc.post("/v1/sessions/s1/stream", json={"type": "tool_results", "request_id": "r1", "data": {}})
    assert reply.headers["content-type"].startswith("text/event-stream")
    ((event, data),) = check_stream(reply.text)
    assert event == "response" and json.loads(data)["status"] == "error"


def test_healthz_answers_as_described(tmp_path):
    _, tc = make(f"sqlite:///{tmp_path / 'runs.db'}", "loopfsm_", TOOLS_SCRIPT, create=True, holder="r1")
    with tc:
        reply = tc.get("/healthz")
    media = openapi()["paths"]["/healthz"]["get"]["responses"]["200"]["content"]["application/json"]
    _check(media["schema"], reply.json())
    assert reply.json()["holder"] == "r1"


@pytest.mark.parametrize(
    "body",
    [
        'event: trace\ndata: {"event": "run.started"}\n\nevent: response\ndata: {}\n\n',  # JSON where a name goes
        "event: trace\ndata: run.started\n\n",  # no response
        'event: response\ndata: {"status": "idle", "data": {}, "allowed_continuations": []}\n\n'
        "event: trace\ndata: run.started\n\n",  # a trace after the response
        'event: response\ndata: {"status": "completed"}\n\n',  # an envelope without its fields
        "event: progress\ndata: run.started\n\n",  # an event name the router never sends
    ],
)
def test_a_stream_unlike_the_routers_is_refused_by_the_document(body):
    """The checks above could pass on a document that allows anything: these streams must fail them."""
    with pytest.raises((jsonschema.ValidationError, ValueError, AssertionError)):
        check_stream(body)
