"""The Anthropic Messages API as a :class:`~loopfsm.router.providers.Provider` (extra ``loopfsm[anthropic]``).

Requests are translated from the brain's provider-neutral messages to the
API's content blocks and sent streaming; the reply's events are assembled by
:class:`~loopfsm.router.streams.AnthropicStream` (stream assembly), so a tool call's
arguments arrive whole or the reply is refused.  Failures are classified by
HTTP status and the API's error type (also when it arrives as an ``error``
event mid-stream), which are stable across SDK versions.
"""

from __future__ import annotations

from typing import Any, cast

from loopfsm.router.errors import ProviderError
from loopfsm.machines.messages import Message, ServerBlock
from loopfsm.router.streams.anthropic import AnthropicStream
from . import sse
from . import import_sdk, token_count, FailureClass, ModelReply, ModelRequest, StopReason, status_class

#: The API's error ``type`` -> the fallback breaker's outcome class.
ERROR_TYPES: dict[str, FailureClass] = {
    "rate_limit_error": "rate_limited",
    "authentication_error": "auth",
    "permission_error": "auth",
    "billing_error": "quota",
    "overloaded_error": "transient",
    "api_error": "transient",
    "timeout_error": "transient",
}
_STOPS = {"end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "pause_turn"}


def to_api_messages(messages: tuple[Message, ...]) -> tuple[str, list[dict[str, Any]]]:
    """The system text and the API's alternating turns; tool results ride in user turns, as the API wants."""
    system = "\n\n".join(m.text for m in messages if m.role == "system")
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.text}
            if m.is_error:
                block["is_error"] = True
            role, blocks = "user", [block]
        elif m.role == "assistant":
            role = "assistant"
            blocks = [_server_block(b) for b in m.server_blocks]  # handed back as they came, before the text
            blocks += [{"type": "text", "text": m.text}] if m.text else []
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls]
        else:
            role, blocks = "user", [{"type": "text", "text": m.text}]
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return system, out


def _server_block(b: ServerBlock) -> dict[str, Any]:
    """A server tool's call or result as the Messages API takes it back."""
    if b.kind == "server_tool_use":
        return {"type": "server_tool_use", "id": b.id, "name": b.name, "input": b.content}
    return {"type": b.kind, "tool_use_id": b.id, "content": b.content}


def retry_after_ms(headers: Any) -> int | None:
    """The ``retry-after`` header in ms, when the provider sent one in seconds."""
    value = headers.get("retry-after") if headers is not None else None
    try:
        return None if value is None else max(0, int(float(value) * 1000))
    except ValueError:
        return None


def classify(status: int | None, body: object, headers: Any = None) -> ProviderError:
    """An HTTP failure as the breaker's outcome class (``status`` None: no response at all, transient)."""
    err = body.get("error") if isinstance(body, dict) else None
    kind = err.get("type") if isinstance(err, dict) else None
    message = str(err.get("message", "")).lower() if isinstance(err, dict) else ""
    outcome: FailureClass
    if isinstance(kind, str) and kind in ERROR_TYPES:
        outcome = ERROR_TYPES[kind]
    elif status == 413 or "prompt is too long" in message:
        outcome = "context_length"
    elif status == 402:
        outcome = "quota"
    else:
        outcome = status_class(status)
    return ProviderError("anthropic", outcome, f"HTTP {status}" if status else "no response", retry_after_ms(headers))


class AnthropicProvider:
    """``client`` is an ``anthropic.Anthropic`` (pass ``http_client=`` to it for proxies or tests).

    Without one, the SDK's client is made from ``client_options`` and the
    SDK's environment (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``).
    """

    name = "anthropic"

    def __init__(self, client: Any = None, **client_options: Any):
        self._sdk = import_sdk("anthropic")
        self._http_error = sse.http_error(self._sdk)
        self.client = client if client is not None else self._sdk.Anthropic(**client_options)

    def _arguments(self, request: ModelRequest) -> dict[str, Any]:
        system, messages = to_api_messages(request.messages)
        if request.system:
            system = f"{request.system}\n\n{system}" if system else request.system
        kwargs: dict[str, Any] = {"model": request.model, "max_tokens": request.max_tokens, "messages": messages}
        if system:
            kwargs["system"] = system
        if request.tools:
            kwargs["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in request.tools
            ]
        return kwargs

    def complete(self, request: ModelRequest) -> ModelReply:
        sdk, stream = self._sdk, AnthropicStream()
        try:
            with self.client.messages.with_streaming_response.create(**self._arguments(request), stream=True) as resp:
                for number, (_, data) in enumerate(sse.events(resp.iter_lines()), 1):
                    stream.feed(sse.decode(data, number))
                    if stream.machine.state in ("Done", "Failed"):
                        break
        except sdk.APIStatusError as err:
            raise classify(err.status_code, err.body, err.response.headers) from None
        except (sdk.APIConnectionError, self._http_error):  # includes timeouts, and a body cut mid-stream
            raise classify(None, None) from None
        result = sse.assembled(self.name, stream, lambda kind: ERROR_TYPES.get(kind, "transient"))
        stop = result.stop_reason or "end_turn"
        return ModelReply(
            result.message,
            cast(StopReason, stop if stop in _STOPS else "end_turn"),
            token_count(result.usage.get("input_tokens")),
            token_count(result.usage.get("output_tokens")),
            result.model,
        )
