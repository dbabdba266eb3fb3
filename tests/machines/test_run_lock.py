"""run_lock: lease, fence, takeover, preemption, recovery; the model the store's SQL is tested against."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopfsm import NoBranchMatched
from loopfsm.machines.errors import FencedOut
from loopfsm.core.errors import IllegalFeed
from loopfsm.machines.run_lock import RUN_LOCK, RunLock


def test_acquire_release_and_the_fence_grows():
    m = RunLock()
    assert m.acquire(100, "A", 50) == ["lock.acquired"]
    assert (m.state, m.data.fence, m.state_data["lease_expires_at"]) == ("Held", 1, 150)
    assert m.release(120, 1) == ["lock.released"]
    assert m.state == "Free" and m.data.fence == 1
    m.acquire(130, "B", 50)
    assert m.data.fence == 2


def test_live_lease_cannot_be_acquired_and_the_boundary_counts_as_expired():
    m = RunLock()
    m.acquire(100, "A", 50)
    with pytest.raises(NoBranchMatched):
        m.acquire(149, "B", 50)
    assert m.acquire(150, "B", 50) == ["lock.taken_over"]
    assert (m.state_data["holder"], m.data.fence) == ("B", 2)


def test_stale_holder_is_fenced_out_and_changes_nothing():
    m = RunLock()
    m.acquire(100, "A", 50)
    m.acquire(200, "B", 50)  # takeover
    before = m.snapshot()
    for call in (lambda: m.renew(210, 1, 50), lambda: m.release(210, 1)):
        with pytest.raises(FencedOut):
            call()
        assert m.snapshot() == before
    m.release(220, 2)
    with pytest.raises(FencedOut):
        m.release(230, 2)  # a freed lock refuses every release


def test_past_its_lease_a_holder_nobody_replaced_may_still_renew():
    m = RunLock()
    m.acquire(100, "A", 50)
    m.renew(400, 1, 50)
    assert m.state_data["lease_expires_at"] == 450


def test_break_requests_cancel_then_preempts():
    m = RunLock()
    m.acquire(100, "A", 1000)
    m.request_cancel("break")
    assert m.state_data["cancel_requested"] == "break"
    m.renew(110, 1, 1000)
    assert m.state_data["cancel_requested"] == "break"  # the holder sees it at its renew
    assert m.preempt(120, "B", 1000) == ["lock.preempted"]
    assert (m.state_data["holder"], m.data.fence, m.state_data["cancel_requested"]) == ("B", 2, None)
    with pytest.raises(IllegalFeed):
        RunLock().preempt(1, "B", 10)


def test_recover_frees_only_own_locks_reset_frees_any():
    m = RunLock()
    m.acquire(100, "A", 1000)
    assert m.recover("B") is None and m.state == "Held"
    assert m.recover("A") == ["recovery.cleared"] and m.state == "Free"
    m.acquire(100, "A", 1000)
    m.reset()
    assert m.state == "Free" and m.data.fence == 2


def test_expire_frees_only_an_expired_lease():
    m = RunLock()
    m.acquire(100, "A", 50)
    m.expire(149)
    assert m.state == "Held"
    m.expire(150)
    assert m.state == "Free"


def test_time_going_backwards_is_clamped():
    m = RunLock()
    m.acquire(1000, "A", 50)
    m.release(1010, 1)
    m.acquire(5, "B", 50)  # a clock that jumped back
    assert m.state_data["started_at"] == 1010 and m.state_data["lease_expires_at"] == 1060


OPS = st.lists(
    st.tuples(
        st.sampled_from(["acquire", "preempt", "renew", "release", "expire", "recover", "reset"]),
        st.integers(0, 400),
        st.sampled_from(["A", "B", "C"]),
        st.integers(0, 6),
    ),
    max_size=30,
)


@pytest.mark.slow
@given(OPS)
def test_fence_never_decreases_and_one_holder_at_most(ops):
    m = RunLock()
    last = 0
    for op, now, who, fence in ops:
        try:
            if op == "acquire":
                m.acquire(now, who, 60)
            elif op == "preempt":
                m.preempt(now, who, 60)
            elif op == "renew":
                m.renew(now, fence, 60)
            elif op == "release":
                m.release(now, fence)
            elif op == "expire":
                m.expire(now)
            elif op == "recover":
                m.recover(who)
            else:
                m.reset()
        except (FencedOut, IllegalFeed):
            pass
        assert m.data.fence >= last
        last = m.data.fence
        assert RUN_LOCK.restore(m.snapshot()).snapshot() == m.snapshot()
