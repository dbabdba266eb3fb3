"""router_run: every edge of seed 002's router diagram, the text-derived edges, and the rebuilt tables."""

from __future__ import annotations

import itertools

import pytest

from loopfsm import FeedArgumentError, IllegalFeed, NoBranchMatched
from loopfsm.core.loader import load
from loopfsm.machines.router_run import ROUTER_RUN, RouterRun
from loopfsm.core.resources import machine_path

from tests.support.router_helpers import OUTCOME_OF, at, pause_for

# The seed's router diagram, edge for edge: (from, to, label, request, outcome, encrypted run).
SEED_EDGES = [
    ("Idle", "AwaitingDecrypt", "execute, encrypted, sealed history needed", "execute", "needs_decrypt", True),
    ("Idle", "AwaitingApproval", "execute, disclosure/cost gate", "execute", "gate", False),
    ("Idle", "AwaitingTool", "execute, model requested allow/ask tools", "execute", "tools", False),
    ("Idle", "AwaitingEncrypt", "execute, completed, encrypted (seal output)", "execute", "completed", True),
    ("Idle", "Idle", "execute, completed, plaintext", "execute", "completed", False),
    ("AwaitingDecrypt", "AwaitingApproval", "decrypted, then gate", "decrypted", "gate", True),
    ("AwaitingDecrypt", "AwaitingTool", "decrypted, then tools", "decrypted", "tools", True),
    ("AwaitingDecrypt", "AwaitingEncrypt", "decrypted, completed, encrypted", "decrypted", "completed", True),
    ("AwaitingDecrypt", "Idle", "decrypted, completed, plaintext", "decrypted", "completed", False),
    ("AwaitingApproval", "AwaitingTool", "decided, next turn requests tools", "approval_decisions", "tools", False),
    ("AwaitingApproval", "AwaitingEncrypt", "decided, completed, encrypted", "approval_decisions", "completed", True),
    ("AwaitingApproval", "Idle", "decided or aborted", "approval_decisions", "completed", False),
    ("AwaitingTool", "AwaitingTool", "results, next turn requests tools again", "tool_results", "tools", False),
    ("AwaitingTool", "AwaitingApproval", "results, next turn hits a gate or plan", "tool_results", "gate", False),
    ("AwaitingTool", "AwaitingEncrypt", "results, completed, encrypted", "tool_results", "completed", True),
    ("AwaitingTool", "Idle", "results, completed, plaintext", "tool_results", "completed", False),
    ("AwaitingEncrypt", "Idle", "sealed, content rows written", "sealed", None, True),
    ("AwaitingDecrypt", "Idle", "break", "break_run", None, True),
    ("AwaitingApproval", "Idle", "break", "break_run", None, True),
    ("AwaitingTool", "Idle", "break", "break_run", None, True),
]
PHASES = ["Idle", "AwaitingDecrypt", "AwaitingApproval", "AwaitingTool", "AwaitingEncrypt"]
LIVE = PHASES[1:]
#: The trace events router_run writes (docs/machines/router_run.md, "Trace events"); every other name has
#: the router as its one writer.
RUN_MOVES = {
    "run.started",
    "run.injected",
    "run.completed",
    "run.broken",
    "run.aborted",
    "decrypt.requested",
    "seal.requested",
}


def feed(m, request, outcome, dest, encrypted=False):
    if request in ("execute", "inject"):
        return m.feed(request, "r2", outcome, encrypted, 20, pause_for(dest))
    if request == "sealed":
        return m.sealed(20)
    if request == "break_run":
        return m.break_run(20)
    return m.feed(request, outcome, 20, pause=pause_for(dest))


@pytest.mark.parametrize(
    "src, dst, label, req, outcome, encrypted", SEED_EDGES, ids=[f"{e[0]}-{e[1]}-{e[2]}" for e in SEED_EDGES]
)
def test_every_seed_edge(src, dst, label, req, outcome, encrypted):
    m = RouterRun() if src == "Idle" else at(src, encrypted=encrypted)
    if src == "AwaitingDecrypt" and not encrypted:  # only an encrypted run decrypts; flip to test plaintext end
        m.data.encrypted = False
    events = feed(m, req, outcome, dst, encrypted)
    assert m.state == dst
    # the machine records the run's moves only; the items of a step (tool calls, decisions ...) are the router's
    assert events is None or (events and set(events) <= RUN_MOVES)
    if dst != "Idle":
        assert m.state_data["resume_step"] and m.state_data["since"] == 20


