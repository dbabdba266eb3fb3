"""`loopfsm new`: the scaffold checks, renders and passes its own test as generated, in a fresh folder."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from loopfsm import load
from loopfsm.cli.main import main
from loopfsm.cli.scaffold import MODELINE, _declare, registry_module
from loopfsm.core.source import read_file
from loopfsm.core.spec import build_spec

ROOT = Path(__file__).resolve().parents[2]


def sh(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run a command as a user would, in ``cwd``, with this interpreter's loopfsm."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def loopfsm(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return sh(cwd, sys.executable, "-m", "loopfsm", *args)


@pytest.mark.slow
def test_scaffold_checks_renders_and_passes_its_test_end_to_end(tmp_path):
    made = loopfsm(tmp_path, "new", "job")
    assert made.returncode == 0, made.stderr
    assert made.stdout.splitlines() == [
        "wrote machines/job.yaml",
        "wrote job.py",
        "wrote tests/test_job.py",
        "wrote machines/machine.schema.json (for editors: the machine file's modeline points at it)",
        'wrote pyproject.toml: [tool.loopfsm] registries job = "job:REGISTRY"',
    ]
    yaml_text = (tmp_path / "machines" / "job.yaml").read_text()
    assert yaml_text.splitlines()[0] == MODELINE == "# yaml-language-server: $schema=machine.schema.json"
    schema = (ROOT / "spec" / "machine.schema.json").read_text()
    assert (tmp_path / "machines" / "machine.schema.json").read_text() == schema
    config = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    assert config["tool"]["loopfsm"] == {"registries": {"job": "job:REGISTRY"}}

    checked = loopfsm(tmp_path, "check", "--require-registry")
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr  # no notes, no unused-name warnings
    assert checked.stdout == "machines/job.yaml: ok (4 states, 3 feeds, 0 decisions)\n"
    built = loopfsm(tmp_path, "build")
    assert built.returncode == 0 and built.stderr == "", built.stderr
    assert sorted(p.name for p in (tmp_path / "diagrams").iterdir()) == [
        ".loopfsm-generated",
        "job.dot",
        "job.md",
        "job.mmd",
        "job.svg",
    ]
    assert loopfsm(tmp_path, "build", "--check").returncode == 0
    tested = sh(tmp_path, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "5 passed" in tested.stdout

    # The generated test really drives the table: a policy edit in the YAML makes it fail.
    (tmp_path / "machines" / "job.yaml").write_text(yaml_text.replace("    default: 3\n", "    default: 2\n", 1))
    tested = sh(tmp_path, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider")
    assert tested.returncode == 1 and "test_failures_are_retried_until_max_attempts" in tested.stdout


def test_new_refuses_to_overwrite_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_job.py").write_text("# mine\n")
    assert main(["new", "job"]) == 2
    assert "tests/test_job.py already exists; nothing was written" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["test_job.py", "tests"]


@pytest.mark.parametrize(
    "name, message",
    [
        ("Job", "not a snake_case identifier"),
        ("class", "not a snake_case identifier"),
        ("json", "would shadow the Python module of that name"),
        ("yaml", "a module named 'yaml' is already importable"),
        ("turnstile", "a registry named 'turnstile' is already installed"),
        ("_job", "starts with '_', which marks a private name"),
        ("conftest", "means something to Python's tools"),
    ],
)
def test_new_refuses_names_that_would_shadow_something(tmp_path, monkeypatch, capsys, name, message):
    monkeypatch.chdir(tmp_path)
    assert main(["new", name]) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_new_declares_into_an_existing_project(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "app"\n\n[tool.loopfsm]\nmachines = "fsm"  # our tables\nregistries = {door = "door:REG"}\n'
    )
    assert main(["new", "job"]) == 0
    out = capsys.readouterr().out
    assert "wrote fsm/job.yaml" in out
    assert 'declared pyproject.toml: [tool.loopfsm] registries job = "job:REGISTRY"' in out
    text = (tmp_path / "pyproject.toml").read_text()
    assert 'machines = "fsm"  # our tables' in text
    assert tomllib.loads(text)["tool"]["loopfsm"]["registries"] == {"door": "door:REG", "job": "job:REGISTRY"}
    assert 'Path(__file__).resolve().parent / "fsm/job.yaml"' in (tmp_path / "job.py").read_text()
    assert 'add `pythonpath = ["."]` under [tool.pytest.ini_options] in pyproject.toml' in out  # not set here
    assert main(["new", "job"]) == 2  # declared now (and its files exist)


@pytest.mark.parametrize(
    "before, registries",
    [
        ("", {"job": "job:REGISTRY"}),
        ('[project]\nname = "x"', {"job": "job:REGISTRY"}),
        ('[tool.loopfsm]\ndiagrams = "docs"\n', {"job": "job:REGISTRY"}),
        ("[tool.loopfsm]\nregistries = {}\n", {"job": "job:REGISTRY"}),
        ('[tool.loopfsm]\nregistries = { a = "a:R" }\n', {"a": "a:R", "job": "job:REGISTRY"}),
        (
            '[tool.loopfsm.registries]  # mine\na = "a:R"\n\n[tool.ruff]\nline-length = 99\n',
            {"a": "a:R", "job": "job:REGISTRY"},
        ),
    ],
)
def test_declaring_keeps_everything_else(tmp_path, before, registries):
    path = tmp_path / "pyproject.toml"
    path.write_text(before)
    after = _declare(path, "job", "job:REGISTRY")
    assert after is not None
    kept = [line for line in before.splitlines() if not line.startswith("registries")]
    assert all(line in after.splitlines() for line in kept)  # comments and layout stay
    old, new = tomllib.loads(before), tomllib.loads(after)
    assert new["tool"]["loopfsm"]["registries"] == registries
    new["tool"]["loopfsm"].pop("registries")
    old.setdefault("tool", {}).setdefault("loopfsm", {}).pop("registries", None)
    assert new == old


def test_an_unusual_pyproject_is_left_alone_with_instructions(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    # a dotted-key table: no textual edit can be proved right, so the user is told what to add
    (tmp_path / "pyproject.toml").write_text('tool.loopfsm.registries.a = "a:R"\n')
    before = (tmp_path / "pyproject.toml").read_text()
    assert main(["new", "job"]) == 0
    assert 'add to [tool.loopfsm] registries in pyproject.toml: job = "job:REGISTRY"' in capsys.readouterr().out
    assert (tmp_path / "pyproject.toml").read_text() == before


@pytest.mark.parametrize("machine", ["turnstile", "tool_breaker", "fallback_breaker", "router_client"])
def test_derived_registry_signatures_match_shipped_tables(machine):
    """The signature generator is general: for a shipped table it writes a registry the checker accepts whole."""
    path = ROOT / "machines" / f"{machine}.yaml"
    source = registry_module(build_spec(read_file(path)), f"machines/{machine}.yaml")
    scope = {"__name__": f"generated_{machine}", "__file__": str(ROOT / "generated.py")}
    exec(compile(source, f"generated_{machine}", "exec"), scope)
    spec = load(path, scope["REGISTRY"])
    assert spec.warnings == []  # every generated function is used, every parameter accepted
    assert "raise NotImplementedError" in source  # unknown bodies are left for the user, loudly


def test_a_failed_write_leaves_nothing_behind(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "machines").write_text("a file where the folder should be\n")
    assert main(["new", "job"]) == 2
    assert "cannot write machines/job.yaml: machines is not a folder; nothing was written" in capsys.readouterr().err
    (tmp_path / "machines").unlink()
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_job.py").symlink_to(tmp_path / "elsewhere.py")  # dangling: not followed
    assert main(["new", "job"]) == 2
    assert "cannot write tests/test_job.py" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["test_job.py", "tests"]  # machines/, job.py undone
    assert not (tmp_path / "elsewhere.py").exists()
    assert main(["new", "a" * 65]) == 2
    assert "too long (at most 64)" in capsys.readouterr().err


def test_a_symlinked_pyproject_keeps_its_link(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "shared.toml").write_text('[project]\nname = "x"\n')
    (tmp_path / "pyproject.toml").symlink_to("shared.toml")
    assert main(["new", "job"]) == 0
    assert (tmp_path / "pyproject.toml").is_symlink()
    assert tomllib.loads((tmp_path / "shared.toml").read_text())["tool"]["loopfsm"]["registries"] == {
        "job": "job:REGISTRY"
    }
