"""``loopfsm verify``: prove a machine's invariants over every run up to a bound, on the real compiled machine.

Instances are plain data, so exploring is breadth first over snapshots: each
configuration (a snapshot, plus the largest time fed on the way there) is
restored, fed every input :mod:`.verify_inputs` derives, and each new
configuration is kept once.  Breadth first means the first run found that
breaks an invariant is a shortest one.  Besides the declared invariants, every
feed is held to what every machine promises (``no_crash``): no guard or action
raises (which the runtime reports as an :class:`~loopfsm.core.errors.ActionError`),
and nothing raises anything but a :class:`~loopfsm.core.errors.LoopFsmError`.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
import pickle
import time
import weakref
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from loopfsm.core import tracing
from loopfsm.core.errors import ActionError, LoopFsmError
from loopfsm.core.invariants import CompiledInvariant, InvariantContext, compile_invariants

from loopfsm.verification.coverage import MachineCoverage, Row, rows_of
from loopfsm.verification.tracefile import Trace, TraceStep
from loopfsm.verification.verify_inputs import Domains, Step

NO_CRASH = "no_crash"

#: A configuration's fingerprint (see :func:`_key`).
Key = bytes


@dataclass(frozen=True)
class Broken:
    """An invariant that failed at the end of a run: which, and why in words."""

    invariant: str
    why: str


@dataclass(frozen=True)
class Answer:
    """What an invariant's guards said: whether they hold, and what they raised if they crashed."""

    holds: bool
    crash: str | None


class Judge:
    """Asks a machine's compiled invariants about one configuration or one step; shared with ``replay``."""

    def __init__(self, invariants: Iterable[CompiledInvariant], policy: Any):
        self.policy = policy
        all_ = tuple(invariants)
        self.always = tuple(i for i in all_ if i.kind == "always")
        self.steps = tuple(i for i in all_ if i.kind == "step")
        self.goals = tuple(i for i in all_ if i.kind == "reach")

    @staticmethod
    def _ask(guard: Callable[[Any, Any], Any], inst: Any, ctx: Any) -> Answer:
        try:
            return Answer(bool(guard(inst, ctx)), None)
        except Exception as err:  # noqa: BLE001 - a guard that crashes on a reachable configuration is a finding
            return Answer(False, f"its guards raised {type(err).__name__}: {err} (in state {inst.state})")

    def configuration(self, inst: Any, skip: AbstractSet[str] = frozenset()) -> list[Broken]:
        ctx = InvariantContext(self.policy)
        out = []
        for inv in self.always:
            if inv.name not in skip and inv.in_scope(inst.state):
                answer = self._ask(inv.holds, inst, ctx)
                if not answer.holds:
                    out.append(Broken(inv.name, answer.crash or f"does not hold in state {inst.state}"))
        return out

    def armed(
        self, before: Any, step: Step, skip: AbstractSet[str] = frozenset()
    ) -> list[tuple[CompiledInvariant, Any]]:
        """The step invariants that apply to ``step`` from ``before`` (their ``when`` holds), asked before feeding."""
        out: list[tuple[CompiledInvariant, Any]] = []
        for inv in self.steps:
            if inv.name in skip or not inv.in_scope(before.state) or not inv.watches(step.feed):
                continue
            ctx = InvariantContext(self.policy, step.kwargs(), None, step.feed)
            answer = self._ask(inv.when, before, ctx)
            if answer.holds:
                out.append((inv, ctx))
            elif answer.crash is not None:  # reported once the feed is known to be accepted
                out.append((inv, answer.crash))
        return out

    def step(self, armed: list[tuple[CompiledInvariant, Any]], before: Any, after: Any) -> list[Broken]:
        out = []
        for inv, ctx in armed:
            if isinstance(ctx, str):  # its `when` crashed
                out.append(Broken(inv.name, ctx))
                continue
            ctx.before = before
            answer = self._ask(inv.holds, after, ctx)
            if not answer.holds:
                moved = f"{before.state} to {after.state}" if before.state != after.state else f"in {after.state}"
                out.append(Broken(inv.name, answer.crash or f"does not hold after {ctx.feed}, {moved}"))
        return out

    def goals_met(self, inst: Any) -> list[str]:
        ctx = InvariantContext(self.policy)
        return [g.name for g in self.goals if g.in_scope(inst.state) and self._ask(g.holds, inst, ctx).holds]