def test_diagram_edges_are_described_with_the_seeds_labels():
    spec = load(machine_path("router_run"))
    found = set()
    for ev in spec.events.values():
        for state, branches in spec.expanded_sources(ev).items():
            for b in branches:
                found.add((state, b.dest or state, b.description))
    seed = {(s, d, label) for s, d, label, *_ in SEED_EDGES}
    assert seed <= found
    text_derived = {e for e in found if "(text" in e[2]}
    assert found - text_derived == seed  # every branch is a seed edge or marked text-derived
    # inject from each live phase reaches every target execute reaches from Idle
    for src in ["AwaitingDecrypt", "AwaitingApproval", "AwaitingTool"]:
        assert {d for s, d, lab in text_derived if s == src and lab.startswith("inject")} == set(PHASES)
    assert ("AwaitingEncrypt", "Idle", "break (text; unsealed output dropped)") in text_derived


def test_aborted_approval_ends_the_run():
    m = at("AwaitingApproval")
    assert m.approval_decisions("tools", 30, aborted=True) == ["run.aborted"]
    assert (m.state, m.data.ended, m.data.run_id, m.data.last_run_id) == ("Idle", "aborted", None, "r1")


def test_a_decided_approval_may_lead_to_a_later_gate():
    """Text-derived: a plan after an approved disclosure (or a cost ceiling passed again) pauses once more."""
    m = at("AwaitingApproval")
    second = {
        "approvals": [{"approval_id": "a2", "kind": "plan", "args_hash": "sha256:ef", "expires_at": 9000}],
        "pending_seal": [],
    }
    # the decisions and the new approval are items of the step: the router records them, this machine nothing
    assert m.approval_decisions("gate", 30, pause=second) is None
    assert m.state == "AwaitingApproval" and m.state_data["approvals"][0]["approval_id"] == "a2"
    assert m.data.run_id == "r1" and m.state_data["since"] == 30


@pytest.mark.parametrize(
    "src, req, outcome",
    [
        ("AwaitingDecrypt", "decrypted", "needs_decrypt"),
        ("AwaitingApproval", "approval_decisions", "needs_decrypt"),
        ("AwaitingTool", "tool_results", "needs_decrypt"),
    ],
)
def test_outcomes_without_an_edge_are_refused(src, req, outcome):
    m = at(src)
    before = m.snapshot()
    with pytest.raises(NoBranchMatched):
        m.feed(req, outcome, 20, pause=pause_for("AwaitingDecrypt"))
    assert m.snapshot() == before


@pytest.mark.parametrize("src", LIVE[:3])
@pytest.mark.parametrize("dst", PHASES)
def test_inject_from_live_phases(src, dst):
    m = at(src)
    events = m.inject("r9", OUTCOME_OF.get(dst, "completed"), dst != "Idle", 40, pause_for(dst))
    assert m.state == dst and events[:2] == ["run.injected", "run.started"]
    assert (m.data.run_id if dst != "Idle" else m.data.last_run_id) == "r9"


def test_inject_in_idle_acts_as_execute_and_is_illegal_while_sealing():
    m = RouterRun()
    assert m.inject("r1", "tools", False, 5, pause_for("AwaitingTool"))[0] == "run.started"
    assert m.state == "AwaitingTool"
    m = at("AwaitingEncrypt")
    with pytest.raises(IllegalFeed):
        m.inject("r9", "completed", True, 40, {})


def test_break_in_awaiting_encrypt_drops_the_output():
    m = at("AwaitingEncrypt")
    assert m.break_run(50, "user") == ["run.broken"]
    assert (m.state, m.data.ended) == ("Idle", "user")
    with pytest.raises(IllegalFeed):
        RouterRun().break_run(1)


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"to_decrypt": ["the secret prompt"], "input_ref": "input:i1", "pending_seal": []}, "list of kind:id"),
        ({"to_decrypt": [], "input_ref": "input:i1"}, "missing pending_seal"),
        ({"to_decrypt": [], "input_ref": "input:i1", "pending_seal": [], "content": "hi"}, "unknown content"),
        ({"to_decrypt": [], "input_ref": "blob:1", "pending_seal": []}, "'input_ref' must be a kind:id"),
    ],
)
def test_a_pause_carries_references_only(bad, message):
    m = RouterRun()
    before = m.snapshot()
    with pytest.raises(FeedArgumentError, match=message):
        m.execute("r1", "needs_decrypt", True, 1, bad)
    assert m.snapshot() == before


