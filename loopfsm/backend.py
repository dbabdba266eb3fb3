"""loopfsm's extension of ``transitions``: its own Machine, Event and Transition, and the data a feed carries.

We extend ``transitions`` through the class hooks it documents
(``event_cls``, ``transition_cls``) instead of wrapping it:

* ``FeedData`` is what guards and actions receive (``EventData``'s fields,
  slotted): feed arguments by name, the policy fed in, the data of the state
  being entered, and an optional reply for feeds that answer (a breaker's
  ``acquire``).
* ``LoopEvent`` turns "no transition from this state" into a typed
  ``IllegalFeed`` (or a declared silent ignore in terminal states), and applies
  the table's ``otherwise`` when every guard failed.
* ``LoopTransition`` moves the instance and replaces its state data in one
  step, refusing to enter a state whose declared data an action forgot.
* ``LoopBackendMachine`` refuses string callbacks: ``transitions`` would
  import a dotted path from a string, and nothing from a machine file may ever
  reach an import.

One ``LoopBackendMachine`` is built per compiled spec and shared by every
instance; instances are passed as the model to ``Event.trigger`` and are never
added to the machine with ``add_model``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from functools import partial
from types import FunctionType, MappingProxyType
from typing import Any

from transitions import Event, Machine, Transition

from .errors import ActionError, IllegalFeed, LoopFsmError, NoBranchMatched, RegistryError


class FeedData:
    """What a guard or action sees of one feed: ``transitions``' ``EventData`` fields, and ours.

    It carries the same names as ``EventData`` (``event``, ``machine``,
    ``model``, ``transition``, ``result``, ``state``...) but is slotted and
    sets only what a feed needs, because one is built for every feed.
    """

    __slots__ = ("event", "model", "args", "policy", "enter_data", "transition", "result", "reply", "memo")
    kwargs: Mapping[str, Any] = MappingProxyType({})
    error: Any = None  # transitions' field for an exception in a callback; loopfsm lets those propagate

    def __init__(self, event: LoopEvent, model: Any, args: Mapping[str, Any], policy: Any):
        self.event = event
        self.model = model
        self.args = args
        self.policy = policy
        self.enter_data: dict[str, Any] = {}
        self.transition: Any = None
        self.result = False
        self.reply: Any = None
        # ``memo``: scratch for guards and actions of one feed that compute the same value;
        # unset until one does, so read it with getattr(ctx, "memo", None).

    @property
    def machine(self) -> Any:
        return self.event.machine

    @property
    def state(self) -> Any:
        """The ``transitions`` State the feed started from (once a branch was tried)."""
        trans = self.transition
        return None if trans is None else self.machine.states[trans.source]

    def enter(self, **data: Any) -> None:
        """Set data of the state this branch enters (``ctx.enter(turn=3)``)."""
        self.enter_data.update(data)


Plan = tuple[Any, tuple[Callable[..., Any], ...], tuple[Callable[..., Any], ...]]
#: A guard or action of a branch: function, fixed params, policy-read params, negation, and (for a
#: guard) the feed arguments that alone decide it, or None.
PlanRef = tuple[Callable[..., Any], dict[str, Any], tuple[tuple[str, str], ...], bool, "frozenset[str] | None"]


class AnyOf:
    """An ``any:`` guard of a branch plan: holds when all guards of one option hold."""

    __slots__ = ("options",)

    def __init__(self, options: tuple[tuple[PlanRef | AnyOf, ...], ...]):
        self.options = options


_NO_POLICY = object()


def _held(guard: Callable[..., Any], negate: bool) -> Callable[..., Any]:
    """The guard as a plan calls it: truthy when the branch may be taken (``negate: true`` inverts it)."""
    if not negate:
        return guard
    return lambda model, event_data: not guard(model, event_data)


def _on_event_data(fn: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
    """A one-argument ``transitions`` callback in a plan's ``(machine, ctx)`` shape."""
    return lambda model, event_data: fn(event_data)


def _resolved(ref: PlanRef, policy: Any) -> Callable[..., Any]:
    """``fn(machine, ctx)`` with the YAML's parameters (policy ones read from ``policy``) already bound."""
    fn, static, dynamic, _negate, _reads = ref
    if not static and not dynamic:
        return fn
    kw = dict(static)
    for key, name in dynamic:
        kw[key] = getattr(policy, name)
    return _with_params(fn, kw)


