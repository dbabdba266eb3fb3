"""Stream assembly's named guards and actions, and its typed Python API.

The table (``machines/stream_assembly.yaml``) decides which event is legal
where; this module implements the names it uses.  The typed methods also word
a refusal: when the table refuses a feed, :func:`explain_refusal` reads the
machine (changing nothing) to say which protocol rule the event broke.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from loopfsm.core.errors import FeedArgumentError, IllegalFeed
from loopfsm.machines.errors import StreamFailed, StreamProtocolError
from loopfsm.core.registry import Registry, ValuesOf
from loopfsm.core.declared import DeclaredMachine
from loopfsm.core.instance import PolicyArg
from .stream_values import COMPACT_EVERY, LANES, SLOT_SCHEMA, ArgumentProblem, Slot, StreamResult, assemble

__all__ = [
    "StreamAssembly",
    "StreamAssemblyPolicy",  # noqa: F822 (it comes from __getattr__: built from the YAML on first use)
    "REGISTRY",
    "Slot",
    "StreamResult",
    "ArgumentProblem",
    "LANES",
    "explain_refusal",
]

REGISTRY = Registry("stream_assembly")
REGISTRY.codec("slot", Slot, Slot.to_json, Slot.from_json, SLOT_SCHEMA)


def _slot(m: Any, index: Any) -> Slot | None:
    slots = m.data.slots
    if type(index) is int and 0 <= index < len(slots):
        return slots[index]  # type: ignore[no-any-return]
    return None


# -- guards -----------------------------------------------------------------------------------


@REGISTRY.guard
def next_index(m: Any, ctx: Any) -> bool:
    """Blocks open at 0, 1, 2...: a start at any other index is misplaced or a duplicate."""
    return ctx.args["index"] == len(m.data.slots)  # type: ignore[no-any-return]


@REGISTRY.guard
def header_fits_lane(m: Any, ctx: Any, *, headed: Annotated[list[str], ValuesOf("lane")]) -> bool:
    """A block of a lane in ``headed`` (the table names them) names its header, id and name; no other does."""
    a = ctx.args
    if a["lane"] in headed:
        return bool(a["block_id"]) and bool(a["name"])
    return a["block_id"] is None and a["name"] is None


def _headed_lanes(m: Any) -> list[str]:
    """The lanes the table's ``header_fits_lane`` says carry a header (for wording a refusal as the table decided)."""
    for branch in m.compiled.spec.events["open_block"].sources["Streaming"]:
        for guard in branch.guards:
            if guard.name == "header_fits_lane":
                return list(guard.params["headed"])
    return []


@REGISTRY.guard
def below_block_limit(m: Any, ctx: Any, *, limit: int) -> bool:
    return len(m.data.slots) < limit


@REGISTRY.guard
def within_char_limit(m: Any, ctx: Any, *, limit: int, arg: str) -> bool:
    """The characters held stay within the policy's bound once this fragment is added."""
    return m.data.chars + len(ctx.args[arg]) <= limit  # type: ignore[no-any-return]


@REGISTRY.guard
def slot_takes(m: Any, ctx: Any, *, limit: int) -> bool:
    """A fragment for an open slot of its lane that keeps the characters held within ``limit``."""
    args = ctx.args
    index = args["index"]
    slots = m.data.slots
    if type(index) is not int or not 0 <= index < len(slots):
        return False
    slot = slots[index]
    fits: bool = m.data.chars + len(args["text"]) <= limit
    return slot.open and slot.lane == args["lane"] and fits


@REGISTRY.guard
def slot_open(m: Any, ctx: Any) -> bool:
    slot = _slot(m, ctx.args["index"])
    return slot is not None and slot.open


@REGISTRY.guard
def unsigned_thinking(m: Any, ctx: Any) -> bool:
    slot = _slot(m, ctx.args["index"])
    return slot is not None and slot.open and slot.lane == "thinking" and slot.signature is None


@REGISTRY.guard
def header_matches(m: Any, ctx: Any) -> bool:
    """A restated tool header equals the one announced; a missing field restates nothing."""
    a = ctx.args
    slot = _slot(m, a["index"])
    if slot is None or not slot.open or slot.lane != "tool":
        return False
    return a["block_id"] in (None, slot.block_id) and a["name"] in (None, slot.name)


