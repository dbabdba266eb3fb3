"""The checks of a table's ``policy:`` block: bounds that cross, enum items of the wrong type, out of bounds
or listed twice, defaults out of bounds, and numbers nothing in the table reads.

Kept apart from :mod:`.checks` as :mod:`.verify_model` is: one block of the file, checked by itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .field_checks import bound_problems, enum_problems
from .fieldtypes import POLICY_TYPES, policy_value_problem
from .spec import Ref, Spec, leaf_refs, policy_ref

if TYPE_CHECKING:  # pragma: no cover - the YAML reader is not needed to check a cached spec
    from .source import PathT


def check_policy(spec: Spec, error: Callable[[PathT, str], None], warn: Callable[..., None]) -> None:
    """Report each problem of the policy block at its own place (``warn`` takes ``key=True``)."""
    for p in spec.policy.values():
        unmeetable = list(bound_problems(p.minimum, p.maximum, p.type == "integer"))
        for which, message in unmeetable:
            error(p.path + (which,), message)
        if unmeetable:
            continue  # every default breaks bounds no value meets; the bounds are the mistake
        mistyped = False
        for i, message, wrong_type in enum_problems(
            p.enum or (), POLICY_TYPES[p.type], p.type, p.minimum, p.maximum, f"policy '{p.name}'"
        ):
            mistyped = mistyped or wrong_type  # an enum of the right type still judges the default
            error(p.path + ("enum", i), message)
        if mistyped:
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


def policy_readers(spec: Spec) -> dict[str, list[str]]:
    """Policy name -> where the table reads it (``coin from locked``, ``next_step rule threshold``,
    ``before every feed``), in file order; a name nothing in the table reads maps to an empty list.

    Code that reads a policy number directly (a store's lease) is not seen here; the YAML says so
    with the number's ``read_by:``.
    """
    found: dict[str, list[str]] = {name: [] for name in spec.policy}

    def note(refs: tuple[Ref, ...], where: str) -> None:
        for leaf in leaf_refs(refs):
            for value in leaf.params.values():
                name = policy_ref(value)
                if name in found and where not in found[name]:
                    found[name].append(where)

    note(spec.before, "before every feed")
    for ev in spec.events.values():
        note(ev.before, f"before {ev.name}")
        for state, branches in ev.sources.items():
            for b in branches:
                note((*b.guards, *b.actions), f"{ev.name} from {state}")
    for d in spec.decisions.values():
        for r in d.rules:
            note((*r.guards, r.result), f"{d.name} rule {r.name}")
    return found