def _with_params(fn: Callable[..., Any], kw: dict[str, Any]) -> Callable[..., Any]:
    """``fn`` with the keyword parameters ``kw`` bound, to be called as ``fn(machine, ctx)``.

    A registered function takes its parameters keyword-only, so for a plain
    function the binding is a copy of it (same code, globals and closure) that
    takes them as defaults: calling it costs what calling ``fn`` costs, where a
    ``functools.partial`` with keywords builds a dict on every call.  When every
    keyword-only parameter has a value, the copy's code takes them as positional
    parameters after ``(machine, ctx)`` with those values as its defaults (the
    same local variables in the same order, so the body is unchanged): Python
    fills positional defaults without looking each one up by name.  Anything
    else (a wrapper, a callable object) is bound with ``partial``.
    """
    if type(fn) is FunctionType:
        code = fn.__code__
        first = code.co_argcount
        kwonly = code.co_varnames[first : first + code.co_kwonlyargcount]
        if kw.keys() <= set(kwonly):
            given = {**(fn.__kwdefaults__ or {}), **kw}
            if not fn.__defaults__ and all(n in given for n in kwonly):
                code = code.replace(co_argcount=first + len(kwonly), co_kwonlyargcount=0)
                bound = FunctionType(code, fn.__globals__, fn.__name__, tuple(given[n] for n in kwonly), fn.__closure__)
            else:
                bound = FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
                bound.__kwdefaults__ = given
            bound.__qualname__ = fn.__qualname__
            bound.__module__ = fn.__module__
            bound.__doc__ = fn.__doc__
            bound.__annotations__ = fn.__annotations__
            bound.__dict__.update(fn.__dict__)
            return bound
    return partial(fn, **kw)


def _any_of(options: tuple[tuple[Callable[..., Any], ...], ...]) -> Callable[..., Any]:
    """One ``(machine, ctx)`` guard over ``any:`` options: the first option whose guards all hold wins."""
    if len(options) == 1 and len(options[0]) == 1:
        return options[0][0]

    def any_of(model: Any, ctx: Any) -> bool:
        for option in options:
            for guard in option:
                if not guard(model, ctx):
                    break
            else:
                return True
        return False

    return any_of


_Narrowed = Any  # True / False when the probe's arguments decide a guard, else the guard to run per feed


def _plan_guard(ref: PlanRef | AnyOf, policy: Any, probe: FeedData | None) -> _Narrowed:
    """A plan guard for ``policy``; with ``probe``, answered now if the probe's arguments alone decide it."""
    if isinstance(ref, AnyOf):
        left = []
        for option in ref.options:
            rest = []
            for g in option:
                got = _plan_guard(g, policy, probe)
                if got is False:
                    break
                if got is not True:
                    rest.append(got)
            else:
                if not rest:
                    return True  # guards are pure: one option that holds decides the whole any
                left.append(tuple(rest))
        return _any_of(tuple(left)) if left else False
    guard = _held(_resolved(ref, policy), ref[3])
    reads = ref[4]
    if probe is not None and reads is not None and reads <= probe.args.keys():
        try:
            return bool(guard(None, probe))
        except Exception as err:  # it read more than it declared
            name = getattr(ref[0], "__name__", "?")
            raise RegistryError(
                f"guard '{name}' is registered with reads={sorted(reads)} but needs more than those "
                f"arguments to answer: {type(err).__name__}: {err}"
            ) from err
    return guard


