"""The commands and examples of the README and docs/ are the ones that work."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.docs_pages import all_pages, page, section
from loopfsm.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
README = page("README.md")
PERFORMANCE = page("docs/performance.md")


def code_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, re.S)


def test_ci_runs_exactly_the_readme_test_command():
    test_cmd = next(b.strip() for b in code_blocks("sh") if "pytest" in b)
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_cmd in ci.splitlines()


def test_the_non_root_set_up_runs_the_same_commands_without_apt():
    blocks = code_blocks("sh")
    build_cmd, test_cmd = blocks[0].strip(), next(b.strip() for b in blocks if "pytest" in b)
    development = section(page("docs/development.md"), "## Set up without root")
    venv = re.findall(r"```sh\n(.*?)```", development, re.S)[0].splitlines()
    assert "apt-get" not in "\n".join(venv) and venv[0].startswith("python3 -m venv .venv && ")
    for root_cmd in (build_cmd, test_cmd):
        found = re.match(r"apt-get update && apt-get install -y graphviz( chromium)? && (.*)", root_cmd)
        assert found and found.group(2) in venv, root_cmd
    assert blocks.index(build_cmd + "\n") == 0 and test_cmd in blocks[1]  # the root commands come first


def test_main_job_command_builds():
    build_cmd = code_blocks("sh")[0].strip()
    assert build_cmd.endswith("loopfsm build")


def test_driven_run_example_runs_and_fits_in_40_lines(capsys):
    block = example("driven-run")
    assert len(block.strip().splitlines()) < 40
    exec(compile(block, "README-driven-run", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "Completed(final_text='The folder holds a.txt and b.txt.')",
        "['user', 'assistant', 'tool', 'assistant']",
    ]


def quickstart() -> str:
    return section(README, "## Quickstart")


def quickstart_edit(machine_file: str) -> str:
    """``machine_file`` with the Quickstart's edit applied, worked out from its YAML block alone:
    the lines it shows, with the value the ``# was`` comment names, are replaced by the lines it shows."""
    block = quickstart().split("```yaml\n", 1)[1].split("```", 1)[0]
    edited = re.search(r"^(\s*\w+: )(\S+)\s+# was (\S+)$", block, re.M)
    assert edited, block
    old = block.replace(edited.group(0), edited.group(1) + edited.group(3))
    new = block.replace(edited.group(0), edited.group(1) + edited.group(2))
    assert machine_file.count(old) == 1, old
    return machine_file.replace(old, new)


@pytest.mark.slow
def test_quickstart_works_when_followed(tmp_path):
    """Copy the project, make the Quickstart's edit, run its commands and its Python block, as a user would."""
    copy = tmp_path / "project"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("loopfsm", "machines", "spec", "diagrams"):
        shutil.copytree(ROOT / part, copy / part, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    turnstile = copy / "machines" / "turnstile.yaml"
    turnstile.write_text(quickstart_edit(turnstile.read_text()))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(PYTHONPATH=str(copy), LOOPFSM_CACHE_DIR=str(tmp_path / "cache"))

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *argv], cwd=copy, env=env, capture_output=True, text=True, timeout=300)

    before = {p.name: p.read_bytes() for p in (copy / "diagrams").glob("turnstile.*")}
    commands = re.findall(r"^loopfsm (\S.*?)\s+# (.*)$", quickstart().split("```sh\n", 1)[1].split("```")[0], re.M)
    assert [c for c, _ in commands] == ["build", "build --check"]
    assert run("-m", "loopfsm", "build", "--check").returncode == 1  # "exits 1 while diagrams/ is stale"
    built = run("-m", "loopfsm", "build")
    assert built.returncode == 0, built.stderr
    written = [line.removeprefix("wrote ") for line in built.stdout.splitlines() if line.startswith("wrote ")]
    assert commands[0][1] == f"writes {', '.join(written)}, the one view that changed"
    assert run("-m", "loopfsm", "build", "--check").returncode == 0
    after = {p.name: p.read_bytes() for p in (copy / "diagrams").glob("turnstile.*")}
    assert [n for n in sorted(after) if after[n] != before[n]] == ["turnstile.md"]
    assert "| `fare` | integer | 2 |" in after["turnstile.md"].decode()
    block = next(b for b in code_blocks("python") if "Turnstile()" in b)
    assert block in quickstart()
    ran = run("-c", block)
    assert ran.returncode == 0, ran.stderr
    # The block ran against the copy and its edited table (the default fare it was written for).
    probe = run("-c", "import loopfsm; from loopfsm.machines import TurnstilePolicy; print(loopfsm.__file__)")
    assert probe.stdout.strip() == str(copy / "loopfsm" / "__init__.py")
    assert run("-c", "from loopfsm.machines import TurnstilePolicy; print(TurnstilePolicy().fare)").stdout == "2\n"


