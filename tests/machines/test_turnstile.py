"""Seed 000's turnstile: the four rows, and the fare as policy."""

from __future__ import annotations

import pytest

from loopfsm.machines.turnstile import Turnstile
from loopfsm.render.matrix import review_sheet

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