@REGISTRY.guard
def message_matches(m: Any, ctx: Any) -> bool:
    a = ctx.args
    return a["message_id"] in (None, m.data.message_id) and a["role"] in (None, m.data.role)


@REGISTRY.guard
def no_open_slots(m: Any, ctx: Any) -> bool:
    return not m.data.open_slots


# -- actions ----------------------------------------------------------------------------------


def _usage(ctx: Any) -> dict[str, Any]:
    usage = ctx.args["usage"]
    if not isinstance(usage, dict):
        raise FeedArgumentError(f"stream_assembly: usage must be a JSON object, got {type(usage).__name__}")
    return usage


def _merge(m: Any, usage: dict[str, Any]) -> None:
    merged = dict(m.data.usage)
    merged.update((k, v) for k, v in usage.items() if v is not None)
    m.data.usage = merged


@REGISTRY.action
def begin_message(m: Any, ctx: Any) -> None:
    usage = _usage(ctx)
    d, a = m.data, ctx.args
    d.message_id, d.model, d.role = a["message_id"], a["model"], a["role"]
    _merge(m, usage)


@REGISTRY.action
def open_slot(m: Any, ctx: Any) -> None:
    a = ctx.args
    d = m.data
    d.slots.append(Slot(a["index"], a["lane"], a["block_id"], a["name"], a["initial"]))
    d.open_slots.setdefault(a["lane"], []).append(a["index"])
    d.chars += len(a["initial"])


@REGISTRY.action
def append_fragment(m: Any, ctx: Any) -> None:
    """Keep the fragment itself (no copy); every COMPACT_EVERY fragments are joined into one piece."""
    a = ctx.args
    text = a["text"]
    d = m.data
    slot = d.slots[a["index"]]
    parts = slot.parts
    parts.append(text)
    if len(parts) >= COMPACT_EVERY:
        slot.chunks.append("".join(parts))
        parts.clear()
    d.chars += len(text)


@REGISTRY.action
def set_signature(m: Any, ctx: Any) -> None:
    m.data.slots[ctx.args["index"]].signature = ctx.args["signature"]


@REGISTRY.action
def close_slot(m: Any, ctx: Any) -> None:
    index = ctx.args["index"]
    d = m.data
    slot = d.slots[index]
    slot.close()
    lane = d.open_slots[slot.lane]
    lane.remove(index)
    if not lane:
        del d.open_slots[slot.lane]


@REGISTRY.action
def record_stop(m: Any, ctx: Any) -> None:
    usage = _usage(ctx)
    m.data.stop_reason = ctx.args["reason"]
    m.data.stop_sequence = ctx.args["stop_sequence"]
    _merge(m, usage)


@REGISTRY.action
def merge_usage(m: Any, ctx: Any) -> None:
    _merge(m, _usage(ctx))


@REGISTRY.action
def enter_failed(m: Any, ctx: Any) -> None:
    ctx.enter(kind=ctx.args["kind"], message=ctx.args["message"])


@REGISTRY.result
def assembled(m: Any, q: Any) -> StreamResult:
    d = m.data
    return assemble(
        d.slots,
        stop_reason=d.stop_reason,
        stop_sequence=d.stop_sequence,
        usage=d.usage,
        message_id=d.message_id,
        model=d.model,
    )


# -- wording refusals -----------------------------------------------------------------------------

_STATE_WHY = {
    "Idle": "the message has not started",
    "Stopped": "the stop reason already arrived",
    "Done": "the message already finished",
    "Failed": "the stream already failed",
}


_STREAMING_WHY = {
    "start": "the message already started",
    "finish": "the stop reason has not arrived (it comes after every block closed)",
}


