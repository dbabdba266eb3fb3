"""An integer is a signed 64-bit value in feeds, snapshots, policies and machine files.

A machine fed ``10**5000`` could never be saved (Python will not write an
integer of more than 4,300 digits as JSON), and a time of ``10**30`` would
clamp a breaker's clock for good: both are refused where they come in.  (A
machine file's default outside the range is a case of test_bad_files.)
"""

from __future__ import annotations

import json

import pytest

from loopfsm import PolicyError, SnapshotError
from loopfsm.core.errors import FeedArgumentError
from loopfsm.core.fieldtypes import INT_MAX, INT_MIN
from loopfsm.machines import ToolBreaker, TurnstilePolicy

TOO_BIG = [INT_MAX + 1, INT_MIN - 1, 10**30, 10**5000]


@pytest.mark.parametrize("now", TOO_BIG, ids=["max+1", "min-1", "1e30", "5000 digits"])
def test_a_feed_refuses_an_integer_outside_64_bits_and_changes_nothing(now):
    b = ToolBreaker()
    b.acquire(5, "c0")
    before = b.snapshot()
    with pytest.raises(FeedArgumentError, match=r"argument 'now' must be integer \(signed 64-bit\)"):
        b.acquire(now, "c1")
    with pytest.raises(FeedArgumentError, match="signed 64-bit"):
        b.feed("acquire", now=now, call_id="c1")  # the general binder says the same
    assert b.snapshot() == before


def test_the_edges_of_the_range_are_integers():
    b = ToolBreaker()
    b.acquire(INT_MAX, "c")
    assert json.loads(json.dumps(b.snapshot()))["data"]["last_now"] == INT_MAX


@pytest.mark.parametrize("now", TOO_BIG, ids=["max+1", "min-1", "1e30", "5000 digits"])
def test_a_snapshot_holding_an_integer_outside_64_bits_is_refused(now):
    """A time field has no bounds of its own (a counter's minimum would refuse min-1 first)."""
    snap = ToolBreaker().snapshot()
    snap["data"]["last_now"] = now
    with pytest.raises(SnapshotError, match="which is not an integer"):
        ToolBreaker.restore(snap)


def test_a_policy_value_outside_64_bits_is_refused():
    with pytest.raises(PolicyError, match="outside the signed 64-bit integer range"):
        TurnstilePolicy(fare=INT_MAX + 1)
    with pytest.raises(PolicyError, match="above the maximum"):  # in range, and then held to the file's bounds
        TurnstilePolicy(fare=INT_MAX)
