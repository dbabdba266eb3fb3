"""``loopfsm diff``'s last line is a promise about a deploy: it must be what ``restore`` then does.

For every shipped machine and a set of edits an operator makes, a run is
saved in every state of the shipped table and restored under the edited one;
the verdict diff printed beforehand must name exactly the runs refused.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from loopfsm import SnapshotError
from loopfsm.core.catalog import load_machine
from loopfsm.cli.main import main
from loopfsm.rendering.diff import diff_specs, load_for_diff
from tests.core.test_saved_runs import (
    MACHINES,
    ROOT,
    edit_added_branch,
    edit_added_field,
    edit_guard_parameter,
    edit_policy_default,
    migration_for,
    renamed_state,
    retyped_field,
)

# State fields whose type is a machine's own codec: one value each that the codec accepts.
CODEC_SAMPLES = {"compaction_reason": "Emergency", "outcome": {"kind": "Cancelled"}}
BUILTIN_SAMPLES = {"integer": 0, "number": 0, "string": "x", "boolean": False, "json": {}}


def sample(f: Any) -> Any:
    """A value of field ``f`` that its table accepts (its lowest, where it has bounds)."""
    if f.list:
        return []
    if f.enum:
        return f.enum[0]
    if f.minimum is not None:
        return f.minimum
    return BUILTIN_SAMPLES.get(f.type, CODEC_SAMPLES.get(f.type))


def highest(f: Any) -> Any:
    """The old table's highest value of field ``f``: what a table that narrowed the field would refuse."""
    if f.list:
        return []
    if f.enum:
        return f.enum[-1]
    if f.type == "integer":
        return f.maximum if f.maximum is not None else 10**6
    return sample(f)


def runs_in_every_state(machine: str, value: Callable[[Any], Any] = sample) -> dict[str, dict[str, Any]]:
    """One snapshot per state of the shipped table, each one the shipped table restores.

    State fields take ``value``; with ``highest``, so do the integer and enum data fields.
    """
    c = load_machine(machine)
    out = {}
    for state, s in c.spec.states.items():
        snap = c.new().snapshot()
        snap["state"] = state
        snap["state_data"] = {n: value(f) for n, f in s.data.items()}
        if value is highest:
            snap["data"] = {
                n: highest(f) if f.enum or (f.type == "integer" and not f.list and not f.nullable) else snap["data"][n]
                for n, f in c.spec.data.items()
            }
        c.restore(snap)  # a run the shipped table could have saved
        out[state] = snap
    return out


def first_state_with_data(doc: dict[str, Any]) -> str:
    """The first state carrying fields, or (a machine without any) the first that is not initial."""
    with_data = [name for name, s in doc["states"].items() if s.get("data")]
    return with_data[0] if with_data else next(n for n, s in doc["states"].items() if not s.get("initial"))


def rename_a_state(doc: dict[str, Any]) -> dict[str, Any]:
    return renamed_state(doc, first_state_with_data(doc))[0]


def rename_a_state_with_a_migration(doc: dict[str, Any], machine: str) -> dict[str, Any]:
    old = first_state_with_data(doc)
    edited, new = renamed_state(doc, old)
    return {"version": 2, "migrations": [migration_for(machine, {old: new})], **edited}


def add_a_state_field_without_default(doc: dict[str, Any]) -> None:
    doc["states"][first_state_with_data(doc)].setdefault("data", {})["added_by_operator"] = {
        "type": "string",
        "description": "a field no saved run has",
    }


def tighten_a_bound(doc: dict[str, Any]) -> None:
    """The first integer data field without a maximum gets one at its default."""
    for f in doc["data"].values():
        if f["type"] == "integer" and not f.get("list") and "maximum" not in f and "enum" not in f:
            if isinstance(f.get("default"), int):
                f["maximum"] = f["default"]
                return
    pytest.fail("no integer field to bound")


def in_place(edit: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any], str], dict[str, Any]]:
    def apply(doc: dict[str, Any], machine: str) -> dict[str, Any]:
        edit(doc)
        return doc

    apply.__name__ = edit.__name__
    return apply


EDITS = [
    in_place(edit_policy_default),
    in_place(edit_guard_parameter),
    in_place(edit_added_branch),
    in_place(edit_added_field),
    in_place(retyped_field),
    in_place(add_a_state_field_without_default),
    in_place(tighten_a_bound),
    lambda doc, machine: rename_a_state(doc),
    rename_a_state_with_a_migration,
]


def restore_outcomes(edited: Any, runs: dict[str, dict[str, Any]]) -> set[str]:
    """The states whose saved runs the edited table refuses (typed refusals only: anything else fails the test)."""
    refused = set()
    for state, snap in runs.items():
        try:
            edited.restore(snap)
        except SnapshotError:
            refused.add(state)
    return refused


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("edit", EDITS, ids=lambda e: getattr(e, "__name__", "edit"))
def test_diffs_verdict_is_what_restore_does(tmp_path, machine, edit, capsys):
    original = ROOT / "machines" / f"{machine}.yaml"
    doc = edit(yaml.safe_load(original.read_text()), machine)
    path = tmp_path / f"{machine}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    verdict = diff_specs(load_for_diff(str(original)), load_for_diff(str(path)))
    main(["diff", str(original), str(path)])
    last = capsys.readouterr().out.splitlines()[-1].strip()

    edited = load_machine(str(path))
    refused = restore_outcomes(edited, runs_in_every_state(machine))
    at_the_top = restore_outcomes(edited, runs_in_every_state(machine, highest))
    if verdict.saved_runs.ok and not verdict.narrowed:
        assert last.startswith("saved runs restore ") and refused == at_the_top == set(), (last, refused, at_the_top)
    elif not verdict.saved_runs.ok:
        assert last.startswith(("saved runs are refused", "saved runs in ")), last
        assert refused == set(verdict.saved_runs.refused_states), (last, refused)
    else:  # restore unless a value breaks a narrowed bound: the runs at the old table's highest values are refused
        assert " unless they hold a value the narrowed bounds or choices of " in last, last
        assert not verdict.snapshots_restore
        assert refused == set() and at_the_top == set(verdict.old.states), (last, refused, at_the_top)


def test_the_narrowed_bound_verdict_names_the_field(tmp_path, capsys):
    path = tmp_path / "turnstile.yaml"
    table = (ROOT / "machines" / "turnstile.yaml").read_text()
    path.write_text(
        table.replace(
            "    minimum: 0\n    description: People", "    minimum: 0\n    maximum: 9\n    description: People"
        )
    )
    main(["diff", str(ROOT / "machines" / "turnstile.yaml"), str(path)])
    assert capsys.readouterr().out.splitlines()[-1] == (
        "  saved runs restore as they are unless they hold a value "
        "the narrowed bounds or choices of field passages refuse"
    )
    assert Path(path).exists()
