"""``loopfsm verify`` with no options, in this project: every shipped machine is proven to the bound its own
``verify:`` section declares, and all nine together take under two minutes of CPU time (the issue's goal;
about 21 s here)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from loopfsm.cli.main import main

pytestmark = pytest.mark.slow  # explores all nine machines, about twenty seconds

ROOT = Path(__file__).resolve().parents[2]


def test_bare_verify_proves_every_shipped_machine_to_its_declared_bound_within_two_minutes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    start = time.process_time()
    assert main(["verify", "-q", "--traces", str(tmp_path)]) == 0, capsys.readouterr().out
    spent = time.process_time() - start
    out = capsys.readouterr().out
    for path in sorted((ROOT / "machines").glob("*.yaml")):
        assert f"bound from machines/{path.name}'s verify: section\n" in out, path.name
    assert "NOT" not in out and "INCOMPLETE" not in out and "VIOLATED" not in out
    assert out.count("holds        ") >= 30 and list(tmp_path.iterdir()) == []
    assert spent < 120, spent