def explain_refusal(m: Any, event: str, args: dict[str, Any], policy: PolicyArg = None) -> str:
    """Which protocol rule ``event`` with ``args`` breaks in ``m``'s current state.  Reads only."""
    state = m.state
    if state != "Streaming" and not (state == "Stopped" and event == "restate_message"):
        return _STATE_WHY.get(state, f"not expected in state {state}")
    if event in _STREAMING_WHY:  # feeds of another state: no block is involved
        return _STREAMING_WHY[event]
    pol = m.compiled.policy(policy)
    d = m.data
    index = args.get("index")
    slot = _slot(m, index)
    if event == "open_block":
        if type(index) is int and index < 0:
            return f"block {index}: an index is 0 or more"
        if type(index) is int and index < len(d.slots):
            return f"block {index} was already started"
        if index != len(d.slots):
            return f"block {index} started where the next block is {len(d.slots)}"
        if args.get("lane") in _headed_lanes(m):
            return f"a {args.get('lane')} block needs its id and name"
        if args.get("block_id") is not None or args.get("name") is not None:
            return f"a {args.get('lane')} block carries no id or name"
        if len(d.slots) >= pol.max_blocks:
            return f"more than max_blocks={pol.max_blocks} blocks"
        return f"more than max_chars={pol.max_chars} characters"
    if event == "restate_message":
        return (
            f"the message was announced as id {d.message_id!r}, role {d.role!r}; "
            f"restated as id {args.get('message_id')!r}, role {args.get('role')!r}"
        )
    if event == "stop":
        open_ = ", ".join(f"{lane} {idx}" for lane, idx in sorted(d.open_slots.items()))
        return f"blocks still open ({open_})"
    if slot is None:
        what = "an argument fragment" if args.get("lane") == "tool" else "a fragment"
        if event == "delta":
            return f"{what} for block {index}, which was never started"
        return f"block {index} was never started"
    if not slot.open:
        return f"block {index} already closed"
    if event == "delta":
        if slot.lane != args.get("lane"):
            return f"a {args.get('lane')} fragment for {slot.lane} block {index}"
        return f"more than max_chars={pol.max_chars} characters"
    if event == "sign":
        if slot.lane != "thinking":
            return f"a signature for {slot.lane} block {index}"
        return f"thinking block {index} is already signed"
    if event == "restate_header":
        if slot.lane != "tool":
            return f"block {index} is a {slot.lane} block, not a tool call"
        return (
            f"tool call {index} was announced as id {slot.block_id!r}, name {slot.name!r}; "
            f"restated as id {args.get('block_id')!r}, name {args.get('name')!r}"
        )
    return "refused by the table"


# -- the typed API --------------------------------------------------------------------------------


