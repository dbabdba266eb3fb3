"""Type stubs of policy classes, written from the YAML's ``policy:`` block.

A machine's policy class is built at run time from its table (see
``compiler._make_policy_class``), so a type checker sees nothing of it: without a
stub, ``ToolBreakerPolicy(trip_aftr=3)`` passes ``mypy --strict`` and fails when it
runs. A stub declares the same frozen dataclass, field by field, for the checker
alone: the module that serves the class at run time imports the stub's class under
``TYPE_CHECKING`` only. ``loopfsm/machines/policies.pyi`` is this module's output for
the shipped machines (a test keeps it current); ``loopfsm stub FILE`` prints one for
a user's machine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from loopfsm.core.spec import PolicyParam, Spec

_PY_TYPES = {"integer": "int", "boolean": "bool", "string": "str", "number": "float"}


def _annotation(p: PolicyParam) -> str:
    """The field's type: its enum's values as a ``Literal`` (the only values a run accepts), else the plain type."""
    if p.enum:
        return "Literal[" + ", ".join(_literal(v) for v in p.enum) + "]"
    return _PY_TYPES[p.type]


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)  # double quotes, as the formatter writes them; JSON's escapes are Python's
    return repr(value) if isinstance(value, (bool, int, float)) else "..."


def _default(value: Any) -> str:
    """A short literal default is written out, so a reader of the stub sees it; anything else is ``...``."""
    text = _literal(value)
    return text if len(text) <= 40 else "..."


def policy_class(spec: Spec, class_name: str) -> str:
    """The stub of one machine's policy class, named ``class_name``."""
    lines = ["@dataclass(frozen=True)", f"class {class_name}:"]
    lines.append(f'    """Policy of machine {spec.name!r}; defaults come from its YAML file."""')
    if spec.policy:
        lines.append("")
    for p in spec.policy.values():
        lines.append(f"    {p.name}: {_annotation(p)} = {_default(p.default)}")
    return "\n".join(lines) + "\n"


def stub_module(classes: Mapping[str, Spec], source: str) -> str:
    """A ``.pyi`` module declaring each named policy class (class name -> its machine's spec).

    ``source`` names what it was written from, one file a line, in the header a reader sees first.
    """
    uses_literal = any(p.enum for spec in classes.values() for p in spec.policy.values())
    head = [
        "# Written by `loopfsm stub` from the policy blocks of: do not edit.",
        *(f"#   {line}" for line in source.split("\n")),
        "# Type checkers read this file; at run time each class is built from the YAML.",
        "",
        "from dataclasses import dataclass",
    ]
    if uses_literal:
        head.append("from typing import Literal")
    body = [policy_class(spec, name) for name, spec in classes.items()]
    return "\n".join(head) + "\n\n" + "\n".join(body)
