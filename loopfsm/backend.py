"""loopfsm's extension of ``transitions``: its own Machine, Event, Transition and EventData.

We extend ``transitions`` through the class hooks it documents
(``event_cls``, ``transition_cls``) instead of wrapping it:

* ``FeedData`` is the ``EventData`` guards and actions receive: feed
  arguments by name, the policy fed in, the data of the state being entered,
  and an optional reply for feeds that answer (a breaker's ``acquire``).
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

from typing import Any

from transitions import Event, EventData, Machine, Transition

from .errors import ActionError, IllegalFeed, NoBranchMatched


class FeedData(EventData):
    """What a guard or action sees of one feed."""

    def __init__(self, event: LoopEvent, model: Any, args: dict[str, Any], policy: Any):
        # EventData's fields, set inline: this runs once per feed.
        self.state = None
        self.event = event
        self.machine = event.machine
        self.model = model
        self.args = args
        self.kwargs: dict[str, Any] = {}
        self.transition = None
        self.error = None
        self.result = False
        self.policy = policy
        self.enter_data: dict[str, Any] = {}
        self.reply: Any = None

    def enter(self, **data: Any) -> None:
        """Set data of the state this branch enters (``ctx.enter(turn=3)``)."""
        self.enter_data.update(data)


class LoopTransition(Transition):
    """A transition that also swaps the instance's state data."""

    def __init__(self, source, dest, conditions=None, unless=None, before=None, after=None,
                 prepare=None, data_keys: frozenset[str] = frozenset(), name: str = ""):
        super().__init__(source, dest, conditions, unless, before, after, prepare)
        self.data_keys = data_keys
        self.name = name  # the branch's stable name, for traces

    def execute(self, event_data: FeedData) -> bool:
        """Guards, then actions, then the move: ``Transition.execute`` without the hooks we never set.

        A loopfsm table has no prepare/after callbacks and its machine no
        machine-wide callbacks, so the parent's per-call logging and callback
        chains are skipped; this is most of what a feed costs in ``transitions``.
        """
        for cond in self.conditions:
            if bool(cond.func(event_data)) != cond.target:
                return False
        for action in self.before:
            action(event_data)
        if self.dest is not None:
            self._change_state(event_data)
        return True

    def _change_state(self, event_data: FeedData) -> None:
        data = event_data.enter_data
        if data.keys() != self.data_keys:
            missing = sorted(self.data_keys - data.keys())
            extra = sorted(data.keys() - self.data_keys)
            raise ActionError(
                f"{event_data.machine.name}: entering '{self.dest}' on '{event_data.event.name}': "
                f"state data {'missing ' + ', '.join(missing) if missing else ''}"
                f"{'; ' if missing and extra else ''}{'undeclared ' + ', '.join(extra) if extra else ''}"
            )
        model = event_data.model
        model._state = self.dest
        model.state_data = data


class LoopEvent(Event):
    """An event that knows the table's answer for states it has no transition from."""

    def __init__(self, name: str, machine: LoopBackendMachine):
        super().__init__(name, machine)
        self.ignored_in: frozenset[str] = frozenset()
        self.otherwise_raise: frozenset[str] = frozenset()
        self.legal_states: tuple[str, ...] = ()

    def trigger(self, model: Any, args: dict[str, Any] | None = None, policy: Any = None) -> FeedData:  # type: ignore[override]
        """Run the feed on ``model``; the machine is never queued, so no ``_process`` indirection."""
        data = FeedData(self, model, args or {}, policy)
        self._trigger(data)
        return data

    def would_accept(self, model: Any, args: dict[str, Any], policy: Any) -> bool:
        """Whether :meth:`trigger` would accept these arguments now, running guards only (they are pure)."""
        state = model._state
        branches = self.transitions.get(state)
        if branches is None:
            return False
        data = FeedData(self, model, args, policy)
        for trans in branches:
            if all(bool(c.func(data)) == c.target for c in trans.conditions):
                return True
        return state not in self.otherwise_raise

    def _trigger(self, event_data: FeedData) -> bool:
        state = event_data.model._state
        branches = self.transitions.get(state)
        if branches is None:
            if state in self.ignored_in:
                return False
            raise IllegalFeed(self.machine.name, state, self.name, self.legal_states)
        event_data.state = self.machine.states[state]
        for trans in branches:
            event_data.transition = trans
            if trans.execute(event_data):
                event_data.result = True
                return True
        if state in self.otherwise_raise:
            raise NoBranchMatched(self.machine.name, state, self.name, self.legal_states)
        return False


class LoopBackendMachine(Machine):
    """The ``transitions`` machine every instance of one spec shares."""

    event_cls = LoopEvent
    transition_cls = LoopTransition

    def __init__(self, name: str, states: list[str], initial: str):
        super().__init__(model=None, states=states, initial=initial, auto_transitions=False,
                         send_event=True, ignore_invalid_triggers=False, name=name,
                         model_attribute="_state")
        # transitions prefixes names with "<name>: " for logs; errors carry the bare machine name.
        self.name = name

    @staticmethod
    def resolve_callable(func, event_data):
        if isinstance(func, str):
            raise TypeError(f"loopfsm never resolves callbacks by name ({func!r}); register a callable")
        return func
