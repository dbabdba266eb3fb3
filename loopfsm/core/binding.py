"""How a guard, action or result named in a machine file becomes a call ``fn(machine, ctx)``.

A YAML reference names a registered function and gives it parameters, some
fixed (``by: 1``), some read from the policy (``fare: {policy: fare}``).  The
compiler turns each reference into a :class:`Call` once (an ``any:`` guard into
an :class:`AnyOf` of them); :func:`bind` and :func:`bind_guard` turn those into
callables for one policy object.  This is the only place parameters are bound
and ``negate``, ``any:`` and a branch's ``when:`` are implemented: both engines of
:mod:`loopfsm.core.engines`, decision chains and trace attributes all call what
these two functions return.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Generic, NamedTuple, TypeVar

from .errors import RegistryError
from .fastparams import with_params
from .registry import Registry
from .spec import Condition, Ref, policy_ref

#: What :func:`bind` returns: called as ``fn(machine, ctx)``.
Bound = Callable[[Any, Any], Any]


class PolicyParam(NamedTuple):
    """A parameter whose value is read from the policy: ``param: {policy: field}`` in YAML."""

    param: str
    field: str


class Call(NamedTuple):
    """A registered function and the parameters one YAML reference gives it.

    ``reads`` is set for a guard registered with ``reads=``: the feed arguments
    that alone decide it (see :func:`bind_guard`).
    """

    name: str
    fn: Callable[..., Any]
    fixed: Mapping[str, Any]
    from_policy: tuple[PolicyParam, ...] = ()
    negate: bool = False
    reads: frozenset[str] | None = None


class AnyOf(NamedTuple):
    """An ``any:`` guard: it holds when every guard of one option holds, options tried in order."""

    options: tuple[tuple[Guard, ...], ...]


Guard = Call | AnyOf


def call_of(registry: Registry, kind: str, ref: Ref) -> Call:
    """The :class:`Call` for a guard, action or result reference (not an ``any:``) of a checked spec."""
    entry = registry.get(kind, ref.name)
    fixed = {k: v for k, v in ref.params.items() if policy_ref(v) is None}
    from_policy = tuple(PolicyParam(k, str(policy_ref(v))) for k, v in ref.params.items() if k not in fixed)
    return Call(ref.name, entry.fn, fixed, from_policy, ref.negate, entry.reads)


def guard_of(registry: Registry, ref: Ref) -> Guard:
    """The :class:`Call` or :class:`AnyOf` for a guard reference of a checked spec."""
    if ref.options:
        return AnyOf(tuple(tuple(guard_of(registry, g) for g in option) for option in ref.options))
    return call_of(registry, "guard", ref)


def condition_of(condition: Condition) -> Call:
    """A branch's ``when:`` entry as a guard that reads one feed argument (no registry involved).

    It is registered-guard shaped on purpose: with ``reads`` naming its
    argument, every path that runs branches (feeds, ``can``, the narrowing of
    :class:`~loopfsm.core.interpreter.Feed` per enum value, the ``transitions`` engine)
    treats it exactly as it treats the guards after it.
    """
    arg, values = condition.arg, condition.values

    if len(values) == 1:
        (only,) = values

        def equals(machine: Any, ctx: Any) -> bool:
            return bool(ctx.args[arg] == only)

        fn: Callable[..., Any] = equals
    else:

        def one_of(machine: Any, ctx: Any) -> bool:
            return ctx.args[arg] in values

        fn = one_of
    return Call(condition.label(), fn, {}, (), False, frozenset((arg,)))


def bind(call: Call, policy: Any) -> Bound:
    """``call.fn`` as ``fn(machine, ctx)`` with its parameters bound for ``policy`` (negation applied).

    A function without parameters is returned as it is; parameters are bound
    by :func:`loopfsm.core.fastparams.with_params` (see there why not simply
    :func:`functools.partial`), so calling the result costs what calling the
    registered function costs.
    """
    kw = dict(call.fixed)
    for p in call.from_policy:
        kw[p.param] = getattr(policy, p.field)
    fn: Bound = with_params(call.fn, kw) if kw else call.fn
    if call.negate:
        return _negated(fn)
    return fn


def _negated(fn: Bound) -> Bound:
    def negated(machine: Any, ctx: Any) -> bool:
        return not fn(machine, ctx)

    return negated


def bind_guard(guard: Guard, policy: Any, probe: Any = None) -> Bound | bool:
    """``guard`` bound for ``policy``, or True / False when ``probe`` alone decides it.

    ``probe`` is a context carrying only some feed arguments (``probe.args``);
    a guard registered with ``reads=`` naming only arguments the probe has is
    asked once, now, and its answer returned instead of a callable.  Guards
    are pure, so an ``any:`` with one option that holds outright holds.
    """
    if isinstance(guard, AnyOf):
        left: list[tuple[Bound, ...]] = []
        for option in guard.options:
            rest: list[Bound] = []
            for g in option:
                got = bind_guard(g, policy, probe)
                if got is False:
                    break
                if got is not True:
                    rest.append(got)
            else:
                if not rest:
                    return True
                left.append(tuple(rest))
        return _any_of(tuple(left)) if left else False
    bound = bind(guard, policy)
    reads = guard.reads
    if probe is not None and reads is not None and reads <= probe.args.keys():
        try:
            return bool(bound(None, probe))
        except Exception as err:  # it read more than it declared
            raise RegistryError(
                f"guard '{guard.name}' is registered with reads={sorted(reads)} but needs more than those "
                f"arguments to answer: {type(err).__name__}: {err}"
            ) from err
    return bound


def _any_of(options: tuple[tuple[Bound, ...], ...]) -> Bound:
    """One guard over ``any:`` options: the first option whose guards all hold wins."""
    if len(options) == 1 and len(options[0]) == 1:
        return options[0][0]

    def any_of(machine: Any, ctx: Any) -> bool:
        for option in options:
            if all_hold(option, machine, ctx):
                return True
        return False

    return any_of


def all_hold(guards: tuple[Bound, ...], machine: Any, ctx: Any) -> bool:
    """Whether every bound guard holds, asked in order, stopping at the first that does not."""
    for guard in guards:
        if not guard(machine, ctx):
            return False
    return True


_V = TypeVar("_V")


class PerPolicy(Generic[_V]):
    """What was bound for each policy object, made once per object by ``make(policy)``.

    Policies are frozen, so a value bound for one stays right; entries are
    keyed by identity and hold their policy, so a recycled id is never taken
    for another policy.  The last one used is kept apart (most callers use one
    policy), and the table is emptied past 64 entries, so callers building a
    policy per call keep memory bounded.
    """

    __slots__ = ("make", "_table", "_last", "_lock")

    def __init__(self, make: Callable[[Any], _V]):
        self.make = make
        self._table: dict[int, tuple[Any, _V]] = {}
        self._last: tuple[Any, _V] | None = None
        self._lock = threading.Lock()

    def get(self, policy: Any) -> _V:
        last = self._last  # one attribute holds policy and value together: threads never see a mix
        if last is not None and last[0] is policy:
            return last[1]
        with self._lock:
            found = self._table.get(id(policy))
            if found is None or found[0] is not policy:
                if len(self._table) > 64:
                    self._table.clear()
                found = self._table[id(policy)] = (policy, self.make(policy))
            self._last = found
        return found[1]
