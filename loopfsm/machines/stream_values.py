"""The values stream assembly holds and returns: slots, argument problems and the assembled reply."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from loopfsm.core.errors import shown
from loopfsm.core.fieldtypes import INT_MAX, MAX_JSON_DEPTH, MAX_JSON_NODES
from .messages import Message, ServerBlock, Thinking, ToolCall

Lane = Literal["text", "tool", "thinking", "redacted_thinking", "refusal", "server_tool", "server_result"]
LANES: tuple[str, ...] = ("text", "tool", "thinking", "redacted_thinking", "refusal", "server_tool", "server_result")
#: Lanes whose text is a JSON object, parsed when the block closes: a tool call's arguments, a server tool's
#: input, a server tool result (``{"content": ...}``, as the adapter opens it).
JSON_LANES = frozenset({"tool", "server_tool", "server_result"})

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
        self.problem: ProblemKind | None = None

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
        if self.lane in JSON_LANES:
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


ProblemKind = Literal[
    "incomplete", "invalid", "not_finite", "lone_surrogate", "too_deep", "too_many_values", "duplicate_id"
]

# A surrogate code point left in a parsed string: json.loads joins an escaped
# pair into one character, so any that remains is half a pair.
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def parse_arguments(text: str) -> tuple[dict[str, Any] | None, ProblemKind | None]:
    """Tool arguments and no problem, or None and the rule they break (a :data:`ProblemKind`).

    The arguments must be one JSON object a message can carry: what
    :class:`~loopfsm.machines.messages.ToolCall` accepts (finite numbers, at
    most MAX_JSON_DEPTH levels, MAX_JSON_NODES values) and strings of whole
    characters, as the Anthropic SDK's parser asks.
    """
    if not text.strip():
        return {}, None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as err:  # RecursionError: nested deeper than json.loads goes
        from .json_prefix import COMPLETE, INCOMPLETE, classify  # noqa: PLC0415 - patterns compile on first use

        verdict = classify(text)
        if verdict == COMPLETE and text.lstrip().startswith("{"):  # whole JSON that json.loads could not read
            # an integer of more digits than Python converts is far past a double's range; else too deep
            return None, "not_finite" if isinstance(err, ValueError) and "integer" in str(err) else "too_deep"
        return None, "incomplete" if verdict == INCOMPLETE else "invalid"
    if not isinstance(value, dict):
        return None, "invalid"
    kind = _value_problem(value)
    return (value, None) if kind is None else (None, kind)


def _value_problem(value: Any) -> ProblemKind | None:
    """Which rule a parsed JSON value breaks, or None; iterative, so no nesting exhausts the stack.

    Accepts exactly what :func:`~loopfsm.core.fieldtypes.json_problem` accepts, less
    strings with half a surrogate pair.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    budget = MAX_JSON_NODES
    while stack:
        v, depth = stack.pop()
        budget -= 1
        if budget < 0:
            return "too_many_values"
        t = type(v)
        if t is str:
            if _SURROGATE.search(v):
                return "lone_surrogate"
        elif t is float:
            if not math.isfinite(v):  # NaN, Infinity, or a number past a double's range such as 1e400
                return "not_finite"
        elif t is dict or t is list:
            if depth >= MAX_JSON_DEPTH:
                return "too_deep"
            if t is dict:
                for k, x in v.items():
                    if _SURROGATE.search(k):
                        return "lone_surrogate"
                    stack.append((x, depth + 1))
            else:
                stack.extend((x, depth + 1) for x in v)
    return None


_PROBLEM_WORDS = {
    "not_finite": "hold a number that is not finite (NaN, Infinity, or past a double's range, such as 1e400)",
    "lone_surrogate": "hold a string with half a surrogate pair (a \\ud800-\\udfff escape alone)",
    "too_deep": f"nest deeper than {MAX_JSON_DEPTH} levels",
    "too_many_values": f"hold more than {MAX_JSON_NODES:,} values",
}


@dataclass(frozen=True)
class ArgumentProblem:
    """A tool call left out of the message, and the rule it broke (``kind``).

    ``incomplete``: the arguments are a prefix of JSON (a max-tokens stop cut
    them); ``invalid``: they are not one JSON object; ``not_finite``,
    ``lone_surrogate``, ``too_deep``, ``too_many_values``: they parse but
    hold what a message cannot carry; ``duplicate_id``: an earlier tool call of
    the same message has this id (that one stays in the message).
    """

    index: int
    call_id: str
    name: str
    raw: str
    kind: ProblemKind

    def __str__(self) -> str:
        head = f"tool call {self.call_id} ({self.name})"
        if self.kind == "duplicate_id":
            return f"{head}: its id is already used by an earlier tool call of this message"
        if self.kind in _PROBLEM_WORDS:
            return f"{head}: arguments {_PROBLEM_WORDS[self.kind]}"
        return f"{head}: arguments {self.kind} after {len(self.raw)} characters"


@dataclass(frozen=True)
class TokenLogprob:
    """One token's log probability as the provider reported it (``bytes``: its UTF-8 bytes, when sent), with the
    most likely alternatives at that position (``top``, each without alternatives of its own)."""

    token: str
    logprob: float
    bytes: tuple[int, ...] | None = None
    top: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True)
class StreamResult:
    """What a stream assembled to: the brain's message plus what the stream said about it.

    ``logprobs`` and ``refusal_logprobs`` are the per-token log probabilities of the text and of the refusal,
    in order, when the provider sent them (OpenAI chat completions asked with ``logprobs``)."""

    message: Message
    stop_reason: str | None
    stop_sequence: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    message_id: str = ""
    model: str = ""
    refusal: str = ""
    problems: tuple[ArgumentProblem, ...] = ()
    logprobs: tuple[TokenLogprob, ...] = ()
    refusal_logprobs: tuple[TokenLogprob, ...] = ()

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
    server: list[ServerBlock] = []
    problems: list[ArgumentProblem] = []
    ids: set[str] = set()
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
        elif s.lane in ("server_tool", "server_result"):
            if s.arguments is None:
                problems.append(ArgumentProblem(s.index, s.block_id or "", s.name or "", body, s.problem or "invalid"))
            elif s.lane == "server_tool":
                server.append(ServerBlock("server_tool_use", s.block_id or "", s.name, s.arguments))
            else:  # a result block: its type is the header's name, its content what the adapter wrapped
                server.append(ServerBlock(s.name or "", s.block_id or "", None, s.arguments.get("content")))
        else:
            call_id = s.block_id or ""
            kind: ProblemKind | None = "duplicate_id" if call_id in ids else s.problem
            ids.add(call_id)
            if kind is None and s.arguments is not None:
                calls.append(ToolCall(call_id, s.name or "", s.arguments))
            else:
                problems.append(ArgumentProblem(s.index, call_id, s.name or "", body, kind or "invalid"))
    message = Message.assistant("".join(text), calls, thinking, server)
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
