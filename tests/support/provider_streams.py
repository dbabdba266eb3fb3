"""The Anthropic and OpenAI adapters over the SDKs' own HTTP client with a mock transport: no network.

Replies are generated with :mod:`loopfsm.router.streams.synthetic` and served as the
server-sent-event bodies the APIs stream; a :class:`Recorder` answers from a
queue and keeps every request the SDK actually sent.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable
from typing import Any

import anthropic
import openai

from loopfsm.router.providers.anthropic_api import AnthropicProvider
from loopfsm.router.providers.openai_api import OpenAIProvider
from loopfsm.router.streams.synthetic import Block, Reply, anthropic_events, openai_chunks


def _http_module(sdk: Any) -> Any:
    """httpx or httpx2: the package whose Client the SDK's DefaultHttpxClient extends."""
    return importlib.import_module(sdk.DefaultHttpxClient.__mro__[1].__module__.split(".")[0])


httpx = _http_module(anthropic)
assert _http_module(openai) is httpx, "both SDKs must share one HTTP library for these tests"


def anthropic_body(events: Iterable[dict[str, Any]]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def openai_body(chunks: Iterable[dict[str, Any]], done: bool = True) -> bytes:
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return (text + ("data: [DONE]\n\n" if done else "")).encode()


def sse(body: bytes, status: int = 200) -> Any:
    return httpx.Response(status, content=body, headers={"content-type": "text/event-stream"})


def anthropic_reply(text: str = "", calls: tuple[tuple[str, str, dict[str, Any]], ...] = (), **kw: Any) -> Any:
    """A streamed Messages API reply: text, then tool_use blocks ``(id, name, arguments)``."""
    blocks = ([Block("text", text)] if text else []) + [Block("tool", json.dumps(a), i, n) for i, n, a in calls]
    usage = {"input_tokens": kw.pop("input_tokens", 11), "output_tokens": kw.pop("output_tokens", 7)}
    stop = "tool_use" if calls else "end_turn"
    return sse(anthropic_body(anthropic_events(Reply(tuple(blocks), stop, usage, **kw))))


def openai_reply(text: str = "", calls: tuple[tuple[str, str, dict[str, Any]], ...] = (), **kw: Any) -> Any:
    """A streamed chat completion: text, then tool calls ``(id, name, arguments)``, then the usage chunk."""
    blocks = ([Block("text", text)] if text else []) + [Block("tool", json.dumps(a), i, n) for i, n, a in calls]
    prompt, completion = kw.pop("input_tokens", 13), kw.pop("output_tokens", 5)
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    stop = "tool_calls" if calls else "stop"
    return sse(openai_body(openai_chunks(Reply(tuple(blocks), stop, usage, **kw))))


def anthropic_error(status: int, kind: str, message: str = "", **headers: str) -> Any:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return httpx.Response(status, json=body, headers=headers)


def openai_error(status: int, kind: str, code: str | None) -> Any:
    return httpx.Response(status, json={"error": {"type": kind, "code": code, "message": "m"}})


class Recorder:
    """A MockTransport handler that answers from a queue and keeps every request (body and headers)."""

    def __init__(self, *answers: Any):
        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []

    def __call__(self, request: Any) -> Any:
        self.bodies.append(json.loads(request.content))
        self.headers.append(dict(request.headers))
        if not self.answers:
            raise AssertionError("the model was called more often than the test expected")
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def anthropic_provider(rec: Recorder, api_key: str = "test-key") -> AnthropicProvider:
    client = anthropic.Anthropic(
        api_key=api_key, max_retries=0, http_client=anthropic.DefaultHttpxClient(transport=httpx.MockTransport(rec))
    )
    return AnthropicProvider(client)


def openai_provider(rec: Recorder, api_key: str = "test-key") -> OpenAIProvider:
    client = openai.OpenAI(
        api_key=api_key, max_retries=0, http_client=openai.DefaultHttpxClient(transport=httpx.MockTransport(rec))
    )
    return OpenAIProvider(client)