def test_pasted_trace_is_what_the_command_prints(monkeypatch):
    brain = page("docs/machines/engine_brain.md")
    pasted = brain.split("$ loopfsm run engine_brain --script examples/summarize.yaml\n")[1].split("```")[0]
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
    """docs/performance.md shows the benchmark's current output: every floor line the script prints, with its floor."""
    bench = (ROOT / "benchmarks" / "bench.py").read_text()
    for label in (
        "turnstile feed, default engine",
        "turnstile restore, default engine (validated)",
        "turnstile create, default engine",
        "growth after 100,000 instances dropped",
        "turnstile feed (alternating coin / push)",
        "turnstile restore (validated)",
        "turnstile create",
        "brain run (10 turns: feeds + next_step)",
        "tool breaker acquire + record(success)",
        "cold start, 9 machines (above bare python)",
        "compile per state (10..5000 states)",
        "compile linear (per state 5000 / 100)",
    ):
        assert label in bench, label
        assert label in PERFORMANCE, label
    assert PERFORMANCE.count("floor <= ") >= 10 and "\nfloors:\n" in PERFORMANCE


def example(name: str, text: str = README) -> str:
    return text.split(f"<!-- example: {name} -->")[1].split("```python\n")[1].split("```")[0]


def test_tool_breaker_example_trips_on_a_real_failing_command(capsys):
    scope: dict = {}
    exec(compile(example("tool-breaker"), "README-tool-breaker", "exec"), scope)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 4 and all("failed" in line for line in out[:3])
    assert "unavailable (open: consecutive_failures)" in out[3]
    assert scope["health"].states == {"false": "Open"}


def test_fallback_breaker_example_switches_models(capsys):
    text = page("docs/machines/breakers.md")
    exec(compile(example("fallback-breaker", text), "docs-fallback-breaker", "exec"), {})
    assert capsys.readouterr().out.splitlines() == [
        "primary timed out Primary",
        "primary timed out Fallback",
        "fallback answers 'hi' Fallback",
    ]


