"""The protocol client of seed 002: every edge of its diagram, the text-derived ones, and what it refuses."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopfsm.core.errors import FeedArgumentError, IllegalFeed, LoopFsmError
from loopfsm.machines.router_client import RouterClient

ROUTER_CLIENT = RouterClient.compiled

# The seed's client diagram, edge for edge: (from, to, label).  Labels are the branch descriptions.
SEED_EDGES = [
    ("Idle", "Waiting", "send execute"),
    ("Waiting", "Idle", "completed (plaintext) / error / idle"),
    ("Waiting", "Sealing", "completed (encrypted), to_encrypt set"),
    ("Waiting", "RunningTools", "awaiting_tool"),
    ("Waiting", "Approving", "awaiting_approval"),
    ("Waiting", "Decrypting", "awaiting_decrypt"),
    ("RunningTools", "Waiting", "send tool_results"),
    ("Approving", "Waiting", "send approval_decisions"),
    ("Decrypting", "Waiting", "send decrypted"),
    ("Sealing", "Waiting", "send sealed"),
    ("RunningTools", "Waiting", "send break / inject"),
    ("Approving", "Waiting", "send break / inject"),
    ("Decrypting", "Waiting", "send break / inject"),
]

ALL = ["tool_results", "approval_decisions", "decrypted", "sealed", "inject", "break"]


def branches() -> list[tuple[str, str, str]]:
    out = []
    for ev in ROUTER_CLIENT.spec.events.values():
        for src, chain in ev.sources.items():
            for b in chain:
                out.append((src, b.dest or src, b.description))
    return out


def test_every_seed_edge_is_a_branch_and_every_other_branch_is_marked_text_derived() -> None:
    table = branches()
    for edge in SEED_EDGES:
        assert edge in table, edge
    extra = [b for b in table if b not in SEED_EDGES]
    # the non-diagram branches: each says where it comes from, or is the retry loop on a retryable error
    assert extra and all("text-derived" in d or "retryable" in d for _, _, d in extra), extra
    assert ROUTER_CLIENT.initial == "Idle" and not ROUTER_CLIENT.terminal_states


def at(state: str, allowed: list[str] | None = None) -> RouterClient:
    """A client in ``state``, reached through real feeds, whose last response allowed ``allowed``."""
    c = RouterClient()
    c.feed("send", "execute", "r0")
    status = {
        "RunningTools": "awaiting_tool",
        "Approving": "awaiting_approval",
        "Decrypting": "awaiting_decrypt",
        "Sealing": "completed",
        "Idle": "error",
    }.get(state)
    if status is not None:
        c.feed("response", "r0", status, allowed if allowed is not None else ALL, has_to_encrypt=state == "Sealing")
    assert c.state == state
    return c


@pytest.mark.parametrize(
    ("status", "to_encrypt", "target"),
    [
        ("completed", False, "Idle"),
        ("completed", True, "Sealing"),
        ("error", False, "Idle"),
        ("idle", False, "Idle"),
        ("awaiting_tool", False, "RunningTools"),
        ("awaiting_approval", False, "Approving"),
        ("awaiting_decrypt", False, "Decrypting"),
    ],
)
def test_responses_move_as_the_diagram_says(status: str, to_encrypt: bool, target: str) -> None:
    c = at("Waiting")
    c.feed("response", "r0", status, ["break"], has_to_encrypt=to_encrypt)
    assert c.state == target and c.data.allowed == ["break"] and c.data.outstanding is None


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ("RunningTools", "tool_results"),
        ("Approving", "approval_decisions"),
        ("Decrypting", "decrypted"),
        ("Sealing", "sealed"),
        ("RunningTools", "break"),
        ("RunningTools", "inject"),
        ("Approving", "break"),
        ("Approving", "inject"),
        ("Decrypting", "break"),
        ("Decrypting", "inject"),
        ("Sealing", "break"),
    ],
)
def test_each_pause_answers_with_what_was_advertised(state: str, message: str) -> None:
    c = at(state)
    c.feed("send", message, "r1")
    assert c.state == "Waiting" and c.data.outstanding == "r1" and c.data.allowed == []


@pytest.mark.parametrize(
    ("state", "message"),
    [(s, m) for s in ("RunningTools", "Approving", "Decrypting", "Sealing") for m in ALL + ["execute"]],
)
def test_the_client_never_leads(state: str, message: str) -> None:
    """Only what the last response advertised may be sent; with an empty list, nothing but Waiting's escape."""
    c = at(state, allowed=[])
    before = c.snapshot()
    with pytest.raises(IllegalFeed):
        c.feed("send", message, "r1")
    assert c.snapshot() == before


