"""What the typed methods turn into a feed's list argument, and what they refuse on the way.

``list(x)`` of a string is a list of its characters, so ``available_tools="ls"``
quietly meant the tools ``l`` and ``s``; and ``list(None)`` raised a bare
``TypeError``.  A feed's list argument comes from a list, a tuple or any other
iterable of values, never from one string, and a refusal is a
:class:`~loopfsm.core.errors.FeedArgumentError` that changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from loopfsm.core.errors import FeedArgumentError, shown
from loopfsm.core.fieldtypes import INT_MAX, INT_MIN

from .names import name_problem

T = TypeVar("T")


def listed(values: Iterable[T], machine: str, feed: str, arg: str) -> list[T]:
    """``values`` as a new list, or FeedArgumentError for one string (or bytes) or something not iterable."""
    if isinstance(values, list):
        return list(values)
    if isinstance(values, (str, bytes, bytearray)) or not isinstance(values, Iterable):
        raise FeedArgumentError(
            f"{machine}: feed '{feed}' argument '{arg}' must be a list, got {type(values).__name__} {shown(values)}"
        )
    return list(values)


def checked_new_run(run_id: Any, owner: Any, deadline_at: Any) -> None:
    """The identity a new agent-loop run starts with: two strings and a time in ms (or None)."""
    for name, value in (("run_id", run_id), ("owner", owner)):
        if not isinstance(value, str):
            raise FeedArgumentError(
                f"agent_loop: new_run's '{name}' must be a string, got {type(value).__name__} {shown(value)}"
            )
        problem = name_problem(value)  # a run nobody can name or nobody owns
        if problem is not None:
            raise FeedArgumentError(f"agent_loop: new_run's '{name}' {problem}")
    if deadline_at is not None and (type(deadline_at) is not int):
        raise FeedArgumentError(
            f"agent_loop: new_run's 'deadline_at' must be an integer (ms) or None, "
            f"got {type(deadline_at).__name__} {shown(deadline_at)}"
        )
    if deadline_at is not None and not INT_MIN <= deadline_at <= INT_MAX:
        # refused here, at the caller's own mistake: accepted, it would only surface at snapshot()
        raise FeedArgumentError(
            f"agent_loop: new_run's 'deadline_at' {shown(deadline_at)} is outside the signed 64-bit range "
            "every time in ms must fit"
        )
