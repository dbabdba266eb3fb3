"""The OpenAI Chat Completions API as a :class:`~loopfsm.providers.Provider` (extra ``loopfsm[openai]``)."""

from __future__ import annotations

import json
from typing import Any

from ..errors import ProviderError
from ..machines.messages import Message, ToolCall
from . import import_sdk, FailureClass, ModelReply, ModelRequest, StopReason, status_class
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


def from_api_completion(body: Any) -> ModelReply:
    """A chat completion (SDK object or dict) as a reply.

    Tool-call arguments arrive as a JSON string; one that is not a JSON object
    is a failed call (``transient``: asking again usually helps), never cut to
    whatever part of it parses.
    """
    data = body if isinstance(body, dict) else body.model_dump()
    choices = data.get("choices") or ()
    if not choices:
        raise ProviderError("openai", "transient", "the completion has no choices")
    choice = choices[0]
    msg = choice.get("message") or {}
    calls = []
    for c in msg.get("tool_calls") or ():
        fn = c.get("function") or {}
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except ValueError:
            args = None
        if not isinstance(args, dict):
            raise ProviderError("openai", "transient", "tool call arguments are not a JSON object")
        calls.append(ToolCall(c["id"], fn.get("name", ""), args))
    text = msg.get("content") or msg.get("refusal") or ""
    usage = data.get("usage") or {}
    return ModelReply(
        Message.assistant(text, calls),
        FINISH.get(choice.get("finish_reason") or "stop", "end_turn"),
        int(usage.get("prompt_tokens") or 0),
        int(usage.get("completion_tokens") or 0),
    )


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
    """``client`` is an ``openai.OpenAI`` (pass ``http_client=`` to it for proxies or tests)."""

    name = "openai"

    def __init__(self, client: Any = None, **client_options: Any):
        if client is None:
            client = import_sdk("openai").OpenAI(**client_options)
        self.client = client

    def complete(self, request: ModelRequest) -> ModelReply:
        import openai

        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": to_api_messages(request.messages, request.system),
            "max_completion_tokens": request.max_tokens,
        }
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
                }
                for t in request.tools
            ]
        try:
            body = self.client.chat.completions.create(**kwargs)
        except openai.APIStatusError as err:
            raise classify(err.status_code, err.body, err.response.headers) from None
        except openai.APIConnectionError:
            raise classify(None, None) from None
        return from_api_completion(body)
