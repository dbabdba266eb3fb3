"""A small provider-neutral message model that serializes to plain JSON.

It carries what every provider shares (role, text, tool calls with id, name and
arguments, tool results with an error flag), so a saved brain can be resumed
against any provider; and, kept verbatim for the provider that made them, a
reply's thinking, its server tool blocks (:class:`ServerBlock`) and the
sources its text cites (:class:`Citation`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, cast

from loopfsm.core.errors import FeedArgumentError, shown
from loopfsm.core.fieldtypes import json_problem

Role = Literal["system", "user", "assistant", "tool"]
ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model asked for: its id, the tool's name and its arguments."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _need(self, "id", str)
        _need(self, "name", str)
        if type(self.arguments) is not dict:
            raise FeedArgumentError(f"ToolCall.arguments must be a dict, got {type(self.arguments).__name__}")
        problem = json_problem(self.arguments)
        if problem:
            raise FeedArgumentError(f"ToolCall.arguments must be plain JSON: {problem}")

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ToolCall:
        return cls(d["id"], d["name"], dict(d.get("arguments") or {}))


@dataclass(frozen=True)
class Thinking:
    """A reasoning block the provider wants back verbatim on the next turn.

    ``signature`` authenticates visible thinking; a redacted block carries only
    its opaque ``redacted`` data.  Either way it is returned as received.
    """

    text: str = ""
    signature: str | None = None
    redacted: str | None = None

    def __post_init__(self) -> None:
        _need(self, "text", str)
        _need(self, "signature", str, nullable=True)
        _need(self, "redacted", str, nullable=True)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"text": self.text}
        if self.signature is not None:
            d["signature"] = self.signature
        if self.redacted is not None:
            d["redacted"] = self.redacted
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Thinking:
        return cls(d.get("text", ""), d.get("signature"), d.get("redacted"))


@dataclass(frozen=True)
class ServerBlock:
    """A block the provider's own server tools made (Anthropic's web search, web fetch, code execution), kept
    verbatim so the next turn can hand it back: the call the server ran (``kind`` ``server_tool_use``,
    ``name`` the tool, ``content`` its input) or its result (``kind`` the result block's type, such as
    ``web_search_tool_result``, ``content`` as the provider sent it), with the ``id`` that pairs them."""

    kind: str
    id: str
    name: str | None = None
    content: Any = None

    def __post_init__(self) -> None:
        _need(self, "kind", str)
        _need(self, "id", str)
        _need(self, "name", str, nullable=True)
        problem = json_problem(self.content)
        if problem:
            raise FeedArgumentError(f"ServerBlock.content must be plain JSON: {problem}")

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "id": self.id, "content": self.content}
        if self.name is not None:
            d["name"] = self.name
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ServerBlock:
        return cls(d["kind"], d["id"], d.get("name"), d.get("content"))


@dataclass(frozen=True)
class Citation:
    """A source the text cites, as the provider described it (Anthropic's ``web_search_result_location``,
    ``char_location``...: its ``type`` and fields), kept verbatim."""

    data: dict[str, Any]

    def __post_init__(self) -> None:
        if type(self.data) is not dict or type(self.data.get("type")) is not str:
            raise FeedArgumentError(f"Citation.data must be an object with a type, got {shown(self.data)}")
        problem = json_problem(self.data)
        if problem:
            raise FeedArgumentError(f"Citation.data must be plain JSON: {problem}")


@dataclass(frozen=True)
class Message:
    """One conversation message; a tool result is a ``tool`` message naming its call."""

    role: Role
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False
    thinking: tuple[Thinking, ...] = ()
    server_blocks: tuple[ServerBlock, ...] = ()
    citations: tuple[Citation, ...] = ()

    def __post_init__(self) -> None:
        # Checked whole here, so a feed never meets a half-valid message and a
        # snapshot never holds one it cannot write.
        if type(self.role) is not str or self.role not in ROLES:
            raise FeedArgumentError(f"message role must be one of {ROLES}, got {shown(self.role)}")
        _need(self, "text", str)
        _need(self, "tool_call_id", str, nullable=True)
        _need(self, "is_error", bool)
        if self.role == "tool" and not self.tool_call_id:
            raise FeedArgumentError("a tool result message needs the tool_call_id it answers")
        kinds: tuple[tuple[str, type], ...] = (
            ("tool_calls", ToolCall),
            ("thinking", Thinking),
            ("server_blocks", ServerBlock),
            ("citations", Citation),
        )
        for name, cls in kinds:
            value = getattr(self, name)
            if not isinstance(value, tuple):
                if not isinstance(value, list):
                    raise FeedArgumentError(
                        f"Message.{name} must be a tuple or list of {cls.__name__}, got {type(value).__name__}"
                    )
                value = tuple(value)
                object.__setattr__(self, name, value)
            for item in value:
                if type(item) is not cls:
                    raise FeedArgumentError(
                        f"Message.{name} must hold {cls.__name__} values, got {type(item).__name__} {shown(item)}"
                    )
        if len(self.tool_calls) > 1:
            ids = [c.id for c in self.tool_calls]
            twice = sorted({i for i in ids if ids.count(i) > 1})
            if twice:  # results are matched to calls by id; providers refuse a repeated one too
                raise FeedArgumentError(f"a message's tool calls need distinct ids; repeated: {shown(twice, 200)}")

    @classmethod
    def user(cls, text: str) -> Message:
        return cls("user", text)

    @classmethod
    def assistant(
        cls,
        text: str = "",
        tool_calls: tuple[ToolCall, ...] | list[ToolCall] = (),
        thinking: tuple[Thinking, ...] | list[Thinking] = (),
        server_blocks: tuple[ServerBlock, ...] | list[ServerBlock] = (),
        citations: tuple[Citation, ...] | list[Citation] = (),
    ) -> Message:
        return cls(
            "assistant",
            text,
            tuple(tool_calls),
            thinking=tuple(thinking),
            server_blocks=tuple(server_blocks),
            citations=tuple(citations),
        )

    @classmethod
    def tool_result(cls, call_id: str, text: str, *, is_error: bool = False) -> Message:
        return cls("tool", text, (), call_id, is_error)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"role": self.role, "text": self.text}
        if self.tool_calls:
            d["tool_calls"] = [c.to_json() for c in self.tool_calls]
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
            d["is_error"] = self.is_error
        if self.thinking:
            d["thinking"] = [t.to_json() for t in self.thinking]
        if self.server_blocks:
            d["server_blocks"] = [b.to_json() for b in self.server_blocks]
        if self.citations:
            d["citations"] = [c.data for c in self.citations]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Message:
        """The message :meth:`to_json` wrote; anything else (not an object, a part missing or of another shape)
        is a :class:`FeedArgumentError`, as a wrong field is: JSON from outside (a client's opened history, a
        stored row) is refused in one typed error, never a ``KeyError`` from deep inside."""
        if isinstance(d, dict) and not d.keys() <= MESSAGE_KEYS:
            unknown = sorted(map(str, d.keys() - MESSAGE_KEYS))[0]
            raise FeedArgumentError(f"not a message as Message.to_json writes one (unknown key {shown(unknown)})")
        try:
            return cls(
                d["role"],
                d.get("text", ""),
                tuple(ToolCall.from_json(c) for c in d.get("tool_calls", ())),
                d.get("tool_call_id"),
                d.get("is_error", False),  # a bool, as __post_init__ checks: "no" is not read as True
                tuple(Thinking.from_json(t) for t in d.get("thinking", ())),
                tuple(ServerBlock.from_json(b) for b in d.get("server_blocks", ())),
                tuple(Citation(dict(c)) for c in d.get("citations", ())),
            )
        except (KeyError, TypeError, AttributeError, ValueError) as err:
            raise FeedArgumentError(f"not a message as Message.to_json writes one ({type(err).__name__})") from None


def _need(obj: object, name: str, typ: type, *, nullable: bool = False) -> None:
    value = getattr(obj, name)
    if (nullable and value is None) or type(value) is typ:
        return
    raise FeedArgumentError(
        f"{type(obj).__name__}.{name} must be {typ.__name__}"
        f"{' or None' if nullable else ''}, got {type(value).__name__} {shown(value)}"
    )


TOOL_CALL_SCHEMA = {
    "type": "object",
    "required": ["id", "name"],
    "additionalProperties": False,
    "properties": {"id": {"type": "string"}, "name": {"type": "string"}, "arguments": {"type": "object"}},
}

THINKING_SCHEMA = {
    "type": "object",
    "required": ["text"],
    "additionalProperties": False,
    "properties": {"text": {"type": "string"}, "signature": {"type": "string"}, "redacted": {"type": "string"}},
}

SERVER_BLOCK_SCHEMA = {
    "type": "object",
    "required": ["kind", "id", "content"],
    "additionalProperties": False,
    "properties": {"kind": {"type": "string"}, "id": {"type": "string"}, "name": {"type": "string"}, "content": {}},
}

CITATION_SCHEMA = {"type": "object", "required": ["type"], "properties": {"type": {"type": "string"}}}

MESSAGE_SCHEMA = {
    "type": "object",
    "required": ["role", "text"],
    "additionalProperties": False,
    "properties": {
        "role": {"enum": list(ROLES)},
        "text": {"type": "string"},
        "tool_calls": {"type": "array", "items": TOOL_CALL_SCHEMA},
        "tool_call_id": {"type": "string"},
        "is_error": {"type": "boolean"},
        "thinking": {"type": "array", "items": THINKING_SCHEMA},
        "server_blocks": {"type": "array", "items": SERVER_BLOCK_SCHEMA},
        "citations": {"type": "array", "items": CITATION_SCHEMA},
    },
}

#: The keys :meth:`Message.to_json` writes (the schema's): from_json refuses any other, which it would drop unsaid.
MESSAGE_KEYS: frozenset[str] = frozenset(cast("dict[str, Any]", MESSAGE_SCHEMA["properties"]))
