"""Transition tracing: one plain record per feed or decision, handed to whoever listens.

Tracing is sans-IO like the machines: a :class:`TransitionRecord` is a frozen
value and a sink is any callable taking one.  What a sink does with it (append
to a list, print a line, emit an OpenTelemetry log record) is its own business;
the machine never learns whether anyone listened.

Sinks attach to one instance (:func:`attach`) or to every instance of every
machine (:func:`global_sink`, a context manager, or :func:`add_global_sink`).
While no sink is attached anywhere, a feed pays a single truth test of
:data:`ACTIVE`; everything else in this module runs only when someone listens.

Branch names are stable: the branch's YAML ``name:`` when it has one, else
``feed/source[index]`` where ``source`` is the state (or ``*``) the branch is
written under and ``index`` its position there.  A branch is identified by
its feed, the state it left and this name (a YAML name is unique per feed and
source state).  A decision's record names the rule that answered.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from .fieldtypes import INT_MAX, INT_MIN
from .spec import Ref, Spec, _ref

if TYPE_CHECKING:  # pragma: no cover
    from .source import PathT  # the YAML reader is imported only when a file is parsed


class Traced:
    """What tracing needs of an instance: a slot for its own sinks, its state and its machine.

    :class:`~loopfsm.core.instance.MachineInstance` derives from this class: the
    runtime imports tracing, so tracing names what it uses instead of importing
    the runtime.
    """

    __slots__ = ("_sinks",)
    _sinks: tuple[Any, ...]  # trace sinks of this instance only (attach); never snapshotted
    _state: str
    compiled: ClassVar[Any]  # the instance's CompiledMachine: its ``name`` and ``trace_attributes``


AttributeValue = str | int | float | bool
Getter = Callable[[Any], Any]

FEED = "feed"
DECISION = "decision"
REFUSAL = "refusal"

_EMPTY: Mapping[str, AttributeValue] = MappingProxyType({})


@dataclass(frozen=True)  # no slots=True: a slotted dataclass is generated at import, a cost every process paid
class TransitionRecord:
    """What one feed or decision did: who, from where, by which branch, to where.

    ``kind`` is ``"feed"`` or ``"decision"`` (or ``"refusal"``, heard only by
    sinks that ask for it: see :func:`refusal_done`).  For a feed, ``branch`` is the
    stable name of the branch taken, or None when no branch ran (a terminal
    state ignoring the feed, or ``otherwise: stay`` after every guard failed);
    ``to_state`` equals ``from_state`` for stays.  For a decision, ``feed`` is
    the decision's name, ``branch`` the rule that answered, and nothing moves.
    ``attributes`` are the machine's declared trace attributes (scalars only:
    traces never carry prompts or tool content).
    """

    machine: str
    from_state: str
    feed: str
    branch: str | None
    to_state: str
    kind: str = FEED
    attributes: Mapping[str, AttributeValue] = field(default_factory=lambda: _EMPTY)

    @property
    def moved(self) -> bool:
        return self.from_state != self.to_state

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form (the CLI prints these)."""
        return {
            "machine": self.machine,
            "kind": self.kind,
            "from": self.from_state,
            "feed": self.feed,
            "branch": self.branch,
            "to": self.to_state,
            "attributes": dict(self.attributes),
        }

    def __str__(self) -> str:
        arrow = f"{self.from_state} -> {self.to_state}" if self.moved else f"{self.from_state} (stays)"
        attrs = " ".join(f"{k}={v!r}" for k, v in self.attributes.items())
        what = "?" if self.kind == DECISION else ""
        return f"{self.machine}: {self.feed}{what} [{self.branch or '-'}] {arrow}" + (f"  {attrs}" if attrs else "")


class TraceSink(Protocol):
    """Anything that accepts records: a function, ``list.append``, an OpenTelemetry sink.

    Two optional class attributes tune what a sink hears: ``wants_refusals = True``
    adds records of ``refuse:`` branches taken (:func:`refusal_done`), and
    ``wants_attributes = False`` says it reads only which row was taken, so when
    every listening sink says so the records carry no attributes and none is
    computed (a coverage collector; ``loopfsm verify``'s row sink).
    """

    def __call__(self, record: TransitionRecord, /) -> None: ...