def test_script_can_cancel_mid_run(tmp_path, capsys):
    script = tmp_path / "cancel.yaml"
    script.write_text(
        "input: go\ntools: [t]\ncancel_after_turn: 1\nmodel: [{tool_calls: [{id: a, name: t}], context_tokens: 5}]\n"
    )
    assert main(["run", "engine_brain", "--script", str(script)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert any("cancel()" in r for r in rows)
    assert rows[-2].endswith("Terminal(outcome=Cancelled)") and "Done(Cancelled) [cancelled]" in rows[-2]


def test_one_api_example_runs():
    exec(compile(example("one-api"), "README-one-api", "exec"), {})


def test_transitions_example_runs():
    exec(compile(example("transitions", page("docs/transitions.md")), "docs-transitions", "exec"), {})


def walkthrough() -> list[tuple[str, ...]]:
    """The "Your first machine" steps in order: ("run", command, expected output, exit code) or ("edit", ...)."""
    steps: list[tuple[str, ...]] = []
    marks = re.finditer(r"<!-- readme-walkthrough(-edit: (.*?))? -->\n", README)
    for mark in marks:
        if mark.group(2):
            file, old, new = (part.strip("\n") for part in mark.group(2).split(" | "))
            steps.append(("edit", file.strip(), old, new))
            continue
        block = README[mark.end() :].split("```console\n", 1)[1].split("```", 1)[0]
        command, output = None, []
        for line in block.splitlines() + ["$ "]:
            if line.startswith("$ "):
                if command is not None:
                    code = re.search(r"#\s*exits (\d+)$", command)
                    steps.append(("run", command, "\n".join(output), code.group(1) if code else "0"))
                command, output = line[2:], []
            else:
                output.append(line)
    return steps


@pytest.mark.slow
def test_first_machine_walkthrough_runs_as_written(tmp_path):
    """Every command of "Your first machine", run in an empty folder, prints what the README shows."""
    steps = walkthrough()
    assert [s[1] for s in steps if s[0] == "run"][:2] == ["mkdir first-machine && cd first-machine", "loopfsm new job"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool, how in (("loopfsm", "-m loopfsm"), ("python3", "")):
        (bin_dir / tool).write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {how} "$@"\n')
        (bin_dir / tool).chmod(0o755)
    edit = (
        "import pathlib, sys; p = pathlib.Path(sys.argv[1]); t = p.read_text(); "
        "assert sys.argv[2] in t, sys.argv[2]; p.write_text(t.replace(sys.argv[2], sys.argv[3], 1))"
    )
    script = ["set -u"]
    for i, step in enumerate(steps):
        if step[0] == "edit":
            script.append("python3 -c " + " ".join(map(shlex.quote, (edit, *step[1:]))) + " || exit 99")
        else:
            script += [f"echo '@@step {i}'", "{", step[1], "} 2>&1", f'echo "@@exit {i} $?"']
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONUNBUFFERED="1", COLUMNS="80")
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    timing = re.compile(r" in [0-9.]+s$", re.M)
    # pytest's short summary shows the failure's message cut to the terminal width in some releases
    # and whole in others: keep "FAILED <test id>" and compare that.
    failed = re.compile(r"^(FAILED \S+) - .*?(?=^\d+ (?:failed|passed))", re.M | re.S)

    def normal(text: str) -> str:
        return failed.sub(r"\1\n", timing.sub(" in Xs", text))

    for i, step in enumerate(steps):
        if step[0] != "run":
            continue
        got = done.stdout.split(f"@@step {i}\n", 1)[1]
        got, code = re.match(rf"(.*?)@@exit {i} (\d+)\n", got, re.S).groups()
        assert (step[1], normal(got.rstrip("\n"))) == (step[1], normal(step[2]))
        assert (step[1], code) == (step[1], step[3])
    svg = (tmp_path / "first-machine" / "diagrams" / "job.svg").read_text()
    assert "<svg" in svg and "gave_up" in svg


def test_walkthrough_excerpts_are_what_new_writes(tmp_path, monkeypatch, capsys):
    """The YAML and Python pasted in "Your first machine" are verbatim parts of the generated files."""
    monkeypatch.chdir(tmp_path)
    assert main(["new", "job"]) == 0
    first = section(README, "## Your first machine")
    yaml_part = first.split("```yaml\n")[1].split("```")[0]
    py_part = first.split("```python\n")[1].split("```")[0]
    assert yaml_part in (tmp_path / "machines" / "job.yaml").read_text()
    assert py_part in (tmp_path / "job.py").read_text()


def test_stream_driver_example_feeds_a_recording_into_the_brain(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    exec(compile(example("stream-driver"), "README-stream-driver", "exec"), {})
    assert capsys.readouterr().out.splitlines() == [
        "tool_use AwaitingTools [{'city': 'Paris', 'unit': 'celsius'}]",
        "EqQBCgIYAhIM True",
    ]


def test_pasted_stream_replay_is_what_the_command_prints(monkeypatch):
    stream = page("docs/machines/stream_assembly.md")
    pasted = stream.split("$ loopfsm run stream_assembly --events examples/weather_anthropic.jsonl\n")[1]
    pasted = pasted.split("```")[0]
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["run", "stream_assembly", "--events", "examples/weather_anthropic.jsonl"]) == 0
    assert out.getvalue() == pasted


def test_ci_gates_types_lint_and_format():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    for gate in ("python3 -m mypy", "python3 -m ruff check .", "python3 -m ruff format --check ."):
        assert gate in ci and gate in page("docs/development.md")


def test_stream_benchmark_output_is_pasted():
    assert "1 MB of JSON tool arguments" in PERFORMANCE and (ROOT / "benchmarks" / "stream.py").exists()


def test_words_that_cite_an_admission_rule_by_number_cite_the_row_that_answers_so():
    """``expire`` (rule 7): a rule number quoted in prose names the admission row with that answer.

    Rule 2 (``request_id_reused``) was inserted into the table and the sweep's words went on citing rule 6.
    """
    text = page("docs/machines/router_run.md")
    rows = dict(re.findall(r"^\| (\d+) \| [^|]+ \| ([^\n]+) \|$", text.split("**Admission**", 1)[1], re.M)[:20])
    assert (
        rows["7"].startswith("`expire`")
        and rows["2"] == "`request_id_reused`, whatever the request's type and body: never processed again"
    )
    cited = [(w, n, p) for p in all_pages() for w, n in re.findall(r"`(\w+)` \(rule (\d+)\)", page(p))]
    sweep = (ROOT / "loopfsm" / "router" / "store" / "sweep.py").read_text()
    cited += [(w, n, "sweep.py") for w, n in re.findall(r"``(\w+)`` \(rule (\d+)", sweep)]
    assert cited, "no citation found: the pattern is stale"
    wrong = [(w, n, where) for w, n, where in cited if f"`{w}`" not in rows.get(n, "")]
    assert wrong == []


@pytest.mark.slow  # a fresh virtual environment and a real `pip install .`: half a minute or more
def test_the_try_it_commands_work_for_a_user(tmp_path):
    """ "Try it in two minutes", as a user runs it: a non-editable install from the clone into a fresh
    environment (its dependencies taken from the system's site-packages, so nothing is downloaded but the
    build backend), then the three commands in an empty folder under the user's home."""
    block = section(README, "## Try it in two minutes").split("```console\n")[1].split("```")[0]
    commands = [line.removeprefix("$ ") for line in block.splitlines()]
    assert all(line.startswith("$ ") for line in block.splitlines()) and len(commands) == 3
    assert commands[0] == "python3 -m pip install . pytest" and "loopfsm new door" in commands[1]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", HOME=str(home), VIRTUAL_ENV=str(venv))
    script = "set -e\n" + "\n".join(commands) + "\n"
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    door = home / "door"
    assert (door / "machines" / "door.yaml").is_file() and "<svg" in (door / "diagrams" / "door.svg").read_text()
    assert re.search(r"^\d+ passed", done.stdout, re.M), done.stdout[-2000:]
    where = subprocess.run(
        [str(venv / "bin" / "python3"), "-c", "import loopfsm; print(loopfsm.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        check=True,
    ).stdout
    assert where.startswith(str(venv)), where  # the user's install, not the clone's editable one
