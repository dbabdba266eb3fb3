"""Anthropic Messages stream events to stream assembly.

Events are the dicts of the ``data:`` lines of the SSE stream:
``message_start``, ``content_block_start`` / ``_delta`` / ``_stop``,
``message_delta``, ``message_stop``, ``ping`` and ``error``.  Block indices go
to the machine as they are, so the machine's index rules are Anthropic's.
Blocks a ``message_start`` already carries in its ``content`` are the
message's first blocks (opened and closed at once, as the SDK keeps them),
and the streamed blocks are numbered on after them.
Text, tool use, thinking and redacted thinking blocks are assembled;
citations (a ``citations_delta``, or a text block that starts with some) and
server tool blocks (``server_tool_use``, search results) are refused as
unsupported rather than silently lost: the Message has no place for them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from loopfsm.core.errors import LoopFsmError
from loopfsm.router.errors import StreamEventError
from loopfsm.machines.stream_assembly import StreamAssembly
from loopfsm.machines.stream_values import StreamResult, usage_of

# content_block_start types -> lanes
_LANES = {"text": "text", "tool_use": "tool", "thinking": "thinking", "redacted_thinking": "redacted_thinking"}
# content_block_delta types -> (lane, field holding the fragment)
_DELTAS = {
    "text_delta": ("text", "text"),
    "input_json_delta": ("tool", "partial_json"),
    "thinking_delta": ("thinking", "thinking"),
}


class AnthropicStream:
    """Feed Anthropic stream events one at a time; read :meth:`result` after the stop reason."""

    __slots__ = ("machine", "policy", "events")

    def __init__(self, machine: Any = None, policy: Any = None):
        self.machine: Any = machine if machine is not None else StreamAssembly()
        self.policy = policy
        self.events = 0

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
                    m.delta(event["index"], lane[0], delta[lane[1]], policy=pol)
                elif dtype == "signature_delta":
                    m.sign(event["index"], delta["signature"], policy=pol)
                elif dtype == "citations_delta":  # the Message has no place for a citation: refused, not lost
                    raise StreamEventError(
                        f"event {self.events}: a citations_delta is unsupported: the message has no place for it"
                    )
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
        cp = m.checkpoint()
        try:
            m.start(msg["id"], msg["model"], msg.get("role", "assistant"), usage, policy=pol)
            for index, block in enumerate(content):
                self._start_block(index, block)
                m.close_block(index, policy=pol)
        except Exception:  # a refused feed, or a malformed block (reported by feed as StreamEventError)
            m.rollback(cp)
            raise

    def _start_block(self, index: Any, block: Mapping[str, Any]) -> None:
        btype = block["type"]
        lane = _LANES.get(btype)
        m, pol = self.machine, self.policy
        if lane is None:
            raise StreamEventError(f"event {self.events}: unsupported content block type {btype!r}")
        if lane == "text":
            if block.get("citations"):  # an empty list or null carries nothing
                raise StreamEventError(
                    f"event {self.events}: a text block's citations are unsupported: the message has no place for them"
                )
            m.open_block(index, "text", initial=block.get("text") or "", policy=pol)
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
        return self.machine.result()  # type: ignore[no-any-return]


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
