"""A hypothesis state machine drives the store and the router machines together against a simple model.

The model is written here from the tables of docs/machines/router_run.md, independently of the
YAML: a phase name, a lock (holder, expiry, fence), a version and the last
request id.  Every rule asks the store and checks its answer and its saved row
against the model.
"""

from __future__ import annotations

import os
import tempfile
import uuid

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

from loopfsm import FencedOut, LoopFsmError
from loopfsm.router.store import open_store
from loopfsm.router.store.serve import Outcome, feed_phase
from loopfsm.router.store.phase_feeds import PhaseFeeds

from tests.support.router_helpers import pause_for
from tests.support.store_support import PG_URL, need_pg

pytestmark = pytest.mark.slow  # a hypothesis state machine over both backends

LEASE = 100
WAITS = {
    "Idle": "execute",
    "AwaitingDecrypt": "decrypted",
    "AwaitingApproval": "approval_decisions",
    "AwaitingTool": "tool_results",
    "AwaitingEncrypt": "sealed",
}
TARGET = {"needs_decrypt": "AwaitingDecrypt", "gate": "AwaitingApproval", "tools": "AwaitingTool"}


def model_admit(phase, request, lock, replay):
    if replay:
        return "replay"
    if request == "inject" and phase == "AwaitingEncrypt":
        return "not_allowed"
    if request in ("break", "inject") and lock != "free":
        return "preempt"
    if request == "break" and phase == "Idle":
        return "idle"
    if lock == "held":
        return "busy"
    if request in ("break", "inject") or WAITS[phase] == request:
        return "admit"
    return "run_live" if request == "execute" else "not_allowed"


def model_next(phase, request, outcome, encrypted):
    """The phase after ``request`` with ``outcome``, or None where the seed's diagram has no edge."""
    if request == "break":
        return "Idle"
    if request == "sealed":
        return "Idle"
    if outcome == "completed":
        return "AwaitingEncrypt" if encrypted else "Idle"
    if outcome == "needs_decrypt" and request not in ("execute", "inject"):
        return None
    if outcome == "gate" and request == "approval_decisions":
        return None
    return TARGET[outcome]


class StoreModel(RuleBasedStateMachine):
    url = ""
    leases = Bundle("leases")

    @initialize()
    def open(self):
        self.prefix = f"t_router_hyp_{uuid.uuid4().hex[:8]}_"
        self.store = open_store(self.url, prefix=self.prefix, create=True, clock=lambda: self.now)
        self.now = 1000
        self.store.ensure("s")
        self.phase, self.holder, self.expires, self.fence, self.version = "Idle", None, None, 0, 0
        self.encrypted, self.last_request, self.seq = False, None, 0

    def teardown(self):
        if hasattr(self, "store"):
            self.store.drop()
            self.store.close()

    def lock(self):
        if self.holder is None:
            return "free"
        return "expired" if self.now >= self.expires else "held"

    @rule(dt=st.integers(0, 150))
    def tick(self, dt):
        self.now += dt

    @rule(
        target=leases,
        request=st.sampled_from(
            ["execute", "decrypted", "approval_decisions", "tool_results", "sealed", "inject", "break"]
        ),
        holder=st.sampled_from(["A", "B"]),
        resend=st.booleans(),
    )
    def admit(self, request, holder, resend):
        if not (resend and self.last_request):
            self.seq += 1
        rid = self.last_request if resend and self.last_request else f"q{self.seq}"
        want = model_admit(self.phase, request, self.lock(), rid == self.last_request)
        adm = self.store.admit("s", request, rid, holder=holder, lease_ms=LEASE)
        assert adm.answer == want, (self.phase, request, self.lock(), adm.rule)
        if adm.outcome == "admitted":
            self.holder, self.expires, self.fence = holder, self.now + LEASE, self.fence + 1
            return (adm, request, rid)
        return None

    @rule(
        held=leases, outcome=st.sampled_from(["needs_decrypt", "gate", "tools", "completed"]), encrypted=st.booleans()
    )
    def checkpoint(self, held, outcome, encrypted):
        if held is None:
            return
        adm, request, rid = held
        lease = adm.lease
        current = lease.fence == self.fence and self.holder == lease.holder
        phase = adm.record.phase_machine()
        enc = encrypted if request in ("execute", "inject") else self.encrypted
        if request == "break" and phase.state == "Idle":
            nxt = "Idle"
        else:
            nxt = model_next(phase.state, request, outcome, enc)
            try:
                feed_phase(
                    PhaseFeeds(phase),
                    "s",
                    request,
                    rid,
                    Outcome(outcome, encrypted=encrypted, pause=pause_for(nxt or "")),
                    self.now,
                )
            except LoopFsmError:
                assert nxt is None, (phase.state, request, outcome)
                return
        assert nxt == phase.state
        try:
            self.store.checkpoint(lease, phase, request_id=rid, response={"to": nxt})
        except FencedOut:
            assert not current
            return
        assert current
        self.phase, self.holder, self.expires, self.version, self.last_request = nxt, None, None, self.version + 1, rid
        if request in ("execute", "inject"):
            self.encrypted = enc

    @rule(held=leases)
    def release(self, held):
        if held is None:
            return
        lease = held[0].lease
        current = lease.fence == self.fence and self.holder == lease.holder
        try:
            self.store.release(lease)
        except FencedOut:
            assert not current
            return
        assert current
        self.holder = self.expires = None

    @rule(holder=st.sampled_from(["A", "B"]))
    def recover(self, holder):
        freed = self.store.recover(holder)
        assert freed == (["s"] if self.holder == holder else [])
        if self.holder == holder:
            self.holder = self.expires = None

    @invariant()
    def row_matches_model(self):
        if not hasattr(self, "store"):
            return
        rec = self.store.load("s")
        assert (rec.phase, rec.holder, rec.fence, rec.version) == (self.phase, self.holder, self.fence, self.version)
        assert rec.lease_expires_at == self.expires
        assert rec.phase_machine().state == rec.phase
        lock = rec.lock_machine()  # the lock columns are a state run_lock.yaml accepts
        assert (lock.state, lock.data.fence) == ("Free" if self.holder is None else "Held", self.fence)


SETTINGS = settings(
    max_examples=int(os.environ.get("LOOPFSM_STORE_EXAMPLES", "30")), stateful_step_count=25, deadline=None
)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_store_and_machines_agree_with_the_model(backend):
    if backend == "postgresql":
        need_pg()
        url = PG_URL
    else:
        url = f"sqlite:///{tempfile.mkdtemp()}/runs.db"

    class Case(StoreModel):
        pass

    Case.url = url
    Case.TestCase.settings = SETTINGS
    Case.TestCase().runTest()