def test_wrong_answer_to_a_pause_is_refused_even_when_advertised_elsewhere() -> None:
    c = at("RunningTools")
    for message in ("approval_decisions", "decrypted", "sealed", "execute"):
        with pytest.raises(IllegalFeed):
            c.feed("send", message, "r1")
    sealing = at("Sealing")
    with pytest.raises(IllegalFeed):  # the encrypted completed turn allows [sealed, break], not inject
        sealing.feed("send", "inject", "r1")


def test_break_or_inject_while_waiting_supersedes_the_outstanding_request() -> None:
    c = at("Waiting")
    c.feed("send", "break", "r1")
    assert c.state == "Waiting" and c.data.outstanding == "r1"
    c.feed("response", "r0", "awaiting_tool", ALL)  # the superseded request's late answer
    assert c.state == "Waiting" and c.data.superseded == 1
    c.feed("response", "r1", "idle", [])
    assert c.state == "Idle"


def test_retryable_error_keeps_waiting_final_error_returns_to_idle_with_escape() -> None:
    c = at("Waiting")
    c.feed("response", "r0", "error", ["tool_results", "inject", "break"], retryable=True)
    assert c.state == "Waiting" and c.data.outstanding == "r0"
    c.feed("response", "r0", "error", ["tool_results", "inject", "break"])
    assert c.state == "Idle"
    with pytest.raises(IllegalFeed):  # from Idle, only execute, or an escape hatch the error advertised
        c.feed("send", "tool_results", "r1")
    c.feed("send", "break", "r1")
    assert c.state == "Waiting"
    idle = at("Waiting")
    idle.feed("response", "r0", "completed", [])
    with pytest.raises(IllegalFeed):
        idle.feed("send", "break", "r1")


def test_responses_only_while_waiting_and_arguments_typed() -> None:
    for state in ("Idle", "RunningTools", "Sealing"):
        c = at(state)
        before = c.snapshot()
        with pytest.raises(IllegalFeed):
            c.feed("response", "r0", "idle", [])
        assert c.snapshot() == before
    c = at("Waiting")
    for bad in (("r0", "finished", []), ("r0", "idle", ["teleport"]), (5, "idle", []), ("r0", "idle", "break")):
        with pytest.raises(FeedArgumentError):
            c.feed("response", *bad)
    with pytest.raises(FeedArgumentError):
        c.feed("send", "shout", "r1")


MESSAGES = st.sampled_from(["execute", *ALL])
STATUSES = st.sampled_from(["completed", "awaiting_tool", "awaiting_approval", "awaiting_decrypt", "idle", "error"])
STEP = st.one_of(
    st.tuples(st.just("send"), MESSAGES),
    st.tuples(
        st.just("response"),
        STATUSES,
        st.lists(st.sampled_from(ALL), max_size=3, unique=True),
        st.booleans(),
        st.booleans(),
        st.booleans(),
    ),
)


@given(st.lists(STEP, max_size=30))
def test_random_conversations_keep_the_invariants(steps: list[tuple]) -> None:  # type: ignore[type-arg]
    """Whatever arrives: refusals change nothing, sends are advertised, snapshots restore exactly."""
    c = RouterClient()
    ids = itertools.count()
    for step in steps:
        before = c.snapshot()
        state, allowed = c.state, list(c.data.allowed)
        try:
            if step[0] == "send":
                rid = f"r{next(ids)}"
                c.feed("send", step[1], rid)
                assert c.state == "Waiting"
                if state != "Waiting":
                    assert step[1] == "execute" and state == "Idle" or step[1] in allowed
            else:
                _, status, adv, enc, retry, stale = step
                rid = "nope" if stale or c.data.outstanding is None else c.data.outstanding
                c.feed("response", rid, status, adv, has_to_encrypt=enc, retryable=retry)
                assert state == "Waiting"
        except LoopFsmError:
            assert c.snapshot() == before
        restored = RouterClient.restore(json.loads(json.dumps(c.snapshot())))
        assert restored.snapshot() == c.snapshot()
        assert (c.data.outstanding is not None) == (c.state == "Waiting")
