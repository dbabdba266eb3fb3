"""loopfsm's interpreter: how a compiled table answers one feed.

A :class:`Feed` holds one event's branches per source state, in the YAML's
order.  Running it looks up the instance's state, tries each branch's guards in
order and takes the first branch whose guards all hold: its actions run, then
the instance moves and its state data is replaced in one step.  A state the
feed has no branch from raises :class:`IllegalFeed` (or is ignored, in a
terminal state the table says ignores it); when every guard failed, the table's
``otherwise`` says stay or raise :class:`NoBranchMatched`.

This is loopfsm's own code, not the ``transitions`` library: instances made
with ``engine="interpreter"`` run feeds here; by default they run on a stock
``transitions.Machine`` built from the same branches (:mod:`loopfsm.core.engines`),
and a differential test drives both with the same feeds.  Guards and actions are bound to their YAML
parameters by :mod:`loopfsm.core.binding`, once per policy object.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from . import tracing as _tracing
from .binding import Bound, Call, Guard, PerPolicy, all_hold, bind, bind_guard
from .errors import ActionError, IllegalFeed, LoopFsmError, NoBranchMatched


class FeedData:
    """What a guard or action sees of one feed (its ``ctx``).

    ``args`` are the feed's arguments by name, ``policy`` the policy object of
    the call, ``model`` the instance, ``event`` the :class:`Feed` (``.name``),
    ``source`` the state the feed started from, ``transition`` the
    :class:`Branch` being tried (``.name``, ``.dest``), ``enter_data`` the data
    of the state being entered (set with :meth:`enter`), ``reply`` what the feed
    answers (a breaker's ``acquire``), and ``result`` whether a branch was taken.
    ``memo`` is scratch for guards and actions of one feed that compute the same
    value; it is unset until one does, so read it with ``getattr(ctx, "memo", None)``.
    ``bound`` is set by the ``transitions`` engine: the feed's guards and
    actions bound for ``policy``, which its conditions and callbacks call
    (see :mod:`loopfsm.core.engines`).
    """

    __slots__ = (
        "event",
        "model",
        "args",
        "policy",
        "source",
        "enter_data",
        "transition",
        "result",
        "reply",
        "memo",
        "bound",
    )
    # No __init__: whoever makes one sets every field but ``memo`` (see :func:`feed_data`); Feed.run sets
    # them itself (measured there).
    event: Any
    model: Any
    args: Mapping[str, Any]
    policy: Any
    source: str
    enter_data: dict[str, Any]
    transition: Branch | None
    result: bool
    reply: Any
    bound: tuple[Callable[[Any, Any], Any], ...]

    def enter(self, **data: Any) -> None:
        """Set data of the state this branch enters (``ctx.enter(turn=3)``)."""
        self.enter_data.update(data)


def feed_data(event: Any, model: Any, args: Mapping[str, Any], policy: Any, source: str) -> FeedData:
    """A new :class:`FeedData` for a feed of ``event`` on ``model`` from state ``source``."""
    ctx = FeedData()
    ctx.event = event
    ctx.model = model
    ctx.args = args
    ctx.policy = policy
    ctx.source = source
    ctx.enter_data = {}
    ctx.transition = None
    ctx.result = False
    ctx.reply = None
    return ctx


class Branch(NamedTuple):
    """One branch of the table: its guards and actions as the YAML names them, and where it goes.

    ``dest`` is None for ``stay: true``; ``data_keys`` are the data fields of
    ``dest``, which the actions must set exactly; a ``refuse:`` branch's only
    action raises :class:`FeedRefused`, and ``refusal`` holds its words.
    """

    name: str
    dest: str | None
    data_keys: frozenset[str]
    guards: tuple[Guard, ...]
    actions: tuple[Call, ...]
    refusal: str | None = None


class Row:
    """A branch with its guards and actions bound for one policy, as :meth:`Feed.run` tries it."""

    __slots__ = ("branch", "guards", "actions", "dest", "data_keys")

    def __init__(self, branch: Branch, guards: tuple[Bound, ...], actions: tuple[Bound, ...]):
        self.branch = branch
        self.guards = guards
        self.actions = actions
        # The state it moves to (interned, as instances' state names are) and that state's data fields.
        self.dest = None if branch.dest is None else sys.intern(branch.dest)
        self.data_keys = branch.data_keys


def state_data_error(
    machine: str, feed: str, dest: str, data_keys: frozenset[str], data: Mapping[str, Any]
) -> ActionError:
    """The error for actions that set other data than the state they enter declares."""
    missing = sorted(data_keys - data.keys())
    extra = sorted(data.keys() - data_keys)
    return ActionError(
        f"{machine}: entering '{dest}' on '{feed}': "
        f"state data {'missing ' + ', '.join(missing) if missing else ''}"
        f"{'; ' if missing and extra else ''}{'undeclared ' + ', '.join(extra) if extra else ''}"
    )


def action_error(machine: str, feed: str, state: str, branch: str, err: Exception) -> ActionError:
    """The error for a registered guard or action that raised something other than a LoopFsmError."""
    return ActionError(
        f"{machine}: feed '{feed}' in state '{state}', branch '{branch}': a registered guard or action raised "
        f"{type(err).__name__}: {str(err)[:200]}"
    )


class Feed:
    """One feed of a compiled machine: its branches per source state, and the table's answer where none apply."""

    def __init__(
        self,
        machine: str,
        name: str,
        branches: dict[str, tuple[Branch, ...]],
        ignored_in: frozenset[str],
        otherwise_raise: frozenset[str],
        enums: Mapping[str, tuple[Any, ...]],
    ):
        self.machine = machine
        self.name = name
        # State names are interned (as are the instance's), so the lookup by state matches by identity.
        self.branches = {sys.intern(s): bs for s, bs in branches.items()}
        self.legal_states = tuple(branches)
        self.ignored_in = ignored_in
        self.otherwise_raise = otherwise_raise
        self.narrow_on, self.narrow_values = self._narrowing(enums)
        self._rows = PerPolicy(self._bind_rows)
        self._last: tuple[Any, dict[str, Any]] = (None, {})  # the policy run last and its rows

    def _narrowing(self, enums: Mapping[str, tuple[Any, ...]]) -> tuple[str | None, tuple[Any, ...]]:
        """The enum argument (of ``enums``: name -> values) that guards registered with ``reads=`` decide alone.

        Each state's branches are then bound once per value of it (per
        policy): a branch such a guard refuses is dropped and a guard that
        holds is left out, so ``record(outcome="success")`` never asks
        ``outcome_in`` at all.
        """
        read: set[str] = set()
        stack: list[Guard] = [g for bs in self.branches.values() for b in bs for g in b.guards]
        while stack:
            g = stack.pop()
            if isinstance(g, Call):
                if g.reads is not None and len(g.reads) == 1:
                    read |= g.reads
            else:
                stack.extend(x for option in g.options for x in option)
        for name, values in enums.items():
            if name in read:
                return name, values
        return None, ()

    def _bind_rows(self, policy: Any) -> dict[str, Any]:
        """Per state, the rows for ``policy``; for a narrowed feed, per state a dict from the argument's value
        to rows."""
        out: dict[str, Any] = {}
        on = self.narrow_on
        for state, branches in self.branches.items():
            if on is None:
                out[state] = self._rows_of(branches, policy, None)
            else:
                out[state] = {
                    v: self._rows_of(branches, policy, feed_data(self, None, {on: v}, policy, state))
                    for v in self.narrow_values
                }
        return out

    @staticmethod
    def _rows_of(branches: tuple[Branch, ...], policy: Any, probe: FeedData | None) -> tuple[Row, ...]:
        rows = []
        for b in branches:
            guards = []
            for g in b.guards:
                got = bind_guard(g, policy, probe)
                if got is False:
                    break
                if got is not True:
                    guards.append(got)
            else:
                rows.append(Row(b, tuple(guards), tuple(bind(a, policy) for a in b.actions)))
                if not guards:
                    break  # always taken: the branches after it are never reached
        return tuple(rows)

    def rows(self, state: str, args: Mapping[str, Any], policy: Any) -> tuple[Row, ...] | None:
        """The rows to try for a feed with ``args`` in ``state``; None when the feed has no branch from it."""
        rows = self._rows.get(policy).get(state)
        if rows is not None and self.narrow_on is not None:
            return rows.get(args.get(self.narrow_on))  # type: ignore[no-any-return]
        return rows

    def run(self, model: Any, args: Mapping[str, Any], policy: Any) -> FeedData:
        """Run the feed on ``model``: the first branch whose guards all hold is taken."""
        state = model._state
        # feed_data() written out: its frame measured 8% of an interpreter feed (742 against 809 ns, turnstile
        # coin/push, best of 15 alternating rounds), which the interpreter's floor needs.
        ctx = FeedData()
        ctx.event = self
        ctx.model = model
        ctx.args = args
        ctx.policy = policy
        ctx.source = state
        ctx.enter_data = {}
        ctx.transition = None
        ctx.result = False
        ctx.reply = None
        last = self._last  # one attribute holds policy and rows together: threads never see a mix
        if last[0] is not policy:
            last = self._last = (policy, self._rows.get(policy))
        rows = last[1].get(state)
        if rows is not None and self.narrow_on is not None:
            rows = rows.get(args.get(self.narrow_on))
        if rows is None:
            if state in self.ignored_in:
                return ctx
            raise IllegalFeed(self.machine, state, self.name, self.legal_states)
        try:
            for row in rows:
                ctx.transition = row.branch
                for guard in row.guards:
                    if not guard(model, ctx):
                        break
                else:
                    try:
                        for action in row.actions:
                            action(model, ctx)
                    except LoopFsmError:
                        if _tracing.ACTIVE:
                            _tracing.action_refused(model, self.name, row.branch)
                        raise
                    dest = row.dest
                    if dest is not None:
                        data = ctx.enter_data
                        data_keys = row.data_keys
                        if (data or data_keys) and data.keys() != data_keys:
                            raise state_data_error(self.machine, self.name, dest, data_keys, data)
                        model._state = dest
                        model.state_data = data
                    ctx.result = True
                    return ctx
        except LoopFsmError:
            raise
        except Exception as err:  # a registered guard or action raised: typed, named, its cause kept
            branch = ctx.transition.name if ctx.transition is not None else "?"
            raise action_error(self.machine, self.name, state, branch, err) from err
        if state in self.otherwise_raise:
            raise NoBranchMatched(self.machine, state, self.name, self.legal_states)
        return ctx

    def would_accept(self, model: Any, args: Mapping[str, Any], policy: Any) -> bool:
        """Whether :meth:`run` would take a branch (or stay) with these arguments now; guards only, they are pure."""
        state = model._state
        rows = self.rows(state, args, policy)
        if rows is None:
            return False
        ctx = feed_data(self, model, args, policy, state)
        for row in rows:
            ctx.transition = row.branch
            if all_hold(row.guards, model, ctx):
                return row.branch.refusal is None
        return state not in self.otherwise_raise

    def __repr__(self) -> str:
        return f"<Feed {self.machine}.{self.name}>"
