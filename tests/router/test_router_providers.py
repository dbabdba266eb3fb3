"""The router with the real Anthropic and OpenAI adapters: whole turns, tool rounds, fallback, refused streams.

Each provider is the real adapter over its real SDK; only the SDK's HTTP is
replaced, by a mock transport serving generated streaming (server-sent event)
responses.  Turns go through ``Router.handle`` directly or through the ASGI
app and the real client.  No network.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

pytest.importorskip("anthropic")
pytest.importorskip("openai")

from loopfsm.router.crypto import Keyring  # noqa: E402
from loopfsm.router import Router  # noqa: E402
from loopfsm.router.protocol import check_response  # noqa: E402
from loopfsm.router.streams.synthetic import Block, Reply, anthropic_events, openai_chunks  # noqa: E402

from tests.support.provider_streams import (  # noqa: E402
    Recorder,
    anthropic_body,
    anthropic_error,
    anthropic_provider,
    anthropic_reply,
    openai_body,
    openai_error,
    openai_provider,
    openai_reply,
    sse,
)
from tests.support.router_support import client, make  # noqa: E402

KEY = "sk-test-9f2c1e77-never-echoed"
PROVIDERS = {"anthropic": (anthropic_provider, anthropic_reply), "openai": (openai_provider, openai_reply)}


class Ticks:
    """A monotonic clock that moves 0.25 s each time it is read: every call takes exactly 250 ms."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        self.t += 0.25
        return self.t


def router_at(tmp_path: Any, provider: Any, **kw: Any) -> Router:
    return Router(f"sqlite:///{tmp_path / 'r.db'}", provider=provider, create=True, monotonic=Ticks(), **kw)


def execute(router: Router, session: str, prompt: str, **data: Any) -> dict[str, Any]:
    resp = router.handle(session, {"type": "execute", "request_id": "r1", "data": dict(data, prompt=prompt)})
    check_response(resp)
    return resp


def model_rows(router: Router, session: str) -> list[dict[str, Any]]:
    return [
        r.meta for r in router.store().rows(session, "trace") if r.meta["event"] in ("model.responded", "model.failed")
    ]


@pytest.mark.parametrize("kind", PROVIDERS)
def test_a_text_turn_completes_and_its_model_call_is_traced(tmp_path, kind):
    factory, reply = PROVIDERS[kind]
    rec = Recorder(reply("The answer is 42.", input_tokens=321, output_tokens=9, model=f"{kind}-model-2026"))
    router = router_at(tmp_path, factory(rec), model=f"{kind}-model")
    resp = execute(router, "s", "what is the answer?")
    assert resp["status"] == "completed" and resp["data"]["message"] == "The answer is 42."
    sent = rec.bodies[0]
    assert sent["stream"] is True and sent["model"] == f"{kind}-model"
    assert "what is the answer?" in json.dumps(sent["messages"])
    assert model_rows(router, "s") == [
        {
            "event": "model.responded",
            "provider": kind,
            "model": f"{kind}-model",
            "response_model": f"{kind}-model-2026",
            "route": "primary",
            "fallback": False,
            "outcome": "success",
            "input_tokens": 321,
            "output_tokens": 9,
            "stop_reason": "end_turn",
            "latency_ms": 250.0,
        }
    ]
    (assistant,) = [r for r in router.store().rows("s", "message") if r.meta["role"] == "assistant"]
    assert assistant.body["text"] == "The answer is 42."
    rec_ = router.store().load("s")
    assert rec_.phase == "Idle" and rec_.holder is None
    router.close()


