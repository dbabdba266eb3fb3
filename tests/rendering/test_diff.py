"""``loopfsm diff``: every kind of change in words, exit codes, snapshot verdicts, the git driver."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.docs_pages import page
from loopfsm.cli.main import main
from loopfsm.rendering.diff import diff_specs, load_for_diff

ROOT = Path(__file__).resolve().parents[2]


def variant(tmp_path: Path, machine: str, *edits: tuple[str, str], name: str = "new.yaml") -> Path:
    text = (ROOT / "machines" / f"{machine}.yaml").read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / name
    path.write_text(text)
    return path


def changes(tmp_path: Path, machine: str, *edits: tuple[str, str]) -> tuple[list[str], bool, bool]:
    d = diff_specs(
        load_for_diff(str(ROOT / "machines" / f"{machine}.yaml")),
        load_for_diff(str(variant(tmp_path, machine, *edits))),
    )
    return [c.text for c in d.changes], d.behaviour_changed, d.snapshots_restore


def test_identical_files_diff_to_nothing(capsys):
    path = str(ROOT / "machines" / "tool_breaker.yaml")
    assert main(["diff", path, path]) == 0
    out = capsys.readouterr().out
    assert "tool_breaker: no changes" in out and "saved runs restore as they are" in out


def test_description_only_exits_0_and_snapshots_still_restore(tmp_path, capsys):
    new = variant(tmp_path, "turnstile", ("it clicks open", "the arm is released"))
    assert main(["diff", str(ROOT / "machines" / "turnstile.yaml"), str(new)]) == 0
    out = capsys.readouterr().out
    assert "descriptions only" in out
    assert '~ coin from locked [0]: description "it clicks open" -> "the arm is released"' in out
    assert "saved runs restore as they are" in out


def test_policy_default_names_where_it_is_read(tmp_path, capsys):
    new = variant(tmp_path, "turnstile", ("default: 1\n", "default: 2\n"))
    assert main(["diff", str(ROOT / "machines" / "turnstile.yaml"), str(new)]) == 1
    out = capsys.readouterr().out
    assert "* policy fare (read by coin from locked): default 1 -> 2" in out
    assert out.rstrip().endswith("\n  saved runs restore as they are")


def test_policy_bounds(tmp_path):
    found, changed, _ = changes(tmp_path, "turnstile", ("maximum: 100", "maximum: 10"))
    assert found == ["policy fare (read by coin from locked): upper bound 100 -> 10"] and changed


def test_guard_params_actions_and_targets(tmp_path):
    found, changed, restore = changes(
        tmp_path,
        "turnstile",
        ("params: {fare: {policy: fare}}", "params: {fare: 3}"),
        ("actions: [count_passage]", "actions: [count_passage, clear_credit]"),
        ("        - to: locked\n", "        - to: unlocked\n"),
    )
    assert "coin from locked [0]: guard fare_paid(fare=policy.fare) -> fare_paid(fare=3)" in found
    assert "push from unlocked [0]: actions count_passage -> count_passage, clear_credit" in found
    assert "push from unlocked [0]: target locked -> unlocked" in found
    assert changed and restore  # rules changed, the shape did not: saved runs are judged by the new rules


def test_branch_inserted_removed_and_feed_states(tmp_path):
    found, _, _ = changes(
        tmp_path,
        "turnstile",
        ("      unlocked:\n        - stay: true\n          description: extra coin, no harm\n", ""),
        (
            "      locked:\n        - stay: true\n          description: it refuses (that is the point)\n",
            "      locked:\n        - guard: fare_paid\n          to: unlocked\n"
            "        - stay: true\n          description: it refuses (that is the point)\n",
        ),
    )
    assert "coin from unlocked: no longer accepted" in found
    assert "push from locked [0] added: if fare_paid -> unlocked" in found


def test_states_fields_and_shape(tmp_path, capsys):
    new = variant(
        tmp_path,
        "turnstile",
        ("  unlocked:\n", "  broken:\n    description: Out of order.\n    terminal: true\n  unlocked:\n"),
        ("  passages:\n    type: integer\n", "  passages:\n    type: number\n"),
    )
    assert main(["diff", str(ROOT / "machines" / "turnstile.yaml"), str(new)]) == 1
    out = capsys.readouterr().out
    assert "* state broken added (terminal)" in out
    assert "* data: field passages integer = 0 -> number = 0" in out
    assert out.splitlines()[-2] == "  saved runs restore as they are"  # every integer is a number
    assert out.splitlines()[-1].startswith("  the new version does not pass `loopfsm check`: ")  # broken: no way in


def test_decision_rules_in_order(tmp_path):
    text = (ROOT / "machines" / "engine_brain.yaml").read_text()
    start = text.index("      - name: emergency")
    end = text.index("      - name: threshold")
    mid = text.index("      - name: call_model")
    swapped = text[:start] + text[end:mid] + text[start:end] + text[mid:]
    swapped = swapped.replace("percent: 95, inclusive: true", "percent: 90, inclusive: true")
    path = tmp_path / "brain.yaml"
    path.write_text(swapped)
    d = diff_specs(load_for_diff(str(ROOT / "machines" / "engine_brain.yaml")), load_for_diff(str(path)))
    texts = [c.text for c in d.changes]
    assert (
        "decision next_step: rule order cancelled, terminal, max_turns, emergency, threshold, call_model, "
        "call_tools, compacting -> cancelled, terminal, max_turns, threshold, emergency, call_model, "
        "call_tools, compacting (first hit wins)"
    ) in texts
    assert any(
        t.startswith("decision next_step rule emergency: guard tokens_past_percent(")
        and "percent=95" in t
        and "percent=90" in t
        for t in texts
    )


def test_feed_added_and_arguments(tmp_path):
    found, _, _ = changes(
        tmp_path,
        "tool_breaker",
        (
            "  tick:\n    description: Time passed;",
            "  ping:\n    description: Health check.\n    from:\n"
            "      Closed:\n        - stay: true\n  tick:\n    description: Time passed;",
        ),
        (
            "      call_id: {type: string, description: the call's id}\n    from:\n      Closed:\n        - stay: true",
            "      call_id: {type: string, description: the call's id}\n      weight: {type: integer, default: 1}\n"
            "    from:\n      Closed:\n        - stay: true",
        ),
    )
    assert "feed ping added (from Closed)" in found
    assert "feed acquire arguments: field weight added (integer = 1)" in found


@pytest.mark.parametrize("bad", ["x: [\n", "machine: t\n", ""])
def test_bad_input_exits_2(tmp_path, capsys, bad):
    path = tmp_path / "bad.yaml"
    path.write_text(bad)
    assert main(["diff", str(ROOT / "machines" / "turnstile.yaml"), str(path)]) == 2
    assert "bad.yaml" in capsys.readouterr().err
    assert main(["diff", str(tmp_path / "missing.yaml"), str(path)]) == 2
    assert main(["diff", str(path)]) == 2


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_git_diff_driver_recipe(tmp_path):
    """docs/cli.md's recipe, run as written, with this interpreter's loopfsm first on PATH."""
    repo, bin_dir = tmp_path / "repo", tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "loopfsm").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m loopfsm "$@"\n')
    (bin_dir / "loopfsm").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout

    (repo / "machines").mkdir(parents=True)
    git("init", "-q")
    git("config", "user.email", "t@example.invalid")
    git("config", "user.name", "t")
    shutil.copy(ROOT / "machines" / "turnstile.yaml", repo / "machines" / "turnstile.yaml")
    recipe = page("docs/cli.md").split("external diff driver:\n")[1].split("```sh\n")[1].split("```")[0]
    subprocess.run(["bash", "-c", "set -e\n" + recipe], cwd=repo, env=env, check=True)
    git("add", ".")
    git("commit", "-qm", "one")
    f = repo / "machines" / "turnstile.yaml"
    f.write_text(f.read_text().replace("default: 1\n", "default: 2\n", 1))
    out = git("diff")
    assert "machines/turnstile.yaml:" in out and "policy fare (read by coin from locked): default 1 -> 2" in out
    f.write_text("machine: turnstile\n  bad: [unclosed\n")  # a work in progress that does not parse
    out = git("diff")  # git stops at a driver that exits non-zero: this one says why and exits 0
    assert "machines/turnstile.yaml: the new version cannot be compared:" in out and "not valid YAML" in out
    assert "git-blob" not in out and "/tmp/" not in out.split("cannot be compared:")[0]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_git_log_and_show_use_the_driver_only_with_ext_diff(tmp_path):
    """docs/cli.md says `git diff` uses the driver as is and `git log -p` / `git show` need --ext-diff: so they do."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    git("config", "user.email", "t@example.invalid")
    git("config", "user.name", "t")
    (tmp_path / "machines").mkdir()
    f = tmp_path / "machines" / "turnstile.yaml"
    shutil.copy(ROOT / "machines" / "turnstile.yaml", f)
    (tmp_path / ".gitattributes").write_text("machines/*.yaml diff=loopfsm\n")
    git("config", "diff.loopfsm.command", f"{sys.executable} -m loopfsm diff --git")
    git("add", ".")
    git("commit", "-qm", "one")
    f.write_text(f.read_text().replace("default: 1\n", "default: 2\n", 1))
    git("commit", "-qam", "two")
    words = "policy fare (read by coin from locked): default 1 -> 2"
    cli = page("docs/cli.md")
    for command in (["diff", "HEAD~1"], ["log", "-p", "--ext-diff", "-1"], ["show", "--ext-diff"]):
        assert words in git(*command), command
        assert f"`git {' '.join(c for c in command if c not in ('HEAD~1', '-1'))}`" in cli, command
    for command in (["log", "-p", "-1"], ["show"]):  # without --ext-diff: git's own text diff
        out = git(*command)
        assert words not in out and "+    default: 2" in out, command