class TraceSinkWarning(UserWarning):
    """A sink raised.  The move it was told about already happened, so the feed is not undone."""


#: True while any sink is attached anywhere; the only thing a feed checks when nobody listens.
ACTIVE = False
_global: tuple[TraceSink, ...] = ()
_instance_sinks = 0  # instances that currently have sinks attached
_lock = threading.Lock()  # attaching and detaching from several threads must not lose a count


def _refresh() -> None:
    global ACTIVE
    ACTIVE = bool(_global) or _instance_sinks > 0


def _check_sink(sink: object) -> None:
    """A sink is called with each record: anything else is refused when attached, not warned about per feed."""
    if not callable(sink):
        raise TypeError(f"a trace sink is a callable taking a TransitionRecord, got {type(sink).__name__}")


def add_global_sink(sink: TraceSink) -> None:
    """Send records of every machine to ``sink`` until :func:`remove_global_sink`."""
    global _global
    _check_sink(sink)
    with _lock:
        if sink not in _global:  # added already: a record is delivered once per sink
            _global = (*_global, sink)
        _refresh()


def remove_global_sink(sink: TraceSink) -> None:
    global _global
    with _lock:
        sinks = list(_global)
        if sink not in sinks:  # a driver bug worth seeing, said plainly
            raise ValueError(f"trace sink {sink!r} is not a global sink")
        sinks.remove(sink)
        _global = tuple(sinks)
        _refresh()


def is_global_sink(sink: TraceSink) -> bool:
    """Whether ``sink`` hears every machine now."""
    return sink in _global


def heard_only_by(sink: TraceSink) -> bool:
    """Whether a feed now reaches ``sink`` and no other sink (a search that reads only its own rows may then
    skip building the record)."""
    return _global == (sink,) and not _instance_sinks


@contextmanager
def global_sink(sink: TraceSink) -> Iterator[TraceSink]:
    """``with global_sink(records.append): ...`` traces every machine inside the block."""
    add_global_sink(sink)
    try:
        yield sink
    finally:
        remove_global_sink(sink)


def attach(instance: Traced, sink: TraceSink) -> None:
    """Send the records of this one instance to ``sink`` (not carried by snapshots).

    Detach it (or use :func:`attached`) when done: while any instance has a
    sink, every feed of every machine takes the slower path that looks.
    """
    global _instance_sinks
    _check_sink(sink)
    if not isinstance(instance, Traced):
        raise TypeError(f"trace sinks attach to a machine instance, got {type(instance).__name__}")
    with _lock:
        current = sinks_of(instance)
        if sink in current:  # attached already: a record is delivered once per sink
            return
        if not current:
            _instance_sinks += 1
        instance._sinks = (*current, sink)
        _refresh()


def detach(instance: Traced, sink: TraceSink) -> None:
    global _instance_sinks
    with _lock:
        sinks = list(sinks_of(instance))
        if sink not in sinks:  # a driver bug worth seeing, said plainly
            raise ValueError(f"trace sink {sink!r} is not attached to this instance")
        sinks.remove(sink)
        instance._sinks = tuple(sinks)
        if not sinks:
            _instance_sinks -= 1
        _refresh()


def sinks_of(instance: Traced) -> tuple[TraceSink, ...]:
    return getattr(instance, "_sinks", None) or ()


@contextmanager
def attached(instance: Traced, sink: TraceSink) -> Iterator[TraceSink]:
    attach(instance, sink)
    try:
        yield sink
    finally:
        detach(instance, sink)


def _deliver(instance: Traced, record: TransitionRecord) -> None:
    for sink in (*_global, *sinks_of(instance)):
        try:
            sink(record)
        except Exception as err:  # a broken exporter must not turn a legal move into an error
            warnings.warn(f"trace sink {sink!r} raised {type(err).__name__}: {err}", TraceSinkWarning, stacklevel=3)


