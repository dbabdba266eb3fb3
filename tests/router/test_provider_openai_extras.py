"""The OpenAI provider keeps what a chat-completions stream says beside its text: a refusal (kept with the text
before it, and said by the stop reason) and log probabilities (kept in order, as the SDK accumulates them)."""

from __future__ import annotations

import pytest

from loopfsm.core.errors import ConfigError
from loopfsm.machines.messages import Message
from loopfsm.router.errors import StreamEventError
from loopfsm.router.providers import ModelRequest
from loopfsm.router.providers.openai_api import OpenAIProvider
from loopfsm.router.streams import assemble_openai_chat

from tests.support.provider_streams import Recorder, openai_body, openai_provider, sse
from tests.support.stream_oracles import openai_sdk


def _chunk(delta: dict, finish: str | None = None, logprobs: dict | None = None) -> dict:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    if logprobs is not None:
        choice["logprobs"] = logprobs
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}


def _token(token: str, logprob: float, top: list | None = None) -> dict:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": top or []}


def _provider(chunks: list[dict], logprobs: int | None = None) -> tuple[OpenAIProvider, Recorder]:
    rec = Recorder(sse(openai_body(chunks)))
    provider = openai_provider(rec)
    if logprobs is not None:
        provider = OpenAIProvider(provider.client, logprobs=logprobs)
    return provider, rec


def _ask(provider: OpenAIProvider):
    return provider.complete(ModelRequest("m", (Message.user("hi"),)))


def test_a_refusal_after_text_is_kept_beside_it_and_stops_as_a_refusal():
    chunks = [
        _chunk({"role": "assistant", "content": "Here is the start. "}),
        _chunk({"refusal": "I can't help with the rest."}),
        _chunk({}, "stop"),
    ]
    reply = _ask(_provider(chunks)[0])
    assert reply.message.text == "Here is the start. \n\nI can't help with the rest."
    assert reply.refusal == "I can't help with the rest." and reply.stop_reason == "refusal"


def test_a_refusal_alone_is_the_text_and_stops_as_a_refusal():
    reply = _ask(_provider([_chunk({"role": "assistant", "refusal": "No."}), _chunk({}, "stop")])[0])
    assert (reply.message.text, reply.refusal, reply.stop_reason) == ("No.", "No.", "refusal")


def test_logprobs_are_asked_for_kept_in_order_and_agree_with_the_sdk():
    chunks = [
        _chunk(
            {"role": "assistant", "content": "Hel"}, logprobs={"content": [_token("Hel", -0.1, [_token("He", -2.5)])]}
        ),
        _chunk({"content": "lo"}, logprobs={"content": [_token("lo", -0.25)], "refusal": None}),
        _chunk({}, "stop"),
    ]
    provider, rec = _provider(chunks, logprobs=1)
    reply = _ask(provider)
    assert rec.bodies[0]["logprobs"] is True and rec.bodies[0]["top_logprobs"] == 1
    assert [(t.token, t.logprob, t.bytes) for t in reply.logprobs] == [
        ("Hel", -0.1, (72, 101, 108)),
        ("lo", -0.25, (108, 111)),
    ]
    assert [(t.token, t.logprob) for t in reply.logprobs[0].top] == [("He", -2.5)]
    sdk = openai_sdk(chunks).choices[0].logprobs
    ours = assemble_openai_chat(chunks)
    assert [(t.token, t.logprob, list(t.bytes), [(a.token, a.logprob) for a in t.top]) for t in ours.logprobs] == [
        (t.token, t.logprob, t.bytes, [(a.token, a.logprob) for a in t.top_logprobs]) for t in sdk.content
    ]


@pytest.mark.parametrize(
    "logprobs",
    [
        {"content": [{"token": "x"}]},  # no logprob
        {"content": [{"token": "x", "logprob": "high"}]},
        {"content": [{"token": "x", "logprob": -1, "bytes": [300]}]},
        {"content": "x"},
        {"tokens": [1]},  # a field this adapter does not know, not empty
        ["x"],
    ],
)
def test_logprobs_of_another_shape_are_refused_not_dropped(logprobs):
    with pytest.raises(StreamEventError, match="logprobs"):
        assemble_openai_chat([_chunk({"role": "assistant", "content": "x"}, logprobs=logprobs), _chunk({}, "stop")])


def test_a_refused_chunk_keeps_none_of_its_logprobs():
    from loopfsm.router.streams.openai_chat import OpenAIChatStream

    stream = OpenAIChatStream()
    stream.feed(_chunk({"role": "assistant", "content": "a"}, logprobs={"content": [_token("a", -1.0)]}))
    bad = _chunk({"content": "b", "tool_calls": [{"index": 3, "id": "t", "function": {"name": "f"}}]},
                 logprobs={"content": [_token("b", -1.0)]})  # fmt: skip
    with pytest.raises(Exception):  # noqa: B017 - the tool call out of order refuses the whole chunk
        stream.feed(bad)
    stream.feed(_chunk({}, "stop"))
    stream.finish()
    assert [t.token for t in stream.result().logprobs] == ["a"]


def test_logprobs_out_of_range_are_refused_at_construction():
    with pytest.raises(ConfigError, match="0 to 20"):
        _provider([], logprobs=21)
