"""A router turn in a tracing backend: one ``invoke_agent`` span per request, its model calls and tool runs as
children, a client's ``traceparent`` continued, and no content in any span (loopfsm.router.service.spans)."""

from __future__ import annotations

import json

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.router_support import make

PROMPT = "PROMPT-SECRET list the files"
RESULT = "RESULT-SECRET a.txt"
SCRIPT = [
    {"text": "looking", "tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "ARG-SECRET ls"}}]},
    {"text": "ANSWER-SECRET done"},
]
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


def _traced(tmp_path):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    router, http = make(
        f"sqlite:///{tmp_path / 'runs.db'}", "loopfsm_", SCRIPT, create=True, tracer=provider.get_tracer("t")
    )
    return router, http, exporter


def _post(http, path: str, body: dict, headers: dict | None = None) -> dict:
    reply = http.post(path, content=json.dumps(body), headers={"content-type": "application/json", **(headers or {})})
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_each_request_is_one_span_with_its_model_calls_and_tool_runs_beneath_it(tmp_path):
    router, http, exporter = _traced(tmp_path)
    header = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
    execute = {"type": "execute", "request_id": "e1", "data": {"prompt": PROMPT, "permissions": {"shell": "allow"}}}
    first = _post(http, "/v1/sessions/s1/execute", execute, header)
    assert first["status"] == "awaiting_tool"
    (call,) = first["data"]["tool_requests"]
    results = {
        "type": "tool_results",
        "request_id": "r1",
        "data": {"results": [{"call_id": call["call_id"], "content": RESULT, "is_error": False}]},
    }
    assert _post(http, "/v1/sessions/s1/continue", results, header)["status"] == "completed"
    spans = exporter.get_finished_spans()
    turns = [s for s in spans if s.name == "invoke_agent router"]
    assert [t.attributes["loopfsm.request.type"] for t in turns] == ["execute", "tool_results"]
    for t in turns:
        assert t.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert t.attributes["gen_ai.provider.name"] == "scripted"  # Required by the GenAI conventions
        assert t.attributes["gen_ai.conversation.id"] == "s1"
        assert t.parent is not None and t.parent.span_id == int(PARENT_ID, 16)  # the client's trace, continued
        assert t.context.trace_id == int(TRACE_ID, 16)
    assert [t.attributes["loopfsm.response.status"] for t in turns] == ["awaiting_tool", "completed"]
    chats = [s for s in spans if s.name.startswith("chat")]
    assert len(chats) == 2
    for chat, t in zip(chats, turns, strict=True):  # one model call in each request, beneath it
        assert chat.parent is not None and chat.parent.span_id == t.context.span_id
    (tool,) = [s for s in spans if s.name == "execute_tool shell"]
    assert tool.parent is not None and tool.parent.span_id == turns[1].context.span_id
    assert tool.attributes["gen_ai.tool.call.id"] == call["call_id"] and tool.start_time <= tool.end_time
    assert tool.start_time <= turns[1].start_time  # from the pause, before the result arrived
    assert {s.context.trace_id for s in spans} == {int(TRACE_ID, 16)}
    moves = [e.attributes for e in turns[0].events if e.name == "loopfsm.transition"]
    machines = {m["loopfsm.machine"] for m in moves}
    assert {"router_run", "engine_brain"} <= machines  # the run's state moves, as events of the request's span
    assert any(m["loopfsm.feed"] == "model_response" for m in moves if m["loopfsm.machine"] == "engine_brain")
    from loopfsm.core import tracing
    from loopfsm.router.service.spans import TURN_EVENTS

    assert TURN_EVENTS not in tracing._global  # the events' sink is gone once no traced request is served
    shown = json.dumps([dict(s.attributes) for s in spans] + [[dict(e.attributes) for e in s.events] for s in spans])
    assert "SECRET" not in shown  # no prompt, argument, result or answer in any span
    router.close()


def test_without_a_traceparent_each_request_starts_a_trace_and_an_error_is_marked(tmp_path):
    from opentelemetry.trace import StatusCode

    router, http, exporter = _traced(tmp_path)
    wrong = {"type": "tool_results", "request_id": "x", "data": {"results": []}}
    answer = _post(http, "/v1/sessions/s2/continue", wrong)
    assert answer["status"] == "error"
    (turn,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent router"]
    assert turn.parent is None
    assert turn.attributes["error.type"] == answer["data"]["code"] and turn.status.status_code == StatusCode.ERROR
    # a session id the router refuses is no attribute, and a malformed traceparent is ignored
    exporter.clear()
    _post(http, "/v1/sessions/" + "x" * 65 + "/continue", wrong, {"traceparent": "00-zz-" + "y" * 100})
    (turn,) = exporter.get_finished_spans()
    assert "gen_ai.conversation.id" not in turn.attributes and turn.parent is None
    router.close()
