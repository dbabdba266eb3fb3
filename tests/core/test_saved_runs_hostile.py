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
from textwrap import dedent
from typing import Any

import pytest

from loopfsm.cli.main import main
from loopfsm import Registry, SnapshotError, SpecError, compile_spec, load_machine, parse
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


# -- states merged by a migration are judged one saved state at a time -----------------------

MERGED_V1 = dedent("""
    machine: merging
    description: two waiting states that a new version merges
    states:
      idle: {initial: true, description: nothing yet}
      by_count: {description: counted, terminal: true, data: {mark: {type: integer}}}
      by_name: {description: named, terminal: true, data: {mark: {type: string}}}
    events:
      count: {description: c, from: {idle: [{to: by_count, actions: [mark_count]}]}}
      name: {description: n, from: {idle: [{to: by_name, actions: [mark_name]}]}}
""")
MERGED_V2 = dedent("""
    machine: merging
    version: 2
    description: one waiting state
    states:
      idle: {initial: true, description: nothing yet}
      marked: {description: marked, terminal: true, data: {mark: {type: string}}}
    events:
      name: {description: n, from: {idle: [{to: marked, actions: [mark_name]}]}}
    migrations:
      - from: 1
        reads: {states: {idle: {}, by_count: {mark: integer}, by_name: {mark: string}}}
        states: {by_count: marked, by_name: marked}
""")


def merging(text: str) -> Any:
    reg = Registry("merging_test")

    @reg.action
    def mark_count(m: Any, ctx: Any) -> None:
        ctx.enter(mark=3)

    @reg.action
    def mark_name(m: Any, ctx: Any) -> None:
        ctx.enter(mark="three")

    return compile_spec(parse(text, "merging.yaml", reg), reg)


def test_merged_states_whose_field_types_differ_are_refused_by_check_and_diff(tmp_path, capsys):
    counted = merging(MERGED_V1).new()
    counted.count()
    with pytest.raises(SpecError) as info:
        merging(MERGED_V2)
    assert re.search(
        r"merging\.yaml:\d+:\d+: migrations\[0\]: the migrations do not carry version 1 to this table: "
        r"field mark of state marked changed from integer to string",
        str(info.value),
    ), str(info.value)
    (tmp_path / "v1.yaml").write_text(MERGED_V1)
    (tmp_path / "v2.yaml").write_text(MERGED_V2)
    main(["diff", str(tmp_path / "v1.yaml"), str(tmp_path / "v2.yaml")])
    verdict, check = capsys.readouterr().out.splitlines()[-2:]
    assert verdict == (
        "  saved runs in by_count are refused even through the migration from version 1: "
        "field mark of state marked changed from integer to string; runs in other states restore"
    )
    assert check.startswith("  the new version does not pass `loopfsm check`: ")


# -- a default given in the middle of a chain is held to the version it leads to --------------

CHAIN = """version: 3
migrations:
  - from: 1
    reads:
      data: {credit: integer}
      states: {locked: {}, unlocked: {}}
    defaults: {passages: DEFAULT}
  - from: 2
    reads:
      data: {credit: integer, passages: integer}
      states: {locked: {}, unlocked: {}}
"""


@pytest.mark.parametrize("default,ok", [("0", True), ("'none'", False), ("1.5", False)])
def test_a_default_of_an_earlier_entry_is_checked_against_the_next_versions_type(tmp_path, default, ok):
    path = tmp_path / "v3.yaml"
    path.write_text(
        TURNSTILE.replace("registry: turnstile\n", "registry: turnstile\n" + CHAIN.replace("DEFAULT", default))
    )
    if ok:
        assert load_machine(str(path)).spec.version == 3
        return
    with pytest.raises(SpecError) as info:
        load_machine(str(path))
    line = next(i for i, x in enumerate(path.read_text().splitlines(), 1) if x.startswith("    defaults:"))
    assert re.search(
        rf"v3\.yaml:{line}:\d+: migrations\[0\]\.defaults\.passages: default .* is not a integer", str(info.value)
    ), str(info.value)