def _attributes_wanted(instance: Traced) -> bool:
    """Whether a sink that hears this instance reads attributes (see :class:`TraceSink`)."""
    return any(getattr(s, "wants_attributes", True) for s in (*_global, *sinks_of(instance)))


def _attributes(
    instance: Traced, ctx: Any, move: tuple[str, str] | None = None, before: Mapping[str, Any] = _EMPTY
) -> Mapping[str, AttributeValue]:
    """The declared attributes of one record: ``move`` is (from, to) for a feed, None for a decision."""
    getters = instance.compiled.trace_attributes
    if not getters or not _attributes_wanted(instance):
        return _EMPTY
    out: dict[str, AttributeValue] = {}
    for g in getters:
        if g.moves is not None and (move is None or not g.matches(*move)):
            continue
        value = g.get(ctx)
        if value is None:
            value = before.get(g.name)
        if value is not None:
            out[g.name] = _fit(g.name, value)
    return MappingProxyType(out)


#: The longest string attribute a record carries, in characters; a longer one is cut and marked
#: (``...`` and its full length), so a 10 MB status fed to a feed never reaches a trace whole.
MAX_ATTRIBUTE_CHARS = 256


def _fit(name: str, value: AttributeValue) -> AttributeValue:
    """A string past :data:`MAX_ATTRIBUTE_CHARS` is cut and marked; an integer outside the signed 64-bit
    range OTLP carries is saturated, loudly."""
    if type(value) is str and len(value) > MAX_ATTRIBUTE_CHARS:
        mark = f"... ({len(value):,} characters)"
        return value[: MAX_ATTRIBUTE_CHARS - len(mark)] + mark
    if type(value) is int and not INT_MIN <= value <= INT_MAX:
        warnings.warn(
            f"trace attribute '{name}' is {value}, outside the signed 64-bit range; saturated",
            TraceSinkWarning,
            stacklevel=3,
        )
        return INT_MAX if value > INT_MAX else INT_MIN
    return value


#: The same bound, for a driver's own span attributes (the router's tool spans): one rule for every attribute.
fit_attribute = _fit


class _Before:
    """What a before-reading sees: the instance as it is before the feed runs, and the feed's arguments."""

    __slots__ = ("args", "model", "policy")

    def __init__(self, model: Any, args: Mapping[str, Any], policy: Any) -> None:
        self.model, self.args, self.policy = model, args, policy


def feed_starting(instance: Traced, args: Mapping[str, Any], policy: Any) -> Mapping[str, Any]:
    """Called by the runtime before a feed runs, only while :data:`ACTIVE`: the ``after_or_before`` values."""
    getters = instance.compiled.trace_attributes
    if not getters or not (_global or sinks_of(instance)) or not _attributes_wanted(instance):
        return _EMPTY
    ctx = _Before(instance, args, policy)
    return {g.name: v for g in getters if g.keep and (v := g.get(ctx)) is not None}


def feed_done(instance: Traced, feed: str, ctx: Any, before: Mapping[str, Any] = _EMPTY) -> None:
    """Called by the runtime after a feed ran (``ctx`` is its ``FeedData``), only while :data:`ACTIVE`.

    ``before`` holds the values of ``read: after_or_before`` attributes read just before the feed
    (:func:`feed_starting`): one the feed cleared keeps that value.
    """
    if not (_global or sinks_of(instance)):
        return
    to_state = instance._state
    from_state = ctx.source if ctx.result else to_state
    branch = ctx.transition.name if ctx.result else None
    attrs = _attributes(instance, ctx, (from_state, to_state), before)
    _deliver(instance, TransitionRecord(instance.compiled.name, from_state, feed, branch, to_state, FEED, attrs))


