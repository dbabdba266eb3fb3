"""A compiled table as a stock ``transitions.Machine``: ``CompiledMachine.to_transitions()``.

Instances of a compiled machine run feeds in loopfsm's own interpreter
(:mod:`loopfsm.core.backend`).  This module builds the same table as a plain
``transitions.Machine`` (its own ``Event`` and ``Transition`` classes, no
subclass), so a user who knows ``transitions`` can drive it and hand it to
``transitions``' extensions:

* each feed is a trigger (``model.coin()``, ``model.trigger("acquire", now, call_id)``);
* each YAML branch is a transition in the YAML's order; ``stay: true`` is an
  internal transition (``dest=None``);
* its conditions are the branch's ``when:`` conditions (named
  ``outcome=gate``), then the registry's guards bound to their YAML
  parameters by :mod:`loopfsm.core.binding` (the path feeds and decisions use), in
  the YAML's order, a negated guard and an ``any:`` each one condition; its ``before``
  callbacks are the branch's actions, then one that replaces the state data;
* ``prepare_event`` binds and checks the trigger's arguments exactly as a feed
  does, before any guard runs; ``on_exception`` turns "no transition from this
  state" into :class:`IllegalFeed` (or ignores it where the table says so)
  and an exception of a registered function into :class:`ActionError`;
* a state whose every branch is guarded and whose feed says ``otherwise:
  raise`` gets one last internal transition that raises
  :class:`NoBranchMatched`.

The model (:class:`TransitionsModel`) carries ``state``, ``state_data``,
``data``, ``compiled`` and ``policy`` (fixed when the machine is built), and
``reply``: what the last trigger answered.  It is not a
:class:`~loopfsm.core.runtime.MachineInstance`: it has no snapshot and emits no
loopfsm trace records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .backend import Branch, FeedData, action_error, feed_data, state_data_error
from .binding import AnyOf, Bound, Guard, bind, bind_guard
from .errors import IllegalFeed, LoopFsmError, NoBranchMatched

if TYPE_CHECKING:  # pragma: no cover
    from transitions import EventData, Machine

    from .runtime import Tables


class TransitionsModel:
    """The model of a machine built by :func:`to_transitions`; guards and actions see it as ``m``.

    ``transitions`` keeps ``state`` (the state's name) and adds the triggers;
    ``state_data`` and ``data`` are what a loopfsm instance holds; ``reply`` is
    what the last trigger answered (None when it answered nothing).
    """

    state: str

    def __init__(self, compiled: Tables, policy: Any):
        self.compiled = compiled
        self.policy = policy
        self.state_data: dict[str, Any] = {}
        self.data: Any = compiled.Data()
        self.reply: Any = None

    @property
    def _state(self) -> str:
        """The state's name, read as loopfsm's own code reads an instance's."""
        return self.state

    def __repr__(self) -> str:
        return f"<TransitionsModel {self.compiled.name} {getattr(self, 'state', '?')}>"


class _Callback:
    """A bound guard or action as a ``transitions`` callback: called with ``EventData``, it runs ``fn(m, ctx)``.

    ``__name__`` is the YAML's name, which ``transitions``' diagrams print;
    ``branch`` is the loopfsm branch it belongs to (``ctx.transition``).
    """

    def __init__(self, fn: Bound, name: str, branch: Branch | None):
        self.fn = fn
        self.__name__ = name
        self.branch = branch

    def __call__(self, event_data: EventData) -> Any:
        ctx: FeedData = event_data.feed  # type: ignore[attr-defined]  # set by prepare_event
        ctx.transition = self.branch
        return self.fn(event_data.model, ctx)

    def __repr__(self) -> str:
        return f"<{self.__name__}>"


def _guard_name(guard: Guard) -> str:
    """The guard as ``transitions``' diagrams print a condition: ``name``, ``!name``, ``any(a | b & c)``."""
    if isinstance(guard, AnyOf):
        return "any(" + " | ".join(" & ".join(_guard_name(g) for g in option) for option in guard.options) + ")"
    return f"!{guard.name}" if guard.negate else str(guard.name)


def to_transitions(
    compiled: Tables, policy: Any = None, machine_class: type[Machine] | None = None, **options: Any
) -> Machine:
    """A new ``transitions.Machine`` with a fresh :class:`TransitionsModel` in the initial state.

    ``policy`` (None for the YAML's defaults, a policy object or a mapping)
    is the policy every trigger runs with.  ``machine_class`` is
    ``transitions.Machine`` or one of its extensions (``LockedMachine``,
    ``GraphMachine``...); ``options`` go to its constructor (``show_conditions=True``).
    """
    from transitions import Machine

    cls = Machine if machine_class is None else machine_class

    pol = compiled.policy(policy)
    name = compiled.name
    model = TransitionsModel(compiled, pol)

    def prepare(event_data: EventData) -> None:
        """Bind the trigger's arguments as a feed binds them, before any guard runs."""
        event = event_data.event.name
        args = compiled.binders[event](tuple(event_data.args), dict(event_data.kwargs))
        event_data.feed = feed_data(compiled.events[event], event_data.model, args, pol, event_data.model.state)  # type: ignore[attr-defined]

    def finalize(event_data: EventData) -> None:
        """Keep what the trigger answered (None when it raised or was ignored)."""
        ctx = getattr(event_data, "feed", None)
        model: TransitionsModel = event_data.model  # type: ignore[assignment]
        model.reply = ctx.reply if event_data.error is None and ctx is not None else None

    def loud(event_data: EventData) -> None:
        """Raise what the instance API raises for the same feed, or return where the table ignores it."""
        from transitions.core import MachineError

        err = event_data.error
        event = event_data.event.name
        model: TransitionsModel = event_data.model  # type: ignore[assignment]
        state = model.state
        if isinstance(err, MachineError):  # no transition from this state
            compiled.binders[event](tuple(event_data.args), dict(event_data.kwargs))  # a wrong call says so first
            if state in compiled.events[event].ignored_in:
                return
            raise IllegalFeed(name, state, event, compiled.events[event].legal_states) from None
        if isinstance(err, LoopFsmError) or not isinstance(err, Exception):
            raise err  # type: ignore[misc]
        ctx = getattr(event_data, "feed", None)
        branch = ctx.transition if ctx is not None else None
        raise action_error(name, event, state, branch.name if branch is not None else "?", err) from err

    machine = cls(
        model=model,
        states=list(compiled.spec.states),
        initial=compiled.initial,
        auto_transitions=False,
        send_event=True,
        name=name,
        prepare_event=[prepare],
        finalize_event=[finalize],
        on_exception=[loud],
        **options,
    )
    machine.name = name  # transitions keeps "<name>: " for its log lines
    for event, feed in compiled.events.items():
        for state, branches in feed.branches.items():
            for branch in branches:
                conditions = []
                for guard in branch.guards:
                    bound = bind_guard(guard, pol)
                    assert not isinstance(bound, bool)  # without a probe a guard is always a callable
                    conditions.append(_Callback(bound, _guard_name(guard), branch))
                before = [_Callback(bind(a, pol), a.name, branch) for a in branch.actions]
                if branch.dest is not None:
                    before.append(_Callback(_entering(name, event, branch.dest, branch.data_keys), "enter", branch))
                machine.add_transition(event, state, branch.dest, conditions=conditions, before=before)  # type: ignore[arg-type]
            if state in feed.otherwise_raise:
                raise_ = _Callback(_no_branch(name, event, feed.legal_states), "no_branch_matched", None)
                machine.add_transition(event, state, None, before=[raise_])
    return machine


def _entering(machine: str, event: str, dest: str, data_keys: frozenset[str]) -> Bound:
    """The last ``before`` callback of a branch that moves: the state data its actions set, checked and kept."""

    def enter(model: Any, ctx: FeedData) -> None:
        data = ctx.enter_data
        if data.keys() != data_keys:
            raise state_data_error(machine, event, dest, data_keys, data)
        model.state_data = data

    return enter


def _no_branch(machine: str, event: str, legal: tuple[str, ...]) -> Bound:
    def no_branch_matched(model: Any, ctx: FeedData) -> None:
        raise NoBranchMatched(machine, model.state, event, legal)

    return no_branch_matched