@pytest.mark.parametrize("kind", PROVIDERS)
def test_a_tool_round_is_assembled_from_the_stream_and_answered_by_the_client(tmp_path, kind):
    factory, reply = PROVIDERS[kind]
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("file body 1234\n")
    calls = (("call_a", "read_file", {"path": "notes.txt"}), ("call_b", "read_file", {"path": "missing.txt"}))
    rec = Recorder(reply("Reading both.", calls), reply("One exists and says 1234."))
    router, tc = make(f"sqlite:///{tmp_path / 'r.db'}", "loopfsm_", None, create=True, provider=factory(rec))
    resp = client(tc, "t", ws).run("read my notes")
    assert resp["status"] == "completed" and resp["data"]["message"] == "One exists and says 1234."
    second = json.dumps(rec.bodies[1]["messages"])
    assert "file body 1234" in second and "call_a" in second and "call_b" in second
    if kind == "anthropic":
        results = rec.bodies[1]["messages"][-1]["content"]
        assert [b["tool_use_id"] for b in results] == ["call_a", "call_b"] and results[1]["is_error"] is True
        assert rec.bodies[1]["messages"][-2]["content"][1] == {
            "type": "tool_use",
            "id": "call_a",
            "name": "read_file",
            "input": {"path": "notes.txt"},
        }
    else:
        tools = [m for m in rec.bodies[1]["messages"] if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in tools] == ["call_a", "call_b"]
        assistant = rec.bodies[1]["messages"][-3]
        assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"path": "notes.txt"}
    rows = router.store().rows("t", "tool_call")
    assert sorted((r.meta["call_id"], r.meta["is_error"]) for r in rows) == [("call_a", False), ("call_b", True)]
    assert [m["stop_reason"] for m in model_rows(router, "t")] == ["tool_use", "end_turn"]
    router.close()


def anthropic_overloaded_mid_stream() -> Any:
    """A 200 stream that starts, then reports overloaded_error as an ``error`` event."""
    start = next(anthropic_events(Reply((), "end_turn")))
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    return sse(anthropic_body([start, error]))


def openai_error_mid_stream() -> Any:
    first = next(openai_chunks(Reply((Block("text", "par"),), "stop")))
    return sse(openai_body([first, {"error": {"type": "server_error", "code": "server_error", "message": "m"}}]))


FAILING_PRIMARIES = {
    "anthropic": (
        anthropic_provider,
        [
            anthropic_error(429, "rate_limit_error", "slow down", **{"retry-after": "1"}),
            anthropic_error(529, "overloaded_error", "Overloaded"),
            anthropic_overloaded_mid_stream(),
        ],
        ["rate_limited", "transient", "transient"],
    ),
    "openai": (
        openai_provider,
        [
            openai_error(429, "requests", "rate_limit_exceeded"),
            openai_error(503, "server_error", None),
            openai_error_mid_stream(),
        ],
        ["rate_limited", "transient", "transient"],
    ),
}


@pytest.mark.parametrize("kind", FAILING_PRIMARIES)
def test_rate_limits_and_overload_trip_the_breaker_and_the_secondary_provider_answers(tmp_path, kind):
    factory, failures, outcomes = FAILING_PRIMARIES[kind]
    other = "openai" if kind == "anthropic" else "anthropic"
    primary, secondary = Recorder(*failures), Recorder(PROVIDERS[other][1]("answered by the secondary"))
    router = router_at(
        tmp_path,
        factory(primary),
        fallback=PROVIDERS[other][0](secondary),
        model="primary-model",
        fallback_model="secondary-model",
        max_model_attempts=4,
    )
    resp = execute(router, "f", "hello")
    assert resp["status"] == "completed" and resp["data"]["message"] == "answered by the secondary"
    assert router.breaker.state == "Fallback" and len(primary.bodies) == 3 and len(secondary.bodies) == 1
    assert secondary.bodies[0]["model"] == "secondary-model"
    rows = model_rows(router, "f")
    assert [(r["provider"], r["outcome"], r["fallback"]) for r in rows] == [
        *[(kind, o, False) for o in outcomes],
        (other, "success", True),
    ]
    assert [r["input_tokens"] for r in rows[:3]] == [None, None, None] and rows[3]["input_tokens"] > 0
    router.close()


