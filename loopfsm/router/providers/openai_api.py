"""The OpenAI Chat Completions API as a :class:`~loopfsm.router.providers.Provider` (extra ``loopfsm[openai]``).

Requests are sent streaming with usage included; the chunks are assembled by
:class:`~loopfsm.router.streams.OpenAIChatStream` (stream assembly), so tool-call
arguments arrive as one whole JSON object or the reply is refused.  An error
object in place of a chunk is classified like an error response.
"""

from __future__ import annotations

import json
from typing import Any

from loopfsm.core.errors import ConfigError
from loopfsm.router.errors import ProviderError
from loopfsm.machines.messages import Message
from loopfsm.machines.stream_values import StreamResult
from loopfsm.router.streams.openai_chat import OpenAIChatStream
from . import sse
from . import import_sdk, token_count, FailureClass, ModelReply, ModelRequest, StopReason, status_class
from .anthropic_api import retry_after_ms

#: The API's error ``code`` (or ``type``) -> the fallback breaker's outcome class.
ERROR_CODES: dict[str, FailureClass] = {
    "insufficient_quota": "quota",
    "billing_hard_limit_reached": "quota",
    "rate_limit_exceeded": "rate_limited",
    "context_length_exceeded": "context_length",
    "string_above_max_length": "context_length",
    "content_policy_violation": "content_policy",
    "content_filter": "content_policy",
    "invalid_api_key": "auth",
    "server_error": "transient",
}
#: finish_reason -> the normalised stop reason.
FINISH: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def to_api_messages(messages: tuple[Message, ...], system: str = "") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.text})
        elif m.role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": m.text or None}
            if m.tool_calls:
                msg["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments, sort_keys=True)},
                    }
                    for c in m.tool_calls
                ]
            out.append(msg)
        else:
            out.append({"role": m.role, "content": m.text})
    return out


def classify(status: int | None, body: object, headers: Any = None) -> ProviderError:
    err = body.get("error", body) if isinstance(body, dict) else None
    codes = [err.get("code"), err.get("type")] if isinstance(err, dict) else []
    outcome: FailureClass | None = next(
        (ERROR_CODES[c] for c in codes if isinstance(c, str) and c in ERROR_CODES), None
    )
    if outcome is None:
        outcome = status_class(status)
    return ProviderError("openai", outcome, f"HTTP {status}" if status else "no response", retry_after_ms(headers))


class OpenAIProvider:
    """``client`` is an ``openai.OpenAI`` (pass ``http_client=`` to it for proxies or tests).

    Without one, the SDK's client is made from ``client_options`` and the
    SDK's environment (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``).
    """

    name = "openai"

    def __init__(self, client: Any = None, *, logprobs: int | None = None, **client_options: Any):
        """``logprobs`` asks for each token's log probability and that many likely alternatives (0 to 20); the
        reply carries them (:attr:`ModelReply.logprobs`)."""
        if logprobs is not None and not (type(logprobs) is int and 0 <= logprobs <= 20):
            raise ConfigError(f"logprobs is how many alternatives per token, 0 to 20, got {logprobs!r}")
        self._sdk = import_sdk("openai")
        self._http_error = sse.http_error(self._sdk)
        self.client = client if client is not None else self._sdk.OpenAI(**client_options)
        self.logprobs = logprobs

    def _arguments(self, request: ModelRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": to_api_messages(request.messages, request.system),
            "max_completion_tokens": request.max_tokens,
            "stream_options": {"include_usage": True},
        }
        if self.logprobs is not None:
            kwargs["logprobs"], kwargs["top_logprobs"] = True, self.logprobs
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
                }
                for t in request.tools
            ]
        return kwargs

    def complete(self, request: ModelRequest) -> ModelReply:
        sdk, stream = self._sdk, OpenAIChatStream()
        try:
            with self.client.chat.completions.with_streaming_response.create(
                **self._arguments(request), stream=True
            ) as resp:
                for number, (_, data) in enumerate(sse.events(resp.iter_lines()), 1):
                    if data == "[DONE]":
                        break
                    chunk = sse.decode(data, number)
                    if "error" in chunk and "choices" not in chunk:
                        raise classify(None, chunk)
                    stream.feed(chunk)
        except sdk.APIStatusError as err:
            raise classify(err.status_code, err.body, err.response.headers) from None
        except (sdk.APIConnectionError, self._http_error):  # includes timeouts, and a body cut mid-stream
            raise classify(None, None) from None
        if stream.machine.state == "Stopped":  # [DONE], or the body closed after the finish reason
            stream.finish()
        result = sse.assembled(self.name, stream, lambda kind: ERROR_CODES.get(kind, "transient"))
        return reply_of(result, "prompt_tokens", "completion_tokens")


def reply_of(result: StreamResult, input_key: str, output_key: str) -> ModelReply:
    """An assembled OpenAI reply (chat completions or responses) as a :class:`ModelReply`, its usage read under
    the API's names; a refusal is kept beside any text that came first and said by the stop reason, whatever the
    finish was."""
    message, refusal = result.message, result.refusal
    stop = FINISH.get(result.stop_reason or "stop", "end_turn")
    if refusal:
        text = f"{message.text}\n\n{refusal}" if message.text else refusal
        message, stop = Message.assistant(text, message.tool_calls, message.thinking), "refusal"
    return ModelReply(
        message,
        stop,
        token_count(result.usage.get(input_key)),
        token_count(result.usage.get(output_key)),
        result.model,
        refusal,
        result.logprobs,
    )
