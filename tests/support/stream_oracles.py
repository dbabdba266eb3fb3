"""The SDKs' own accumulators, driven on plain event dicts, as oracles for stream assembly."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


def anthropic_sdk(events: Iterable[dict[str, Any]]) -> tuple[Any, dict[int, bytes]]:
    """The message the Anthropic SDK's MessageStream accumulates, and its raw argument buffers."""
    from anthropic.lib.streaming._messages import accumulate_event

    snapshot, bufs = None, {}
    for event in events:
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs)
    return snapshot, bufs


def openai_sdk(chunks: Iterable[dict[str, Any]]) -> Any:
    """The completion snapshot the OpenAI SDK's ChatCompletionStreamState accumulates."""
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    state = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(ChatCompletionChunk.model_validate(chunk))
    return state.current_completion_snapshot


def loads_or_none(text: str) -> Any:
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
