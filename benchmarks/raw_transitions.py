"""The turnstile written on ``transitions`` directly, as its README teaches: the baseline of the default engine.

One ``Machine(model=gate, ...)`` per gate, the seed's table as ``transitions``
dictionaries in the YAML's order, and the turnstile registry's own guard and
actions as its conditions and ``before`` callbacks (``send_event=True``, the
fare fixed at the YAML's default).  Restoring builds a machine in the saved
state and sets the two counters, with no validation: what a user of plain
``transitions`` would write, so it flatters the baseline, not loopfsm.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from transitions import Machine

from loopfsm.machines.turnstile import clear_credit, count_passage, fare_paid, keep_credit

FARE = 1


def _paid(event: Any) -> bool:
    return fare_paid(event.model, event, fare=FARE)


def _clear(event: Any) -> None:
    clear_credit(event.model, event)


def _keep(event: Any) -> None:
    keep_credit(event.model, event)


def _count(event: Any) -> None:
    count_passage(event.model, event)


TABLE = [
    {"trigger": "coin", "source": "locked", "dest": "unlocked", "conditions": [_paid], "before": [_clear]},
    {"trigger": "coin", "source": "locked", "dest": None, "before": [_keep]},
    {"trigger": "coin", "source": "unlocked", "dest": None},
    {"trigger": "push", "source": "locked", "dest": None},
    {"trigger": "push", "source": "unlocked", "dest": "locked", "before": [_count]},
]


class RawGate:
    """A model for ``transitions``: ``state`` (set by the machine) and the two counters in ``data``."""

    state: str

    def __init__(self, state: str = "locked", credit: int = 0, passages: int = 0):
        self.data = SimpleNamespace(credit=credit, passages=passages)
        self.machine = Machine(
            model=self,
            states=["locked", "unlocked"],
            transitions=TABLE,
            initial=state,
            auto_transitions=False,
            send_event=True,
        )

    @classmethod
    def restore(cls, snap: dict[str, Any]) -> RawGate:
        return cls(snap["state"], snap["data"]["credit"], snap["data"]["passages"])
