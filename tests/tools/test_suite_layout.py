"""The test suite's own layout, as tests/README.md states it: folders that mirror the package, a strict slow marker."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
GUIDE = (TESTS / "README.md").read_text(encoding="utf-8")


def folders_in_the_guide() -> list[str]:
    return re.findall(r"^\| `(\w+)/` \|", GUIDE, re.M)


def test_every_test_file_is_in_a_folder_the_guide_names():
    folders = folders_in_the_guide()
    assert "support" in folders and len(folders) >= 7
    misplaced = [
        str(p.relative_to(TESTS))
        for p in TESTS.rglob("test_*.py")
        if len(p.relative_to(TESTS).parts) != 2 or p.parent.name not in folders or p.parent.name == "support"
    ]
    assert misplaced == [], "move these into the folder of what they test (tests/README.md)"


def test_the_tree_is_a_package_and_the_guide_names_every_folder():
    on_disk = sorted(p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
    assert on_disk == sorted(folders_in_the_guide())
    for folder in [TESTS, *(TESTS / name for name in on_disk)]:
        assert (folder / "__init__.py").is_file(), folder


def test_the_slow_marker_is_registered_and_markers_are_strict():
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "--strict-markers" in shlex.split(options["addopts"])
    assert [m.split(":")[0] for m in options["markers"]] == ["slow"]


def test_ci_runs_every_test_once_and_the_quick_loop_on_the_other_pythons():
    """One run leaves no test out (the README's command); every other run is exactly the quick loop."""
    ci = (ROOT / ".ci" / "run").read_text()
    runs = [line for line in ci.splitlines() if "-m pytest" in line and not line.lstrip().startswith("#")]
    options = [line.split("-m pytest", 1)[1] for line in runs]
    whole = [o for o in options if not re.search(r"(^|\s)(-m|-k|--deselect|--ignore)\b", o)]
    assert len(runs) >= 2 and len(whole) == 1, runs
    assert [o for o in options if o not in whole] == [' -q -m "not slow" -n auto'] * (len(runs) - 1), runs
    assert 'export PYTEST_ADDOPTS="${PYTEST_ADDOPTS:+$PYTEST_ADDOPTS }--durations=10"' in ci.splitlines()


def test_the_readme_gives_the_quick_loop():
    readme = (ROOT / "README.md").read_text()
    assert 'python3 -m pytest -q -m "not slow" -n auto' in readme
    assert 'python3 -m pytest -q -m "not slow" -n auto' in GUIDE
