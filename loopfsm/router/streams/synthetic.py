"""Provider stream events made up from a reply, for testing drivers and adapters without a network.

A reply is a list of blocks; each block's text is cut into fragments by a
``cut`` function (``every(8)`` cuts every 8 characters) and rendered as the
events the provider would send.  Argument text is taken as given, so a test
can stream JSON that is cut short or broken.  Events are generated lazily:
a megabyte in one-character fragments never sits in memory as a million dicts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

Cut = Callable[[str], Iterable[str]]


def every(n: int) -> Cut:
    """Cut text into pieces of ``n`` characters (the last may be shorter); empty text gives no piece."""
    if n < 1:
        raise ValueError("fragment size must be at least 1")
    return lambda text: (text[i : i + n] for i in range(0, len(text), n))


@dataclass(frozen=True)
class Block:
    """One block of a reply: ``lane`` is text, tool, thinking, redacted_thinking or refusal."""

    lane: str
    text: str = ""
    id: str | None = None
    name: str | None = None
    signature: str | None = None


@dataclass(frozen=True)
class Reply:
    blocks: tuple[Block, ...]
    stop_reason: str
    usage: dict[str, Any] = field(default_factory=dict)
    message_id: str = "msg_synthetic"
    model: str = "synthetic-model"
    stop_sequence: str | None = None


def anthropic_events(reply: Reply, cut: Cut | None = None, *, pings: bool = False) -> Iterator[dict[str, Any]]:
    """The Anthropic Messages stream of ``reply``, as decoded ``data:`` dicts (16-character fragments by default)."""
    cut = cut or every(16)
    usage = dict(reply.usage)
    start_usage = {"input_tokens": usage.get("input_tokens", 0), "output_tokens": 1}
    yield {
        "type": "message_start",
        "message": {
            "id": reply.message_id,
            "type": "message",
            "role": "assistant",
            "model": reply.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": start_usage,
        },
    }
    if pings:
        yield {"type": "ping"}
    for index, b in enumerate(reply.blocks):
        if b.lane == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            kind, key = "text_delta", "text"
        elif b.lane == "tool":
            start = {"type": "tool_use", "id": b.id, "name": b.name, "input": {}}
            kind, key = "input_json_delta", "partial_json"
        elif b.lane == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            kind, key = "thinking_delta", "thinking"
        elif b.lane == "redacted_thinking":
            start = {"type": "redacted_thinking", "data": b.text}
            kind, key = "", ""
        else:
            raise ValueError(f"Anthropic streams have no {b.lane} blocks")
        yield {"type": "content_block_start", "index": index, "content_block": start}
        if kind:
            for piece in cut(b.text):
                yield {"type": "content_block_delta", "index": index, "delta": {"type": kind, key: piece}}
        if b.lane == "thinking" and b.signature is not None:
            yield {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "signature_delta", "signature": b.signature},
            }
        yield {"type": "content_block_stop", "index": index}
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": reply.stop_reason, "stop_sequence": reply.stop_sequence},
        "usage": {"output_tokens": usage.get("output_tokens", 0)},
    }
    yield {"type": "message_stop"}


# the delta field each text-like lane streams in
_OPENAI_KEYS = {"text": "content", "refusal": "refusal", "thinking": "reasoning_content"}


def openai_chunks(
    reply: Reply, cut: Cut | None = None, *, order: Sequence[int] | None = None, include_usage: bool = True
) -> Iterator[dict[str, Any]]:
    """The chat-completion chunks of ``reply`` (text, refusal, tool and thinking blocks).

    Thinking goes out as ``reasoning_content``, as OpenAI-compatible servers
    stream a reasoning model's thinking (OpenAI itself sends none).

    ``order`` interleaves the blocks: each entry names the block whose next
    fragment goes out (entries for exhausted blocks are skipped; whatever is
    left afterwards follows in block order).  Tool calls are numbered in the
    order their first fragment goes out, as OpenAI numbers them.
    """
    cut = cut or every(16)
    base = {"id": "chatcmpl-synthetic", "object": "chat.completion.chunk", "created": 0, "model": reply.model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    yield chunk(
        {"role": "assistant", "content": ""}
        if reply.blocks and reply.blocks[0].lane == "text"
        else {"role": "assistant"}
    )
    pieces = []
    for b in reply.blocks:
        if b.lane not in _OPENAI_KEYS and b.lane != "tool":
            raise ValueError(f"OpenAI chat streams have no {b.lane} blocks")
        pieces.append(list(cut(b.text)))
    started: dict[int, int] = {}
    pos = [0] * len(pieces)
    sequence = list(order or ()) + [i for i, p in enumerate(pieces) for _ in range(len(p) + 1)]
    for i in sequence:
        if not 0 <= i < len(pieces):
            continue
        b = reply.blocks[i]
        if b.lane == "tool":
            if i not in started:
                started[i] = len(started)
                first = pieces[i][0] if pieces[i] else ""
                pos[i] = 1 if pieces[i] else 0
                yield chunk(
                    {
                        "tool_calls": [
                            {
                                "index": started[i],
                                "id": b.id,
                                "type": "function",
                                "function": {"name": b.name, "arguments": first},
                            }
                        ]
                    }
                )
                continue
            if pos[i] >= len(pieces[i]):
                continue
            yield chunk({"tool_calls": [{"index": started[i], "function": {"arguments": pieces[i][pos[i]]}}]})
        else:
            if pos[i] >= len(pieces[i]):
                continue
            yield chunk({_OPENAI_KEYS[b.lane]: pieces[i][pos[i]]})
        pos[i] += 1
    yield chunk({}, reply.stop_reason)
    if include_usage:
        yield {**base, "choices": [], "usage": dict(reply.usage)}


def openai_responses_events(reply: Reply, cut: Cut | None = None) -> Iterator[dict[str, Any]]:
    """The Responses API stream of ``reply``: each block its own output item, in order.

    Text and refusal blocks are message items with an ``output_text`` or
    ``refusal`` part, tool blocks ``function_call`` items (the block's id is the
    ``call_id``), thinking blocks ``reasoning`` items with one summary part.
    ``stop_reason`` ``length`` or ``content_filter`` ends with
    ``response.incomplete``, anything else with ``response.completed``.
    """
    cut = cut or every(16)
    seq = iter(range(10**9))
    response: dict[str, Any] = {
        "id": reply.message_id,
        "object": "response",
        "created_at": 0,
        "model": reply.model,
        "status": "in_progress",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    yield {"type": "response.created", "sequence_number": next(seq), "response": dict(response)}
    yield {"type": "response.in_progress", "sequence_number": next(seq), "response": dict(response)}
    output: list[dict[str, Any]] = []
    for i, b in enumerate(reply.blocks):
        item_id = f"item_{i}"
        added: dict[str, Any]
        if b.lane in ("text", "refusal"):
            field_name = "text" if b.lane == "text" else "refusal"
            part_type = "output_text" if b.lane == "text" else "refusal"
            added = {"type": "message", "id": item_id, "status": "in_progress", "role": "assistant", "content": []}
            yield {"type": "response.output_item.added", "sequence_number": next(seq), "output_index": i, "item": added}
            empty = {"type": part_type, field_name: "", **({"annotations": []} if b.lane == "text" else {})}
            where = {"item_id": item_id, "output_index": i, "content_index": 0}
            yield {"type": "response.content_part.added", "sequence_number": next(seq), **where, "part": empty}
            kind = "response.output_text" if b.lane == "text" else "response.refusal"
            extra: dict[str, Any] = {"logprobs": []} if b.lane == "text" else {}
            for piece in cut(b.text):
                yield {"type": f"{kind}.delta", "sequence_number": next(seq), **where, "delta": piece, **extra}
            yield {"type": f"{kind}.done", "sequence_number": next(seq), **where, field_name: b.text, **extra}
            part = {**empty, field_name: b.text}
            yield {"type": "response.content_part.done", "sequence_number": next(seq), **where, "part": part}
            item = {**added, "status": "completed", "content": [part]}
        elif b.lane == "tool":
            added = {
                "type": "function_call",
                "id": item_id,
                "call_id": b.id,
                "name": b.name,
                "arguments": "",
                "status": "in_progress",
            }
            yield {"type": "response.output_item.added", "sequence_number": next(seq), "output_index": i, "item": added}
            where = {"item_id": item_id, "output_index": i}
            for piece in cut(b.text):
                yield {
                    "type": "response.function_call_arguments.delta",
                    "sequence_number": next(seq),
                    **where,
                    "delta": piece,
                }
            yield {
                "type": "response.function_call_arguments.done",
                "sequence_number": next(seq),
                **where,
                "arguments": b.text,
            }
            item = {**added, "arguments": b.text, "status": "completed"}
        elif b.lane == "thinking":
            added = {"type": "reasoning", "id": item_id, "summary": []}
            yield {"type": "response.output_item.added", "sequence_number": next(seq), "output_index": i, "item": added}
            where = {"item_id": item_id, "output_index": i, "summary_index": 0}
            empty = {"type": "summary_text", "text": ""}
            yield {
                "type": "response.reasoning_summary_part.added",
                "sequence_number": next(seq),
                **where,
                "part": empty,
            }
            for piece in cut(b.text):
                yield {
                    "type": "response.reasoning_summary_text.delta",
                    "sequence_number": next(seq),
                    **where,
                    "delta": piece,
                }
            yield {
                "type": "response.reasoning_summary_text.done",
                "sequence_number": next(seq),
                **where,
                "text": b.text,
            }
            part = {"type": "summary_text", "text": b.text}
            yield {"type": "response.reasoning_summary_part.done", "sequence_number": next(seq), **where, "part": part}
            item = {**added, "summary": [part]}
        else:
            raise ValueError(f"Responses API streams have no {b.lane} blocks")
        yield {"type": "response.output_item.done", "sequence_number": next(seq), "output_index": i, "item": item}
        output.append(item)
    done = {**response, "output": output, "usage": dict(reply.usage) or None}
    if reply.stop_reason in ("length", "content_filter"):
        why = "max_output_tokens" if reply.stop_reason == "length" else "content_filter"
        final = {**done, "status": "incomplete", "incomplete_details": {"reason": why}}
        yield {"type": "response.incomplete", "sequence_number": next(seq), "response": final}
    else:
        yield {"type": "response.completed", "sequence_number": next(seq), "response": {**done, "status": "completed"}}
