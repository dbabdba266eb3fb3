"""Seed 000's turnstile: the four rows, and the fare as policy."""

from __future__ import annotations

import pytest

from tests.support.docs_pages import page
from loopfsm import load_machine
from loopfsm.core.compiler import compile_file
from loopfsm.machines.turnstile import REGISTRY, Turnstile
from loopfsm.rendering.matrix import review_sheet

# Current state, event, new state: the seed's table, row by row.
SEED_ROWS = [
    ("locked", "coin", "unlocked"),
    ("locked", "push", "locked"),
    ("unlocked", "push", "locked"),
    ("unlocked", "coin", "unlocked"),
]


@pytest.mark.parametrize("state,event,new_state", SEED_ROWS)
def test_seed_rows(state, event, new_state):
    t = Turnstile()
    if state == "unlocked":
        t.coin()
    assert t.state == state
    t.feed(event)
    assert t.state == new_state


def test_no_row_lets_a_push_through_a_locked_gate():
    t = Turnstile()
    for _ in range(5):
        t.push()
    assert t.state == "locked" and t.data.passages == 0


def test_fare_is_policy():
    t = Turnstile()
    fare = Turnstile.compiled.Policy(fare=3)
    t.coin(policy=fare)
    t.coin(policy=fare)
    assert t.state == "locked" and t.data.credit == 2
    t.coin(policy=fare)
    assert t.state == "unlocked" and t.data.credit == 0
    t.push()
    assert t.state == "locked" and t.data.passages == 1


def test_review_sheet_shows_the_four_rows():
    md = review_sheet(Turnstile.compiled.spec)
    assert "| `locked` | if `fare_paid(fare=1 (policy.fare))` → `unlocked`" in md
    assert "| `unlocked` | stay | → `locked` / `count_passage` |" in md


def test_the_format_pages_annotated_turnstile_is_the_shipped_table(tmp_path):
    """docs/format.md's annotated turnstile differs from machines/turnstile.yaml only in comments and wording:
    it compiles, with the shipped registry, to the same fingerprint (which covers everything but descriptions)."""
    block = page("docs/format.md").split("## The turnstile, annotated\n")[1].split("```yaml\n")[1].split("```")[0]
    (tmp_path / "turnstile.yaml").write_text(block)
    annotated = compile_file(tmp_path / "turnstile.yaml", REGISTRY)
    assert annotated.spec.fingerprint == load_machine("turnstile").spec.fingerprint