@pytest.mark.parametrize("kind", PROVIDERS)
def test_refused_credentials_end_the_run_as_a_setup_error_without_asking_again(tmp_path, kind, caplog):
    caplog.set_level(logging.DEBUG)
    factory = PROVIDERS[kind][0]
    refusal = (
        anthropic_error(401, "authentication_error", "invalid x-api-key")
        if kind == "anthropic"
        else (openai_error(401, "invalid_request_error", "invalid_api_key"))
    )
    rec = Recorder(refusal)
    router = router_at(tmp_path, factory(rec, api_key=KEY), max_model_attempts=3)
    resp = execute(router, "a", "hello")
    assert resp["status"] == "idle" and resp["data"]["ended"] == "failed"
    assert "setup error" in resp["data"]["error"] and "credentials" in resp["data"]["error"]
    assert len(rec.bodies) == 1  # the same key is not tried again
    assert [r["outcome"] for r in model_rows(router, "a")] == ["auth"]
    assert router.breaker.state == "Fallback" and router.breaker.state_data["reason"] == "auth"
    assert KEY in json.dumps(rec.headers[0])  # the SDK did send it ...
    assert_key_nowhere(router, [resp], caplog)  # ... and it is nowhere else
    router.close()


def test_refused_credentials_on_the_primary_fall_back_at_once(tmp_path):
    primary = Recorder(anthropic_error(403, "permission_error", "no"))
    secondary = Recorder(openai_reply("from the secondary"))
    router = router_at(tmp_path, anthropic_provider(primary), fallback=openai_provider(secondary))
    resp = execute(router, "b", "hello")
    assert resp["data"]["message"] == "from the secondary" and len(primary.bodies) == 1
    assert [(r["provider"], r["outcome"]) for r in model_rows(router, "b")] == [
        ("anthropic", "auth"),
        ("openai", "success"),
    ]
    router.close()


def assert_key_nowhere(router: Router, responses: list[Any], caplog: Any) -> None:
    store = router.store()
    _, rows = store.backend.run(f"SELECT * FROM {router.prefix}rows")
    _, state = store.backend.run(f"SELECT * FROM {router.prefix}run_state")
    dump = json.dumps([[str(v) for v in row] for row in rows + state]) + json.dumps(responses)
    assert rows and KEY not in dump
    assert KEY not in caplog.text and all(KEY not in str(r.args) for r in caplog.records)