def refusal_done(instance: Traced, feed: str, branch: str) -> None:
    """Called by a ``refuse:`` branch just before it raises, only while :data:`ACTIVE`.

    A refused feed changes nothing, so ordinary sinks hear nothing of it
    (like an illegal feed); only a sink with ``wants_refusals = True`` (the
    transition-coverage collector) gets a ``"refusal"`` record naming the
    branch, for a ``refuse:`` branch and for a branch whose action raised a
    loopfsm error (:func:`action_refused`).  It carries no attributes: nothing the feed brought is read.
    """
    sinks = [s for s in (*_global, *sinks_of(instance)) if getattr(s, "wants_refusals", False)]
    if not sinks:
        return
    state = instance._state
    record = TransitionRecord(instance.compiled.name, state, feed, branch, state, REFUSAL)
    for sink in sinks:
        try:
            sink(record)
        except Exception as err:
            warnings.warn(f"trace sink {sink!r} raised {type(err).__name__}: {err}", TraceSinkWarning, stacklevel=3)


def action_refused(instance: Traced, feed: str, branch: Any) -> None:
    """Called when an action of ``branch`` (a backend ``Branch``) refused the feed by raising a LoopFsmError,
    only while :data:`ACTIVE`: the branch was taken and refused, as a ``refuse:`` branch is (the run lock's
    ``fenced_out``).  A ``refuse:`` branch reports itself (:func:`refusal_done`), so it is not reported twice."""
    if branch.refusal is None:
        refusal_done(instance, feed, branch.name)


def decision_done(instance: Traced, decision: str, rule: str, query: Any) -> None:
    """Called by the runtime after a decision answered, only while :data:`ACTIVE`."""
    if not (_global or sinks_of(instance)):
        return
    state = instance._state
    _deliver(
        instance,
        TransitionRecord(instance.compiled.name, state, decision, rule, state, DECISION, _attributes(instance, query)),
    )


_SCALAR_TYPES = frozenset({"integer", "number", "string", "boolean"})
_SCALARS = (str, int, float, bool)


@dataclass(frozen=True)
class TraceAttribute:
    """One entry of a machine file's ``trace:`` table: an attribute name and where its value comes from."""

    name: str
    kind: str  # data | state_data | arg | result
    field: str  # the field or argument name; the result's name for kind == "result"
    ref: Ref | None
    path: PathT
    read: str = "after"  # or "after_or_before": a value the feed cleared is read from just before it
    moves: tuple[tuple[str, str], ...] | None = None  # (from, to) moves it is recorded on ("*" any); None: every record


ANY = "*"


def parse_move(text: str) -> tuple[str, str]:
    """``"planning -> awaiting_tool"`` as (from, to); the schema has checked the shape."""
    a, b = text.split("->")
    return a.strip(), b.strip()


def move_matches(moves: tuple[tuple[str, str], ...], from_state: str, to_state: str) -> bool:
    return any((a == ANY or a == from_state) and (b == ANY or b == to_state) for a, b in moves)


def trace_attributes(spec: Spec) -> list[TraceAttribute]:
    """The ``trace:`` table of a schema-valid spec, in file order."""
    out = []
    for name, raw in (spec.source.doc.get("trace") or {}).items():
        path: PathT = ("trace", name)
        kind = next(k for k in ("data", "state_data", "arg", "result") if k in raw)
        read = raw.get("read", "after")
        moves = tuple(parse_move(m) for m in raw["moves"]) if "moves" in raw else None
        if kind == "result":
            ref = _ref(raw["result"], path + ("result",))
            out.append(TraceAttribute(name, kind, ref.name, ref, path, read, moves))
        else:
            out.append(TraceAttribute(name, kind, raw[kind], None, path + (kind,), read, moves))
    return out


def move_problems(spec: Spec, attr: TraceAttribute) -> list[tuple[PathT, str]]:
    """Each ``moves:`` entry naming no state, or no move any branch of the table makes, with its path."""
    out: list[tuple[PathT, str]] = []
    made = {
        (src, b.dest or src)
        for ev in spec.events.values()
        for src, bs in spec.expanded_sources(ev).items()
        for b in bs
        if b.refusal is None
    }
    for i, (a, b) in enumerate(attr.moves or ()):
        where: PathT = ("trace", attr.name, "moves", i)
        bad = [s for s in (a, b) if s != ANY and s not in spec.states]
        if bad:
            out.append((where, f"trace attribute '{attr.name}': no state '{bad[0]}' (moves: '{a} -> {b}')"))
        elif not any((a == ANY or a == x) and (b == ANY or b == y) for x, y in made):
            out.append((where, f"trace attribute '{attr.name}': no branch of the table moves {a} -> {b}"))
    if attr.read == "after_or_before" and attr.kind == "arg":
        out.append(
            (
                ("trace", attr.name, "read"),
                f"trace attribute '{attr.name}': an argument has no value before the feed (read: after_or_before "
                "is for data, state_data and results)",
            )
        )
    return out


