"""The OpenAI Responses API as a :class:`~loopfsm.router.providers.Provider` (extra ``loopfsm[openai]``).

Requests are sent streaming; the events are assembled by
:class:`~loopfsm.router.streams.openai_responses.OpenAIResponsesStream` (stream
assembly), so a function call's arguments arrive as one whole JSON object or
the reply is refused.  Conversation state stays with the router: every request
carries the whole conversation as input items (``store`` is off, no
``previous_response_id``), so a run restored elsewhere asks exactly as before.

The conversation as input items: user and assistant text as messages, an
assistant's tool calls as ``function_call`` items (``call_id``, ``name``, the
arguments as JSON text), a tool result as a ``function_call_output``.  Thinking
from a reasoning summary is not handed back: the Responses API takes reasoning
back only with its encrypted content, which this adapter does not ask for.
"""

from __future__ import annotations

import json
from typing import Any

from loopfsm.router.streams.openai_responses import OpenAIResponsesStream
from loopfsm.machines.messages import Message
from . import sse
from . import import_sdk, ModelReply, ModelRequest
from .openai_api import ERROR_CODES, classify, reply_of


def to_input_items(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """The conversation as the Responses API's ``input`` list."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            out.append({"type": "function_call_output", "call_id": m.tool_call_id, "output": m.text})
        elif m.role == "assistant":
            if m.text:
                out.append({"role": "assistant", "content": m.text})
            out += [
                {
                    "type": "function_call",
                    "call_id": c.id,
                    "name": c.name,
                    "arguments": json.dumps(c.arguments, sort_keys=True),
                }
                for c in m.tool_calls
            ]
        else:
            out.append({"role": m.role, "content": m.text})
    return out


class OpenAIResponsesProvider:
    """``client`` is an ``openai.OpenAI`` (pass ``http_client=`` to it for proxies or tests).

    Without one, the SDK's client is made from ``client_options`` and the
    SDK's environment (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``).
    """

    name = "openai"

    def __init__(self, client: Any = None, **client_options: Any):
        self._sdk = import_sdk("openai")
        self._http_error = sse.http_error(self._sdk)
        self.client = client if client is not None else self._sdk.OpenAI(**client_options)

    def _arguments(self, request: ModelRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "input": to_input_items(request.messages),
            "max_output_tokens": request.max_tokens,
            "store": False,
        }
        if request.system:
            kwargs["instructions"] = request.system
        if request.tools:
            kwargs["tools"] = [
                {"type": "function", "name": t.name, "description": t.description, "parameters": t.input_schema}
                for t in request.tools
            ]
        return kwargs

    def complete(self, request: ModelRequest) -> ModelReply:
        sdk, stream = self._sdk, OpenAIResponsesStream()
        try:
            with self.client.responses.with_streaming_response.create(**self._arguments(request), stream=True) as resp:
                for number, (_, data) in enumerate(sse.events(resp.iter_lines()), 1):
                    stream.feed(sse.decode(data, number))
        except sdk.APIStatusError as err:
            raise classify(err.status_code, err.body, err.response.headers) from None
        except (sdk.APIConnectionError, self._http_error):  # includes timeouts, and a body cut mid-stream
            raise classify(None, None) from None
        if stream.machine.state == "Stopped":  # the body closed after the response completed
            stream.finish()
        result = sse.assembled(self.name, stream, lambda kind: ERROR_CODES.get(kind, "transient"))
        return reply_of(result, "input_tokens", "output_tokens")
