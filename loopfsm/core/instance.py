"""Instances: plain values holding a state name, that state's data, and the machine's data fields.

An instance owns nothing but data.  The rules live in the compiled machine its
class points to, so creating or restoring one costs a few attribute writes,
and a snapshot is just those values as JSON.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, ClassVar, Protocol
from collections.abc import Callable, Mapping
from types import MappingProxyType

from . import tracing as _tracing
from .binding import all_hold
from .engines import EngineName, Engines
from .errors import DecisionError, FeedArgumentError, SnapshotError, UnknownFeed
from .shape import Shape
from .spec import Spec

if TYPE_CHECKING:  # pragma: no cover
    from transitions import Machine

SNAPSHOT_FORMAT = 2
# Format 1 (no version, no shape) is still read: under the same fingerprint it restores as it always did.
READ_FORMATS = (1, 2)

# The arguments of every feed that declares none: read-only and shared, not a new dict per feed.
_NO_ARGS: Mapping[str, Any] = MappingProxyType({})

#: What every feed and decision accepts as ``policy=``: ``None`` (the YAML's
#: defaults), the machine's policy class, or a mapping of policy names to values.
PolicyArg = Any


class QueryData:
    """What a decision rule's guards and result see: the instance, the policy and the question's arguments."""

    __slots__ = ("model", "policy", "args")

    def __init__(self, model: Any, policy: Any, args: dict[str, Any] | None = None):
        self.model = model
        self.policy = policy
        self.args: dict[str, Any] = args if args is not None else {}


class Tables(Protocol):
    """What an instance reads of its compiled machine (:class:`~loopfsm.core.compiler.CompiledMachine`).

    Named here, not imported: the compiler builds instance classes on this
    module, so this module must not import the compiler.
    """

    @property
    def name(self) -> str: ...
    @property
    def spec(self) -> Spec: ...

    @property
    def shape(self) -> Shape: ...
    @property
    def fingerprint(self) -> str: ...
    @property
    def initial(self) -> str: ...
    @property
    def terminal_states(self) -> frozenset[str]: ...
    @property
    def Data(self) -> type: ...
    @property
    def Policy(self) -> type: ...
    @property
    def default_policy(self) -> Any: ...
    @property
    def feed_table(self) -> Mapping[str, Any]: ...
    @property
    def events(self) -> Mapping[str, Any]: ...
    @property
    def binders(self) -> Mapping[str, Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]]: ...
    @property
    def decisions(self) -> Mapping[str, Any]: ...
    @property
    def decision_binders(self) -> Mapping[str, Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]]: ...
    @property
    def data_encoders(self) -> Mapping[str, Callable[[Any], Any]]: ...
    @property
    def data_decoders(self) -> Mapping[str, Callable[[Any], Any]]: ...
    @property
    def state_encoders(self) -> Mapping[str, Mapping[str, Callable[[Any], Any]]]: ...
    @property
    def state_decoders(self) -> Mapping[str, Mapping[str, Callable[[Any], Any]]]: ...

    @property
    def engines(self) -> Engines: ...

    def policy(self, value: Any = None) -> Any: ...
    def engine_for(
        self,
        instance: Any,
        engine: EngineName | None = None,
        machine_class: type[Machine] | None = None,
        machine_options: Mapping[str, Any] | None = None,
    ) -> Any: ...
    def decision_rules(self, decision: str, state: str, policy: Any) -> tuple[Any, ...]: ...
    def check_snapshot(self, snap: Mapping[str, Any]) -> Mapping[str, Any]: ...


class _NotBound:
    """``cls.compiled`` of a class no machine was compiled for: a clear error instead of an AttributeError."""

    def __get__(self, obj: object, owner: type) -> Tables:
        raise TypeError(
            f"{owner.__name__} is not bound to a machine: compile one (compile_file, load_machine) or declare it "
            "with class X(DeclaredMachine, machine=..., registry=...)"
        )


class _ClassEngine:
    """A class's ``_engine`` until first read: then the engine its instances run on when they name none.

    The process's default engine for the class (its shared ``transitions``
    machine, or the interpreter) is resolved on the first feed, and stored on
    the class itself in place of this object: after that, reading
    ``self._engine`` is a plain class attribute, and an instance that names
    no engine costs no write and no ``__dict__`` for it (the interpreter's
    create floor, 5x the hand-written gate, has little to spare).
    Every class gets its own (a subclass's
    ``on_enter_<state>`` methods make its machine differ from its parent's).
    """

    def __get__(self, obj: object, owner: type[MachineInstance]) -> Any:
        engine = owner.compiled.engines.for_class(owner)
        owner._engine = engine
        return engine


class MachineInstance(_tracing.Traced):
    """Base of every compiled machine's instance class: the one API all machines share.

    ``state`` is the state's name, ``state_data`` the typed values it carries
    (``{"turn": 2}`` in ``AwaitingModel``), ``data`` the machine's fields.
    Every feed and every decision takes an optional ``policy=``: ``None`` uses
    the defaults written in the YAML, a policy object or a mapping overrides
    them for that one call.  ``can(feed)`` and ``allowed_feeds()`` ask the
    table what the current state accepts.

    A machine with typed Python methods is declared on
    :class:`~loopfsm.core.declared.DeclaredMachine`, a subclass of this one.
    Diagrams of an instance come from :func:`loopfsm.rendering.render_instance`.
    """

    # ``__dict__`` is made only for an instance that names its engine, or whose machine of its own binds
    # ``transitions``' model attributes on it (``is__state_Open``, ``GraphMachine``'s ``get_graph``).
    __slots__ = ("_state", "state_data", "data", "__dict__")
    compiled: ClassVar[Tables] = _NotBound()  # type: ignore[assignment]
    policy_class_name: ClassVar[str | None] = None
    #: The engine of an instance that names none: each class's own, resolved on its first use
    #: (:class:`_ClassEngine`); an instance that names one keeps it in its ``__dict__``.
    _engine: Any

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls._engine = _ClassEngine()

    def __init__(
        self,
        *,
        engine: EngineName | None = None,
        machine_class: type[Machine] | None = None,
        machine_options: Mapping[str, Any] | None = None,
    ) -> None:
        """A new instance in the initial state, with the YAML's data defaults.

        ``engine`` is ``"transitions"`` or ``"interpreter"`` (default: the
        process's, see :mod:`loopfsm.core.engines`).  ``machine_class`` (a
        ``transitions`` extension such as ``LockedMachine`` or ``GraphMachine``)
        and ``machine_options`` (its constructor's keywords, such as
        ``after_state_change``) give the instance a ``transitions`` machine of
        its own, with the instance registered as its model.
        """
        c = self.compiled
        self._state: str = c.initial
        self.state_data: dict[str, Any] = {}
        self.data: Any = c.Data()
        if engine is not None or machine_class is not None or machine_options:
            self._engine = c.engine_for(self, engine, machine_class, machine_options)

    @property
    def state(self) -> str:
        """The current state's name."""
        return self._state

    @property
    def engine(self) -> EngineName:
        """The engine this instance runs its feeds on: ``"transitions"`` or ``"interpreter"``."""
        name: EngineName = self._engine.name
        return name

    @property
    def machine(self) -> Machine:
        """The ``transitions.Machine`` this instance's feeds run on.

        Shared by every instance of the class that has no machine of its own
        (as one ``transitions`` machine serves many models): a callback added
        to it (``machine.on_enter_Open(alert)``) fires for all of them.  An
        instance made with ``machine_class=`` or ``machine_options=`` has its
        own, with this instance as its model.  An instance on the interpreter
        has none and raises :class:`~loopfsm.core.errors.ConfigError`.
        """
        machine: Machine = self._engine.machine
        return machine

    # -- feeding ------------------------------------------------------------
    def feed(self, event: str, *args: Any, policy: PolicyArg = None, **kwargs: Any) -> Any:
        """Deliver feed ``event``; returns the reply an action set, if any.

        Arguments are checked against the table before any guard runs, so a bad
        call changes nothing.
        """
        # The body of :meth:`_run`, written out: one Python frame less is a tenth of an interpreter feed
        # (turnstile coin/push alternating, one process, best of 15 rounds: 891 ns through _run, 799 ns
        # inline), which the interpreter's floor (<= 10x the hand-written gate, benchmarks/bench.py) needs.
        c = self.compiled
        try:
            ev, bind = c.feed_table[event]
        except KeyError:
            raise UnknownFeed(f"{c.name}: no feed named '{event}' (feeds: {', '.join(c.events)})") from None
        bound: Mapping[str, Any]
        if bind is not None:
            bound = bind(args, kwargs)
        elif args or kwargs:  # a feed that declares no arguments got some: its binder explains
            bound = c.binders[event](args, kwargs)
        else:
            bound = _NO_ARGS
        if policy is None:
            policy = c.default_policy
        elif type(policy) is not c.Policy:
            policy = c.policy(policy)
        if _tracing.ACTIVE:
            return self._engine.traced(ev, self, bound, policy).reply
        return self._engine.run(ev, self, bound, policy).reply

    def trigger(self, event: str, *args: Any, policy: PolicyArg = None, **kwargs: Any) -> bool:
        """Feed ``event`` as ``transitions``' ``model.trigger`` does: True when a branch was taken.

        False when the state ignores the feed, or stays because no guard held;
        errors are :meth:`feed`'s, and a feed that raises changes nothing.
        """
        taken: bool = self._run(event, args, kwargs, policy).result
        return taken

    def _run(self, event: str, args: tuple[Any, ...], kwargs: dict[str, Any], policy: PolicyArg) -> Any:
        """Bind the arguments and the policy, then run the feed on this instance's engine; its ``FeedData``.

        :meth:`feed` holds the same lines (see there why); a test feeds both ways and compares.
        """
        c = self.compiled
        try:
            ev, bind = c.feed_table[event]
        except KeyError:
            raise UnknownFeed(f"{c.name}: no feed named '{event}' (feeds: {', '.join(c.events)})") from None
        bound: Mapping[str, Any]
        if bind is not None:
            bound = bind(args, kwargs)
        elif args or kwargs:  # a feed that declares no arguments got some: its binder explains
            bound = c.binders[event](args, kwargs)
        else:
            bound = _NO_ARGS
        if policy is None:
            policy = c.default_policy
        elif type(policy) is not c.Policy:
            policy = c.policy(policy)
        if _tracing.ACTIVE:
            return self._engine.traced(ev, self, bound, policy)
        return self._engine.run(ev, self, bound, policy)

    def may_trigger(self, event: str, *args: Any, policy: PolicyArg = None, **kwargs: Any) -> bool:
        """``transitions``' name for :meth:`can`."""
        return self.can(event, *args, policy=policy, **kwargs)

    def can(self, event: str, *args: Any, policy: PolicyArg = None, **kwargs: Any) -> bool:
        """Would feed ``event`` be accepted now?  Answered from the table; nothing changes.

        Without arguments: does the current state have a branch for it.  With
        the feed's arguments: also are they well typed, and does a branch's
        guard hold (or does the table say stay when none does).  Actions are not
        run, so a check an action makes is not part of the answer.
        """
        c = self.compiled
        try:
            ev = c.events[event]
        except KeyError:
            raise UnknownFeed(f"{c.name}: no feed named '{event}' (feeds: {', '.join(c.events)})") from None
        if not args and not kwargs and policy is None:
            return self._state in ev.branches
        try:
            bound = c.binders[event](args, kwargs)
        except FeedArgumentError:
            return False
        accepted: bool = ev.would_accept(self, bound, c.policy(policy))
        return accepted

    def allowed_feeds(self) -> tuple[str, ...]:
        """The feeds the table accepts in the current state, in the YAML's order."""
        state = self._state
        return tuple(name for name, ev in self.compiled.events.items() if state in ev.branches)

    def decide(self, decision: str, *, policy: PolicyArg = None, **args: Any) -> Any:
        """Answer a decision chain (``next_step``, ``admit(request=...)``) without changing anything.

        Arguments are bound and type-checked against the decision's ``args``
        exactly like a feed's, before any rule runs.
        """
        return self.explain(decision, policy=policy, **args)[1]

    def explain(self, decision: str, *, policy: PolicyArg = None, **args: Any) -> tuple[str, Any]:
        """The name of the rule that answered, and its answer; for traces and debugging."""
        c = self.compiled
        if decision not in c.decisions:
            raise UnknownFeed(
                f"{c.name}: no decision named '{decision}' (decisions: {', '.join(c.decisions) or 'none'})"
            )
        return self._answer(decision, c.policy(policy), c.decision_binders[decision]((), args))

    def _answer(self, decision: str, policy: Any, args: dict[str, Any], traced: bool = True) -> tuple[str, Any]:
        """:meth:`explain` of arguments its binder bound and a policy object (``loopfsm verify`` asks the same
        bound question of thousands of configurations, untraced: it reads the rule from the answer)."""
        c = self.compiled
        q = QueryData(self, policy, args)
        for rule in c.decision_rules(decision, self._state, policy):
            if all_hold(rule.guards, self, q):
                answer = rule.result(self, q)
                if traced and _tracing.ACTIVE:
                    _tracing.decision_done(self, decision, rule.name, q)
                return rule.name, answer
        raise DecisionError(f"{c.name}: decision '{decision}' has no answer in state '{self._state}'")

    def is_terminal(self) -> bool:
        """Terminal is forever: no feed leaves a terminal state."""
        return self._state in self.compiled.terminal_states

    # -- snapshots --------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`restore` turns it back into an identical instance."""
        c = self.compiled
        return {
            "format": SNAPSHOT_FORMAT,
            "machine": c.name,
            "version": c.spec.version,
            "fingerprint": c.fingerprint,
            "shape": c.shape.to_json(),
            **self._encoded(),
        }

    def _encoded(self) -> dict[str, Any]:
        """The snapshot's ``state``, ``state_data`` and ``data``, encoded: what ``loopfsm verify`` fingerprints
        (without the header, which it would only throw away)."""
        c = self.compiled
        data = self.data
        return {
            "state": self._state,
            "state_data": {k: c.state_encoders[self._state][k](v) for k, v in self.state_data.items()},
            "data": {name: enc(getattr(data, name)) for name, enc in c.data_encoders.items()},
        }

    @classmethod
    def restore(
        cls,
        snap: Mapping[str, Any],
        *,
        engine: EngineName | None = None,
        machine_class: type[Machine] | None = None,
        machine_options: Mapping[str, Any] | None = None,
    ) -> Any:
        """Rebuild an instance from :meth:`snapshot`, or raise :class:`SnapshotError` and build nothing.

        The snapshot does not record an engine: ``engine``, ``machine_class``
        and ``machine_options`` are those of the constructor, and a snapshot
        taken on one engine restores on the other.
        """
        c = cls.compiled
        snap = c.check_snapshot(snap)  # the values to decode: migrated and defaulted when the shape was older
        try:
            data: Any = object.__new__(c.Data)
            for name, dec in c.data_decoders.items():
                setattr(data, name, dec(snap["data"][name]))
            decoders = c.state_decoders[snap["state"]]
            state_data = {k: decoders[k](v) for k, v in snap["state_data"].items()}
        except SnapshotError:
            raise
        except Exception as err:
            raise SnapshotError(f"{c.name}: snapshot field could not be decoded: {err}") from err
        inst = cls.__new__(cls)
        state = snap["state"]
        inst._state = sys.intern(state) if type(state) is str else state  # as the compiled tables' names are
        inst.state_data = state_data
        inst.data = data
        if engine is not None or machine_class is not None or machine_options:
            inst._engine = c.engine_for(inst, engine, machine_class, machine_options)
        return inst

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickle as a snapshot: unpickling restores (and so validates) it, on the engine it was made with when
        it named one (else the default).

        A machine of its own is code (callbacks, an extension), not data: it is not pickled, and the copy runs
        on its class's shared machine.
        """
        named = self.__dict__.get("_engine")
        return (_unpickled, (type(self), self.snapshot(), None if named is None else named.name))

    def __repr__(self) -> str:
        sd = ", ".join(f"{k}={v!r}" for k, v in self.state_data.items())
        return f"<{type(self).__name__} {self._state}{'(' + sd + ')' if sd else ''}>"


def _unpickled(cls: type[MachineInstance], snap: Mapping[str, Any], engine: EngineName | None) -> Any:
    """An instance pickled by :meth:`MachineInstance.__reduce__`, restored."""
    return cls.restore(snap, engine=engine)