def attribute_problem(spec: Spec, attr: TraceAttribute) -> str | None:
    """Why ``attr`` cannot be traced, or None.  Only scalar fields qualify: traces never carry content."""
    if attr.name.split(".")[0] == "loopfsm":
        return f"trace attribute '{attr.name}': the 'loopfsm.' prefix is reserved for the record's own fields"
    if attr.kind == "result":
        return None
    if attr.kind == "data":
        fields = [spec.data[attr.field]] if attr.field in spec.data else []
        where = "the machine's data"
    elif attr.kind == "state_data":
        fields = [s.data[attr.field] for s in spec.states.values() if attr.field in s.data]
        where = "the data of any state"
    else:
        arg_tables = [e.args for e in spec.events.values()] + [d.args for d in spec.decisions.values()]
        fields = [args[attr.field] for args in arg_tables if attr.field in args]
        where = "the arguments of any feed or decision"
    if not fields:
        return f"trace attribute '{attr.name}': no field '{attr.field}' in {where}"
    for f in fields:
        if f.type not in _SCALAR_TYPES or f.list:
            return (
                f"trace attribute '{attr.name}': '{attr.field}' is {'a list of ' if f.list else ''}{f.type}; "
                "traces take integer, number, string or boolean values only (never content)"
            )
    return None


@dataclass(frozen=True)
class CompiledAttribute:
    """One ``trace:`` entry ready to read: its getter, whether a cleared value is read from before, where it goes."""

    name: str
    get: Getter
    keep: bool  # read: after_or_before
    moves: tuple[tuple[str, str], ...] | None

    def matches(self, from_state: str, to_state: str) -> bool:
        return self.moves is None or move_matches(self.moves, from_state, to_state)


def compile_attributes(spec: Spec, bind_result: Callable[[Ref], Getter]) -> tuple[CompiledAttribute, ...]:
    """Getters reading each declared attribute from a feed's or decision's context."""
    out: list[CompiledAttribute] = []
    for attr in trace_attributes(spec):
        if attr.kind in _READERS:
            get = _READERS[attr.kind](attr.field)
        else:
            assert attr.ref is not None
            get = _scalar_only(attr.name, bind_result(attr.ref))
        out.append(CompiledAttribute(attr.name, get, attr.read == "after_or_before", attr.moves))
    return tuple(out)


def _data_reader(key: str) -> Getter:
    return lambda ctx: getattr(ctx.model.data, key)


def _state_data_reader(key: str) -> Getter:
    return lambda ctx: ctx.model.state_data.get(key)


def _arg_reader(key: str) -> Getter:
    return lambda ctx: ctx.args.get(key)


_READERS: dict[str, Callable[[str], Getter]] = {
    "data": _data_reader,
    "state_data": _state_data_reader,
    "arg": _arg_reader,
}


def _scalar_only(name: str, fn: Getter) -> Getter:
    def get(ctx: Any) -> Any:
        value = fn(ctx)
        if value is None or isinstance(value, _SCALARS):
            return value
        warnings.warn(
            f"trace attribute '{name}' computed a {type(value).__name__}, not a scalar; left out",
            TraceSinkWarning,
            stacklevel=2,
        )
        return None

    return get


def branch_name(feed: str, source: str, index: int, declared: str | None = None) -> str:
    """The stable name of a branch: its YAML ``name:`` or ``feed/source[index]``."""
    return declared or f"{feed}/{source}[{index}]"