class _RowSink:
    """A trace sink noting the rows (branches, refusals, decision rules) each feed or question took."""

    wants_refusals = True
    wants_attributes = False

    def __init__(self) -> None:
        self.rows: list[tuple[str, str]] = []

    def __call__(self, record: tracing.TransitionRecord) -> None:
        if record.branch is None:
            return
        if record.kind == tracing.DECISION:
            self.rows.append(("rule", f"{record.feed}/{record.branch}"))
        else:
            self.rows.append(("branch", record.branch))


@dataclass(frozen=True)
class Taken:
    """Where a row was first taken: the configuration, and the feed (or question) that took it."""

    key: Key
    step: Step
    decision: bool


@dataclass
class Node:
    parent: Key | None
    step: Step | None
    depth: int


@dataclass
class Finding:
    """A shortest run that breaks an invariant (or reaches a goal): its feeds from the start."""

    invariant: str
    why: str
    key: Key | None  # the configuration the last step was fed in (None: the start itself)
    last: Step | None  # the step that broke it, when a feed did
    steps: list[Step] = field(default_factory=list)


@dataclass
class Result:
    configurations: int = 0
    transitions: int = 0
    refused: int = 0
    depth: int = 0  # every run of up to this many feeds was explored
    complete: bool = False  # no configuration was left unexplored (a fixpoint before the bound)
    truncated: bool = False  # stopped before the bound: see ``stopped_by``
    stopped_by: str | None = None  # "max_states", "time_limit" or "interrupt"
    seconds: float = 0.0  # wall time
    cpu_seconds: float = 0.0
    states_reached: set[str] = field(default_factory=set)
    exercised: set[str] = field(default_factory=set)  # invariants asked of a configuration or step in scope
    violations: dict[str, Finding] = field(default_factory=dict)
    reached: dict[str, Finding] = field(default_factory=dict)
    coverage: Any = None


