"""The README's commands and examples are the ones that work."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from loopfsm.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def code_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, re.S)


def test_ci_runs_exactly_the_readme_test_command():
    test_cmd = next(b.strip() for b in code_blocks("sh") if "pytest" in b)
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_cmd in ci.splitlines()


def test_main_job_command_builds():
    build_cmd = code_blocks("sh")[0].strip()
    assert build_cmd.endswith("loopfsm build")


def test_driven_run_example_runs_and_fits_in_40_lines(capsys):
    block = README.split("<!-- readme-example: driven-run -->")[1].split("```python\n")[1].split("```")[0]
    assert len(block.strip().splitlines()) < 40
    exec(compile(block, "README-driven-run", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out == ["Completed(final_text='The folder holds a.txt and b.txt.')",
                   "['user', 'assistant', 'tool', 'assistant']"]


def test_quickstart_python_runs():
    block = next(b for b in code_blocks("python") if "Turnstile()" in b)
    exec(compile(block, "README-quickstart", "exec"), {})


def test_pasted_trace_is_what_the_command_prints(monkeypatch):
    pasted = README.split("$ loopfsm run engine_brain --script examples/summarize.yaml\n")[1].split("```")[0]
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["run", "engine_brain", "--script", "examples/summarize.yaml"]) == 0
    assert out.getvalue() == pasted


def test_longer_example_script_walks_compaction(monkeypatch):
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["run", "engine_brain", "--script", "examples/fix_tests.yaml"]) == 0
    text = out.getvalue()
    assert "web_search*" in text and "Compact(ThresholdExceeded) [threshold]" in text
    assert text.splitlines()[-2].endswith("Terminal(outcome=Completed)")


def test_run_refuses_a_bad_script(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("input: hi\nmodel: []\n")
    assert main(["run", "engine_brain", "--script", str(bad)]) == 1
    assert "script model: [] should be non-empty" in capsys.readouterr().err
    short = tmp_path / "short.yaml"
    short.write_text("input: hi\nmodel: [{tool_calls: [{id: a, name: t}], context_tokens: 5}]\ntools: [t]\n")
    assert main(["run", "engine_brain", "--script", str(short)]) == 1
    assert "no model reply left for turn 1" in capsys.readouterr().err
    assert main(["run", "turnstile", "--script", str(short)]) == 2


def test_benchmark_output_is_pasted():
    assert "full 10-turn run (feeds + next_step)" in README
    assert "vs raw transitions" in README and (ROOT / "benchmarks" / "bench.py").exists()


def example(name: str) -> str:
    return README.split(f"<!-- readme-example: {name} -->")[1].split("```python\n")[1].split("```")[0]


def test_tool_breaker_example_trips_on_a_real_failing_command(capsys):
    scope: dict = {}
    exec(compile(example("tool-breaker"), "README-tool-breaker", "exec"), scope)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 4 and all("failed" in line for line in out[:3])
    assert "unavailable (open: consecutive_failures)" in out[3]
    assert scope["health"].states == {"false": "Open"}


def test_fallback_breaker_example_switches_models(capsys):
    exec(compile(example("fallback-breaker"), "README-fallback-breaker", "exec"), {})
    assert capsys.readouterr().out.splitlines() == [
        "primary timed out Primary", "primary timed out Fallback", "fallback answers 'hi' Fallback"]


def test_script_can_cancel_mid_run(tmp_path, capsys):
    script = tmp_path / "cancel.yaml"
    script.write_text("input: go\ntools: [t]\ncancel_after_turn: 1\n"
                      "model: [{tool_calls: [{id: a, name: t}], context_tokens: 5}]\n")
    assert main(["run", "engine_brain", "--script", str(script)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert any("cancel()" in r for r in rows)
    assert rows[-2].endswith("Terminal(outcome=Cancelled)") and "Done(Cancelled) [cancelled]" in rows[-2]


def test_one_api_example_runs():
    exec(compile(example("one-api"), "README-one-api", "exec"), {})