class StreamAssembly(DeclaredMachine, machine="stream_assembly", registry=REGISTRY, policy="StreamAssemblyPolicy"):
    """Stream assembly with typed feeds; a refused one raises :class:`StreamProtocolError` naming the rule.

    Compiled from ``machines/stream_assembly.yaml`` on first use.
    """

    __slots__ = ()

    def _feed(self, event: str, args: dict[str, Any], policy: Any) -> None:
        try:
            self.feed(event, policy=policy, **args)
        except StreamProtocolError:
            raise
        except IllegalFeed as err:
            raise StreamProtocolError(
                err.machine, err.state, event, err.legal_states, explain_refusal(self, event, args, policy)
            ) from None

    def protocol_error(self, event: str, reason: str) -> StreamProtocolError:
        """The error for ``event`` refused by an adapter's own rule, worded as the table's refusals are.

        An adapter that derives a feed (an OpenAI tool call's header becomes
        open_block) checks what only it can see, such as the provider's own
        numbering, and raises this before feeding.
        """
        legal = self.compiled.events[event].legal_states
        return StreamProtocolError(self.compiled.name, self.state, event, legal, reason)

    def start(
        self,
        message_id: str,
        model: str,
        role: str = "assistant",
        usage: dict[str, Any] | None = None,
        *,
        policy: PolicyArg = None,
    ) -> None:
        self._feed("start", {"message_id": message_id, "model": model, "role": role, "usage": usage or {}}, policy)

    def open_block(
        self,
        index: int,
        lane: str,
        block_id: str | None = None,
        name: str | None = None,
        initial: str = "",
        *,
        policy: PolicyArg = None,
    ) -> None:
        self._feed(
            "open_block", {"index": index, "lane": lane, "block_id": block_id, "name": name, "initial": initial}, policy
        )

    def delta(self, index: int, lane: str, text: str, *, policy: PolicyArg = None) -> None:
        try:
            self.feed("delta", index, lane, text, policy=policy)
        except IllegalFeed as err:
            raise StreamProtocolError(
                err.machine,
                err.state,
                "delta",
                err.legal_states,
                explain_refusal(self, "delta", {"index": index, "lane": lane, "text": text}, policy),
            ) from None

    def sign(self, index: int, signature: str, *, policy: PolicyArg = None) -> None:
        self._feed("sign", {"index": index, "signature": signature}, policy)

    def restate_header(
        self, index: int, block_id: str | None = None, name: str | None = None, *, policy: PolicyArg = None
    ) -> None:
        self._feed("restate_header", {"index": index, "block_id": block_id, "name": name}, policy)

    def restate_message(
        self, message_id: str | None = None, role: str | None = None, *, policy: PolicyArg = None
    ) -> None:
        self._feed("restate_message", {"message_id": message_id, "role": role}, policy)

    def close_block(self, index: int, *, policy: PolicyArg = None) -> None:
        self._feed("close_block", {"index": index}, policy)

    def stop(
        self,
        reason: str,
        stop_sequence: str | None = None,
        usage: dict[str, Any] | None = None,
        *,
        policy: PolicyArg = None,
    ) -> None:
        self._feed("stop", {"reason": reason, "stop_sequence": stop_sequence, "usage": usage or {}}, policy)

    def usage(self, usage: dict[str, Any], *, policy: PolicyArg = None) -> None:
        self._feed("usage", {"usage": usage}, policy)

    def finish(self, *, policy: PolicyArg = None) -> None:
        self._feed("finish", {}, policy)

    def ping(self, *, policy: PolicyArg = None) -> None:
        self._feed("ping", {}, policy)

    def error(self, kind: str, message: str, *, policy: PolicyArg = None) -> None:
        self._feed("error", {"kind": kind, "message": message}, policy)

    # -- one provider event, several feeds --
    def checkpoint(self) -> Any:
        """What :meth:`rollback` needs to undo the feeds that follow; costs the open slots' fragment lists.

        An adapter turns one provider event into several feeds at times (an
        OpenAI chunk that opens a tool call and carries its first fragment);
        it takes a checkpoint first, so a refused event changes nothing as a
        whole, not only feed by feed.  Closed slots never change, so only the
        open ones are copied.
        """
        d = self.data
        open_slots = [(s, list(s.parts), list(s.chunks), s.signature) for s in d.slots if s.open]
        return (
            self._state,
            dict(self.state_data),
            d.message_id,
            d.model,
            d.role,
            list(d.slots),
            {k: list(v) for k, v in d.open_slots.items()},
            d.chars,
            d.stop_reason,
            d.stop_sequence,
            dict(d.usage),
            open_slots,
        )

    def rollback(self, cp: Any) -> None:
        d = self.data
        (
            self._state,
            self.state_data,
            d.message_id,
            d.model,
            d.role,
            d.slots,
            d.open_slots,
            d.chars,
            d.stop_reason,
            d.stop_sequence,
            d.usage,
            open_slots,
        ) = cp
        for slot, parts, chunks, signature in open_slots:
            slot.parts, slot.chunks, slot.signature = parts, chunks, signature
            slot.open, slot.text, slot.arguments, slot.problem = True, None, None, None

    # -- readers --
    def result(self) -> StreamResult:
        """The assembled reply, once the stop reason arrived; raises StreamFailed after a provider error."""
        if self.state == "Failed":
            sd = self.state_data
            raise StreamFailed(sd["kind"], sd["message"])
        return self.decide("result")  # type: ignore[no-any-return]

    def open_slots(self) -> dict[str, list[int]]:
        """The open slots per lane: lane -> indices, in opening order."""
        return {lane: list(idx) for lane, idx in self.data.open_slots.items()}

    def slots(self) -> list[Slot]:
        return list(self.data.slots)


if TYPE_CHECKING:  # what type checkers see: the stub written from the YAML's policy block
    from .policies import StreamAssemblyPolicy as StreamAssemblyPolicy


def __getattr__(name: str) -> Any:
    if name == "StreamAssemblyPolicy":  # built from the YAML's policy block, so compiled on first use
        return StreamAssembly.compiled.Policy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
