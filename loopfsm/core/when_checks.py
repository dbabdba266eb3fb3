"""The checks of a ``when:`` condition: it names an argument of its feed or decision, and every value it lists
is one that argument can take, once.

Kept apart from :mod:`.checks` as :mod:`.policy_checks` is: one kind of entry, checked by itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .errors import did_you_mean
from .fieldtypes import fits_type, python_checker, yaml_shown
from .registry import BUILTIN_CODECS
from .spec import Branch, Condition, FieldDef, Rule

# The argument types a ``when:`` compares by equality: a YAML scalar means the same value to each.
_WHEN_TYPES = frozenset({"integer", "number", "string", "boolean"})


def _bounds_words(f: FieldDef) -> str:
    parts = ([f"at least {f.minimum}"] if f.minimum is not None else []) + (
        [f"at most {f.maximum}"] if f.maximum is not None else []
    )
    return f", {' and '.join(parts)}" if parts else ""


def check_condition(owner: str, args: dict[str, FieldDef], c: Condition, error: Callable[..., None]) -> None:
    """A ``when:`` entry names an argument of its feed or decision (``owner``, with ``args``), and every
    value it lists is one that argument can take.

    A value the argument can never hold would make the branch dead without
    a word, so it is an error, as a misspelt guard name is.
    """
    f = args.get(c.arg)
    if f is None:
        takes = ", ".join(args) or "no arguments"
        error(
            c.path,
            f"{owner} has no argument '{c.arg}'{did_you_mean(c.arg, args)} (it takes: {takes})",
            key=True,
        )
        return
    if f.list or f.type not in _WHEN_TYPES:
        what = f"a list of {f.type}" if f.list else f.type
        error(
            c.path,
            f"'when' compares integer, number, string and boolean arguments; argument '{c.arg}' "
            f"of {owner} is {what}: use a guard",
            key=True,
        )
        return
    py_type = BUILTIN_CODECS[f.type].py_type
    if f.enum is not None and not all(fits_type(py_type, x) for x in f.enum):
        return  # the argument's own enum is wrong, and says so at its line: no value can be judged against it
    holds = python_checker(f, BUILTIN_CODECS[f.type])
    for i, v in enumerate(c.values):
        if holds(v):
            continue
        where = c.path + ((i,) if c.choice else ())
        if f.enum is not None and fits_type(BUILTIN_CODECS[f.type].py_type, v):
            hint = did_you_mean(v, [str(x) for x in f.enum]) if isinstance(v, str) else ""
            choices = ", ".join(x if isinstance(x, str) else json.dumps(x) for x in f.enum)
            error(where, f"argument '{c.arg}' of {owner} is never {yaml_shown(v)} (it is one of {choices}){hint}")
        else:
            error(
                where,
                f"argument '{c.arg}' of {owner} is never {yaml_shown(v)} (it is "
                f"{f.type}{' or null' if f.nullable else ''}{_bounds_words(f)})",
            )
    seen: set[tuple[type, Any]] = set()
    for i, v in enumerate(c.values):
        if (type(v), v) in seen:
            error(c.path + (i,), f"{yaml_shown(v)} is listed twice for argument '{c.arg}'")
        seen.add((type(v), v))
    every = _every_value(f)
    if every is not None and every <= seen:
        # Always true, the branch is unconditional in all but name: the ones after it never run,
        # yet the table reads as if they could, and `otherwise` is asked for without a reason.
        error(
            c.path,
            f"argument '{c.arg}' of {owner} can only be one of the values listed, so this condition "
            "always holds: remove it, or list only the values the branch is for",
        )


def _every_value(f: FieldDef) -> set[tuple[type, Any]] | None:
    """Every value an argument can take, when there are few enough to list (an enum, a boolean), else None."""
    if f.enum is not None:
        values = {(type(x), x) for x in f.enum}
    elif f.type == "boolean":
        values = {(bool, True), (bool, False)}
    else:
        return None
    return values | {(type(None), None)} if f.nullable else values


def covers(earlier: Branch | Rule, later: Branch | Rule) -> bool:
    """Whether ``earlier``, tried first, takes every feed ``later`` could: it has no guard, and each of its
    ``when:`` conditions holds for every value ``later``'s own condition on that argument allows.

    ``{outcome: completed}`` before ``{outcome: completed, encrypted: true}`` is such a pair: the second is
    never tried.  A branch with neither (no ``when:``, no guard) is reported as always winning instead.  The
    same holds of a decision's rules, where the earlier one answers in the later one's states.
    """
    if earlier.guards or not earlier.when:
        return False
    mine = {c.arg: c.values for c in later.when}
    return all(c.arg in mine and all(any(v == u for u in c.values) for v in mine[c.arg]) for c in earlier.when)
