"""The checks of a table's ``policy:`` block: bounds that cross, enum items of the wrong type, defaults out of
bounds, and numbers nothing in the table reads.

Kept apart from :mod:`.checks` as :mod:`.verify_model` is: one block of the file, checked by itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .fieldtypes import POLICY_TYPES, fits_type, policy_value_problem
from .spec import Spec, policy_readers

if TYPE_CHECKING:  # pragma: no cover - the YAML reader is not needed to check a cached spec
    from .source import PathT


def yaml_kind(value: object) -> str:
    """A value's type in the YAML's words (``integer``, ``string``), for messages about a value of the wrong type."""
    return {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def check_policy(spec: Spec, error: Callable[[PathT, str], None], warn: Callable[..., None]) -> None:
    """Report each problem of the policy block at its own place (``warn`` takes ``key=True``)."""
    for p in spec.policy.values():
        if p.minimum is not None and p.maximum is not None and p.minimum > p.maximum:
            error(p.path + ("minimum",), f"minimum {p.minimum} is above maximum {p.maximum}")
            continue  # every default breaks one of two crossed bounds; the bounds are the mistake
        bad_enum = False
        for i, item in enumerate(p.enum or ()):
            if not fits_type(POLICY_TYPES[p.type], item):
                bad_enum = True
                error(
                    p.path + ("enum", i),
                    f"enum item {item!r} is of type {yaml_kind(item)}, but the policy's "
                    f"type is {p.type}: every choice must be of that type",
                )
        if bad_enum:
            continue
        problem = policy_value_problem(p, p.default)
        if problem:
            shown_default = "" if problem.startswith("must be") else f" {p.default!r}"  # the problem shows it
            error(p.path + ("default",), f"default{shown_default} {problem}")
    # A number no guard, action or rule names is a knob wired to nothing: editing it changes nothing, which a
    # policy reviewer cannot tell from the table. Code that reads it directly (a store's lease) says so.
    for name, where in policy_readers(spec).items():
        if not where and spec.policy[name].read_by is None:
            warn(
                ("policy", name),
                f"policy '{name}' is read by no guard, action or rule of the table (none names "
                f"{{policy: {name}}}), so changing it changes nothing here; if code outside the table "
                "reads it, say which with 'read_by:'",
                key=True,
            )
