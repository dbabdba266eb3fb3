"""Invariants of a machine file compiled into callables, and the guards every machine may use in them.

An invariant is written with the guard vocabulary of its machine's registry
(parameters, ``{policy: name}`` values, ``negate``, ``any:``); a few generic
guards are built in here, so common properties ("the state did not change",
"this list holds at most N items") need no Python.  Guards are called
``fn(machine, ctx)`` as everywhere: for an invariant, ``ctx`` is an
:class:`InvariantContext`: the feed's arguments (empty outside a step), the
policy, and for a step's ``then`` the configuration before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .binding import Bound, all_hold, bind_guard, guard_of
from .registry import DataField, Registry, StateName
from .spec import Invariant, Ref, Spec

#: Guards every machine's invariants may name, unless its registry has a guard of the same name (which wins).
BUILTINS = Registry("invariants")

#: Built-in guards that compare with the configuration before a feed: meaningful in a step's ``then`` only.
STEP_ONLY = frozenset({"state_unchanged", "state_changed", "state_data_unchanged", "field_unchanged", "field_changed"})


@BUILTINS.guard
def state_unchanged(m: Any, ctx: Any) -> bool:
    """The feed left the machine in the state it was in (its data may have changed)."""
    return bool(m.state == ctx.before.state)


@BUILTINS.guard
def state_changed(m: Any, ctx: Any) -> bool:
    """The feed moved the machine to another state."""
    return bool(m.state != ctx.before.state)


@BUILTINS.guard
def state_data_unchanged(m: Any, ctx: Any) -> bool:
    """The feed left the machine in the state it was in, carrying the same state data."""
    return bool(m.state == ctx.before.state and m.state_data == ctx.before.state_data)


@BUILTINS.guard
def state_in(m: Any, ctx: Any, *, states: list[StateName]) -> bool:
    """The machine is in one of ``states`` (negate it to say "not in")."""
    return m.state in states


@BUILTINS.guard
def field_unchanged(m: Any, ctx: Any, *, field: DataField) -> bool:
    """The data field ``field`` has the value it had before the feed."""
    return bool(getattr(m.data, field) == getattr(ctx.before.data, field))


@BUILTINS.guard
def field_changed(m: Any, ctx: Any, *, field: DataField) -> bool:
    """The data field ``field`` has another value than before the feed."""
    return bool(getattr(m.data, field) != getattr(ctx.before.data, field))


@BUILTINS.guard
def field_did_not_decrease(m: Any, ctx: Any, *, field: DataField) -> bool:
    """The (number) data field ``field`` is at least what it was before the feed."""
    return bool(getattr(m.data, field) >= getattr(ctx.before.data, field))


@BUILTINS.guard
def field_at_most(m: Any, ctx: Any, *, field: DataField, limit: int) -> bool:
    """The (number) data field ``field`` is at most ``limit``."""
    return bool(getattr(m.data, field) <= limit)


@BUILTINS.guard
def field_at_least(m: Any, ctx: Any, *, field: DataField, limit: int) -> bool:
    """The (number) data field ``field`` is at least ``limit``."""
    return bool(getattr(m.data, field) >= limit)


@BUILTINS.guard
def length_at_most(m: Any, ctx: Any, *, field: DataField, limit: int) -> bool:
    """The (list) data field ``field`` holds at most ``limit`` items."""
    return len(getattr(m.data, field)) <= limit


class InvariantContext:
    """What an invariant's guards see besides the machine: like a feed's ``ctx``, plus the configuration before."""

    __slots__ = ("args", "policy", "before", "feed")

    def __init__(self, policy: Any, args: dict[str, Any] | None = None, before: Any = None, feed: str | None = None):
        self.args: dict[str, Any] = args if args is not None else {}
        self.policy = policy
        self.before = before
        self.feed = feed


def builtin_or_registered(registry: Registry, name: str) -> Registry | None:
    """Where a guard an invariant names is found: the machine's registry first, then the built-ins."""
    if name in registry.entries["guard"]:
        return registry
    if name in BUILTINS.entries["guard"]:
        return BUILTINS
    return None


def _guard(registry: Registry, ref: Ref, policy: Any) -> Bound:
    if ref.options:
        options = tuple(tuple(_guard(registry, g, policy) for g in opt) for opt in ref.options)

        def any_of(m: Any, ctx: Any) -> bool:
            return any(all_hold(opt, m, ctx) for opt in options)

        return any_of
    where = builtin_or_registered(registry, ref.name) or registry  # a checked spec: registry.get explains otherwise
    bound = bind_guard(guard_of(where, ref), policy)
    assert not isinstance(bound, bool)  # no probe given: always a callable
    return bound


def _all(guards: tuple[Bound, ...]) -> Bound:
    def holds(m: Any, ctx: Any) -> bool:
        return all_hold(guards, m, ctx)

    return holds


@dataclass(frozen=True)
class CompiledInvariant:
    """One invariant bound for one policy: ``applies(before_state, feed)`` and the guards to ask."""

    spec: Invariant
    holds: Bound
    when: Bound

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def kind(self) -> str:
        return self.spec.kind

    def in_scope(self, state: str) -> bool:
        return self.spec.states is None or state in self.spec.states

    def watches(self, feed: str) -> bool:
        return self.spec.feeds is None or feed in self.spec.feeds


def compile_invariants(spec: Spec, registry: Registry, policy: Any) -> tuple[CompiledInvariant, ...]:
    """Every invariant of a checked ``spec``, its guards bound for ``policy``, in file order."""
    out = []
    for inv in spec.invariants.values():
        holds = _all(tuple(_guard(registry, r, policy) for r in inv.holds))
        when = _all(tuple(_guard(registry, r, policy) for r in inv.when))
        out.append(CompiledInvariant(inv, holds, when))
    return tuple(out)
