"""What a declared field type accepts, in Python and in JSON.

One place answers "does this value fit this field?" for defaults at load time,
feed arguments at run time, and the JSON Schema that guards snapshots, so the
three can never disagree.
"""

from __future__ import annotations

import math
import typing
from typing import Any
from collections.abc import Callable, Collection

from .errors import shown
from .registry import Codec, DataField, StateName
from .spec import MISSING, FieldDef, PolicyParam

# An integer is a signed 64-bit value wherever it lives: in a feed, a snapshot, a policy or a file.
# Beyond that no store column holds it, no JSON client reads it exactly, and past 4,300 digits
# Python cannot even write it as JSON, so a machine fed one could never be saved.
# A number is finite wherever it lives, for the same reason: JSON has no NaN or infinity, so a
# snapshot, a store row or an export holding one is not JSON (``json.dumps`` writes ``NaN``).
INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1

POLICY_TYPES: dict[str, type | tuple[type, ...]] = {
    "integer": int,
    "boolean": bool,
    "string": str,
    "number": (int, float),
}


def fits_type(py_type: type | tuple[type, ...], value: Any) -> bool:
    """isinstance, except that a bool is not accepted as a number (YAML ``true`` is not ``1``),
    an int must be a 64-bit one and a float a finite one."""
    if isinstance(value, bool):
        return _admits_bool(py_type)
    if isinstance(value, int) and not INT_MIN <= value <= INT_MAX and not _admits_anything(py_type):
        return False
    if isinstance(value, float) and not math.isfinite(value) and not _admits_anything(py_type):
        return False
    return isinstance(value, py_type)


def _admits_anything(py_type: type | tuple[type, ...]) -> bool:
    return object in (py_type if isinstance(py_type, tuple) else (py_type,))


def _admits_bool(py_type: type | tuple[type, ...]) -> bool:
    types = py_type if isinstance(py_type, tuple) else (py_type,)
    return bool in types or object in types


def python_checker(f: FieldDef, codec: Codec) -> Callable[[Any], bool]:
    """A fast predicate for values of field ``f``.

    Three kinds get a one-line check of their own, the ones the breaker's and
    brain's feeds bind on every call: a plain integer, a string (or None where
    allowed) and a string enum.  Measured on the tool breaker's acquire +
    record (interpreter, best of 15 alternating rounds, one process): the
    general check alone is 12-20% slower; these three are as fast as the seven
    specialisations that were here (0.98x), so the others went.
    """
    py = codec.py_type
    allowed: Collection[Any] | None = f.enum
    bounded = f.minimum is not None or f.maximum is not None
    if py is int and allowed is None and not f.nullable and not f.list and not bounded:
        return lambda v: (
            (type(v) is int or (isinstance(v, int) and not isinstance(v, bool))) and INT_MIN <= v <= INT_MAX
        )
    if py is str and allowed is None and not f.list:
        if f.nullable:
            return lambda v: v is None or isinstance(v, str)
        return lambda v: isinstance(v, str)
    if py is str and allowed is not None and not f.nullable and not f.list and all(isinstance(x, str) for x in allowed):
        choices = frozenset(allowed)
        return lambda v: isinstance(v, str) and v in choices
    if codec.name == "json":
        return _json_checker(f)
    lo, hi = f.minimum, f.maximum
    # Membership in a set, where the items allow: a 40,000-item integer enum made each value a scan of it.
    if allowed is not None and all(isinstance(x, (str, int, float, type(None))) for x in allowed):
        allowed = frozenset(allowed)

    def one(v: Any) -> bool:
        if f.nullable and v is None:
            return True
        if not fits_type(py, v) or (allowed is not None and v not in allowed):
            return False
        if bounded:
            if isinstance(v, float) and not math.isfinite(v):
                return False
            return (lo is None or v >= lo) and (hi is None or v <= hi)
        return True

    if f.list:
        return lambda v: isinstance(v, list) and all(one(x) for x in v)
    return one


def _json_checker(f: FieldDef) -> Callable[[Any], bool]:
    def one(v: Any) -> bool:
        return (f.nullable and v is None) or (json_problem(v) is None and (f.enum is None or v in f.enum))

    if f.list:
        return lambda v: isinstance(v, list) and all(one(x) for x in v)
    return one


MAX_JSON_DEPTH = 64
MAX_JSON_NODES = 1_000_000


