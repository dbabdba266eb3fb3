"""What a user installs: --version, python -m loopfsm, the licence file, classifiers, py.typed in the wheel."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loopfsm", *args], capture_output=True, text=True, cwd=ROOT)


def test_version_is_the_installed_one_and_python_dash_m_works():
    out = run("--version")
    assert (
        out.returncode == 0 and out.stdout.strip() == f"loopfsm {version('loopfsm')}" == f"loopfsm {PROJECT['version']}"
    )
    checked = run("check", "machines/turnstile.yaml")
    assert checked.returncode == 0, checked.stderr


def test_licence_classifiers_and_urls():
    assert PROJECT["license"] == "MIT" and "LICENSE" in PROJECT["license-files"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert PROJECT["requires-python"] == ">=3.11"
    classifiers = set(PROJECT["classifiers"])
    assert {"Programming Language :: Python :: 3.11", "Typing :: Typed"} <= classifiers
    assert not any(c.endswith((":: 3.9", ":: 3.10")) for c in classifiers)
    assert PROJECT["urls"]["Homepage"].startswith("https://")


def test_wheel_carries_py_typed_licence_and_the_bundled_machines(tmp_path):
    pytest.importorskip("hatchling")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("loopfsm-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "loopfsm/py.typed" in names
    assert "loopfsm/machines/policies.pyi" in names  # what type checkers read of the policy classes
    assert "loopfsm/_bundled/machines/engine_brain.yaml" in names
    assert any(n.endswith("licenses/LICENSE") for n in names)
    meta = next(n for n in names if n.endswith("METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    assert "Classifier: Typing :: Typed" in text and "Project-URL: Homepage" in text


def test_changelog_lists_the_breaking_renames_with_their_old_names():
    text = (ROOT / "CHANGELOG.md").read_text()
    for old, new in [
        ("consecutive_failures", "trip_after"),
        ("open_ms", "cooldown_ms"),
        ("probe_successes", "recover_after"),
        ("open_elapsed", "cooldown_over"),
        ("`ok`", "`success`"),
        ("load_brain", "load_machine"),
        ("state_name", "state_and_data"),
        ("ENGINE_BRAIN", "compiled"),
        ("ToolHealth.states()", "UnknownFeed"),
    ]:
        assert old in text and new in text, (old, new)
