"""The engine brain's invariants, proven by ``loopfsm verify`` to a documented bound; and for each, a fault
planted in a copy of the YAML that verify catches and replay reproduces.

The brain's feeds carry values tied to the configuration (the step next_step answers, one answer per
pending tool call, the size measured before a compaction): its YAML says where they come from with
each argument's ``verify:`` block, so this bound needs no ``--values``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from loopfsm.cli.main import main

from tests.support.planted import planted_copy

pytestmark = pytest.mark.slow  # each exploration runs for seconds

ROOT = Path(__file__).resolve().parents[2]
BRAIN = ROOT / "machines" / "engine_brain.yaml"

#: The engine brain's bound: every run of up to 5 feeds with one turn allowed (so that a whole turn
#: cycle, a tool batch included, reaches the cap within it), the rest of the policy at its defaults.
BRAIN_BOUND = ["-q"]  # the machine's own verify: section

INVARIANTS = (
    "turns_bounded",
    "terminal_outcome_is_forever",
    "history_changes_only_by_commit_or_compaction",
    "commit_appends_the_scratchpad",
    "max_turns_only_at_the_cap",
)


def test_the_engine_brain_holds_every_invariant_to_its_bound(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["verify", str(BRAIN), *BRAIN_BOUND]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    for name in INVARIANTS:
        assert f"holds        {name}\n" in out
    assert "reached      the_turn_cap_ends_a_run in 4 feeds" in out
    assert "branches and decision rules taken: 35/35" in out


CAP = "guard: {name: turns_at_least, params: {limit: {policy: max_turns}}}"
FAIL_ANYWHERE = '      "*":\n        - to: Terminal\n          actions: [enter_failed]\n'
DISCARD_ANYWHERE = "  discard_pending:\n    description: Throws the scratchpad away; the driver calls it on failure.\n"
DISCARD_ANYWHERE += '    from:\n      "*":\n        - stay: true\n          actions: [discard]\n'
COMMIT_ANYWHERE = '    from:\n      "*":\n        - stay: true\n          actions: [commit]\n'

# (invariant, (old text, new text): every occurrence replaced)
BRAIN_FAULTS = [
    ("turns_bounded", (CAP, "guard: {name: turns_at_least, params: {limit: 1000}}")),
    ("max_turns_only_at_the_cap", (CAP, "guard: {name: turns_at_least, params: {limit: 0}}")),
    (
        "terminal_outcome_is_forever",
        (FAIL_ANYWHERE, FAIL_ANYWHERE + "      Terminal:\n        - to: Terminal\n          actions: [enter_failed]\n"),
    ),
    (
        "history_changes_only_by_commit_or_compaction",
        (DISCARD_ANYWHERE, DISCARD_ANYWHERE.replace("[discard]", "[commit]")),
    ),
    ("commit_appends_the_scratchpad", (COMMIT_ANYWHERE, COMMIT_ANYWHERE.replace("[commit]", "[discard]"))),
    # a goal: the brain no longer accepts the Done its next_step gives at the cap
    ("the_turn_cap_ends_a_run", ("outcomes: [Cancelled, MaxTurnsExceeded]", "outcomes: [Cancelled]")),
]


@pytest.mark.parametrize(("invariant", "fault"), BRAIN_FAULTS, ids=[f[0] for f in BRAIN_FAULTS])
def test_a_planted_fault_in_the_engine_brain_is_caught_and_replayed(tmp_path, monkeypatch, capsys, invariant, fault):
    monkeypatch.chdir(tmp_path)
    faulty = planted_copy(BRAIN, tmp_path, *fault)
    assert main(["verify", str(faulty), *BRAIN_BOUND]) == 1
    out = capsys.readouterr().out
    if invariant == "the_turn_cap_ends_a_run":  # a goal without an example: nothing to replay
        assert f"NOT REACHED  {invariant}" in out
        return
    assert f"VIOLATED     {invariant}:" in out
    assert "shortest counterexample" in out
    assert main(["replay", str(faulty), str(tmp_path / f"engine_brain.{invariant}.trace.yaml")]) == 1
    assert f"invariant {invariant} violated after step" in capsys.readouterr().out