MALFORMED = {
    "anthropic: a delta for a block never started": (
        anthropic_provider,
        lambda: sse(
            anthropic_body(
                [
                    next(anthropic_events(Reply((), "end_turn"))),
                    {"type": "content_block_delta", "index": 3, "delta": {"type": "text_delta", "text": "x"}},
                ]
            )
        ),
        "StreamProtocolError",
    ),
    "anthropic: an event that is not JSON": (
        anthropic_provider,
        lambda: sse(b"event: message_start\ndata: {not json\n\n"),
        "not JSON",
    ),
    "anthropic: an event missing its fields": (
        anthropic_provider,
        lambda: sse(anthropic_body([{"type": "message_start"}])),
        "malformed 'message_start' event",
    ),
    "openai: arguments for a tool call that was never announced": (
        openai_provider,
        lambda: sse(
            openai_body(
                [
                    next(openai_chunks(Reply((), "stop"))),
                    {
                        "id": "chatcmpl-synthetic",
                        "choices": [
                            {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}
                        ],
                    },
                ]
            )
        ),
        "StreamProtocolError",
    ),
    "openai: a chunk that is a JSON list": (openai_provider, lambda: sse(b"data: [1, 2]\n\n"), "not a JSON object"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_stream_is_refused_and_the_run_fails_with_a_typed_error(tmp_path, case):
    factory, answer, why = MALFORMED[case]
    rec = Recorder(answer(), answer(), answer())
    router = router_at(tmp_path, factory(rec), max_model_attempts=3)
    resp = execute(router, "m", "hello")
    assert resp["status"] == "idle" and resp["data"]["ended"] == "failed"
    error = resp["data"]["error"]
    assert "malformed" in error and (why in error or why == "StreamProtocolError"), error
    assert "Traceback" not in error and len(rec.bodies) == 1  # refused, not retried
    assert [r["outcome"] for r in model_rows(router, "m")] == ["malformed_stream"]
    events = [r.meta["event"] for r in router.store().rows("m", "trace")]
    assert "run.failed" in events and events[-1] == "lock.released"
    state = router.store().load("m")
    assert state.phase == "Idle" and state.holder is None
    assert router.breaker.data.primary_failures == 1  # counted against the provider, like a transient failure
    router.close()


def test_a_stream_cut_before_its_stop_reason_is_a_transient_failure_and_retried(tmp_path):
    events = list(anthropic_events(Reply((Block("text", "partial answer"),), "end_turn")))
    cut = sse(anthropic_body(events[:3]))
    rec = Recorder(cut, anthropic_reply("whole answer"))
    router = router_at(tmp_path, anthropic_provider(rec))
    resp = execute(router, "c", "hello")
    assert resp["data"]["message"] == "whole answer" and len(rec.bodies) == 2
    assert [r["outcome"] for r in model_rows(router, "c")] == ["transient", "success"]
    router.close()


@pytest.mark.parametrize("kind", PROVIDERS)
def test_an_encrypted_session_keeps_no_content_in_clear_and_its_trace_rows_only_metadata(tmp_path, kind):
    factory, reply = PROVIDERS[kind]
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "diary.txt").write_text("diary-secret-body\n")
    rec = Recorder(
        reply("sealed-assistant-text", (("call_z", "read_file", {"path": "diary.txt"}),), input_tokens=77),
        reply("sealed-final-answer", input_tokens=88, output_tokens=4),
    )
    router, tc = make(
        f"sqlite:///{tmp_path / 'r.db'}", "loopfsm_", None, create=True, provider=factory(rec, api_key=KEY)
    )
    c = client(tc, "enc", ws, keyring=Keyring.generate())
    resp = c.run("sealed-prompt-text")
    assert c.last_message == "sealed-final-answer" and resp["data"]["ended"] == "completed"
    rows = model_rows(router, "enc")
    assert [(r["provider"], r["input_tokens"], r["outcome"]) for r in rows] == [
        (kind, 77, "success"),
        (kind, 88, "success"),
    ]
    assert all(set(r) <= {"event", "provider", "model", "response_model", "route", "fallback", "outcome",
                          "input_tokens", "output_tokens", "stop_reason", "latency_ms"} for r in rows)  # fmt: skip
    _, table = router.store().backend.run("SELECT * FROM loopfsm_rows")
    _, state = router.store().backend.run("SELECT * FROM loopfsm_run_state")
    dump = json.dumps([[str(v) for v in row] for row in table + state])
    for secret in ("sealed-prompt-text", "sealed-assistant-text", "sealed-final-answer", "diary-secret-body", KEY):
        assert secret not in dump
    router.close()


def test_model_calls_become_genai_client_spans(tmp_path):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind, StatusCode

    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    primary = Recorder(anthropic_error(529, "overloaded_error", "Overloaded"), anthropic_reply(
        "span-secret-text", input_tokens=40, output_tokens=6, model="claude-x-2026"))  # fmt: skip
    router = router_at(tmp_path, anthropic_provider(primary), model="claude-x", tracer=tp.get_tracer("test"))
    assert execute(router, "o", "span-secret-prompt")["status"] == "completed"
    failed, ok, turn = exporter.get_finished_spans()  # the request's span ends last, its model calls beneath it
    assert turn.name == "invoke_agent router" and failed.parent.span_id == ok.parent.span_id == turn.context.span_id
    assert failed.name == ok.name == "chat claude-x" and failed.kind == ok.kind == SpanKind.CLIENT
    assert failed.status.status_code == StatusCode.ERROR and failed.attributes["error.type"] == "transient"
    assert dict(ok.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-x",
        "gen_ai.response.model": "claude-x-2026",
        "gen_ai.usage.input_tokens": 40,
        "gen_ai.usage.output_tokens": 6,
        "gen_ai.response.finish_reasons": ("end_turn",),
        "loopfsm.model.route": "primary",
        "loopfsm.model.fallback": False,
        "loopfsm.model.outcome": "success",
        "loopfsm.model.latency_ms": 250.0,
    }
    assert ok.end_time - ok.start_time == 250_000_000  # the span lasts what the router measured
    assert "secret" not in json.dumps([dict(s.attributes) for s in (failed, ok)])
    router.close()
