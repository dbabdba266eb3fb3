"""Guards and actions of the turnstile (``machines/turnstile.yaml``); the table is in the YAML."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopfsm.core.registry import Registry
from loopfsm.core.declared import DeclaredMachine
from loopfsm.core.instance import PolicyArg

REGISTRY = Registry("turnstile")


@REGISTRY.guard
def fare_paid(m: Any, ctx: Any, *, fare: int) -> bool:
    """The coin being inserted, with the credit already held, covers the fare."""
    return bool(m.data.credit + 1 >= fare)


@REGISTRY.action
def keep_credit(m: Any, ctx: Any) -> None:
    m.data.credit += 1


@REGISTRY.action
def clear_credit(m: Any, ctx: Any) -> None:
    m.data.credit = 0


@REGISTRY.action
def count_passage(m: Any, ctx: Any) -> None:
    m.data.passages += 1


class Turnstile(DeclaredMachine, machine="turnstile", registry=REGISTRY, policy="TurnstilePolicy"):
    """The coin-operated gate; compiled from ``machines/turnstile.yaml`` on first use."""

    __slots__ = ()

    def coin(self, *, policy: PolicyArg = None) -> None:
        """A coin is inserted."""
        self.feed("coin", policy=policy)

    def push(self, *, policy: PolicyArg = None) -> None:
        """Someone pushes the arm."""
        self.feed("push", policy=policy)


if TYPE_CHECKING:  # what type checkers see: the stub written from the YAML's policy block
    from .policies import TurnstilePolicy as TurnstilePolicy


def __getattr__(name: str) -> Any:
    if name == "TurnstilePolicy":  # built from the YAML's policy block, so compiled on first use
        return Turnstile.compiled.Policy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