def test_before_actions_any_guards_and_refusals_are_named(tmp_path):
    found, changed, _ = changes(
        tmp_path,
        "tool_breaker",
        ("before: [clamp_clock]", "before: [clamp_clock, new_generation]"),
        ("guard: {any: [stale, {name: holds_lease, negate: true}]}", "guard: {any: [stale, holds_lease]}"),
    )
    assert "before every feed: clamp_clock -> clamp_clock, new_generation" in found
    assert any("guard (stale or not holds_lease) -> (stale or holds_lease)" in t for t in found), found
    assert changed
    found, _, _ = changes(
        tmp_path,
        "agent_loop",
        ('refuse: "the action named is not the tool call awaiting a decision"', 'refuse: "not that one"'),
    )
    assert any(
        'target refuse ("the action named is not the tool call awaiting a decision") -> refuse ("not that one")' in t
        for t in found
    ), found


def test_git_mode_takes_seven_arguments_and_names_added_files(capsys):
    path = str(ROOT / "machines" / "turnstile.yaml")
    assert main(["diff", "--git", "machines/turnstile.yaml", "/dev/null", ".", ".", path, "abc", "100644"]) == 0
    assert capsys.readouterr().out == "machines/turnstile.yaml: machine file added\n"
    assert main(["diff", "--git", "machines/turnstile.yaml", path, ".", ".", path, ".", "."]) == 0
    assert "turnstile: no changes" in capsys.readouterr().out
    assert main(["diff", "--git", "a", "b"]) == 2


