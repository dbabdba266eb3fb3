"""The router run's invariants, proven by ``loopfsm verify`` to a documented bound; and for each, a fault
planted in a copy of the YAML that verify catches and replay reproduces.

One table proves what its phase can promise: a run is live exactly while paused, only an encrypted run waits
for sealing, decryption is asked only at a run's start, and a resumed turn counts. That a tool call needing
approval runs only after it is the router's (the approval is folded into the call's result before this
table hears of it), so it is proven by the router's tests, not here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from loopfsm.cli.main import main

from tests.support.planted import planted_copy

pytestmark = pytest.mark.slow  # each exploration runs for a few seconds

ROOT = Path(__file__).resolve().parents[2]
ROUTER_RUN = ROOT / "machines" / "router_run.yaml"

#: The router run's bound: every run of up to 5 feeds, all at time 0 (no invariant here reads the clock;
#: a pause's payload comes from the table's `verify:` generator, one valid payload per pause state).
ROUTER_BOUND = ["-q"]  # the machine's own verify: section

INVARIANTS = ("live_exactly_while_paused", "seal_only_encrypted_runs", "decrypt_only_at_a_run_start")
INVARIANTS += ("a_resumed_turn_counts",)


def test_the_router_run_holds_every_invariant_to_its_bound(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["verify", str(ROUTER_RUN), *ROUTER_BOUND]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    for name in INVARIANTS:
        assert f"holds        {name}\n" in out


PLAINTEXT_DONE = (
    "[start_run, next_turn, {name: end_run, params: {how: completed}}, "
    "{name: emit, params: {events: [run.started, run.completed]}}]"
)
TOOLS_AGAIN = "      AwaitingTool:\n        - when: {outcome: tools}\n          to: AwaitingTool\n"
DECRYPTED_GATE = (
    "          actions: [{name: pause, params: {resume_step: after_approval}}, next_turn]\n"
    "          description: decrypted, then gate\n"
)

# (invariant, (old text, new text): every occurrence replaced)
ROUTER_FAULTS = [
    (
        "live_exactly_while_paused",
        (PLAINTEXT_DONE, PLAINTEXT_DONE.replace(" {name: end_run, params: {how: completed}},", "")),
    ),
    # the guard turned round: a plaintext run is sealed (with the guard left out, `check` refuses the table
    # first: the plaintext branch after it could never be taken; see the test below)
    (
        "seal_only_encrypted_runs",
        ("          guard: run_encrypted\n", "          guard: {name: run_encrypted, negate: true}\n"),
    ),
    (
        "decrypt_only_at_a_run_start",
        (
            TOOLS_AGAIN,
            "      AwaitingTool:\n        - when: {outcome: needs_decrypt}\n          to: AwaitingDecrypt\n"
            "          actions: [{name: pause, params: {resume_step: call_model}}]\n"
            + TOOLS_AGAIN.removeprefix("      AwaitingTool:\n"),
        ),
    ),
    ("a_resumed_turn_counts", (DECRYPTED_GATE, DECRYPTED_GATE.replace(", next_turn]", "]"))),
]


@pytest.mark.parametrize(("invariant", "fault"), ROUTER_FAULTS, ids=[f[0] for f in ROUTER_FAULTS])
def test_a_planted_fault_in_the_router_run_is_caught_and_replayed(tmp_path, monkeypatch, capsys, invariant, fault):
    monkeypatch.chdir(tmp_path)
    faulty = planted_copy(ROUTER_RUN, tmp_path, *fault)
    assert main(["verify", str(faulty), *ROUTER_BOUND]) == 1
    out = capsys.readouterr().out
    assert f"VIOLATED     {invariant}:" in out
    assert "shortest counterexample" in out
    assert main(["replay", str(faulty), str(tmp_path / f"router_run.{invariant}.trace.yaml")]) == 1
    assert f"invariant {invariant} violated after step" in capsys.readouterr().out


def test_the_sealing_guard_left_out_is_refused_by_check_before_verify(tmp_path, capsys):
    """Without `guard: run_encrypted` every completed run is sealed and the plaintext branch after it is never
    taken: `check` says so, at that branch, in each of the three states, and verify will not drive the table."""
    faulty = planted_copy(ROUTER_RUN, tmp_path, "          guard: run_encrypted\n", "")
    assert main(["check", str(faulty)]) == 1
    err = capsys.readouterr().err
    assert err.count("can never be taken: branch") == 3 and "takes every feed it does (outcome=completed)" in err
    assert main(["verify", str(faulty), *ROUTER_BOUND]) == 2