def test_tool_call_items_cannot_smuggle_content():
    m = RouterRun()
    pause = pause_for("AwaitingTool")
    pause = dict(pause, calls=[dict(pause["calls"][0], arguments={"command": "cat ~/.ssh/id_rsa"})])
    with pytest.raises(FeedArgumentError, match="unknown key"):
        m.execute("r1", "tools", False, 1, pause)
    assert m.state == "Idle"


def test_snapshot_round_trip_in_every_phase():
    for phase in PHASES:
        m = at(phase)
        r = ROUTER_RUN.restore(m.snapshot())
        assert r.snapshot() == m.snapshot() and r.state == phase


# -- the rebuilt admission table, against an oracle written from the docs' table ------------


def oracle(phase, request, lock, replay):
    if replay:
        return "replay"
    if request == "inject" and phase == "AwaitingEncrypt":
        return "not_allowed"
    if request in ("break", "inject") and lock in ("held", "expired"):
        return "preempt"
    if request == "break" and phase == "Idle":
        return "idle"
    if lock == "held":
        return "busy"
    wanted = {
        "Idle": "execute",
        "AwaitingDecrypt": "decrypted",
        "AwaitingApproval": "approval_decisions",
        "AwaitingTool": "tool_results",
        "AwaitingEncrypt": "sealed",
    }
    if request == wanted[phase]:
        return "admit"
    if request == "inject":
        return "not_allowed" if phase == "AwaitingEncrypt" else "admit"
    if request == "break":
        return "admit"
    if request == "execute":
        return "run_live"
    return "not_allowed"


REQUESTS = ["execute", "decrypted", "approval_decisions", "tool_results", "sealed", "inject", "break"]


def test_admission_table_matches_the_oracle_in_every_cell():
    for phase, request, lock, replay in itertools.product(PHASES, REQUESTS, ["free", "held", "expired"], [False, True]):
        m = at(phase)
        assert m.decide("admit", request=request, lock=lock, replay=replay) == oracle(phase, request, lock, replay), (
            phase,
            request,
            lock,
            replay,
        )


def test_respond_and_continuations():
    assert at("AwaitingTool").decide("respond") == {
        "status": "awaiting_tool",
        "allowed_continuations": ["tool_results", "inject", "break"],
    }
    assert at("AwaitingEncrypt").decide("respond") == {
        "status": "completed",
        "allowed_continuations": ["sealed", "break"],
    }
    assert RouterRun().decide("respond", ended="completed") == {"status": "completed", "allowed_continuations": []}
    assert RouterRun().decide("respond", ended="user")["status"] == "idle"
    for phase in LIVE:
        assert "break" in at(phase).decide("continuations")
        assert "break" in at(phase).decide("respond")["allowed_continuations"]


def test_mediation_table():
    m = RouterRun()
    assert m.decide("mediate", permission="deny")["reaches_client"] is False
    assert m.decide("mediate", permission="deny")["trace"] == "tool.denied"
    assert m.decide("mediate", permission="allow")["requires_approval"] == "allow"
    assert m.decide("mediate", permission=None)["requires_approval"] == "ask"
    assert m.decide("mediate", permission=None, policy={"default_permission": "deny"})["route"] == "deny"
    assert m.decide("mediate", permission="allow", known=False)["route"] == "pre_answered"


@pytest.mark.parametrize("dst", PHASES)
def test_inject_in_idle_reaches_what_execute_reaches(dst):
    m = RouterRun()
    events = m.inject("r1", OUTCOME_OF.get(dst, "completed"), dst != "Idle", 5, pause_for(dst))
    assert m.state == dst and events[0] == "run.started"


def test_admission_expires_an_old_pause_but_not_a_break():
    m = at("AwaitingTool")
    ttl = ROUTER_RUN.default_policy.pause_ttl_ms
    assert m.decide("admit", request="tool_results", lock="free", pause_age_ms=ttl - 1) == "admit"
    assert m.decide("admit", request="tool_results", lock="free", pause_age_ms=ttl) == "expire"
    assert m.decide("admit", request="break", lock="free", pause_age_ms=ttl) == "admit"
    assert m.decide("admit", request="tool_results", lock="held", pause_age_ms=ttl) == "busy"
    assert RouterRun().decide("admit", request="execute", lock="free", pause_age_ms=ttl) == "admit"
    assert (
        m.decide("admit", request="tool_results", lock="free", pause_age_ms=10, policy={"pause_ttl_ms": 10}) == "expire"
    )