@pytest.mark.slow
def test_what_was_removed_is_listed_in_the_old_files_order_whatever_the_hash_seed(tmp_path):
    """A git diff driver's output must not change between two runs on the same files."""
    extra = "".join(f"  gone_{c}:\n    type: integer\n    default: 0\n" for c in "qwertyuiop")
    old = variant(tmp_path, "turnstile", ("data:\n", "data:\n" + extra), name="old.yaml")
    new = ROOT / "machines" / "turnstile.yaml"
    outs = set()
    for seed in ("1", "2", "3", "4"):
        run = subprocess.run(
            [sys.executable, "-m", "loopfsm", "diff", str(old), str(new)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert run.returncode == 1, run.stderr
        outs.add(run.stdout)
    assert len(outs) == 1
    removed = [line for line in outs.pop().splitlines() if "gone_" in line and "saved runs" not in line]
    assert [line.split("gone_")[1][0] for line in removed] == list("qwertyuiop"), removed


def test_a_new_file_naming_a_state_it_does_not_declare_is_bad_input(tmp_path, capsys):
    new = variant(tmp_path, "tool_breaker", ("to: HalfOpen", "to: HalfOpn"))
    assert main(["diff", str(ROOT / "machines" / "tool_breaker.yaml"), str(new)]) == 2
    err = capsys.readouterr().err
    assert "new.yaml:" in err and "events.acquire.from.Open[0].to: unknown state 'HalfOpn'" in err


def test_two_branches_swapped_are_said_to_have_moved(tmp_path):
    old = variant(
        tmp_path,
        "turnstile",
        (
            "        - to: locked\n",
            "        - guard: {name: fare_paid, params: {fare: 9}}\n          to: locked\n        - to: locked\n",
        ),
        name="old.yaml",
    )
    text = old.read_text()
    swapped = text.replace(
        "        - guard: {name: fare_paid, params: {fare: 9}}\n          to: locked\n        - to: locked\n",
        "        - to: locked\n        - guard: {name: fare_paid, params: {fare: 9}}\n          to: locked\n",
    )
    assert swapped != text
    new = tmp_path / "new.yaml"
    new.write_text(swapped)
    found = [c.text for c in diff_specs(load_for_diff(str(old)), load_for_diff(str(new))).changes]
    moved = [t for t in found if "moved to" in t]
    assert moved and not [t for t in found if " added: " in t or " removed: " in t], found


def test_a_state_field_added_with_a_default_is_named_in_the_verdict_and_restores_so(tmp_path, capsys):
    old = ROOT / "machines" / "engine_brain.yaml"
    line = "      turn: {type: integer, minimum: 0, description: the turn the call belongs to}\n  AwaitingTools:"
    added = "      retries: {type: integer, minimum: 0, default: 0, description: retries so far}\n"
    new = variant(tmp_path, "engine_brain", (line, line.replace("  AwaitingTools:", added + "  AwaitingTools:")))
    assert main(["diff", str(old), str(new)]) == 1
    out = capsys.readouterr().out
    assert "saved runs restore as they are; new fields take their defaults (retries of state AwaitingModel)" in out
    from loopfsm import load_machine

    brain = load_machine(str(old)).new()
    brain.accept_input("hi")
    brain.begin(brain.next_step())
    again = load_machine(str(new)).restore(brain.snapshot())
    assert again.state == "AwaitingModel" and again.state_data == {"turn": 0, "retries": 0}


def test_an_invariant_whose_states_changed_is_marked_as_a_proof_change_not_a_rewording(tmp_path, capsys):
    new = variant(
        tmp_path,
        "engine_brain",
        (
            "    states: [Terminal]\n    step:\n      then: [state_unchanged",
            "    states: [Terminal, Start]\n    step:\n      then: [state_unchanged",
        ),
    )
    assert main(["diff", str(ROOT / "machines" / "engine_brain.yaml"), str(new)]) == 0
    out = capsys.readouterr().out
    assert "engine_brain: invariants and descriptions only" in out
    assert "  ! invariant terminal_outcome_is_forever changed" in out
    assert "~ invariant" not in out


def test_diff_says_when_the_new_version_does_not_pass_check(tmp_path, capsys):
    first = "      AwaitingCompaction:\n        - guard: no_progress\n"
    unguarded = "        - to: Start\n          actions: [replace_history]\n"
    shadowing = first.replace("        - guard", unguarded + "        - guard")
    old = ROOT / "machines" / "engine_brain.yaml"
    new = variant(tmp_path, "engine_brain", (first, shadowing))
    assert main(["diff", str(old), str(new)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("  the new version does not pass `loopfsm check`: ")
    assert "can never be taken: branch 0 before it has no guard and always wins (and 1 more error)" in out[-1]
    assert main(["diff", str(old), str(old)]) == 0
    assert "does not pass" not in capsys.readouterr().out
