"""Errors of verification: ``verify``, ``paths`` and ``replay`` given something they cannot work with."""

from __future__ import annotations

from loopfsm.core.errors import LoopFsmError


class ReviewError(LoopFsmError):
    """A review command was given something it cannot work with (a bad trace file, underivable inputs)."""
