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


def openai_responses_sdk(events: Iterable[dict[str, Any]]) -> Any:
    """The output items and usage the OpenAI SDK's ResponseStreamState accumulates (no usage when incomplete)."""
    from openai import omit
    from openai._models import construct_type
    from openai.lib.streaming.responses._responses import ResponseStreamState
    from openai.types.responses import ResponseStreamEvent

    state = ResponseStreamState(input_tools=omit, text_format=omit)
    for event in events:
        state.handle_event(construct_type(type_=ResponseStreamEvent, value=event))
    completed = state._completed_response
    if completed is not None:
        return completed.output, completed.usage
    # An incomplete response: the SDK keeps each finished output item as its `output_item.done` carried it.
    return [state._completed_output[i] for i in sorted(state._completed_output)], None


def loads_or_none(text: str) -> Any:
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
