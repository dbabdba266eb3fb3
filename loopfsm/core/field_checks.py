"""The checks of a field's own declaration (a data field, a state's data, a feed's or a decision's argument):
its type is one there is, its bounds apply to its type, are finite, do not cross and leave an integer one a
value, its enum items are of its type, within its bounds and listed once, and its default is a value it can
hold.

Kept apart from :mod:`.checks` as :mod:`.policy_checks` is: one kind of entry, checked by itself.  The
policy block's bounds and enum items are checked by :func:`bound_problems` and :func:`enum_problems` too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .errors import did_you_mean
from .fieldtypes import INT_MAX, INT_MIN, fits_type, python_checker, value_key, yaml_kind, yaml_shown
from .registry import Codec
from .spec import MISSING, FieldDef


def shown(value: Any) -> str:
    """A value as the YAML writes it: ``true``, ``null``, ``1.5``, ``.inf``, ``'on'``."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else ("-.inf" if value < 0 else ".inf")
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _key(item: Any) -> Any:
    """``item`` as a key that equal items share (``1`` and ``1.0``); a list or a mapping (a ``json`` field's
    choices) by its JSON text."""
    key = value_key(item)
    try:
        hash(key)
    except TypeError:
        return ("json", json.dumps(item, sort_keys=True, default=repr))
    return key


#: The problems said of one enum's items; the rest are counted in one more line (a 1 MiB file held 200,000).
SAID = 20


def enum_problems(
    enum: tuple[Any, ...], py_type: type | tuple[type, ...], type_name: str, low: Any, high: Any, owner: str
) -> Iterator[tuple[int, str, bool]]:
    """:func:`_enum_problems`, at most :data:`SAID` of them and then how many more there are."""
    unsaid: list[int] = []
    for n, (i, message, mistyped) in enumerate(_enum_problems(enum, py_type, type_name, low, high, owner)):
        if n < SAID:
            yield i, message, mistyped
        else:
            unsaid.append(i)
    if unsaid:
        yield unsaid[0], f"and {len(unsaid):,} more items of this enum are refused as those above", False


def _enum_problems(
    enum: tuple[Any, ...], py_type: type | tuple[type, ...], type_name: str, low: Any, high: Any, owner: str
) -> Iterator[tuple[int, str, bool]]:
    """(index, message, whether the item is of the wrong type) for each enum item of the wrong type or not a
    finite number, outside the bounds ``low`` and ``high`` (None: unbounded), or listed before (``1`` and
    ``1.0`` are one number).  ``owner`` names the field or policy ("field 'x'"): an anchored enum that
    several share is reported at the anchor, and the message must say whose bounds it broke.

    An item outside the bounds is a choice no value could be: ``when:`` lists naming it read as if it could.
    """
    seen: dict[Any, int] = {}
    for i, item in enumerate(enum):
        if not fits_type(py_type, item):
            kind = "a number that is not finite" if isinstance(item, float) else f"of type {yaml_kind(item)}"
            yield (
                i,
                f"enum item {shown(item)} of {owner} is {kind}, but its type is {type_name}: "
                "every choice must be a value of that type",
                True,
            )
            continue
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            if low is not None and item < low:
                yield i, f"enum item {shown(item)} of {owner} is below its minimum {shown(low)}: no value is", False
                continue
            if high is not None and item > high:
                yield i, f"enum item {shown(item)} of {owner} is above its maximum {shown(high)}: no value is", False
                continue
        key = _key(item)
        if key in seen:
            first = seen[key]
            yield i, f"enum item {shown(item)} of {owner} is listed twice (item {first} is {shown(enum[first])})", False
            continue
        seen[key] = i


def bound_problems(low: Any, high: Any, integer: bool) -> Iterator[tuple[str, str]]:
    """(which bound, message) for bounds no value could meet: not a finite number (``.inf``, ``1e999``); above
    the other; of an integer, with no integer between them (``minimum: 0.5, maximum: 0.7``)."""
    finite = True
    for name, bound in (("minimum", low), ("maximum", high)):
        if isinstance(bound, float) and not math.isfinite(bound):
            finite = False
            yield name, f"{name} {shown(bound)} is not a finite number"
    if not finite:
        return
    if integer and low is not None and low > INT_MAX:
        yield "minimum", f"minimum {shown(low)} is above every 64-bit integer, the only integers a feed brings"
        return
    if integer and high is not None and high < INT_MIN:
        yield "maximum", f"maximum {shown(high)} is below every 64-bit integer, the only integers a feed brings"
        return
    if low is None or high is None:
        return
    if low > high:
        yield "minimum", f"minimum {shown(low)} is above maximum {shown(high)}"
    elif integer and math.ceil(low) > math.floor(high):
        yield "minimum", f"no integer lies between minimum {shown(low)} and maximum {shown(high)}"


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
    unmeetable = list(bound_problems(f.minimum, f.maximum, f.type == "integer"))
    for which, message in unmeetable:
        error(f.path + (which,), message)
    bounds = (None, None) if unmeetable else (f.minimum, f.maximum)
    for i, message, _ in enum_problems(f.enum or (), codec.py_type, f.type, *bounds, f"field '{f.name}'"):
        error(f.path + ("enum", i), message)
    if unmeetable:
        return  # every default breaks bounds no value meets; the bounds are the mistake
    if f.default is not MISSING and not python_checker(f, codec)(f.default):
        error(
            f.path + ("default",),
            f"default {yaml_shown(f.default)} is not a valid {f.type}{' list' if f.list else ''}",
        )
