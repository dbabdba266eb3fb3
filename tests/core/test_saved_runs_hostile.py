"""Saved runs as an attacker writes them and as an operator's mistakes leave them.

A snapshot is untrusted: whatever its shape claims, a restore either gives
back a run whose values are the ones saved and fit the table, or refuses with
a typed error. A migration chain that would drop a saved value is refused by
``check``, not discovered in production.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from loopfsm import SnapshotError, SpecError, load_machine
from loopfsm.machines import Turnstile


def saved_under_an_edit() -> dict[str, Any]:
    """A turnstile run with credit, as an edited table (another fingerprint, same shape) saved it."""
    gate = Turnstile()
    gate.coin()
    gate.push()
    snap = gate.snapshot()
    snap["data"]["credit"] = 0
    snap["fingerprint"] = "sha256:" + "0" * 32
    return snap


def test_a_run_saved_under_an_edit_restores():
    assert Turnstile.restore(saved_under_an_edit()).data.passages == 1


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda s: s["data"].pop("passages"), "data lacks passages, which its shape records"),
        (lambda s: s["data"].update(secret=1), "data holds 1 field its shape does not record"),
        (lambda s: s["state_data"].update(a=1, b=2), "state_data holds 2 fields its shape does not record"),
    ],
)
def test_values_unlike_their_own_shape_are_refused_not_filled(damage, message):
    snap = saved_under_an_edit()
    damage(snap)
    before = copy.deepcopy(snap)
    with pytest.raises(SnapshotError) as info:
        Turnstile.restore(snap)
    assert message in str(info.value)
    assert "secret" not in str(info.value)
    assert snap == before


@pytest.mark.parametrize("version", [True, 1.0])
def test_a_version_that_is_not_an_integer_is_refused_on_every_path(version):
    snap = Turnstile().snapshot()  # the very table's fingerprint and shape
    snap["version"] = version
    with pytest.raises(SnapshotError, match="is not a positive integer"):
        Turnstile.restore(snap)


# -- a migration that would lose a saved value is refused by check -------------------------

TURNSTILE = Path(Turnstile.compiled.spec.file).read_text()
V2 = """version: 2
migrations:
  - from: 1
    reads:
      data: {credit: integer, passages: integer}
      states: {locked: {}, unlocked: {}}
    fields: {credit: coins, passages: coins}
"""


@pytest.mark.parametrize(
    "fields,key,first",
    [
        ("{credit: coins, passages: coins}", "passages", "credit"),  # two fields into one
        ("{credit: passages}", "credit", "passages"),  # onto a field that keeps its own name
    ],
)
def test_renames_that_would_drop_a_saved_value_are_refused_where_written(tmp_path, fields, key, first):
    path = tmp_path / "v2.yaml"
    table = TURNSTILE.replace("  credit:\n", "  coins:\n").replace(
        "registry: turnstile\n", "registry: turnstile\n" + V2
    )
    path.write_text(table.replace("{credit: coins, passages: coins}", fields))
    with pytest.raises(SpecError) as info:
        load_machine(str(path))
    line = next(i for i, x in enumerate(path.read_text().splitlines(), 1) if x.startswith("    fields:"))
    assert re.search(rf"v2\.yaml:{line}:\d+: migrations\[0\]\.fields\.{key}: ", str(info.value)), str(info.value)
    assert f"which '{first}' also becomes: one of the two saved values would be lost" in str(info.value)


def test_fields_that_swap_names_keep_both_values(tmp_path):
    path = tmp_path / "v2.yaml"
    table = TURNSTILE.replace("registry: turnstile\n", "registry: turnstile\n" + V2)
    path.write_text(table.replace("{credit: coins, passages: coins}", "{credit: passages, passages: credit}"))
    gate = Turnstile()
    gate.coin()
    gate.push()
    run = load_machine(str(path)).restore(gate.snapshot())
    assert (run.data.credit, run.data.passages) == (1, 0)
