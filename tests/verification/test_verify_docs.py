"""docs/verify.md: every code block of the worked example is what the commands print and write."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from loopfsm.core import loader
from tests.support.docs_pages import page
from loopfsm.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
DOC = page("docs/verify.md")


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", DOC, re.S)


def _timeless(text: str) -> str:
    return re.sub(r" in \d+\.\ds of CPU;", " in 0.0s of CPU;", text)


def _run(console: str, capsys) -> tuple[int, str]:
    """Run the block's ``$`` command; its output is the rest of the block."""
    lines = console.split("\n")
    i = 0
    while lines[i].endswith("\\"):
        i += 1
    command = " ".join(line.rstrip("\\").strip() for line in lines[: i + 1])
    expected = "\n".join(lines[i + 1 :])
    args = shlex.split(command.removeprefix("$ "))
    assert args[0] == "loopfsm"
    capsys.readouterr()
    code = main(args[1:])
    out = capsys.readouterr().out
    assert _timeless(out) == _timeless(expected), out
    return code, out


def test_the_invariants_example_is_a_valid_section_of_the_tool_breaker():
    text = (ROOT / "machines" / "tool_breaker.yaml").read_text(encoding="utf-8").split("\ninvariants:")[0]
    spec = loader.parse(text + "\n" + _blocks("yaml")[0], "tool_breaker.yaml")
    assert list(spec.invariants) == ["probes_bounded", "stale_result_never_moves", "half_opens"]


def test_the_verify_section_shown_is_the_tool_breakers():
    import yaml

    shown = yaml.safe_load(_blocks("yaml")[1])
    assert shown["verify"] == yaml.safe_load((ROOT / "machines" / "tool_breaker.yaml").read_text())["verify"]


def test_the_arg_values_example_is_the_engine_brains():
    import yaml

    shown = yaml.safe_load(_blocks("yaml")[2])["events"]
    brain = yaml.safe_load((ROOT / "machines" / "engine_brain.yaml").read_text(encoding="utf-8"))["events"]
    for feed, body in shown.items():
        for arg, field in body["args"].items():
            assert brain[feed]["args"][arg] == field, (feed, arg)
    assert sum(len(b["args"]) for b in shown.values()) == 4


@pytest.mark.slow
def test_the_worked_example_from_the_edit_to_the_fix(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "machines").mkdir()
    machine = tmp_path / "machines" / "tool_breaker.yaml"
    shutil.copy(ROOT / "machines" / "tool_breaker.yaml", machine)
    good = machine.read_text(encoding="utf-8")
    (diff,) = _blocks("diff")
    old, new = (line[1:] for line in diff.splitlines())
    assert old in good
    machine.write_text(good.replace(old, new), encoding="utf-8")
    verify_broken, replay_broken, verify_fixed = _blocks("console")[:3]
    assert _run(verify_broken, capsys)[0] == 1
    trace = tmp_path / "tool_breaker.probes_bounded.trace.yaml"
    assert trace.read_text(encoding="utf-8") == _blocks("yaml")[3]
    assert _run(replay_broken, capsys)[0] == 1
    machine.write_text(good, encoding="utf-8")
    assert _run(verify_fixed, capsys)[0] == 0


def test_the_hand_written_trace_replays(tmp_path, capsys):
    trace = tmp_path / "t.yaml"
    trace.write_text(_blocks("yaml")[4], encoding="utf-8")
    assert main(["replay", str(ROOT / "machines" / "tool_breaker.yaml"), str(trace)]) == 0
    assert "replayed 2 steps: as the trace expects" in capsys.readouterr().out


def test_the_speed_table_is_pasted_from_the_benchmark():
    """docs/verify.md's Speed table is benchmarks/verify.py's output: its header, and a row per shipped machine."""
    bench = (ROOT / "benchmarks" / "verify.py").read_text(encoding="utf-8")
    table = DOC.split("## Speed", 1)[1].split("```\n", 1)[1].split("```", 1)[0].splitlines()
    assert table[0].startswith("CPU seconds, best of 3 alternating rounds; naive: the same work through the public API")
    assert "naive: the same work through the public API" in bench
    for column in ("configs", "verify s", "naive s", "naive/interp s", "configs/min", "x naive", "x naive/interp"):
        assert column in table[1] and f"'{column}'" in bench, column
    machines = sorted(p.stem for p in (ROOT / "machines").glob("*.yaml"))
    assert [row.split()[0] for row in table[2:]] == machines
