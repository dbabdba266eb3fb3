"""Guards and actions of the turnstile (``machines/turnstile.yaml``); the table is in the YAML."""

from __future__ import annotations

from ..compiler import compile_file
from ..registry import Registry
from ..resources import machine_path

REGISTRY = Registry("turnstile")


@REGISTRY.guard
def fare_paid(m, ctx, *, fare: int) -> bool:
    """The coin being inserted, with the credit already held, covers the fare."""
    return m.data.credit + 1 >= fare


@REGISTRY.action
def keep_credit(m, ctx) -> None:
    m.data.credit += 1


@REGISTRY.action
def clear_credit(m, ctx) -> None:
    m.data.credit = 0


@REGISTRY.action
def count_passage(m, ctx) -> None:
    m.data.passages += 1


TURNSTILE = compile_file(machine_path("turnstile"), REGISTRY)
Turnstile = TURNSTILE.Instance
TurnstilePolicy = TURNSTILE.Policy
