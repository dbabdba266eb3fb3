"""OpenAI Responses API stream events to stream assembly.

An event is the dict of one ``data:`` line of ``responses.create(stream=True)``.
The Responses API says what the chat chunks leave to be derived: output items
(a message, a function call, reasoning) and their content parts are added and
done by events of their own, so each part is a slot, opened when it is added
and closed when it is done, and the response's lifecycle events start and stop
the message.

Rules of this adapter (the machine's are in its YAML):
- ``response.created`` starts the message with the response's id and model; a
  later lifecycle event (``in_progress``, ``queued``, ``completed``, ...) for
  another response id goes to ``restate_message``, which refuses it.
- A message item's ``output_text`` part is the text lane and its ``refusal``
  part the refusal lane; a ``function_call`` item is the tool lane, headed by
  its ``call_id`` (the id a result answers) and ``name``; a ``reasoning`` item's
  summary text is the thinking lane, unsigned (its encrypted content is not
  carried), one slot per summary part.
- ``response.completed`` closes what is still open and stops with
  ``tool_calls`` when the response called a function, else ``stop``, then
  reports its usage; ``response.incomplete`` stops with ``length`` when the
  output ran out (``max_output_tokens``) or ``content_filter``; ``response.failed``
  and ``error`` end the stream as failed, with the error's code and message.
- Nothing is dropped silently: an output item or part of another type (a
  built-in tool's call, an MCP call), an annotation (a citation the message has
  no place for here), non-empty ``logprobs`` and any event type this adapter
  does not know raise StreamEventError naming it.  ``*.done`` events are
  checked against what was assembled: a ``done`` whose text differs is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from loopfsm.core.errors import LoopFsmError, shown
from loopfsm.router.errors import StreamEventError
from loopfsm.machines.stream_assembly import StreamAssembly
from loopfsm.machines.stream_values import StreamResult, usage_of

_LIFECYCLE = frozenset({"response.created", "response.queued", "response.in_progress"})
#: ``*.done`` events: each repeats what its deltas said (checked), or ends a part whose slot closes elsewhere.
_DONE_TEXT = {
    "response.output_text.done": ("text", "text"),
    "response.refusal.done": ("refusal", "refusal"),
    "response.function_call_arguments.done": ("arguments", "tool"),
    "response.reasoning_summary_text.done": ("text", "thinking"),
}
_QUIET = frozenset({"response.reasoning_summary_part.done", "response.reasoning_summary_part.added"})
_PART_LANES = {"output_text": ("text", "text"), "refusal": ("refusal", "refusal")}
_STOPS = {"max_output_tokens": "length", "content_filter": "content_filter"}
_EMPTY: tuple[Any, ...] = (None, "", [], {})


class OpenAIResponsesStream:
    """Feed Responses API stream events one at a time; call :meth:`finish` at the end of the stream."""

    __slots__ = ("machine", "policy", "events", "_id", "_items", "_slots", "_texts", "_called")

    def __init__(self, machine: Any = None, policy: Any = None):
        self.machine: Any = machine if machine is not None else StreamAssembly()
        self.policy = policy
        self.events = 0
        self._id: str | None = None
        self._items: dict[int, str] = {}  # output index -> the item's type
        self._slots: dict[tuple[int, int], int] = {}  # (output index, part or summary index) -> slot; tools: (i, -1)
        self._texts: dict[int, list[str]] = {}  # slot -> its fragments, for checking the done events
        self._called = False  # a function call was made: the response stops with tool_calls

    def feed(self, event: Mapping[str, Any]) -> None:
        """One event; a malformed one raises StreamEventError, an illegal one StreamProtocolError.

        Either way nothing changed: an event that takes several feeds is undone as a whole.
        """
        self.events += 1
        m = self.machine
        cp = m.checkpoint()
        kept = (dict(self._items), dict(self._slots), {k: list(v) for k, v in self._texts.items()})
        first, called = self._id, self._called
        try:
            self._feed(event)
        except LoopFsmError:
            m.rollback(cp)
            self._items, self._slots, self._texts = kept
            self._id, self._called = first, called
            raise

    def _bad(self, why: str) -> StreamEventError:
        return StreamEventError(f"event {self.events}: {why}")

    def _feed(self, event: Mapping[str, Any]) -> None:
        try:
            kind = event["type"]
            if kind in _LIFECYCLE or kind in ("response.completed", "response.incomplete", "response.failed"):
                self._lifecycle(kind, event["response"])
            elif kind == "error":
                self.machine.error(
                    str(event.get("code") or "error"), str(event.get("message") or ""), policy=self.policy
                )
            elif kind == "response.output_item.added":
                self._item_added(event["output_index"], event["item"])
            elif kind == "response.output_item.done":
                self._item_done(event["output_index"], event["item"])
            elif kind == "response.content_part.added":
                self._part_added(event["output_index"], event["content_index"], event["part"])
            elif kind == "response.content_part.done":
                self._close(event["output_index"], event["content_index"])
            elif kind in ("response.output_text.delta", "response.refusal.delta"):
                if event.get("logprobs") not in _EMPTY:
                    raise self._bad("logprobs on a Responses API stream are not kept by this adapter")
                lane = "text" if kind == "response.output_text.delta" else "refusal"
                self._delta((event["output_index"], event["content_index"]), lane, event["delta"])
            elif kind == "response.function_call_arguments.delta":
                self._delta((event["output_index"], -1), "tool", event["delta"])
            elif kind == "response.reasoning_summary_text.delta":
                key = (event["output_index"], event["summary_index"])
                if key not in self._slots:
                    self._open(key, "thinking")
                self._delta(key, "thinking", event["delta"])
            elif kind in _DONE_TEXT:
                self._done_text(kind, event)
            elif kind in _QUIET:
                if self._items.get(event["output_index"]) != "reasoning":
                    raise self._bad(f"{kind} for output {shown(event['output_index'])}, which is not reasoning")
            else:
                raise self._bad(f"unsupported event type {shown(kind)}")
        except (KeyError, TypeError, AttributeError, IndexError, ValueError) as err:
            raise self._bad(f"malformed event ({type(err).__name__}: {err})") from None

    def _lifecycle(self, kind: str, response: Mapping[str, Any]) -> None:
        m, pol = self.machine, self.policy
        rid = response["id"]
        if self._id is None:
            if kind != "response.created":
                raise self._bad(f"{kind} before response.created")
            self._id = rid
            m.start(rid, response.get("model") or "", "assistant", policy=pol)
        elif rid != self._id:
            m.restate_message(rid, None, policy=pol)
        if kind in _LIFECYCLE:
            return
        if kind == "response.failed":
            err = response.get("error") or {}
            m.error(str(err.get("code") or "error"), str(err.get("message") or ""), policy=pol)
            return
        for indices in list(m.data.open_slots.values()):
            for index in list(indices):
                m.close_block(index, policy=pol)
        if kind == "response.completed":
            reason = "tool_calls" if self._called else "stop"
        else:
            why = str((response.get("incomplete_details") or {}).get("reason") or "max_output_tokens")
            reason = _STOPS.get(why, why)
        m.stop(reason, policy=pol)
        if response.get("usage") is not None:
            m.usage(usage_of(response["usage"]), policy=pol)

    def _item_added(self, index: int, item: Mapping[str, Any]) -> None:
        if type(index) is not int or index in self._items:
            raise self._bad(f"output item {shown(index)} added twice, or its index is not a whole number")
        kind = item["type"]
        if kind == "message":
            if item.get("role", "assistant") != "assistant":
                self.machine.restate_message(None, item["role"], policy=self.policy)
            for content_index, part in enumerate(item.get("content") or ()):
                self._part_added(index, content_index, part)
        elif kind == "function_call":
            self._open((index, -1), "tool", item["call_id"], item["name"])
            self._called = True
            if item.get("arguments"):
                self._delta((index, -1), "tool", item["arguments"])
        elif kind != "reasoning":
            raise self._bad(f"output item type {shown(kind)} is unsupported (the message has no place for it)")
        self._items[index] = kind

    def _part_added(self, index: int, content_index: int, part: Mapping[str, Any]) -> None:
        if self._items.get(index) not in ("message", None) or (index, content_index) in self._slots:
            raise self._bad(f"content part {shown(content_index)} of output {shown(index)} added twice")
        lane = _PART_LANES.get(part["type"])
        if lane is None:
            raise self._bad(f"content part type {shown(part['type'])} is unsupported")
        if part.get("annotations") not in _EMPTY:
            raise self._bad("annotations (citations) on output text are unsupported: the message has no place for them")
        self._open((index, content_index), lane[1])
        if part.get(lane[0]):
            self._delta((index, content_index), lane[1], part[lane[0]])

    def _open(self, key: tuple[int, int], lane: str, block_id: str | None = None, name: str | None = None) -> None:
        slot = self._slots[key] = len(self.machine.data.slots)
        self._texts[slot] = []
        self.machine.open_block(slot, lane, block_id, name, policy=self.policy)

    def _delta(self, key: tuple[int, int], lane: str, text: str) -> None:
        # A fragment for a part never added goes to the machine as a delta for an unstarted block, which it refuses.
        slot = self._slots.get(key, len(self.machine.data.slots))
        self.machine.delta(slot, lane, text, policy=self.policy)
        self._texts[slot].append(text)

    def _close(self, index: int, content_index: int) -> None:
        slot = self._slots.get((index, content_index))
        if slot is None:
            raise self._bad(f"content part {shown(content_index)} of output {shown(index)} is done, never added")
        if slot in self.machine.data.open_slots.get(self.machine.data.slots[slot].lane, ()):
            self.machine.close_block(slot, policy=self.policy)

    def _item_done(self, index: int, item: Mapping[str, Any]) -> None:
        if index not in self._items or self._items[index] != item["type"]:
            raise self._bad(f"output item {shown(index)} is done, but no such item was added")
        for (i, _), slot in self._slots.items():
            if i == index and slot in self.machine.data.open_slots.get(self.machine.data.slots[slot].lane, ()):
                self.machine.close_block(slot, policy=self.policy)

    def _done_text(self, kind: str, event: Mapping[str, Any]) -> None:
        field, _ = _DONE_TEXT[kind]
        if kind == "response.function_call_arguments.done":
            key = (event["output_index"], -1)
        elif kind == "response.reasoning_summary_text.done":
            key = (event["output_index"], event["summary_index"])
        else:
            key = (event["output_index"], event["content_index"])
        slot = self._slots.get(key)
        said = "".join(self._texts[slot]) if slot is not None else ""  # a summary with no text opened no slot
        if (slot is None and kind != "response.reasoning_summary_text.done") or said != event[field]:
            raise self._bad(f"{kind} says other {field} than its deltas did")

    def finish(self) -> None:
        """The stream ended (the HTTP body closed)."""
        self.machine.finish(policy=self.policy)

    def feed_all(self, events: Iterable[Mapping[str, Any]]) -> None:
        for event in events:
            self.feed(event)
        self.finish()

    def result(self) -> StreamResult:
        result: StreamResult = self.machine.result()
        return result


def assemble_openai_responses(events: Iterable[Mapping[str, Any]], policy: Any = None) -> StreamResult:
    """Assemble a whole recorded Responses API stream, then finish it."""
    stream = OpenAIResponsesStream(policy=policy)
    stream.feed_all(events)
    return stream.result()