class _Stopped(Exception):
    """The search stops before its bound: ``reason`` is ``max_states`` or ``time_limit``."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


_SCALARS = frozenset({int, str, bool, float, type(None)})


def _copy(value: Any) -> Any:
    """A deep copy of a field's value: JSON-shaped values, tuples and dataclass values (the brain's messages) by
    hand, field by field, anything else by :mod:`copy` (whose memo and reduce protocol cost three times as much
    on the brain's messages)."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is list:
        return [_copy(v) for v in value]
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is tuple:
        return tuple([_copy(v) for v in value])
    names = _FIELDS.get(kind)
    if names is None:
        names = _FIELDS[kind] = _plain_fields(kind)
    if names and len(getattr(value, "__dict__", names)) == len(names):  # nothing set besides its fields
        out = object.__new__(kind)
        for name in names:
            field_value = getattr(value, name, _UNSET)
            if field_value is not _UNSET:
                object.__setattr__(out, name, _copy(field_value))
        return out
    return copy.deepcopy(value)


#: Per type, the attributes :func:`_copy` copies one by one, else () and a deep copy: a dataclass's fields (its
#: instances holding nothing else), or the slots of a class made of slots alone (the stream's Slot), for a class
#: that does not say itself how it is copied or pickled.  Measured: the stream assembly's exploration spent 14 of
#: its 22 profiled seconds in ``copy.deepcopy``.
_FIELDS: dict[type, tuple[str, ...]] = {}
_UNSET = object()
_OWN_COPYING = ("__copy__", "__deepcopy__", "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__")


def _plain_fields(kind: type) -> tuple[str, ...]:
    if kind.__module__ == "builtins" or any(
        getattr(kind, h, None) is not getattr(object, h, None) for h in _OWN_COPYING
    ):
        return ()
    if dataclasses.is_dataclass(kind) and "__slots__" not in vars(kind):
        return tuple(f.name for f in dataclasses.fields(kind))
    slots: list[str] = []
    for base in kind.__mro__[:-1]:  # object last
        own = vars(base).get("__slots__")
        if own is None:
            return ()  # a class in the chain keeps a __dict__
        slots += [own] if isinstance(own, str) else list(own)
    return () if "__dict__" in slots or "__weakref__" in slots else tuple(dict.fromkeys(slots))


#: id(spec) -> (a weak reference to it, its rows, their keys); an entry goes when its table does.
_ROWS: dict[int, tuple[weakref.ref[Any], list[Row], set[tuple[str, str]]]] = {}


def _coverage_rows(spec: Any) -> tuple[list[Row], set[tuple[str, str]]]:
    """The table's coverage rows (with their lines) and their (kind, name) keys, worked out once per table:
    a search of a small machine spent a tenth of its time reading them again."""
    found = _ROWS.get(id(spec))
    if found is None or found[0]() is not spec:
        source = spec.source
        rows = rows_of(source.doc, lambda path: source.locate(path)[0])
        key = id(spec)
        ref = weakref.ref(spec, lambda _: _ROWS.pop(key, None))
        found = _ROWS[key] = (ref, rows, {(r.kind, r.name) for r in rows})
    return found[1], found[2]


def clone(inst: Any) -> Any:
    """An independent instance equal to ``inst``: what restoring its snapshot gives, without re-validating
    a snapshot the machine itself just took (the explorer feeds hundreds of copies of each configuration)."""
    cls: Any = type(inst)
    out = cls.__new__(cls)
    out._state = inst._state
    out.__dict__.update(inst.__dict__)  # a named engine, a machine's model attributes
    out.state_data = {k: _copy(v) for k, v in inst.state_data.items()}
    data = object.__new__(type(inst.data))
    for name in cls.compiled.data_encoders:
        setattr(data, name, _copy(getattr(inst.data, name)))
    out.data = data
    return out


#: What ``json.dumps(..., sort_keys=True, separators=(",", ":"))`` encodes with, made once: ``dumps`` builds an
#: encoder per call, 1.7 of the 4.1 µs a turnstile configuration's JSON took.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def _key(snap: dict[str, Any], clock: int, forget: frozenset[str] = frozenset()) -> bytes:
    """A configuration's fingerprint: 128 bits of BLAKE2b over its canonical JSON (the snapshot's state, state
    data and data less the forgotten fields, and the largest time fed).

    Kept instead of the JSON, it bounds the memory a configuration costs (16 bytes plus its node) whatever
    the machine holds.  Two configurations share a fingerprint with probability below n**2 / 2**129 for n
    configurations (about 10**-25 for ten million); such a pair would be explored as one.
    """
    data = {k: v for k, v in snap["data"].items() if k not in forget} if forget else snap["data"]
    text = _CANONICAL.encode([snap["state"], snap["state_data"], data, clock])
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


class _Fingerprints:
    """Fingerprints of configurations, with a shortcut for the many feeds that lead somewhere already seen.

    Most feeds of an exploration end in a configuration met before (the tool breaker: 156,285 accepted feeds,
    4,579 configurations).  Encoding the instance to canonical JSON costs about 11 µs; pickling its raw values
    costs under 2 µs.  So each instance's raw values are pickled first, and their digest is looked up: equal raw
    values mean an equal snapshot, and only raw values not met before are encoded.  Values that encode alike but
    pickle differently (a dict's order, 1 against 1.0) are only encoded twice; what decides is the fingerprint
    of the canonical JSON.  This trusts a value's pickling to say all of it, as :func:`clone`'s copying already
    does (copying uses the same ``__reduce_ex__``); a value that cannot be pickled is encoded every time.
    """

    #: Fingerprints taken the canonical way before the shortcut is tried: in a search this small most feeds
    #: find new configurations, and the pickle's digest is only a cost (the turnstile: 8 feeds, 5 configurations).
    DIRECT = 64

    def __init__(self, forget: frozenset[str]):
        self.forget = forget
        self._by_raw: dict[bytes, Key] = {}
        self._direct = self.DIRECT

    def of(self, inst: Any, clock: int) -> Key:
        if self._direct:
            self._direct -= 1
            return _key(inst._encoded(), clock, self.forget)
        names = inst.compiled.data_encoders
        data = inst.data
        try:
            blob = pickle.dumps((inst._state, inst.state_data, [getattr(data, n) for n in names], clock), 5)
        except Exception:  # noqa: BLE001 - a value pickle cannot take: encode it (the canonical way) every time
            return _key(inst._encoded(), clock, self.forget)
        raw = hashlib.blake2b(blob, digest_size=16).digest()
        key = self._by_raw.get(raw)
        if key is None:
            key = self._by_raw[raw] = _key(inst._encoded(), clock, self.forget)
        return key


def _args_key(name: str, args: tuple[tuple[str, Any], ...]) -> tuple[Any, ...] | None:
    """What a binding is kept under: each value's type and ``repr`` (1, True and 1.0 are equal keys in a dict,
    as are 0.0 and -0.0, and bind differently); None when a value is not a scalar (not kept: checking a list's
    items to make its key measured as dear as binding it)."""
    out: list[Any] = [name]
    for arg, value in args:
        if type(value) not in _SCALARS:
            return None
        out += (arg, type(value), repr(value))
    return tuple(out)


class Explorer:
    """Breadth-first exploration of one compiled machine under one policy."""

    def __init__(
        self,
        compiled: Any,
        policy: Any,
        domains: Domains,
        *,
        progress: Callable[[Result, int], None] | None = None,
        forget: frozenset[str] = frozenset(),
        progress_every: float = 1.0,
    ):
        self.forget = forget
        self.progress_every = progress_every  # seconds between progress lines
        self.compiled = compiled
        self.policy = policy
        self.domains = domains
        self.judge = Judge(compile_invariants(compiled.spec, compiled.registry, policy), policy)
        self.progress = progress
        self.nodes: dict[Key, Node] = {}
        self.starts: dict[Key, dict[str, Any]] = {}
        self.last_instance: Any = None  # where the last trace_of() ended
        self.first_taken: dict[tuple[str, str], Taken] = {}  # (kind, row name) -> the first run that took it
        self._sink = _RowSink()
        self._asked: dict[tuple[str, Any], dict[str, Any] | None] = {}  # (decision, arguments) -> bound, or None
        self._fed: dict[tuple[str, Any], dict[str, Any]] = {}  # (feed, arguments) -> bound

    def _took(self, key: Key, step: Step, decision: bool = False) -> None:
        for row in self._sink.rows:
            if row not in self.first_taken:
                self.first_taken[row] = Taken(key, step, decision)
        self._sink.rows.clear()

    def path_to(self, key: Key | None) -> list[Step]:
        steps: list[Step] = []
        while key is not None:
            node = self.nodes[key]
            if node.step is not None:
                steps.append(node.step)
            key = node.parent
        return steps[::-1]

    def start_of(self, key: Key | None) -> dict[str, Any] | None:
        while key is not None and self.nodes[key].parent is not None:
            key = self.nodes[key].parent
        return self.starts.get(key) if key is not None else None

    def _violate(self, res: Result, broken: list[Broken], key: Key | None, step: Step | None) -> None:
        for b in broken:
            if b.invariant not in res.violations:
                res.violations[b.invariant] = Finding(b.invariant, b.why, key, step)

    def _decisions(self, inst: Any, res: Result, key: Key, clock: int) -> None:
        """Ask every decision with every combination of its arguments, so its rules count as covered
        (and a decision that crashes is found)."""
        binders = self.compiled.decision_binders
        for name, d in self.compiled.spec.decisions.items():
            asks = self.domains.combinations(name, d.args, inst, clock)
            for ask in asks:
                bound = self._bound(binders[name], name, ask)
                if bound is None:
                    continue  # the question's own binder refuses these arguments
                try:
                    rule, _ = inst._answer(name, self.policy, bound, traced=False)  # the row is the rule answering
                    row = ("rule", f"{name}/{rule}")
                    if row not in self.first_taken:
                        self.first_taken[row] = Taken(key, ask, True)
                except ActionError as err:
                    self._violate(res, [Broken(NO_CRASH, str(err))], key, None)
                except LoopFsmError:
                    pass
                except Exception as err:  # noqa: BLE001
                    why = f"decision {ask.shown()} raised {type(err).__name__}: {err}"
                    self._violate(res, [Broken(NO_CRASH, why)], key, None)

    def _bound(self, binder: Any, name: str, ask: Step) -> dict[str, Any] | None:
        """The question's arguments as its binder binds them (None: it refuses them), bound once per question:
        most questions are asked unchanged of every configuration."""
        key = _args_key(name, ask.args)
        if key is not None and key in self._asked:
            return self._asked[key]
        try:
            bound: dict[str, Any] | None = binder((), ask.kwargs())
        except LoopFsmError:
            bound = None
        if key is not None:
            self._asked[key] = bound
        return bound

    def _bound_feed(self, step: Step) -> dict[str, Any]:
        """The feed's arguments as its binder binds them (raising as ``feed`` would), bound once per step:
        the same steps are fed in thousands of configurations."""
        key = _args_key(step.feed, step.args)
        bound = self._fed.get(key) if key is not None else None
        if bound is None:
            bound = self.compiled.binders[step.feed]((), step.kwargs())  # a refusal raises here, every time
            if key is not None:
                self._fed[key] = bound
        return bound

    def _accepts(self, event: Any, inst: Any, bound: dict[str, Any]) -> bool:
        """Whether ``event``'s guards take a branch for ``bound`` in ``inst`` (asked before copying it); a guard
        that raises counts as accepted, so that the feed itself reports it as it reports it to a user."""
        try:
            accepted: bool = event.would_accept(inst, bound, self.policy)
        except Exception:  # noqa: BLE001 - fed next, on a copy: the feed wraps and reports it
            return True
        return accepted

    def _steps(self, inst: Any, clock: int, feeds: tuple[str, ...], allowed: tuple[str, ...]) -> list[Step]:
        """What ``inst`` is fed: every step of the feeds its state accepts, then those of the others tried."""
        steps = self.domains.steps(inst, clock, allowed)
        if len(feeds) > len(allowed):
            steps += self._once_each(inst, clock, [f for f in feeds if f not in allowed])
        return steps

    def _once_each(self, inst: Any, clock: int, feeds: list[str]) -> list[Step]:
        """Feeds ``inst``'s state does not accept: one call each where the state raises for it (every value
        raises alike), every value where it ignores it (a step invariant's guards may read the arguments)."""
        out: list[Step] = []
        for feed in feeds:
            ignored = inst.state in self.compiled.events[feed].ignored_in
            out += self.domains.steps(inst, clock, (feed,), first_only=not ignored)
        return out

    def _arrive(self, inst: Any, res: Result, key: Key, clock: int = 0) -> None:
        res.states_reached.add(inst.state)
        judge = self.judge
        if judge.always:  # a machine without invariants of a kind asks nothing of it (the turnstile has none)
            self._violate(res, judge.configuration(inst, res.violations.keys()), key, None)
        if judge.goals:
            for goal in judge.goals_met(inst):
                if goal not in res.reached:
                    res.reached[goal] = Finding(goal, "reached", key, None)
        if self.compiled.spec.decisions:
            self._decisions(inst, res, key, clock)

    def run(self, starts: list[dict[str, Any]], depth: int, max_states: int, time_limit: float | None = None) -> Result:
        """Explore breadth first from ``starts`` to ``depth`` feeds; stop at once past ``max_states``
        configurations, ``time_limit`` seconds of CPU, or Ctrl-C, with what was explored so far."""
        res = Result()
        try:
            self._run(res, starts, depth, max_states, time_limit)
        except _Stopped as stop:
            res.truncated, res.stopped_by = True, stop.reason
        except KeyboardInterrupt:
            res.truncated, res.stopped_by = True, "interrupt"
        return self._finish(res)

    def _run(
        self, res: Result, starts: list[dict[str, Any]], depth: int, max_states: int, time_limit: float | None
    ) -> None:
        self._began, self._cpu_began = time.monotonic(), time.process_time()
        began = self._began
        deadline = None if time_limit is None else self._cpu_began + time_limit
        # Exploring feeds each configuration many times: it runs on the interpreter (about ten times faster), which
        # the engines' differential test holds to the default engine's answers; trace_of replays a finding on the
        # default engine.
        restore = functools.partial(self.compiled.restore, engine="interpreter")
        fingerprints = _Fingerprints(self.forget)
        # The frontier keeps instances, not snapshots: each is fed only through copies (``clone``), never itself
        # changed, so restoring (and re-validating) what the machine just made is not needed.
        frontier: list[tuple[Key, Any, int]] = []
        # The sink is added and removed by hand: ``tracing.global_sink``'s generator costs 2.6 µs a run against 1.0
        # (the turnstile's whole search at its bound takes about 280 µs).
        tracing.add_global_sink(self._sink)
        try:
            for snap in starts:
                inst = restore(snap)
                snap = inst.snapshot()
                key = _key(snap, 0, self.forget)
                if key in self.nodes:
                    continue
                self.nodes[key] = Node(None, None, 0)
                self.starts[key] = snap
                frontier.append((key, inst, 0))
                self._arrive(inst, res, key)
            last_report = began
            # state -> (feeds tried, accepted, their steps when no argument's values depend on the configuration)
            feeds_of: dict[str, tuple[tuple[str, ...], tuple[str, ...], list[Step] | None]] = {}
            events = self.compiled.events
            step_invariants = bool(self.judge.steps)
            sink, rows = self._sink, self._sink.rows
            for level in range(depth):
                nxt: list[tuple[Key, Any, int]] = []
                for key, before, clock in frontier:
                    if deadline is not None and time.process_time() > deadline:
                        raise _Stopped("time_limit")
                    known = feeds_of.get(before.state)
                    if known is None:
                        # A step invariant in scope asks every feed, those the state refuses or ignores too (what
                        # a terminal state does with a feed is what "terminal is forever" is about).
                        asks = any(inv.in_scope(before.state) for inv in self.judge.steps)
                        accepted = before.allowed_feeds()
                        tried = tuple(self.compiled.events) if asks else accepted
                        fixed = self._steps(before, clock, tried, accepted) if self.domains.fixed(tried) else None
                        if fixed is not None and any(type(v) not in _SCALARS for s in fixed for _, v in s.args):
                            fixed = None  # a list or a codec's value: each configuration is fed its own, as before
                        known = feeds_of[before.state] = (tried, accepted, fixed)
                    feeds, allowed, fixed = known
                    steps = fixed if fixed is not None else self._steps(before, clock, feeds, allowed)
                    self._sink.rows.clear()  # a generator may have asked a decision: that took no row here
                    for step in steps:
                        armed = self.judge.armed(before, step, res.violations.keys()) if step_invariants else []
                        if armed:
                            res.exercised.update(inv.name for inv, _ in armed)  # a refused feed holds it too
                        # A feed the state does not accept raises or is ignored, and one its guards refuse raises
                        # before any action runs: neither changes anything, so neither needs a copy (most of the
                        # stream assembly's feeds are refused).
                        event = events[step.feed]
                        try:
                            bound = self._bound_feed(step)
                            accepted = step.feed in allowed and self._accepts(event, before, bound)
                            inst = clone(before) if accepted else before
                            if tracing.heard_only_by(sink):
                                # feed() with its binding done once, its record written here: the only sink
                                # listening is this search's, which reads nothing of it but the row (building and
                                # delivering the record took 2.2 of the 5.4 µs a turnstile coin took, copy included).
                                done = inst._engine.run(event, inst, bound, self.policy)
                                if done.result:
                                    rows.append(("branch", done.transition.name))
                            else:  # another sink listens too: it hears the feed as a user's feed is heard
                                inst._engine.traced(event, inst, bound, self.policy)
                        except ActionError as err:  # a guard or action raised: the runtime wrapped it
                            self._sink.rows.clear()
                            self._violate(res, [Broken(NO_CRASH, str(err))], key, step)
                            continue
                        except LoopFsmError:
                            res.refused += 1
                            self._took(key, step)  # a refuse: branch is a row too
                            continue
                        except Exception as err:  # noqa: BLE001 - the finding: a feed must never crash
                            self._violate(res, [Broken(NO_CRASH, f"{type(err).__name__}: {err}")], key, step)
                            continue
                        if rows:
                            self._took(key, step)
                        res.transitions += 1
                        if inst is before and step.feed in allowed:
                            # its guards refused it a moment ago: one of them answers differently when asked again
                            why = f"{step.shown()} was refused by its guards, then accepted: a guard is not pure"
                            self._violate(res, [Broken(NO_CRASH, why)], key, step)
                            break  # this configuration may have changed under the search: explore no more of it
                        if armed:
                            self._violate(res, self.judge.step(armed, before, inst), key, step)
                        if step.feed not in allowed:
                            continue  # ignored, so nothing changed: only its clock would make it look new
                        now = step.clock()
                        nclock = clock if now is None or now < clock else now
                        nkey = fingerprints.of(inst, nclock)
                        if nkey in self.nodes:
                            continue
                        if len(self.nodes) >= max_states:
                            raise _Stopped("max_states")
                        self.nodes[nkey] = Node(key, step, level + 1)
                        nxt.append((nkey, inst, nclock))
                        self._arrive(inst, res, nkey, nclock)
                    if self.progress is not None and time.monotonic() - last_report >= self.progress_every:
                        last_report = time.monotonic()
                        res.configurations = len(self.nodes)
                        res.seconds = last_report - began
                        self.progress(res, level + 1)
                frontier = nxt
                res.depth = level + 1
                if not frontier:
                    res.complete = True
                    break
        finally:
            tracing.remove_global_sink(self._sink)

    def _finish(self, res: Result) -> Result:
        """What the run explored, wherever it stopped: counts, times, the shortest runs to each finding, coverage."""
        res.configurations = len(self.nodes)
        res.seconds = time.monotonic() - self._began
        res.cpu_seconds = time.process_time() - self._cpu_began
        res.exercised.update(inv.name for inv in self.judge.always if any(inv.in_scope(s) for s in res.states_reached))
        for finding in [*res.violations.values(), *res.reached.values()]:
            finding.steps = self.path_to(finding.key) + ([finding.last] if finding.last is not None else [])
        rows, known = _coverage_rows(self.compiled.spec)
        res.coverage = MachineCoverage(
            self.compiled.name, self.compiled.spec.file, rows, {row for row in self.first_taken if row in known}
        )
        return res

    def trace_of(self, finding: Finding, policy_given: dict[str, Any], note: str) -> Trace:
        """The finding as a trace file: its feeds from its start, with the state after each (replayed here)."""
        start = self.start_of(finding.key)
        inst = self.compiled.restore(start) if start is not None else self.compiled.new()
        steps = []
        for step in finding.steps:
            try:
                inst.feed(step.feed, policy=self.policy, **step.kwargs())
                steps.append(TraceStep(step, inst.state, False))
            except ActionError:  # the crash this trace shows: replay reports it
                steps.append(TraceStep(step, None, False))
            except LoopFsmError:
                steps.append(TraceStep(step, None, True))
            except Exception:  # noqa: BLE001 - the crash this trace shows: replay reports it
                steps.append(TraceStep(step, None, False))
        self.last_instance = inst
        initial = self.compiled.new().snapshot()
        shown_start = None if start is None or start == initial else start
        return Trace(self.compiled.name, dict(policy_given), shown_start, tuple(steps), note)
