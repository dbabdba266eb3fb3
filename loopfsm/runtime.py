"""Instances: plain values holding a state name, that state's data, and the machine's data fields.

An instance owns nothing but data.  The rules live in the compiled machine its
class points to, so creating or restoring one costs a few attribute writes,
and a snapshot is just those values as JSON.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any, ClassVar
from collections.abc import Callable, Mapping
from types import MappingProxyType

from . import tracing as _tracing
from .errors import DecisionError, FeedArgumentError, SnapshotError, UnknownFeed

if TYPE_CHECKING:  # pragma: no cover
    from .compiler import CompiledMachine
    from .registry import Registry

SNAPSHOT_FORMAT = 1

# The arguments of every feed that declares none: read-only and shared, not a new dict per feed.
_NO_ARGS: Mapping[str, Any] = MappingProxyType({})

#: What every feed and decision accepts as ``policy=``: ``None`` (the YAML's
#: defaults), the machine's policy class, or a mapping of policy names to values.
PolicyArg = Any


class Binder:
    """What :meth:`MachineInstance.feed` binds a feed's arguments with.

    ``general`` binds any call (positional, keywords, defaults) and explains a
    wrong one.  The call typed methods make, every argument in order, is bound
    by ``quick`` instead: when the arguments' exact types are one of
    ``signatures`` the types are right, and ``value_checks`` (position, check)
    hold enum and bound checks.  ``signatures`` (and ``quick``) are None when
    exact types cannot settle it.
    """

    __slots__ = ("general", "names", "signatures", "value_checks", "quick")

    def __init__(
        self,
        general: Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]],
        names: tuple[str, ...],
        signatures: frozenset[tuple[type, ...]] | None,
        value_checks: tuple[tuple[int, Callable[[Any], bool]], ...],
    ):
        self.general = general
        self.names = names
        self.signatures = signatures
        self.value_checks = value_checks
        #: ``quick(args)``: the bound arguments when ``args`` has one of ``signatures``, else None.
        self.quick = None if signatures is None else _quick_binder(names, signatures)


def _quick_binder(
    names: tuple[str, ...], signatures: frozenset[tuple[type, ...]]
) -> Callable[[tuple[Any, ...]], dict[str, Any] | None]:
    """``quick(args)`` for a typed method's call (every argument, in order): the arguments by name
    when their exact types are one of ``signatures``, else None.

    Up to six arguments the types and the dict are built by one tuple and one dict display of
    the unpacked values, which costs a fraction of ``dict(zip(names, args))`` and
    ``tuple(map(type, args))``; beyond that, those two.
    """
    sigs = signatures
    if len(names) == 1:
        (k0,) = names

        def quick(args: tuple[Any, ...]) -> dict[str, Any] | None:
            if len(args) == 1:
                (a0,) = args
                if (type(a0),) in sigs:
                    return {k0: a0}
            return None

    elif len(names) == 2:
        k0, k1 = names

        def quick(args: tuple[Any, ...]) -> dict[str, Any] | None:
            if len(args) == 2:
                a0, a1 = args
                if (type(a0), type(a1)) in sigs:
                    return {k0: a0, k1: a1}
            return None

    elif len(names) == 3:
        k0, k1, k2 = names

        def quick(args: tuple[Any, ...]) -> dict[str, Any] | None:
            if len(args) == 3:
                a0, a1, a2 = args
                if (type(a0), type(a1), type(a2)) in sigs:
                    return {k0: a0, k1: a1, k2: a2}
            return None

    elif len(names) == 4:
        k0, k1, k2, k3 = names

        def quick(args: tuple[Any, ...]) -> dict[str, Any] | None:
            if len(args) == 4:
                a0, a1, a2, a3 = args
                if (type(a0), type(a1), type(a2), type(a3)) in sigs:
                    return {k0: a0, k1: a1, k2: a2, k3: a3}
            return None

    elif len(names) == 5:
        k0, k1, k2, k3, k4 = names

        def quick(args: tuple[Any, ...]) -> dict[str, Any] | None:
            if len(args) == 5:
                a0, a1, a2, a3, a4 = args
                if (type(a0), type(a1), type(a2), type(a3), type(a4)) in sigs:
                    return {k0: a0, k1: a1, k2: a2, k3: a3, k4: a4}
            return None

    elif len(names) == 6:
        k0, k1, k2, k3, k4, k5 = names

        def quick(args: tuple[Any, ...]) -> dict[str, Any] | None:
            if len(args) == 6:
                a0, a1, a2, a3, a4, a5 = args
                if (type(a0), type(a1), type(a2), type(a3), type(a4), type(a5)) in sigs:
                    return {k0: a0, k1: a1, k2: a2, k3: a3, k4: a4, k5: a5}
            return None

    else:

        def quick(args: tuple[Any, ...]) -> dict[str, Any] | None:
            if tuple(map(type, args)) in sigs:
                return dict(zip(names, args))  # noqa: B905 - lengths equal: a signature matched
            return None

    return quick


class QueryData:
    """What a decision rule's guards and result see: the instance, the policy and the question's arguments."""

    __slots__ = ("model", "policy", "args")

    def __init__(self, model: Any, policy: Any, args: dict[str, Any] | None = None):
        self.model = model
        self.policy = policy
        self.args: dict[str, Any] = args if args is not None else {}


_compile_lock = threading.Lock()


class _CompiledOnFirstUse:
    """``cls.compiled`` of a class declared with ``machine=...``: compiled on first use, then a plain attribute.

    Importing a module that declares a machine class (and its registry) must
    not read or compile the machine file: a registry is looked up while that
    very file is being checked, and an edit to it must be reported as itself.
    """

    def __get__(self, obj: object, owner: type[MachineInstance]) -> CompiledMachine:
        with _compile_lock:
            found = owner.__dict__.get("compiled")
            if isinstance(found, _CompiledOnFirstUse) or found is None:
                source = owner.__dict__.get("_machine_source")
                if source is None:
                    raise TypeError(
                        f"{owner.__name__} is not bound to a machine: declare it with "
                        "class X(MachineInstance, machine=..., registry=...)"
                    )
                from .compiler import compile_file
                from .resources import machine_path

                machine, registry = source
                compile_file(machine_path(machine), registry, bind=owner)
            return owner.__dict__["compiled"]  # type: ignore[no-any-return]


class MachineInstance:
    """Base of every compiled machine's instance class: the one API all machines share.

    ``state`` is the state's name, ``state_data`` the typed values it carries
    (``{"turn": 2}`` in ``AwaitingModel``), ``data`` the machine's fields.
    Every feed and every decision takes an optional ``policy=``: ``None`` uses
    the defaults written in the YAML, a policy object or a mapping overrides
    them for that one call.  ``can(feed)`` and ``allowed_feeds()`` ask the
    table what the current state accepts.

    A machine that ships with typed Python methods is declared as
    ``class Turnstile(MachineInstance, machine="turnstile", registry=REGISTRY)``;
    it is compiled from its YAML on first use, not on import.
    """

    __slots__ = ("_state", "state_data", "data", "_sinks")
    compiled: ClassVar[CompiledMachine] = _CompiledOnFirstUse()  # type: ignore[assignment]
    _sinks: tuple[Any, ...]  # trace sinks of this instance only (tracing.attach); never snapshotted
    policy_class_name: ClassVar[str | None] = None

    def __init_subclass__(
        cls, machine: str | None = None, registry: Registry | None = None, policy: str | None = None, **kw: Any
    ) -> None:
        super().__init_subclass__(**kw)
        if machine is not None:
            if registry is None:
                raise TypeError(f"{cls.__name__}: machine={machine!r} needs registry=")
            cls._machine_source = (machine, registry)  # type: ignore[attr-defined]
            cls.compiled = _CompiledOnFirstUse()  # type: ignore[assignment]
            registry.instance_class = cls
        if policy is not None:
            cls.policy_class_name = policy

    def __init__(self) -> None:
        c = self.compiled
        self._state: str = c.initial
        self.state_data: dict[str, Any] = {}
        self.data: Any = c.Data()

    @property
    def state(self) -> str:
        """The current state's name."""
        return self._state

    # -- feeding ------------------------------------------------------------
    def feed(self, event: str, *args: Any, policy: PolicyArg = None, **kwargs: Any) -> Any:
        """Deliver feed ``event``; returns the reply an action set, if any.

        Arguments are checked against the table before any guard runs, so a bad
        call changes nothing.
        """
        c = self.compiled
        try:
            ev, bind = c.feed_table[event]
        except KeyError:
            raise UnknownFeed(f"{c.name}: no feed named '{event}' (feeds: {', '.join(c.events)})") from None
        bound: Mapping[str, Any] | None
        if bind is not None:
            quick = bind.quick
            if kwargs or quick is None or (bound := quick(args)) is None:
                bound = bind.general(args, kwargs)
            elif bind.value_checks:
                for i, check in bind.value_checks:
                    if not check(args[i]):
                        bound = bind.general(args, kwargs)  # explains which argument is wrong
                        break
        elif args or kwargs:  # a feed that declares no arguments got some: its binder explains
            bound = c.binders[event](args, kwargs)
        else:
            bound = _NO_ARGS
        if policy is None:
            policy = ev.default_policy  # the event's copy: a plain attribute, quicker to read than the machine's
            if policy is None:
                policy = ev.default_policy = c.default_policy
        elif type(policy) is not c.Policy:
            policy = c.policy(policy)
        done = ev.trigger(self, bound, policy)
        if _tracing.ACTIVE:
            _tracing.feed_done(self, event, done)
        return done.reply

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
            return self._state in ev.transitions
        try:
            bound = c.binders[event](args, kwargs)
        except FeedArgumentError:
            return False
        accepted: bool = ev.would_accept(self, bound, c.policy(policy))
        return accepted

    def allowed_feeds(self) -> tuple[str, ...]:
        """The feeds the table accepts in the current state, in the YAML's order."""
        state = self._state
        return tuple(name for name, ev in self.compiled.events.items() if state in ev.transitions)

    def decide(self, decision: str, *, policy: PolicyArg = None, **args: Any) -> Any:
        """Answer a decision chain (``next_step``, ``admit(request=...)``) without changing anything.

        Arguments are bound and type-checked against the decision's ``args``
        exactly like a feed's, before any rule runs.
        """
        return self.explain(decision, policy=policy, **args)[1]

    def explain(self, decision: str, *, policy: PolicyArg = None, **args: Any) -> tuple[str, Any]:
        """The name of the rule that answered, and its answer; for traces and debugging."""
        c = self.compiled
        try:
            rules = c.decisions[decision][self._state]
        except KeyError:
            raise UnknownFeed(
                f"{c.name}: no decision named '{decision}' (decisions: {', '.join(c.decisions) or 'none'})"
            ) from None
        q = QueryData(self, c.policy(policy), c.decision_binders[decision]((), args))
        for name, guards, result in rules:
            for g in guards:
                if not g(q):
                    break
            else:
                answer = result(q)
                if _tracing.ACTIVE:
                    _tracing.decision_done(self, decision, name, q)
                return name, answer
        raise DecisionError(f"{c.name}: decision '{decision}' has no answer in state '{self._state}'")

    def is_terminal(self) -> bool:
        """Terminal is forever: no feed leaves a terminal state."""
        return self._state in self.compiled.terminal_states

    # -- snapshots --------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`restore` turns it back into an identical instance."""
        c = self.compiled
        data = self.data
        return {
            "format": SNAPSHOT_FORMAT,
            "machine": c.name,
            "fingerprint": c.fingerprint,
            "state": self._state,
            "state_data": {k: c.state_encoders[self._state][k](v) for k, v in self.state_data.items()},
            "data": {name: enc(getattr(data, name)) for name, enc in c.data_encoders.items()},
        }

    @classmethod
    def restore(cls, snap: Mapping[str, Any]) -> Any:
        """Rebuild an instance from :meth:`snapshot`, or raise :class:`SnapshotError` and build nothing."""
        c = cls.compiled
        c.check_snapshot(snap)
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
        return inst

    def diagram(self, format: str = "svg", *, detailed: bool = False) -> str:
        """This machine's state diagram with the current state highlighted (svg, dot or mermaid)."""
        from .render import render_instance

        return render_instance(self, format, detailed=detailed)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickle as a snapshot: unpickling restores (and so validates) it."""
        return (type(self).restore, (self.snapshot(),))

    def __repr__(self) -> str:
        sd = ", ".join(f"{k}={v!r}" for k, v in self.state_data.items())
        return f"<{type(self).__name__} {self._state}{'(' + sd + ')' if sd else ''}>"
