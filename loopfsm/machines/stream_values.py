"""The values stream assembly holds and returns: slots, argument problems and the assembled reply."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import field

from ..lazyclass import dataclass
from typing import Any, Literal

from ..errors import shown
from ..fieldtypes import INT_MAX
from .messages import Message, Thinking, ToolCall

Lane = Literal["text", "tool", "thinking", "redacted_thinking", "refusal"]
LANES: tuple[str, ...] = ("text", "tool", "thinking", "redacted_thinking", "refusal")

# Fragments are joined into one piece every this many, so a stream of tiny
# fragments holds about as much memory as its text, and each character is
# still copied only twice (here and at close): linear either way.
COMPACT_EVERY = 1024


class Slot:
    """One block of the message: its lane and header, and its text as fragments until it closes."""

    __slots__ = (
        "index",
        "lane",
        "block_id",
        "name",
        "parts",
        "chunks",
        "open",
        "text",
        "signature",
        "arguments",
        "problem",
    )

    def __init__(self, index: int, lane: str, block_id: str | None = None, name: str | None = None, initial: str = ""):
        self.index = index
        self.lane = lane
        self.block_id = block_id
        self.name = name
        self.parts: list[str] = [initial] if initial else []
        self.chunks: list[str] = []  # every COMPACT_EVERY parts, joined
        self.open = True
        self.text: str | None = None  # joined once, at close
        self.signature: str | None = None
        self.arguments: dict[str, Any] | None = None
        self.problem: str | None = None

    def add(self, fragment: str) -> None:
        parts = self.parts
        parts.append(fragment)
        if len(parts) >= COMPACT_EVERY:
            self.chunks.append("".join(parts))
            parts.clear()

    def close(self) -> None:
        self.text = self.current_text()
        self.parts = []
        self.chunks = []
        self.open = False
        if self.lane == "tool":
            self.arguments, self.problem = parse_arguments(self.text)

    def current_text(self) -> str:
        if self.text is not None:
            return self.text
        if self.chunks:
            return "".join([*self.chunks, *self.parts])  # one join: one copy of the text
        return "".join(self.parts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Slot) and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        state = "open" if self.open else "closed"
        return f"<Slot #{self.index} {self.lane} {state} {len(self.current_text())} chars>"

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"index": self.index, "lane": self.lane, "open": self.open, "text": self.current_text()}
        if self.block_id is not None:
            d["id"] = self.block_id
        if self.name is not None:
            d["name"] = self.name
        if self.signature is not None:
            d["signature"] = self.signature
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Slot:
        slot = cls(d["index"], d["lane"], d.get("id"), d.get("name"), d["text"])
        if d.get("signature") is not None:
            slot.signature = d["signature"]
        if not d["open"]:
            slot.close()
        return slot


SLOT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["index", "lane", "open", "text"],
    "additionalProperties": False,
    "properties": {
        "index": {"type": "integer", "minimum": 0},
        "lane": {"enum": list(LANES)},
        "open": {"type": "boolean"},
        "text": {"type": "string"},
        "id": {"type": "string"},
        "name": {"type": "string"},
        "signature": {"type": "string"},
    },
}


def parse_arguments(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """Tool arguments and no problem, or None and why: ``incomplete`` (cut short) or ``invalid``."""
    if not text.strip():
        return {}, None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than json.loads goes
        from .json_prefix import INCOMPLETE, classify  # noqa: PLC0415 - its patterns compile on first bad arguments

        return None, "incomplete" if classify(text) == INCOMPLETE else "invalid"
    if not isinstance(value, dict):
        return None, "invalid"
    return value, None


@dataclass(frozen=True)
class ArgumentProblem:
    """A tool call left out of the message because its arguments are not one whole JSON object."""

    index: int
    call_id: str
    name: str
    raw: str
    kind: Literal["incomplete", "invalid"]

    def __str__(self) -> str:
        return f"tool call {self.call_id} ({self.name}): arguments {self.kind} after {len(self.raw)} characters"


@dataclass(frozen=True)
class StreamResult:
    """What a stream assembled to: the brain's message plus what the stream said about it."""

    message: Message
    stop_reason: str | None
    stop_sequence: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    message_id: str = ""
    model: str = ""
    refusal: str = ""
    problems: tuple[ArgumentProblem, ...] = ()

    @property
    def ok(self) -> bool:
        """Every tool call's arguments parsed; the message can go to the brain as it is."""
        return not self.problems


def assemble(
    slots: list[Slot],
    *,
    stop_reason: str | None,
    stop_sequence: str | None,
    usage: dict[str, Any],
    message_id: str,
    model: str,
) -> StreamResult:
    """Build the reply from closed slots, in index order."""
    text: list[str] = []
    refusal: list[str] = []
    calls: list[ToolCall] = []
    thinking: list[Thinking] = []
    problems: list[ArgumentProblem] = []
    for s in slots:
        body = s.current_text()
        if s.lane == "text":
            text.append(body)
        elif s.lane == "refusal":
            refusal.append(body)
        elif s.lane == "thinking":
            thinking.append(Thinking(body, s.signature))
        elif s.lane == "redacted_thinking":
            thinking.append(Thinking("", None, body))
        elif s.problem is None and s.arguments is not None:
            calls.append(ToolCall(s.block_id or "", s.name or "", s.arguments))
        else:
            problems.append(
                ArgumentProblem(
                    s.index,
                    s.block_id or "",
                    s.name or "",
                    body,
                    "incomplete" if s.problem == "incomplete" else "invalid",
                )
            )
    message = Message.assistant("".join(text), calls, thinking)
    return StreamResult(
        message, stop_reason, stop_sequence, dict(usage), message_id, model, "".join(refusal), tuple(problems)
    )


def usage_of(raw: Any) -> dict[str, Any]:
    """A provider's token counts, checked: every number in them a whole count, 0 to 2**63 - 1.

    The names are the provider's and some values are words (a service tier) or
    objects (cache details), so only the numbers are held to this: a negative,
    fractional or string count would reach a driver's arithmetic and the
    router's cost gate.  A malformed one raises TypeError, which the adapters
    report as a malformed event.
    """
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise TypeError("usage is not an object")
    _check_counts(raw, "usage", 0)
    return {k: v for k, v in raw.items() if v is not None}


def _check_counts(node: Any, where: str, depth: int) -> None:
    if depth > 8:
        raise TypeError(f"{where} is nested too deeply")
    if isinstance(node, Mapping):
        for k, v in node.items():
            name = f"{where}.{k}"
            if isinstance(k, str) and k.endswith(("_tokens", "_count")) and v is not None and type(v) is not int:
                raise TypeError(f"{name} is a {type(v).__name__}, not a token count")
            _check_counts(v, name, depth + 1)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _check_counts(v, f"{where}[{i}]", depth + 1)
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        if type(node) is not int or not 0 <= node <= INT_MAX:
            raise TypeError(f"{where} is {shown(node)}, not a token count (a whole number, 0 or more)")
