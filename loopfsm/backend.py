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

from functools import partial
from typing import Any

from transitions import Event, EventData, Machine, Transition

from .errors import ActionError, IllegalFeed, NoBranchMatched


class FeedData(EventData):
    """What a guard or action sees of one feed."""

    __slots__ = ("args", "policy", "enter_data", "reply")

    def __init__(self, event: "LoopEvent", model: Any, args: dict[str, Any], policy: Any):
        super().__init__(None, event, event.machine, model, (), {})
        self.args = args
        self.policy = policy
        self.enter_data: dict[str, Any] = {}
        self.reply: Any = None

    def enter(self, **data: Any) -> None:
        """Set data of the state this branch enters (``ctx.enter(turn=3)``)."""
        self.enter_data.update(data)


class LoopTransition(Transition):
    """A transition that also swaps the instance's state data."""

    def __init__(self, source, dest, conditions=None, unless=None, before=None, after=None,
                 prepare=None, data_keys: frozenset[str] = frozenset()):
        super().__init__(source, dest, conditions, unless, before, after, prepare)
        self.data_keys = data_keys

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
        event_data.update(self.dest)


class LoopEvent(Event):
    """An event that knows the table's answer for states it has no transition from."""

    def __init__(self, name: str, machine: "LoopBackendMachine"):
        super().__init__(name, machine)
        self.ignored_in: frozenset[str] = frozenset()
        self.otherwise_raise: frozenset[str] = frozenset()
        self.legal_states: tuple[str, ...] = ()

    def trigger(self, model: Any, args: dict[str, Any] | None = None, policy: Any = None) -> FeedData:  # type: ignore[override]
        data = FeedData(self, model, args or {}, policy)
        self.machine._process(partial(self._trigger, data))
        return data

    def _is_valid_source(self, state) -> bool:
        if state.name in self.transitions:
            return True
        if state.name in self.ignored_in:
            return False
        raise IllegalFeed(self.machine.name, state.name, self.name, self.legal_states)

    def _process(self, event_data: FeedData) -> None:
        super()._process(event_data)
        if not event_data.result and event_data.state.name in self.otherwise_raise:
            raise NoBranchMatched(self.machine.name, event_data.state.name, self.name, self.legal_states)


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
