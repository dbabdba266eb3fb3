"""The checks of a field's own declaration (a data field, a state's data, a feed's or a decision's argument):
its type is one there is, its enum items are of that type, within its bounds and listed once, its bounds
apply to its type and do not cross, and its default is a value it can hold.

Kept apart from :mod:`.checks` as :mod:`.policy_checks` is: one kind of entry, checked by itself.  The
policy block's enum items are checked by :func:`enum_problems` too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .errors import did_you_mean
from .fieldtypes import fits_type, python_checker, value_key, yaml_kind, yaml_shown
from .registry import Codec
from .spec import MISSING, FieldDef


def enum_problems(
    enum: tuple[Any, ...], py_type: type | tuple[type, ...], type_name: str, low: Any, high: Any, owner: str
) -> Iterator[tuple[int, str]]:
    """(index, message) for each enum item of the wrong type, outside the bounds ``low`` and ``high`` (None:
    unbounded), or listed before (``1`` and ``1.0`` are one number).  ``owner`` is "field" or "policy".

    An item outside the bounds is a choice no value could be: ``when:`` lists naming it read as if it could.
    """
    seen: dict[Any, int] = {}
    for i, item in enumerate(enum):
        if not fits_type(py_type, item):
            yield (
                i,
                (
                    f"enum item {item!r} is of type {yaml_kind(item)}, but the {owner}'s "
                    f"type is {type_name}: every choice must be of that type"
                ),
            )
            continue
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            if low is not None and item < low:
                yield i, f"enum item {item!r} is below the {owner}'s minimum {low}: no value could be it"
                continue
            if high is not None and item > high:
                yield i, f"enum item {item!r} is above the {owner}'s maximum {high}: no value could be it"
                continue
        key = value_key(item)
        if key in seen:
            yield i, f"enum item {item!r} is listed twice (item {seen[key]} is {enum[seen[key]]!r})"
            continue
        seen[key] = i


def check_field(
    f: FieldDef,
    codecs: Mapping[str, Codec],
    error: Callable[..., None],
    *,
    registry: str | None,
    need_default: bool = False,
) -> None:
    """Report each problem of ``f``'s declaration at its own place; ``codecs`` are the types there are
    (``registry`` names where the others come from, None when the builtins are all there are)."""
    if need_default and f.default is MISSING and not (f.list or f.nullable):
        error(
            f.path,
            f"field '{f.name}' needs a 'default' (or 'nullable: true'): a new instance must start with a value",
            key=True,
        )
    codec = codecs.get(f.type)
    if codec is None:
        error(
            f.path + ("type",),
            f"unknown type '{f.type}'{did_you_mean(f.type, codecs)} "
            f"(built in: integer, boolean, string, number, json; others come from registry '{registry}')",
        )
        return
    if (f.minimum is not None or f.maximum is not None) and f.type not in ("integer", "number"):
        error(
            f.path + ("minimum" if f.minimum is not None else "maximum",),
            f"'minimum' and 'maximum' apply to integer and number fields, not to {f.type}",
        )
        return
    crossed = f.minimum is not None and f.maximum is not None and f.minimum > f.maximum
    if crossed:
        error(f.path + ("minimum",), f"minimum {f.minimum} is above maximum {f.maximum}")
    bounds = (None, None) if crossed else (f.minimum, f.maximum)
    for i, message in enum_problems(f.enum or (), codec.py_type, f.type, *bounds, "field"):
        error(f.path + ("enum", i), message)
    if crossed:
        return
    if f.default is not MISSING and not python_checker(f, codec)(f.default):
        error(
            f.path + ("default",),
            f"default {yaml_shown(f.default)} is not a valid {f.type}{' list' if f.list else ''}",
        )
