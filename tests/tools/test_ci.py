"""CI runs the suite on every CPython the package claims, and finds those interpreters only when they are real."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIND = ROOT / ".ci" / "find-python"
BASH = shutil.which("bash") or "/bin/bash"
HERE = f"{sys.version_info.major}.{sys.version_info.minor}"


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def test_ci_runs_the_suite_on_every_python_the_package_claims():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    prefix = "Programming Language :: Python :: "
    claimed = sorted(
        (c.removeprefix(prefix) for c in project["classifiers"] if re.fullmatch(re.escape(prefix) + r"3\.\d+", c)),
        key=version_key,
    )
    oldest = project["requires-python"].removeprefix(">=")
    others = re.search(r"^other_versions=\(([^)]*)\)$", (ROOT / ".ci" / "run").read_text(), re.M)
    assert others, "no other_versions=(...) line in .ci/run"
    tested = sorted([oldest, *others.group(1).split()], key=version_key)
    assert tested == claimed
    readme = (ROOT / "README.md").read_text()
    assert f"(CI tests {', '.join(tested[:-1])} and {tested[-1]})" in readme


def wrapper(path: Path, target: str = sys.executable) -> Path:
    """An executable at ``path`` that runs ``target``: an interpreter installed where find-python looks."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nexec "{target}" "$@"\n')
    path.chmod(0o755)
    return path


def find(version: str, tmp_path: Path, path_dirs: list[Path]) -> subprocess.CompletedProcess[str]:
    """find-python with only ``path_dirs`` (then /usr/bin, /bin) on PATH and ``tmp_path/pyenv`` as pyenv's root."""
    path = ":".join([*map(str, path_dirs), "/usr/bin", "/bin"])
    env = {"PATH": path, "PYENV_ROOT": str(tmp_path / "pyenv"), "HOME": str(tmp_path)}
    return subprocess.run([BASH, str(FIND), version], env=env, capture_output=True, text=True, timeout=60)


def test_find_python_takes_the_interpreter_on_path(tmp_path):
    exe = wrapper(tmp_path / "bin" / f"python{HERE}")
    done = find(HERE, tmp_path, [tmp_path / "bin"])
    assert (done.returncode, done.stdout) == (0, f"{exe}\n"), done.stderr


def test_find_python_prefers_pyenvs_newest_patch_release(tmp_path):
    versions = tmp_path / "pyenv" / "versions"
    for patch in ("1", "9", "10"):  # 10 is newer than 9, though it sorts before it as text
        wrapper(versions / f"{HERE}.{patch}" / "bin" / "python3")
    wrapper(tmp_path / "bin" / f"python{HERE}")
    done = find(HERE, tmp_path, [tmp_path / "bin"])
    assert (done.returncode, done.stdout) == (0, f"{versions / f'{HERE}.10' / 'bin' / 'python3'}\n"), done.stderr


def test_find_python_checks_what_each_candidate_really_runs(tmp_path):
    """A pyenv folder or a command named for 3.99 that runs this interpreter is not 3.99: CI fails, loudly."""
    wrapper(tmp_path / "pyenv" / "versions" / "3.99.0" / "bin" / "python3")
    wrapper(tmp_path / "bin" / "python3.99")
    done = find("3.99", tmp_path, [tmp_path / "bin"])
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: no CPython 3.99 found (looked in ")


def test_find_python_refuses_a_malformed_version(tmp_path):
    for bad in ("", "3", "3.12'", "3.12; true"):
        done = find(bad, tmp_path, [])
        assert (done.returncode, done.stdout) == (2, ""), bad
        assert done.stderr.startswith("usage: find-python MAJOR.MINOR"), bad
