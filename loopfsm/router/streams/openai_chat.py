"""OpenAI chat-completion chunks to stream assembly.

A chunk is the dict of one ``data:`` line of ``chat.completions.create(stream=True)``.
Chat chunks have no block starts or stops, so the adapter derives them: the
first ``content`` (or ``refusal``) opens that lane's slot, a tool call's first
chunk (carrying its id and name) opens its slot, the ``finish_reason`` closes
every open slot and stops the message, a chunk with ``usage`` reports usage,
and :meth:`OpenAIChatStream.finish` (the end of the stream) finishes it.

Rules of this adapter (the machine's are in its YAML):
- One choice only (``n=1``): a chunk for another choice index is refused.
- Tool calls are numbered 0, 1, 2... in the order their headers arrive; a
  header at another index (a gap, or headers out of order) is refused as a
  StreamProtocolError, and an argument fragment for an index whose header
  never came goes to the machine as a delta for an unstarted block, which it
  refuses.
- ``reasoning_content`` (sent by OpenAI-compatible servers for a reasoning
  model's thinking) is the thinking lane: its first non-empty fragment opens
  a thinking slot, and the message carries it as unsigned thinking.
- Nothing in a delta is dropped silently: the legacy ``function_call`` (a
  call without an id, which the message's tool calls need) and any field
  this adapter does not know are refused as unsupported (StreamEventError)
  unless their value is empty (null, "", [] or {}).
- A chunk id, role, tool call id or name repeated on a later chunk goes to the
  machine's restate feeds: accepted when equal, refused when different.
- A choice's ``logprobs`` (``content`` and ``refusal`` lists of tokens, each
  with ``token``, ``logprob``, ``bytes`` and ``top_logprobs``) are kept in
  order in the result, as the SDK accumulates them; an entry of another shape,
  or another key, is refused as malformed rather than dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from loopfsm.core.errors import LoopFsmError, shown
from loopfsm.router.errors import StreamEventError
from loopfsm.machines.stream_assembly import StreamAssembly
from loopfsm.machines.stream_values import StreamResult, TokenLogprob, usage_of


# delta fields carrying text -> the lane they fill
_TEXT_LANES = {"content": "text", "refusal": "refusal", "reasoning_content": "thinking"}
_KNOWN_FIELDS = frozenset({"role", "tool_calls", "function_call", *_TEXT_LANES})
_EMPTY: tuple[Any, ...] = (None, "", [], {})  # a field with one of these values carries nothing


class OpenAIChatStream:
    """Feed chat-completion chunks one at a time; call :meth:`finish` at the end of the stream."""

    __slots__ = ("machine", "policy", "chunks", "_id", "_lanes", "_tools", "_logprobs")

    def __init__(self, machine: Any = None, policy: Any = None):
        self.machine: Any = machine if machine is not None else StreamAssembly()
        self.policy = policy
        self.chunks = 0
        self._id: str | None = None
        self._lanes: dict[str, int] = {}  # text / refusal -> slot index
        self._tools: list[int] = []  # tool call index -> slot index
        self._logprobs: dict[str, list[TokenLogprob]] = {"content": [], "refusal": []}

    def feed(self, chunk: Mapping[str, Any]) -> None:
        """One chunk; a malformed one raises StreamEventError, an illegal one StreamProtocolError.

        Either way nothing changed: a chunk that takes several feeds is undone
        as a whole when one of them is refused.
        """
        self.chunks += 1
        if self._single_feed(chunk):
            self._feed(chunk)
            return
        m = self.machine
        cp = m.checkpoint()
        lanes, tools, first_id = dict(self._lanes), list(self._tools), self._id
        kept = {k: len(v) for k, v in self._logprobs.items()}
        try:
            self._feed(chunk)
        except LoopFsmError:
            m.rollback(cp)
            self._lanes, self._tools, self._id = lanes, tools, first_id
            for k, n in kept.items():
                del self._logprobs[k][n:]
            raise

    def _single_feed(self, chunk: Any) -> bool:
        """The common chunk: one fragment for a slot already open, nothing else."""
        try:
            if self._id is None or chunk.get("id") != self._id or chunk.get("usage") is not None:
                return False
            (choice,) = chunk["choices"]
            delta = choice["delta"]
            if choice.get("finish_reason") is not None or choice.get("index", 0) != 0 or len(delta) != 1:
                return False
            if choice.get("logprobs") not in _EMPTY:
                return False
            ((key, value),) = delta.items()
            if key in _TEXT_LANES:
                return _TEXT_LANES[key] in self._lanes
            if key == "tool_calls" and isinstance(value, list) and len(value) == 1:
                call = value[0]
                fn = call.get("function") or {}
                return (
                    call.get("id") is None
                    and fn.get("name") is None
                    and type(call.get("index")) is int
                    and 0 <= call["index"] < len(self._tools)
                )
        except (AttributeError, KeyError, TypeError, ValueError):
            pass
        return False

    def _feed(self, chunk: Mapping[str, Any]) -> None:
        try:
            m, pol = self.machine, self.policy
            if isinstance(chunk, Mapping) and "choices" not in chunk and isinstance(chunk.get("error"), Mapping):
                # The API's error object mid-stream (an overload, a policy stop): the stream failed, and
                # result() raises StreamFailed with its type and message, as for Anthropic's error event.
                err = chunk["error"]
                kind = err.get("type") or err.get("code") or "error"
                m.error(str(kind), str(err.get("message", "")), policy=pol)
                return
            choices = chunk["choices"]
            if self._id is None:
                delta0 = choices[0]["delta"] if choices else {}
                self._id = chunk["id"]
                m.start(chunk["id"], chunk.get("model") or "", delta0.get("role") or "assistant", policy=pol)
            elif chunk["id"] != self._id:
                m.restate_message(chunk["id"], None, policy=pol)
            for choice in choices:
                if choice.get("index", 0) != 0:
                    raise StreamEventError(
                        f"chunk {self.chunks}: choice {choice['index']}: this adapter assembles one choice (n=1)"
                    )
                self._delta(choice["delta"] or {})
                self._keep_logprobs(choice.get("logprobs"))
                reason = choice.get("finish_reason")
                if reason is not None:
                    for lane_indices in list(m.data.open_slots.values()):
                        for index in list(lane_indices):
                            m.close_block(index, policy=pol)
                    m.stop(reason, policy=pol)
            usage = chunk.get("usage")
            if usage is not None:
                m.usage(usage_of(usage), policy=pol)
        except (KeyError, TypeError, AttributeError, IndexError) as err:
            raise StreamEventError(f"chunk {self.chunks}: malformed chunk ({type(err).__name__}: {err})") from None

    def _delta(self, delta: Mapping[str, Any]) -> None:
        m, pol = self.machine, self.policy
        for key, value in delta.items():
            if key not in _KNOWN_FIELDS and value not in _EMPTY:
                raise StreamEventError(f"chunk {self.chunks}: unsupported delta field {shown(key)}")
        if delta.get("function_call") not in _EMPTY:
            raise StreamEventError(
                f"chunk {self.chunks}: a legacy function_call delta is unsupported: the call has no id to answer "
                "it by (ask with tools=, which streams tool_calls)"
            )
        if self.chunks > 1 and delta.get("role") is not None:
            m.restate_message(None, delta["role"], policy=pol)
        for key, name in _TEXT_LANES.items():
            text = delta.get(key)
            if text is None:
                continue
            index = self._lanes.get(name)
            if index is None:
                if name == "thinking" and text == "":
                    continue  # an empty fragment carries nothing; the first real one opens the slot
                index = self._lanes[name] = len(m.data.slots)
                m.open_block(index, name, policy=pol)
            m.delta(index, name, text, policy=pol)
        calls = delta.get("tool_calls")
        if calls:
            for call in calls:
                self._tool(call)

    def _keep_logprobs(self, logprobs: Any) -> None:
        """A choice's ``logprobs``, checked and kept (they are not the machine's: no slot holds them)."""
        if logprobs in _EMPTY:
            return
        if not isinstance(logprobs, Mapping):
            raise StreamEventError(f"chunk {self.chunks}: logprobs is an object, got {shown(logprobs)}")
        for key, entries in logprobs.items():
            if key not in self._logprobs:
                if entries in _EMPTY:
                    continue
                raise StreamEventError(f"chunk {self.chunks}: unsupported logprobs field {shown(key)}")
            if entries is None:
                continue
            if not isinstance(entries, list):
                raise StreamEventError(f"chunk {self.chunks}: logprobs.{key} is a list, got {shown(entries)}")
            self._logprobs[key] += [self._token(e, key, True) for e in entries]

    def _token(self, entry: Any, where: str, with_top: bool) -> TokenLogprob:
        ok = isinstance(entry, Mapping) and isinstance(entry.get("token"), str)
        value = entry.get("logprob") if ok else None
        ok = ok and type(value) in (int, float)
        raw = entry.get("bytes") if ok else None
        ok = ok and (raw is None or (isinstance(raw, list) and all(type(b) is int and 0 <= b < 256 for b in raw)))
        top = entry.get("top_logprobs") if ok else None
        ok = ok and (top is None or (isinstance(top, list) and (with_top or not top)))
        if not ok:
            raise StreamEventError(
                f"chunk {self.chunks}: a logprobs.{where} entry is {{token, logprob, bytes, top_logprobs}}, "
                f"got {shown(entry)}"
            )
        alternatives = tuple(self._token(t, where + ".top_logprobs", False) for t in top or ())
        return TokenLogprob(
            entry["token"], float(entry["logprob"]), tuple(raw) if raw is not None else None, alternatives
        )

    def _tool(self, call: Mapping[str, Any]) -> None:
        m, pol = self.machine, self.policy
        i = call["index"]
        if type(i) is not int or i < 0:
            raise StreamEventError(f"chunk {self.chunks}: a tool call's index is a whole number, got {shown(i)}")
        fn = call.get("function") or {}
        args = fn.get("arguments")
        tools = self._tools
        if type(i) is int and 0 <= i < len(tools):
            slot = tools[i]
            if call.get("id") is not None or fn.get("name") is not None:
                m.restate_header(slot, call.get("id"), fn.get("name"), policy=pol)
        elif call.get("id") is not None or fn.get("name") is not None:
            if i != len(tools):
                raise m.protocol_error("open_block", f"tool call {i} announced while the next is {len(tools)}")
            slot = len(m.data.slots)
            m.open_block(slot, "tool", call.get("id"), fn.get("name"), policy=pol)
            tools.append(slot)
        else:
            # Arguments for a call whose header never came: the machine refuses a
            # delta for a block that was never started.
            slot = len(m.data.slots)
        if args is not None:
            m.delta(slot, "tool", args, policy=pol)

    def finish(self) -> None:
        """The stream ended (the HTTP body closed, or ``data: [DONE]``)."""
        self.machine.finish(policy=self.policy)

    def feed_all(self, chunks: Iterable[Mapping[str, Any]]) -> None:
        for chunk in chunks:
            self.feed(chunk)
        self.finish()

    def result(self) -> StreamResult:
        assembled: StreamResult = self.machine.result()
        lp = self._logprobs
        if not (lp["content"] or lp["refusal"]):
            return assembled
        return replace(assembled, logprobs=tuple(lp["content"]), refusal_logprobs=tuple(lp["refusal"]))


def assemble_openai_chat(chunks: Iterable[Mapping[str, Any]], policy: Any = None) -> StreamResult:
    """Assemble a whole recorded stream of chunks, then finish it."""
    stream = OpenAIChatStream(policy=policy)
    stream.feed_all(chunks)
    return stream.result()