class LoopTransition(Transition):
    """A transition that also swaps the instance's state data.

    Its guards and actions also live in a plan per policy object: a tuple of
    callables with every YAML parameter already bound (see :func:`_with_params`),
    so running a branch calls registered functions directly, with no wrapper
    frame and no keyword rebuilding per call.  A compiled branch leaves
    ``conditions`` and ``before`` empty (the plan is all that runs); a
    transition built through ``transitions``' own API runs its ``Condition``s.
    """

    def __init__(
        self,
        source: str,
        dest: Any,
        conditions: Any = None,
        unless: Any = None,
        before: Any = None,
        after: Any = None,
        prepare: Any = None,
        data_keys: frozenset[str] = frozenset(),
        name: str = "",
        plan_refs: tuple[tuple[PlanRef, ...], tuple[PlanRef, ...]] | None = None,
        refusal: str | None = None,
    ):
        super().__init__(source, dest, conditions, unless, before, after, prepare)
        self.refusal = refusal  # a refusal branch's words: taking it raises FeedRefused
        self.data_keys = data_keys
        self.name = name  # the branch's stable name, for traces
        self._refs = plan_refs
        self._plans: dict[int, Plan] = {}
        self._last: Plan = (_NO_POLICY, (), ())  # the plan used last: most drivers use one policy

    def _plan(self, policy: Any) -> Plan:
        """The guards and actions bound for ``policy``; policies are frozen, so one plan per object."""
        plans = self._plans
        if len(plans) > 64:  # callers building a policy per call: keep the memory bounded
            plans.clear()
        if self._refs is None:  # built by transitions' own API: run its Condition objects
            guards = tuple(_held(_on_event_data(c.func), not c.target) for c in self.conditions)  # type: ignore[arg-type]
            actions = tuple(_on_event_data(a) for a in self.before)  # type: ignore[arg-type]
        else:
            guards = tuple(_plan_guard(r, policy, None) for r in self._refs[0])
            actions = tuple(_resolved(r, policy) for r in self._refs[1])
        plan = plans[id(policy)] = (policy, guards, actions)
        return plan

    def narrowed(self, policy: Any, probe: FeedData) -> tuple[Callable[..., Any], ...] | None:
        """This branch's guards for feeds with the probe's arguments: None if one of them never holds."""
        if self._refs is None:
            return self._plan(policy)[1]
        guards = []
        for ref in self._refs[0]:
            got = _plan_guard(ref, policy, probe)
            if got is False:
                return None
            if got is not True:
                guards.append(got)
        return tuple(guards)

    def execute(self, event_data: FeedData) -> bool:  # type: ignore[override]
        """Guards, then actions, then the move: ``Transition.execute`` without the hooks we never set.

        A loopfsm table has no prepare/after callbacks and its machine no
        machine-wide callbacks, so the parent's per-call logging and callback
        chains are skipped; this is most of what a feed costs in ``transitions``.
        """
        policy = event_data.policy
        plan = self._last
        if plan[0] is not policy:
            plan = self._plans.get(id(policy))  # type: ignore[assignment]
            if plan is None or plan[0] is not policy:
                plan = self._plan(policy)
            self._last = plan
        model = event_data.model
        for guard in plan[1]:
            if not guard(model, event_data):
                return False
        for action in plan[2]:
            action(model, event_data)
        dest = self.dest
        if dest is not None:
            data = event_data.enter_data
            if (data or self.data_keys) and data.keys() != self.data_keys:
                self._refuse_data(event_data)
            model._state = dest
            model.state_data = data
        return True

    def _change_state(self, event_data: FeedData) -> None:  # type: ignore[override]
        data = event_data.enter_data
        if (data or self.data_keys) and data.keys() != self.data_keys:
            self._refuse_data(event_data)
        model = event_data.model
        model._state = self.dest
        model.state_data = data

    def _refuse_data(self, event_data: FeedData) -> None:
        data = event_data.enter_data
        missing = sorted(self.data_keys - data.keys())
        extra = sorted(data.keys() - self.data_keys)
        raise ActionError(
            f"{event_data.machine.name}: entering '{self.dest}' on '{event_data.event.name}': "
            f"state data {'missing ' + ', '.join(missing) if missing else ''}"
            f"{'; ' if missing and extra else ''}{'undeclared ' + ', '.join(extra) if extra else ''}"
        )


class _FeedRecord(FeedData):
    """The ``FeedData`` a feed builds: the same slots, made by one C-level call with no ``__init__`` frame.

    ``trigger`` fills in its fields right after, so ``object.__init__`` is all it needs.
    """

    __slots__ = ()
    __init__ = object.__init__


_new_feed_data = object.__new__


def _all_hold(guards: tuple[Callable[..., Any], ...], model: Any, ctx: FeedData) -> bool:
    """Whether every guard holds, asked in order (a branch's guards after its first)."""
    for guard in guards:
        if not guard(model, ctx):
            return False
    return True


