"""Adapters from providers' stream events (plain dicts, as decoded from the wire) to stream assembly.

No SDK is needed at run time: each adapter reads the documented JSON shape of
its provider's events and turns each into feeds of one
:class:`~loopfsm.machines.stream_assembly.StreamAssembly` instance.
"""

from __future__ import annotations

from .anthropic import AnthropicStream, assemble_anthropic
from .openai_chat import OpenAIChatStream, assemble_openai_chat
from .openai_responses import OpenAIResponsesStream, assemble_openai_responses

__all__ = [
    "AnthropicStream",
    "assemble_anthropic",
    "OpenAIChatStream",
    "assemble_openai_chat",
    "OpenAIResponsesStream",
    "assemble_openai_responses",
]
