"""Policy classes are visible to type checkers: a misspelt or mistyped policy keyword fails `mypy --strict`.

The classes are built from the YAML at run time; ``loopfsm/machines/policies.pyi`` (written by
``loopfsm stub``) declares them for the checker, and a user's machine gets the same by the route
docs/cli.md gives.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from tests.support.docs_pages import ROOT, page, section
from tests.support.policy_stubs import SHIPPED, STUB, shipped_stub

LOOPFSM = [sys.executable, "-m", "loopfsm"]


def mypy(folder: Path, *files: str) -> list[str]:
    """The error lines of ``mypy --strict`` on ``files`` in ``folder`` (a fresh cache each call: nothing carried
    over; mypy trusts a cached file whose size and whole-second mtime are unchanged, so "fare=2" rewritten as
    "fair=2" within a second was read from one shared cache and passed)."""
    cache = tempfile.mkdtemp(prefix="mypy-cache-", dir=folder)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", cache, *files],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in done.stderr
    return [line for line in done.stdout.splitlines() if ": error:" in line]


def test_the_shipped_stub_is_what_loopfsm_stub_writes():
    assert STUB.read_text(encoding="utf-8") == shipped_stub(), "run `python -m tests.support.policy_stubs`"


def test_loopfsm_stub_prints_the_same_classes_as_the_shipped_stub():
    done = subprocess.run(
        [*LOOPFSM, "stub", "machines/tool_breaker.yaml"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    shipped = STUB.read_text(encoding="utf-8")
    own = done.stdout.split("class ToolBreakerPolicy:", 1)[1]
    assert "class ToolBreakerPolicy:" + own.split("\n\n@dataclass")[0] in shipped
    assert done.stdout.startswith("# Written by `loopfsm stub`") and "#   machines/tool_breaker.yaml" in done.stdout


def test_stub_refuses_a_class_name_for_several_machines_or_a_name_python_cannot_use(tmp_path):
    two = subprocess.run(
        [*LOOPFSM, "stub", "machines/turnstile.yaml", "machines/run_lock.yaml", "--class", "P"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert two.returncode == 2 and "--class names one class, but 2 machines were given" in two.stderr
    bad = subprocess.run(
        [*LOOPFSM, "stub", "machines/turnstile.yaml", "--class", "not a name"], cwd=ROOT, capture_output=True, text=True
    )
    assert bad.returncode == 2 and "is not a Python name" in bad.stderr
    kw = subprocess.run(
        [*LOOPFSM, "stub", "machines/turnstile.yaml", "--class", "class"], cwd=ROOT, capture_output=True, text=True
    )
    assert kw.returncode == 2 and "is not a Python name" in kw.stderr


@pytest.mark.slow  # runs mypy: about a second per run, cold
def test_mypy_reports_a_misspelt_keyword_on_every_shipped_policy_class(tmp_path):
    lines = ["from loopfsm.machines import " + ", ".join(cls.compiled.Policy.__name__ for cls in SHIPPED)]
    for cls in SHIPPED:
        lines.append(f"{cls.compiled.Policy.__name__}(misspelt_number=3)")
    (tmp_path / "typo.py").write_text("\n".join(lines) + "\n", encoding="utf-8")
    errors = mypy(tmp_path, "typo.py")
    assert len(errors) == len(SHIPPED)
    for cls, error in zip(SHIPPED, errors, strict=True):
        assert f'Unexpected keyword argument "misspelt_number" for "{cls.compiled.Policy.__name__}"' in error


@pytest.mark.slow  # runs mypy twice
def test_the_documented_route_types_a_users_policy_class(tmp_path):
    (tmp_path / "machines").mkdir()
    (tmp_path / "machines" / "turnstile.yaml").write_text(
        (ROOT / "machines" / "turnstile.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    subprocess.run(
        [*LOOPFSM, "stub", "machines/turnstile.yaml", "--class", "GatePolicy", "-o", "gate_policy.pyi"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    docs = section(page("docs/cli.md"), "## Typed policy classes")
    use = textwrap.dedent(docs.split("```python\n")[1].split("```")[0])
    assert "gate_policy" in use
    (tmp_path / "gate.py").write_text(use, encoding="utf-8")
    assert mypy(tmp_path, "gate.py") == []
    run = subprocess.run([sys.executable, "gate.py"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    (tmp_path / "gate.py").write_text(use.replace("fare=2", "fair=2"), encoding="utf-8")
    errors = mypy(tmp_path, "gate.py")
    assert len(errors) == 1 and 'Unexpected keyword argument "fair" for "GatePolicy"' in errors[0]
