"""The Anthropic Messages API as a :class:`~loopfsm.providers.Provider` (extra ``loopfsm[anthropic]``).

Requests and replies are translated between the brain's provider-neutral
messages and the API's content blocks; failures are classified by HTTP status
and the API's error type, which are stable across SDK versions.
"""

from __future__ import annotations

from typing import Any, cast

from ..errors import ProviderError
from ..machines.messages import Message, ToolCall
from . import import_sdk, FailureClass, ModelReply, ModelRequest, StopReason, status_class

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
            blocks = [{"type": "text", "text": m.text}] if m.text else []
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls]
        else:
            role, blocks = "user", [{"type": "text", "text": m.text}]
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return system, out


def from_api_message(body: Any) -> ModelReply:
    """A Messages API response (SDK object or dict) as a reply; unknown block kinds are ignored, not guessed."""
    data = body if isinstance(body, dict) else body.model_dump()
    texts, calls = [], []
    for block in data.get("content") or ():
        if block.get("type") == "text":
            texts.append(block.get("text", ""))
        elif block.get("type") == "tool_use":
            args = block.get("input")
            if not isinstance(args, dict):
                raise ProviderError("anthropic", "transient", "tool_use input is not a JSON object")
            calls.append(ToolCall(block["id"], block["name"], args))
    stop = data.get("stop_reason") or "end_turn"
    usage = data.get("usage") or {}
    return ModelReply(
        Message.assistant("".join(texts), calls),
        cast(StopReason, stop if stop in _STOPS else "end_turn"),
        int(usage.get("input_tokens") or 0),
        int(usage.get("output_tokens") or 0),
    )


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
    """``client`` is an ``anthropic.Anthropic`` (pass ``http_client=`` to it for proxies or tests)."""

    name = "anthropic"

    def __init__(self, client: Any = None, **client_options: Any):
        if client is None:
            client = import_sdk("anthropic").Anthropic(**client_options)
        self.client = client

    def complete(self, request: ModelRequest) -> ModelReply:
        import anthropic

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
        try:
            body = self.client.messages.create(**kwargs)
        except anthropic.APIStatusError as err:
            raise classify(err.status_code, err.body, err.response.headers) from None
        except anthropic.APIConnectionError:  # includes timeouts
            raise classify(None, None) from None
        return from_api_message(body)
