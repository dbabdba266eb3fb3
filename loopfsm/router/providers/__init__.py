"""Model providers behind one interface, for drivers and the router.

A provider turns a :class:`ModelRequest` (the brain's provider-neutral
messages plus tool declarations) into a :class:`ModelReply` (the assistant
:class:`~loopfsm.machines.messages.Message`, why it stopped, token usage), or
raises :class:`ProviderError` carrying the outcome class the model fallback
breaker records (``transient``, ``rate_limited``, ``auth``, ``quota``,
``context_length``, ``content_policy``), or ``invalid_request`` for a request
the API refused as malformed.  Classifying failures here, at the
edge, is what lets the breaker's YAML decide what a failure means.

Shipped: :class:`~loopfsm.router.providers.scripted.ScriptedProvider` (deterministic,
offline, the default) and adapters for the Anthropic Messages and OpenAI Chat
Completions APIs (optional extras ``loopfsm[anthropic]`` / ``loopfsm[openai]``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from loopfsm.core.errors import ConfigError
from loopfsm.router.errors import ProviderError
from loopfsm.machines.messages import Message
from loopfsm.machines.stream_values import TokenLogprob

FailureClass = Literal[
    "transient", "rate_limited", "auth", "quota", "context_length", "content_policy", "invalid_request"
]
#: ``invalid_request`` (a request the API refused as malformed) is this side's bug, not the model's:
#: it is not an outcome the fallback breaker records, and a driver should end the run instead.
FAILURE_CLASSES: tuple[FailureClass, ...] = (
    "transient",
    "rate_limited",
    "auth",
    "quota",
    "context_length",
    "content_policy",
    "invalid_request",
)


def status_class(status: int | None) -> FailureClass:
    """The outcome class an HTTP status means when the error body named none (None: no response at all)."""
    if status == 429:
        return "rate_limited"
    if status in (401, 403):
        return "auth"
    if status is None or status == 408 or status >= 500:
        return "transient"
    return "invalid_request"


#: Why a reply stopped, normalised across providers.
StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "pause_turn"]


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: name, what it does, and the JSON Schema of its arguments."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})


@dataclass(frozen=True)
class ModelRequest:
    model: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    system: str = ""
    max_tokens: int = 4096


@dataclass(frozen=True)
class ModelReply:
    """The assistant turn, why it stopped, and the usage and model name as the provider reported them."""

    message: Message
    stop_reason: StopReason
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""
    #: What the model refused, in its words, when it did (also in the message's text: nothing is lost).
    refusal: str = ""
    #: Per-token log probabilities of the text, when the provider was asked for them (``OpenAIProvider(logprobs=)``).
    logprobs: tuple[TokenLogprob, ...] = ()

    @property
    def context_tokens(self) -> int:
        """What the brain's ``model_response`` wants: the conversation's size after this reply."""
        return self.input_tokens + self.output_tokens


def token_count(value: Any) -> int:
    """A token count as the provider reported it; anything but a non-negative integer counts as not reported (0)."""
    return value if type(value) is int and value >= 0 else 0


def import_sdk(name: str) -> Any:
    """A provider's SDK module, imported when an adapter is built; missing, it is a setup error, not a failed call."""
    try:
        return importlib.import_module(name)
    except ImportError as err:
        raise ConfigError(f"the {name} adapter needs its SDK: pip install 'loopfsm[{name}]'") from err


class Provider(Protocol):
    """One model endpoint.

    A failed call raises :class:`ProviderError`.  A streamed reply that breaks
    its provider's stream protocol raises stream assembly's
    :class:`~loopfsm.router.errors.StreamEventError` or
    :class:`~loopfsm.machines.errors.StreamProtocolError`: the reply is refused, never
    repaired, and the caller decides what a refused reply means.
    """

    name: str

    def complete(self, request: ModelRequest) -> ModelReply: ...


__all__ = [
    "FAILURE_CLASSES",
    "FailureClass",
    "import_sdk",
    "ModelReply",
    "ModelRequest",
    "Provider",
    "ProviderError",
    "StopReason",
    "ToolSpec",
]
