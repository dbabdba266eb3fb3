"""Helpers for tests that write machines inline: a demo registry of generic guards and actions, and text helpers.

They live here rather than in conftest.py because test modules import them, and pytest's conftest files are
for fixtures and hooks, not for importing.
"""

from __future__ import annotations

import textwrap

from loopfsm import Registry
from loopfsm.core.registry import DataField


def make_registry() -> Registry:
    reg = Registry("demo")

    @reg.guard
    def flag(m, ctx, *, field: DataField) -> bool:
        return bool(getattr(m.data, field))

    @reg.guard
    def at_least(m, ctx, *, field: str, value: int) -> bool:
        return getattr(m.data, field) >= value

    @reg.guard
    def arg_is(m, ctx, *, name: str, value: str) -> bool:
        return ctx.args.get(name) == value

    @reg.action
    def bump(m, ctx, *, field: str, by: int = 1) -> None:
        setattr(m.data, field, getattr(m.data, field) + by)

    @reg.action
    def log(m, ctx, *, text: str) -> None:
        m.data.log.append(text)

    @reg.action
    def enter_with(m, ctx, *, key: str) -> None:
        ctx.enter(**{key: ctx.args["n"]})

    @reg.action
    def answer(m, ctx, *, text: str) -> None:
        ctx.reply = text

    @reg.result
    def constant(m, q, *, value: str) -> str:
        return value

    return reg


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def marked_line(text: str, marker: str = "# <-") -> int:
    """1-based number of the line carrying ``marker`` in ``text``."""
    for i, line in enumerate(text.splitlines(), 1):
        if marker in line:
            return i
    raise AssertionError(f"no marker {marker!r} in text")
