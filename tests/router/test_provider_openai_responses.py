"""The OpenAI Responses API adapter through the real SDK over a stand-in HTTP transport: the request it sends, the
reply it assembles, and each failure classed for the fallback breaker."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from loopfsm.machines.messages import Message, ToolCall
from loopfsm.router.errors import ProviderError, StreamEventError
from loopfsm.router.providers import ModelRequest, ToolSpec
from loopfsm.router.providers.openai_responses_api import OpenAIResponsesProvider, to_input_items
from loopfsm.router.streams.openai_responses import assemble_openai_responses
from loopfsm.router.streams.synthetic import Block, Reply, every, openai_responses_events

from tests.support.provider_streams import Recorder, httpx, openai_error, sse


def body(events: list[dict[str, Any]]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def reply(*blocks: Block, stop: str = "stop", usage: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    counts = usage if usage is not None else {"input_tokens": 21, "output_tokens": 8, "total_tokens": 29}
    return list(openai_responses_events(Reply(blocks, stop, counts, message_id="resp_1", model="gpt-x"), every(5)))


def provider(*answers: Any) -> tuple[OpenAIResponsesProvider, Recorder]:
    rec = Recorder(*answers)
    client = openai.OpenAI(
        api_key="test-key", max_retries=0, http_client=openai.DefaultHttpxClient(transport=httpx.MockTransport(rec))
    )
    return OpenAIResponsesProvider(client), rec


WEATHER = ToolSpec(
    "get_weather", "the weather in a city", {"type": "object", "properties": {"city": {"type": "string"}}}
)


def test_a_request_carries_the_whole_conversation_as_input_items_and_the_reply_comes_back_whole():
    events = reply(
        Block("thinking", "The user wants weather."),
        Block("text", "Let me look."),
        Block("tool", json.dumps({"city": "Paris"}), "call_7", "get_weather"),
    )
    p, rec = provider(sse(body(events)))
    conversation = (
        Message.user("Weather in Paris?"),
        Message.assistant("", (ToolCall("call_1", "get_weather", {"city": "Oslo"}),)),
        Message.tool_result("call_1", "rain"),
    )
    got = p.complete(ModelRequest("gpt-x", conversation, (WEATHER,), system="Be brief.", max_tokens=300))
    sent = rec.bodies[0]
    assert sent["model"] == "gpt-x" and sent["stream"] is True and sent["store"] is False
    assert sent["instructions"] == "Be brief." and sent["max_output_tokens"] == 300
    assert sent["input"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "rain"},
    ]
    assert sent["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": WEATHER.description,
            "parameters": WEATHER.input_schema,
        }
    ]
    assert got.message.text == "Let me look."
    assert got.message.tool_calls == (ToolCall("call_7", "get_weather", {"city": "Paris"}),)
    assert [t.text for t in got.message.thinking] == ["The user wants weather."]
    assert (got.stop_reason, got.input_tokens, got.output_tokens, got.model) == ("tool_use", 21, 8, "gpt-x")


def test_assistant_text_and_calls_are_separate_items_in_order():
    turn = Message.assistant("Checking.", (ToolCall("c1", "a", {}), ToolCall("c2", "b", {"x": 1})))
    assert to_input_items((turn,)) == [
        {"role": "assistant", "content": "Checking."},
        {"type": "function_call", "call_id": "c1", "name": "a", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "b", "arguments": '{"x": 1}'},
    ]


def test_a_refusal_is_kept_beside_the_text_and_stops_as_a_refusal():
    p, _ = provider(sse(body(reply(Block("text", "Part one. "), Block("refusal", "I can't do the rest.")))))
    got = p.complete(ModelRequest("gpt-x", (Message.user("hi"),)))
    assert got.message.text == "Part one. \n\nI can't do the rest."
    assert (got.refusal, got.stop_reason) == ("I can't do the rest.", "refusal")


@pytest.mark.parametrize(("stop", "said"), [("length", "max_tokens"), ("content_filter", "refusal")])
def test_an_incomplete_response_says_why_it_stopped(stop, said):
    p, _ = provider(sse(body(reply(Block("text", "So far"), stop=stop))))
    got = p.complete(ModelRequest("gpt-x", (Message.user("hi"),)))
    assert (got.message.text, got.stop_reason) == ("So far", said)


def test_arguments_cut_short_fail_the_call_and_are_never_cut_to_what_parses():
    events = reply(Block("tool", '{"city": "Par', "call_1", "get_weather"), stop="length")
    assert assemble_openai_responses(events).problems[0].kind == "incomplete"
    p, _ = provider(sse(body(events)))
    with pytest.raises(ProviderError) as err:
        p.complete(ModelRequest("gpt-x", (Message.user("hi"),)))
    assert err.value.outcome == "transient"


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        (openai_error(429, "requests", "rate_limit_exceeded"), "rate_limited"),
        (openai_error(401, "invalid_request_error", "invalid_api_key"), "auth"),
        (openai_error(400, "invalid_request_error", "context_length_exceeded"), "context_length"),
        (openai_error(503, "server_error", None), "transient"),
    ],
)
def test_failures_are_classed_for_the_breaker(answer, outcome):
    p, _ = provider(answer)
    with pytest.raises(ProviderError) as err:
        p.complete(ModelRequest("gpt-x", (Message.user("hi"),)))
    assert err.value.outcome == outcome


def test_an_error_mid_stream_and_a_failed_response_are_failures_classed_by_their_code():
    head = reply(Block("text", "Hel"))[:4]
    failed = {
        "type": "response.failed",
        "response": {"id": "resp_1", "error": {"code": "server_error", "message": "x"}},
    }
    for last, outcome in [
        ({"type": "error", "code": "rate_limit_exceeded", "message": "slow down"}, "rate_limited"),
        (failed, "transient"),
    ]:
        p, _ = provider(sse(body([*head, last])))
        with pytest.raises(ProviderError) as err:
            p.complete(ModelRequest("gpt-x", (Message.user("hi"),)))
        assert err.value.outcome == outcome


def test_a_stream_cut_before_the_response_completed_is_transient():
    p, _ = provider(sse(body(reply(Block("text", "Hello there"))[:-1])))
    with pytest.raises(ProviderError) as err:
        p.complete(ModelRequest("gpt-x", (Message.user("hi"),)))
    assert err.value.outcome == "transient"


@pytest.mark.parametrize(
    ("event", "words"),
    [
        (
            {"type": "response.output_item.added", "output_index": 1, "item": {"type": "web_search_call", "id": "w"}},
            "output item type 'web_search_call' is unsupported",
        ),
        ({"type": "response.output_text.annotation.added", "output_index": 0}, "unsupported event type"),
        (
            {
                "type": "response.output_text.delta",
                "output_index": 0,
                "content_index": 0,
                "delta": "x",
                "logprobs": [{"token": "x", "logprob": -1.0}],
            },
            "logprobs",
        ),
        (
            {"type": "response.output_text.done", "output_index": 0, "content_index": 0, "text": "not what was said"},
            "says other text than its deltas did",
        ),
    ],
)
def test_what_the_message_has_no_place_for_is_refused_never_dropped(event, words):
    events = reply(Block("text", "Hello"))
    at = next(i for i, e in enumerate(events) if e["type"] == "response.content_part.done")
    stream_events = [*events[:at], event]
    with pytest.raises(StreamEventError, match=words):
        assemble_openai_responses(stream_events)


def test_a_refused_event_changes_nothing():
    from loopfsm.router.streams.openai_responses import OpenAIResponsesStream

    events = reply(Block("text", "Hello"))
    stream = OpenAIResponsesStream()
    for e in events[:5]:
        stream.feed(e)
    before = stream.machine.snapshot()
    with pytest.raises(StreamEventError):
        stream.feed({"type": "response.output_text.done", "output_index": 0, "content_index": 0, "text": "other"})
    assert stream.machine.snapshot() == before
    for e in events[5:]:
        stream.feed(e)
    stream.finish()
    assert stream.result().message.text == "Hello"


def test_a_router_turn_on_the_responses_api_completes_and_records_the_call(tmp_path):
    from tests.router.test_router_providers import execute, model_rows, router_at  # noqa: PLC0415

    p, rec = provider(sse(body(reply(Block("text", "Hello from Responses")))))
    router = router_at(tmp_path, p, model="gpt-x")
    resp = execute(router, "s", "hello")
    assert resp["status"] == "completed" and resp["data"]["message"] == "Hello from Responses"
    assert rec.bodies[0]["input"] == [{"role": "user", "content": "hello"}] and rec.bodies[0]["model"] == "gpt-x"
    (row,) = model_rows(router, "s")
    assert (row["provider"], row["outcome"], row["input_tokens"]) == ("openai", "success", 21)
    router.close()