class LoopEvent(Event):
    """An event that knows the table's answer for states it has no transition from."""

    def __init__(self, name: str, machine: LoopBackendMachine):
        super().__init__(name, machine)
        self.ignored_in: frozenset[str] = frozenset()
        self.otherwise_raise: frozenset[str] = frozenset()
        self.legal_states: tuple[str, ...] = ()
        self._by_policy: dict[int, tuple[Any, dict[str, Any]]] = {}
        self._current: tuple[Any, dict[str, Any]] = (_NO_POLICY, {})
        # The argument whose value picks the branch list (see narrow_by), and its values.
        self.narrow_on: str | None = None
        self.narrow_values: tuple[Any, ...] = ()
        # The machine's default policy object, kept here by MachineInstance.feed on first use.
        self.default_policy: Any = None

    def narrow_by(self, enums: Mapping[str, tuple[Any, ...]]) -> None:
        """Pick the enum argument (of ``enums``: name -> values) that guards declared ``reads=`` decide alone.

        Each state's branches are then narrowed once per value (per policy): a
        branch such a guard refuses is dropped, a guard that holds is left out,
        so ``record(outcome="success")`` never asks ``outcome_in`` at all.
        """
        read = set()
        for branches in self.transitions.values():
            for trans in branches:
                refs = getattr(trans, "_refs", None)
                stack: list[Any] = list(refs[0]) if refs else []
                while stack:
                    ref = stack.pop()
                    if isinstance(ref, AnyOf):
                        stack.extend(g for option in ref.options for g in option)
                    elif ref[4] is not None and len(ref[4]) == 1:
                        read |= ref[4]
        for name, values in enums.items():
            if name in read:
                self.narrow_on, self.narrow_values = name, values
                return

    def trigger(self, model: Any, args: Mapping[str, Any] | None = None, policy: Any = None) -> FeedData:  # type: ignore[override]
        """Run the feed on ``model``: the branches of its state, each a precompiled plan, first match wins.

        The plans are this event's transitions' (see :class:`LoopTransition`),
        gathered per state so a feed looks its branches up once; the machine
        is never queued, so there is no ``_process`` indirection either.
        """
        # FeedData.__init__, inline: this runs once per feed (``transition`` and ``result``
        # are set below on every path that returns; ``memo`` stays unset until used).
        if args is None:
            args = {}
        event_data: FeedData = _FeedRecord()
        event_data.event = self
        event_data.model = model
        event_data.args = args
        event_data.policy = policy
        event_data.enter_data = {}
        event_data.reply = None
        current = self._current
        plans = current[1] if current[0] is policy else self._plans_for(policy)
        state = model._state
        try:
            branches = plans[state]
        except KeyError:  # no branch from this state: answered below
            branches = None
        on = self.narrow_on
        if on is not None and branches is not None:
            branches = branches.get(args.get(on))
        if branches is None:
            if state in self.ignored_in:
                event_data.transition = None
                event_data.result = False
                return event_data
            raise IllegalFeed(self.machine.name, state, self.name, self.legal_states)
        # A row holds its first guard and first action apart from the rest: most branches have at
        # most one of each, and those then run without building an iterator over a tuple.
        try:  # free in CPython 3.11+ until something raises
            for trans, guard, more_guards, action, more_actions, dest, data_keys in branches:
                event_data.transition = trans
                if guard is not None:
                    if not guard(model, event_data):
                        continue
                    if more_guards and not _all_hold(more_guards, model, event_data):
                        continue
                if action is not None:
                    action(model, event_data)
                    if more_actions:
                        for action in more_actions:
                            action(model, event_data)
                if dest is not None:
                    data = event_data.enter_data
                    if (data or data_keys) and data.keys() != data_keys:
                        trans._refuse_data(event_data)
                    model._state = dest
                    model.state_data = data
                event_data.result = True
                return event_data
        except LoopFsmError:
            raise
        except Exception as err:  # a registered guard or action raised: typed, named, its cause kept
            raise ActionError(
                f"{self.machine.name}: feed '{self.name}' in state '{state}', branch "
                f"'{getattr(event_data.transition, 'name', '?')}': a registered guard or action raised "
                f"{type(err).__name__}: {str(err)[:200]}"
            ) from err
        if state in self.otherwise_raise:
            raise NoBranchMatched(self.machine.name, state, self.name, self.legal_states)
        event_data.result = False
        return event_data

    def _plans_for(self, policy: Any) -> dict[str, Any]:
        """Per state, each branch as (transition, first guard or None, the other guards, first action or
        None, the other actions, destination, data keys) for ``policy``;
        when the event narrows by an argument, per state a dict from its value to those branches."""
        found = self._by_policy.get(id(policy))
        if found is None or found[0] is not policy:
            if len(self._by_policy) > 64:  # callers building a policy per call: keep the memory bounded
                self._by_policy.clear()
            plans: dict[str, Any] = {}
            on = self.narrow_on
            for state, branches in self.transitions.items():
                per_value: dict[Any, tuple[Any, ...]] = {}
                for value in (None,) if on is None else self.narrow_values:
                    probe = None
                    if on is not None:
                        probe = _new_feed_data(FeedData)
                        probe.event, probe.model, probe.args, probe.policy = self, None, {on: value}, policy
                        probe.enter_data, probe.reply, probe.transition = {}, None, None
                    rows = []
                    for trans in branches:
                        assert isinstance(trans, LoopTransition)
                        _, guards, actions = trans._plan(policy)
                        if probe is not None:
                            narrowed = trans.narrowed(policy, probe)
                            if narrowed is None:
                                continue  # a guard decided by the argument alone never holds here
                            guards = narrowed
                        rows.append(
                            (
                                trans,
                                guards[0] if guards else None,
                                guards[1:],
                                actions[0] if actions else None,
                                actions[1:],
                                None if trans.dest is None else sys.intern(trans.dest),
                                trans.data_keys,
                            )
                        )
                        if not guards:
                            break  # always taken: the branches after it are never reached
                    per_value[value] = tuple(rows)
                # State names are interned (so is the one a row moves to, and the machine's initial
                # state): the lookup by an instance's state then matches by identity, not by comparing text.
                plans[sys.intern(state)] = per_value[None] if on is None else per_value
            found = self._by_policy[id(policy)] = (policy, plans)
        self._current = found  # one attribute holds policy and plans together: threads never see a mix
        return found[1]

    def would_accept(self, model: Any, args: dict[str, Any], policy: Any) -> bool:
        """Whether :meth:`trigger` would accept these arguments now, running guards only (they are pure)."""
        state = model._state
        on = self.narrow_on
        branches = self._plans_for(policy).get(state)
        if on is not None and branches is not None:
            branches = branches.get(args.get(on))
        if branches is None:
            return False
        event_data = _new_feed_data(FeedData)
        event_data.event, event_data.model, event_data.args = self, model, args
        event_data.policy, event_data.enter_data, event_data.reply = policy, {}, None
        for trans, guard, more_guards, *_ in branches:
            event_data.transition = trans
            if guard is None or (guard(model, event_data) and _all_hold(more_guards, model, event_data)):
                return trans.refusal is None
        return state not in self.otherwise_raise

    def _trigger(self, event_data: FeedData) -> bool:  # type: ignore[override]
        """``transitions``' entry point, for callers that built their own FeedData."""
        done = self.trigger(event_data.model, event_data.args, event_data.policy)
        for name in FeedData.__slots__:
            setattr(event_data, name, getattr(done, name))
        return bool(done.result)


class LoopBackendMachine(Machine):
    """The ``transitions`` machine every instance of one spec shares."""

    event_cls = LoopEvent
    transition_cls = LoopTransition

    def __init__(self, name: str, states: list[str], initial: str):
        super().__init__(
            model=None,
            states=states,
            initial=initial,
            auto_transitions=False,
            send_event=True,
            ignore_invalid_triggers=False,
            name=name,
            model_attribute="_state",
        )
        # transitions prefixes names with "<name>: " for logs; errors carry the bare machine name.
        self.name = name

    @staticmethod
    def resolve_callable(func: Any, event_data: Any) -> Any:
        if isinstance(func, str):
            raise TypeError(f"loopfsm never resolves callbacks by name ({func!r}); register a callable")
        return func
