"""Per-field snapshot codecs and validators: how a field's value goes to JSON and back, held to its declaration.

A snapshot may come from anywhere, so every value read back is checked twice:
against a JSON Schema of the field set (compiled once, on the first restore)
and, after decoding, against the field's declaration in Python terms (no
``1.0`` for an integer, no NaN in a json field, bounds and enum).  Writing a
snapshot holds the values to the same rules, so a snapshot its own restore
would refuse is never taken.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from .errors import RegistryError, SnapshotError, shown
from .fieldtypes import INT_MAX, INT_MIN, json_schema, python_checker
from .registry import Codec
from .spec import FieldDef


def _converter(f: FieldDef, one: Callable[[Any], Any], codec: Codec) -> Callable[[Any], Any]:
    """Lift a codec's per-value function (to or from JSON) over the field's nullability and list-ness."""
    if codec.name == "json":
        one = copy.deepcopy  # snapshots must never alias an instance's mutable JSON values
    if f.nullable:
        inner = one
        one = lambda v: None if v is None else inner(v)  # noqa: E731
    if f.list:
        return lambda v: [one(x) for x in v]
    return one


def field_encoder(f: FieldDef, codec: Codec, machine: str) -> Callable[[Any], Any]:
    """To JSON, after holding the value to the field's declaration: an action may have set anything,
    and a snapshot its own restore would refuse must not be taken at all."""
    convert = _converter(f, codec.to_json, codec)
    ok = python_checker(f, codec)

    def encode(value: Any) -> Any:
        if not ok(value):
            raise SnapshotError(
                f"{machine}: cannot snapshot: field '{f.name}' holds {shown(value)}, "
                f"which is not {_what(f, value)}{_bounds_text(f)} (an action set it)"
            )
        return convert(value)

    return encode


def _what(f: FieldDef, value: Any) -> str:
    what = f"a list of {f.type} values" if f.list else f"{'an' if f.type[0] in 'aeiou' else 'a'} {f.type}"
    return what + (" (signed 64-bit)" if type(value) is int and not INT_MIN <= value <= INT_MAX else "")


def field_decoder(f: FieldDef, codec: Codec, machine: str) -> Callable[[Any], Any]:
    """From JSON, then held to the field's declaration in Python terms: the schema check before it
    takes ``1.0`` for an integer and lets NaN into a json field; this does not, so a restored
    instance holds only values a feed could have produced."""
    convert = _converter(f, codec.from_json, codec)
    ok = python_checker(f, codec)

    def decode(value: Any) -> Any:
        out = convert(value)
        if not ok(out):
            raise SnapshotError(
                f"{machine}: refusing snapshot: field '{f.name}' holds {shown(value)}, "
                f"which is not {_what(f, out)}{_bounds_text(f)}"
            )
        return out

    return decode


def limits(f: FieldDef) -> list[str]:
    """A field's bounds in words (``at least 0``, ``at most 9``): what a refused value is told it missed."""
    return ([f"at least {f.minimum}"] if f.minimum is not None else []) + (
        [f"at most {f.maximum}"] if f.maximum is not None else []
    )


def _bounds_text(f: FieldDef) -> str:
    parts = limits(f)
    enum = [f"one of {', '.join(map(repr, f.enum))}"] if f.enum else []
    extra = parts + enum + (["or None"] if f.nullable else [])
    return f" ({', '.join(extra)})" if extra else ""


def fields_schema(fields: dict[str, FieldDef], codecs: dict[str, Codec]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": sorted(fields),
        "additionalProperties": False,
        "properties": {n: json_schema(f, codecs[f.type]) for n, f in fields.items()},
    }


def fields_validator(fields: dict[str, FieldDef], codecs: dict[str, Codec]) -> Callable[[Any], str | None] | None:
    """A checker returning why a value does not fit ``fields`` (None if it does); None when there are no fields."""
    if not fields:
        return None
    import fastjsonschema  # noqa: PLC0415 - only processes that restore pay for it

    try:
        check = fastjsonschema.compile(fields_schema(fields, codecs))
    except fastjsonschema.JsonSchemaDefinitionException as err:  # a codec's own schema is not one
        used = sorted({f.type for f in fields.values() if codecs[f.type].schema})
        raise RegistryError(
            f"the schema of codec {', '.join(map(repr, used)) or '?'} is not a valid JSON Schema: {err}"
        ) from None

    def problem(value: Any) -> str | None:
        try:
            check(value)
        except fastjsonschema.JsonSchemaException as err:
            return str(getattr(err, "message", err))
        return None

    return problem


def no_fields_problem(value: Any) -> str | None:
    """What the generated validator would say of a value for an empty field set, without one."""
    if not isinstance(value, dict):
        return "data must be object"
    if value:
        return f"data must not contain {set(value)!r} properties"
    return None