def json_problem(value: Any) -> str | None:
    """Why ``value`` is not plain, finite JSON (str keys, no NaN or infinity, at most 64 levels), or None.

    Iterative, so a deep or cyclic value is answered, not a ``RecursionError``.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    budget = MAX_JSON_NODES
    while stack:
        v, depth = stack.pop()
        budget -= 1
        if budget < 0:
            return f"more than {MAX_JSON_NODES:,} values"
        t = type(v)
        if v is None or t is bool or t is int or t is str:
            continue
        if t is float:
            if not math.isfinite(v):
                return f"{v} is not a JSON number"
            continue
        if depth >= MAX_JSON_DEPTH:  # a value that contains itself ends here too
            return f"nested deeper than {MAX_JSON_DEPTH} levels"
        if t is dict:
            for k, x in v.items():
                if type(k) is not str:
                    return f"key {shown(k)} is not a string"
                stack.append((x, depth + 1))
        elif t is list:
            stack.extend((x, depth + 1) for x in v)
        else:
            return f"a {t.__name__} is not a JSON value"
    return None


def json_schema(f: FieldDef, codec: Codec) -> dict[str, Any]:
    item = dict(codec.schema)
    if f.enum is not None:
        item["enum"] = list(f.enum)
    if f.minimum is not None:
        item["minimum"] = f.minimum
    if f.maximum is not None:
        item["maximum"] = f.maximum
    if f.nullable:
        item = {"anyOf": [{"type": "null"}, item]} if item else {}
    return {"type": "array", "items": item} if f.list else item


def annotation_accepts(annotation: Any, value: Any) -> bool:
    """Whether a YAML literal suits a guard parameter annotated ``annotation``."""
    if annotation is Any:
        return True
    if annotation is DataField or annotation is StateName:
        return isinstance(value, str)
    origin = typing.get_origin(annotation)
    if _is_union(origin):
        return any(annotation_accepts(a, value) for a in typing.get_args(annotation))
    if origin is typing.Literal:
        return value in typing.get_args(annotation)
    if annotation is type(None):
        return value is None
    if origin is list and len(typing.get_args(annotation)) == 1:  # list[X]: each item an X
        (item,) = typing.get_args(annotation)
        return isinstance(value, list) and all(annotation_accepts(item, x) for x in value)
    if origin is not None:
        annotation = origin
    if annotation is float:
        return fits_type((int, float), value)
    if isinstance(annotation, type):
        return fits_type(annotation, value)
    return True


def annotation_name(annotation: Any) -> str:
    if annotation is Any:
        return "any"
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(annotation)))
    if origin is list and len(typing.get_args(annotation)) == 1:
        return f"list[{annotation_name(typing.get_args(annotation)[0])}]"
    if _is_union(origin):
        return " | ".join(annotation_name(a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", None) or str(annotation)


def _is_union(origin: Any) -> bool:
    return origin is typing.Union or str(origin) == "<class 'types.UnionType'>"


def named_in(annotation: Any, kind: type, value: Any) -> list[tuple[tuple[int, ...], str]]:
    """The names a parameter annotated ``kind`` or ``list[kind]`` (or either ``| None``) is given in ``value``,
    each with its place inside the value (``()``, or the item's index): what the checker resolves against the
    machine's states for :class:`StateName`."""
    if annotation is kind:
        return [((), value)] if isinstance(value, str) else []
    origin = typing.get_origin(annotation)
    if origin is list and typing.get_args(annotation) == (kind,) and isinstance(value, list):
        return [((i,), x) for i, x in enumerate(value) if isinstance(x, str)]
    if _is_union(origin):
        for a in typing.get_args(annotation):
            found = named_in(a, kind, value)
            if found:
                return found
    return []


def default_value(f: FieldDef) -> Any:
    """A fresh copy of a field's default (lists default to empty, nullables to None)."""
    if f.default is MISSING:
        return [] if f.list else None
    d = f.default
    return list(d) if isinstance(d, list) else (dict(d) if isinstance(d, dict) else d)


_YAML_KINDS = {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "mapping"}


def yaml_shown(value: Any) -> str:
    """A value as a YAML file's reader knows it: ``boolean true``, ``string 'five'``, ``null``."""
    if value is None:
        return "null"
    if type(value) is bool:
        return f"boolean {'true' if value else 'false'}"
    if type(value) is float and not math.isfinite(value):
        written = ".nan" if math.isnan(value) else ".inf" if value > 0 else "-.inf"
        return f"number {written} (not finite: JSON has no infinity or NaN)"
    kind = _YAML_KINDS.get(type(value))
    return f"{kind} {shown(value)}" if kind else f"{type(value).__name__} {shown(value)}"


def policy_value_problem(p: PolicyParam, value: Any) -> str | None:
    """Why ``value`` cannot be policy ``p`` (its type, bounds or choices), or None if it can.

    The checker asks this of the YAML default and the policy class of every
    value fed in, so the two can never disagree about what is allowed.
    """
    if isinstance(value, int) and not isinstance(value, bool) and not INT_MIN <= value <= INT_MAX:
        return "is outside the signed 64-bit integer range"
    if not fits_type(POLICY_TYPES[p.type], value):
        return f"must be {p.type}, got {yaml_shown(value)}"
    if p.minimum is not None and value < p.minimum:
        return f"is below the minimum {p.minimum}"
    if p.maximum is not None and value > p.maximum:
        return f"is above the maximum {p.maximum}"
    if p.enum is not None and value not in p.enum:
        return f"is not one of {list(p.enum)}"
    return None


#: A value as ``==`` tells it apart at run time (``ctx.args[arg] == only``): ``1`` and ``1.0`` are one value
#: of a number, and a boolean is its own kind (``true == 1`` in Python, never in a table).
ValueKey = tuple[str, Any]


def value_key(v: Any) -> ValueKey:
    """``v`` as a key that two values share when a table must count them as one (an enum's items, a
    ``when:`` list's values)."""
    if isinstance(v, bool):
        return ("boolean", v)
    if isinstance(v, (int, float)):
        return ("number", v)
    return (type(v).__name__, v)


def yaml_kind(value: object) -> str:
    """A value's type in the YAML's words (``integer``, ``string``), for messages about a value of the wrong type."""
    return {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}.get(
        type(value), type(value).__name__
    )
