"""Anthropic Messages stream events to stream assembly.

Events are the dicts of the ``data:`` lines of the SSE stream:
``message_start``, ``content_block_start`` / ``_delta`` / ``_stop``,
``message_delta``, ``message_stop``, ``ping`` and ``error``.  Block indices go
to the machine as they are, so the machine's index rules are Anthropic's.
Blocks a ``message_start`` already carries in its ``content`` are the
message's first blocks (opened and closed at once, as the SDK keeps them),
and the streamed blocks are numbered on after them.
Text, tool use, thinking and redacted thinking blocks are assembled, and so
are the blocks of Anthropic's server tools: a ``server_tool_use`` block (the
call the API ran, its input streamed as JSON) goes to the server_tool lane,
and a result block (``web_search_tool_result``, ``web_fetch_tool_result``,
``code_execution_tool_result``..., any type ending ``_tool_result`` that
names its ``tool_use_id``) to the server_result lane, whole as it starts; the
message keeps both (:class:`~loopfsm.machines.messages.ServerBlock`).
Citations (a ``citations_delta``, or those a text block starts with) are kept
in order on the message (:class:`~loopfsm.machines.messages.Citation`); a
citation for a block that is not an open text block is refused.  MCP blocks
(``mcp_tool_use``) and any other block type are refused as unsupported
rather than silently lost.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from loopfsm.core.errors import LoopFsmError
from loopfsm.router.errors import StreamEventError
from loopfsm.machines.stream_assembly import StreamAssembly
from loopfsm.machines.messages import Citation
from loopfsm.machines.stream_values import StreamResult, usage_of

# content_block_start types -> lanes
_LANES = {
    "text": "text",
    "tool_use": "tool",
    "thinking": "thinking",
    "redacted_thinking": "redacted_thinking",
    "server_tool_use": "server_tool",
}
# content_block_delta types -> (lane, field holding the fragment); an input_json_delta's lane is its block's
_DELTAS = {
    "text_delta": ("text", "text"),
    "input_json_delta": ("tool", "partial_json"),
    "thinking_delta": ("thinking", "thinking"),
}


class AnthropicStream:
    """Feed Anthropic stream events one at a time; read :meth:`result` after the stop reason."""

    __slots__ = ("machine", "policy", "events", "citations")

    def __init__(self, machine: Any = None, policy: Any = None):
        self.machine: Any = machine if machine is not None else StreamAssembly()
        self.policy = policy
        self.events = 0
        self.citations: list[Citation] = []

    def feed(self, event: Mapping[str, Any]) -> None:
        """One event; a malformed one raises StreamEventError, an illegal one StreamProtocolError."""
        self.events += 1
        if not isinstance(event, Mapping) or "type" not in event:
            what = "an object without a 'type'" if isinstance(event, Mapping) else f"a {type(event).__name__}"
            raise StreamEventError(f"event {self.events}: an event is an object with a 'type', got {what}")
        try:
            kind = event["type"]
            m, pol = self.machine, self.policy
            if kind == "content_block_delta":
                delta = event["delta"]
                dtype = delta["type"]
                lane = _DELTAS.get(dtype)
                if lane is not None:
                    name = lane[0]
                    if dtype == "input_json_delta" and self._lane_of(event["index"]) == "server_tool":
                        name = "server_tool"  # a server tool's input streams as a tool call's does
                    m.delta(event["index"], name, delta[lane[1]], policy=pol)
                elif dtype == "signature_delta":
                    m.sign(event["index"], delta["signature"], policy=pol)
                elif dtype == "citations_delta":
                    if self._lane_of(event["index"]) != "text" or not m.data.slots[event["index"]].open:
                        raise m.protocol_error(
                            "delta", f"a citation for block {event['index']}, not an open text block"
                        )
                    self.citations.append(self._citation(delta["citation"]))
                else:
                    raise StreamEventError(f"event {self.events}: unsupported delta type {dtype!r}")
            elif kind == "content_block_start":
                self._start_block(event["index"], event["content_block"])
            elif kind == "content_block_stop":
                m.close_block(event["index"], policy=pol)
            elif kind == "message_start":
                self._start_message(event["message"])
            elif kind == "message_delta":
                delta = event["delta"]
                reason = delta.get("stop_reason")
                if reason is None:
                    m.usage(_usage(event.get("usage")), policy=pol)
                else:
                    m.stop(reason, delta.get("stop_sequence"), _usage(event.get("usage")), policy=pol)
            elif kind == "message_stop":
                m.finish(policy=pol)
            elif kind == "ping":
                m.ping(policy=pol)
            elif kind == "error":
                err = event["error"]
                m.error(str(err.get("type", "error")), str(err.get("message", "")), policy=pol)
            else:
                raise StreamEventError(f"event {self.events}: unknown event type {kind!r}")
        except (KeyError, TypeError, AttributeError) as err:
            raise StreamEventError(
                f"event {self.events}: malformed {_kind(event)} event ({type(err).__name__}: {err})"
            ) from None

    def _start_message(self, msg: Mapping[str, Any]) -> None:
        """Start the message; content it already carries becomes its first blocks, opened and closed.

        The blocks streamed after it are numbered on from there (the SDK
        appends them to that content too).  Several feeds for one event: a
        refused one undoes them all.
        """
        m, pol = self.machine, self.policy
        content = msg.get("content") or []
        if not isinstance(content, list):
            raise TypeError(f"message content is a {type(content).__name__}, not a list")
        usage = _usage(msg.get("usage"))
        if not content:
            m.start(msg["id"], msg["model"], msg.get("role", "assistant"), usage, policy=pol)
            return
        cp, cited = m.checkpoint(), len(self.citations)
        try:
            m.start(msg["id"], msg["model"], msg.get("role", "assistant"), usage, policy=pol)
            for index, block in enumerate(content):
                self._start_block(index, block)
                m.close_block(index, policy=pol)
        except Exception:  # a refused feed, or a malformed block (reported by feed as StreamEventError)
            m.rollback(cp)
            del self.citations[cited:]
            raise

    def _lane_of(self, index: Any) -> str | None:
        slots = self.machine.data.slots
        lane: str | None = slots[index].lane if type(index) is int and 0 <= index < len(slots) else None
        return lane

    def _citation(self, value: Any) -> Citation:
        try:
            return Citation(dict(value))
        except (TypeError, ValueError, LoopFsmError) as err:
            raise StreamEventError(f"event {self.events}: a citation is an object with a type ({err})") from None

    def _start_block(self, index: Any, block: Mapping[str, Any]) -> None:
        btype = block["type"]
        lane = _LANES.get(btype)
        m, pol = self.machine, self.policy
        if lane is None and isinstance(btype, str) and btype.endswith("_tool_result") and not btype.startswith("mcp_"):
            # The result of a server tool, whole: its call's id and its type are its header, its content the JSON.
            content = _json_text({"content": block.get("content")})
            m.open_block(index, "server_result", block["tool_use_id"], btype, content, policy=pol)
            return
        if lane is None:
            raise StreamEventError(f"event {self.events}: unsupported content block type {btype!r}")
        if lane == "text":
            cited = [self._citation(c) for c in block.get("citations") or ()]  # an empty list or null carries none
            m.open_block(index, "text", initial=block.get("text") or "", policy=pol)
            self.citations += cited
        elif lane == "server_tool":
            initial = block.get("input")
            m.open_block(
                index, "server_tool", block["id"], block["name"], "" if not initial else _json_text(initial), policy=pol
            )
        elif lane == "tool":
            initial = block.get("input")
            # The block announces its input as {} and streams the JSON text; a
            # non-empty object here is the whole input, given up front.
            text = "" if not initial else _json_text(initial)
            m.open_block(index, "tool", block["id"], block["name"], text, policy=pol)
        elif lane == "thinking":
            if not block.get("signature"):
                m.open_block(index, "thinking", initial=block.get("thinking") or "", policy=pol)
                return
            cp = m.checkpoint()  # two feeds for one event: undone together if the second is refused
            try:
                m.open_block(index, "thinking", initial=block.get("thinking") or "", policy=pol)
                m.sign(index, block["signature"], policy=pol)
            except LoopFsmError:
                m.rollback(cp)
                raise
        else:
            m.open_block(index, "redacted_thinking", initial=block["data"], policy=pol)

    def feed_all(self, events: Iterable[Mapping[str, Any]]) -> None:
        for event in events:
            self.feed(event)

    def result(self) -> StreamResult:
        assembled: StreamResult = self.machine.result()
        if not self.citations:
            return assembled
        message = replace(assembled.message, citations=tuple(self.citations))
        return replace(assembled, message=message)


def _kind(event: Any) -> str:
    return repr(event.get("type")) if isinstance(event, Mapping) else type(event).__name__


_usage = usage_of


def _json_text(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def assemble_anthropic(events: Iterable[Mapping[str, Any]], policy: Any = None) -> StreamResult:
    """Assemble a whole recorded stream; the last event must be ``message_stop`` (or the stop reason)."""
    stream = AnthropicStream(policy=policy)
    stream.feed_all(events)
    return stream.result()
