"""``loopfsm paths``: the generated module's tests pass and take exactly the rows it says it takes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopfsm.core import loader
from loopfsm.core.compiler import compile_file
from loopfsm.cli.main import main
from loopfsm.verification.coverage import rows_of

from tests.support.planted import run_generated_module

ROOT = Path(__file__).resolve().parents[2]


def test_the_turnstile_paths_take_every_row(tmp_path, capsys):
    out = tmp_path / "test_turnstile_paths.py"
    assert main(["paths", str(ROOT / "machines" / "turnstile.yaml"), "-o", str(out), "--set", "fare=2", "-q"]) == 0
    assert "paths taking 5 of 5 branches and decision rules" in capsys.readouterr().err
    count, taken = run_generated_module(out)
    assert count == 5 and len(taken) == 5
    assert "Not reached" not in out.read_text()


# Depth 1 already makes paths that take 57 of the 85 rows, refusals among them, and leaves rows to name as not
# reached, in under a second; depth 2 (71 of 85, paths of two feeds replayed from the start) takes about 15 s
# and runs with the slow tests. Depth 6 (83 of 85) took over ten minutes of CPU once paths fed every feed in
# the states of a step invariant; test_paths_coverage[agent_loop] checks the declared bound's rows instead.
# Longer paths replayed from the start are checked quickly on the turnstile above and in test_paths_coverage.
@pytest.mark.parametrize("depth", ["1", pytest.param("2", marks=pytest.mark.slow)])
def test_the_agent_loop_paths_take_what_they_say_and_name_the_rest(tmp_path, capsys, depth):
    inst = compile_file(ROOT / "machines" / "agent_loop.yaml").new()
    inst.data.run_id, inst.data.owner, inst.data.deadline_at = "r", "o", 6
    start = tmp_path / "start.json"
    start.write_text(json.dumps(inst.snapshot()))
    out = tmp_path / "test_agent_loop_paths.py"
    args = ["paths", str(ROOT / "machines" / "agent_loop.yaml"), "-o", str(out), "--from", str(start), "-q"]
    args += ["--depth", depth, "--set", "max_attempts=2", "--values", f'arguments_hash=["sha256:{"a" * 64}", "x"]']
    args += ["--values", 'passed=[[], ["output_valid", "artifacts_present", "side_effects_resolved"]]']
    args += ["--values", 'approver=["a", " "]', "--values", 'owner=["o", " "]']
    assert main(args) == 0
    err = capsys.readouterr().err
    hit = int(err.split("paths taking ")[1].split(" of ")[0])
    count, taken = run_generated_module(out)
    rows = rows_of(loader.load(ROOT / "machines" / "agent_loop.yaml").source.doc)
    assert sum((r.kind, r.name) in taken for r in rows if r.excuse is None) == hit and count <= hit
    text = out.read_text()
    assert "with pytest.raises(FeedRefused):" in text  # refusals are paths too, raising what the feed raises
    assert "from loopfsm.core.errors import FeedRefused" in text
    assert "Not reached within the bound: " in text
