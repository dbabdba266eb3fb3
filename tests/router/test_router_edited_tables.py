"""Deploying edited machine tables without editing the installed package: ``LOOPFSM_MACHINES``.

Each check runs in a fresh process: a shipped machine is compiled once per
process, on first use, from the file ``machine_path`` names then.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import loopfsm
from loopfsm.core.resources import machine_path
from tests.support.router_support import START_S, free_port

ROOT = Path(loopfsm.__file__).resolve().parents[1]
TURNSTILE = machine_path("turnstile").read_text()


def python(code: str, machines: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), LOOPFSM_MACHINES=str(machines))
    return subprocess.run(
        [sys.executable, *(["-c", code] if code else []), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_file_in_the_directory_replaces_the_shipped_one_and_the_others_stay(tmp_path):
    (tmp_path / "turnstile.yaml").write_text(TURNSTILE.replace("    default: 1\n", "    default: 2\n", 1))
    done = python(
        "from loopfsm import load_machine\n"
        "from loopfsm.machines import Turnstile\n"
        "print(Turnstile.compiled.spec.file, Turnstile.compiled.default_policy.fare)\n"
        "print(load_machine('turnstile') is Turnstile.compiled, load_machine('run_lock').spec.file)\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    edited, shipped = done.stdout.splitlines()
    assert edited == f"{tmp_path / 'turnstile.yaml'} 2"
    assert shipped == f"True {machine_path('run_lock')}"


def test_a_directory_that_is_not_one_stops_the_process(tmp_path):
    done = python("from loopfsm.machines import Turnstile\nTurnstile()", tmp_path / "nowhere")
    assert done.returncode != 0
    assert f"ConfigError: LOOPFSM_MACHINES names '{tmp_path / 'nowhere'}', which is not a directory" in done.stderr


def test_a_file_of_another_machine_under_its_name_is_refused(tmp_path):
    (tmp_path / "turnstile.yaml").write_text(TURNSTILE.replace("machine: turnstile\n", "machine: gate\n", 1))
    done = python("from loopfsm.machines import Turnstile\nTurnstile()", tmp_path)
    assert done.returncode != 0
    assert "declares machine 'gate', not 'turnstile'" in done.stderr


@pytest.mark.slow
def test_router_serve_names_the_tables_it_runs_and_refuses_a_broken_one(tmp_path):
    brain = machine_path("engine_brain").read_text()
    (tmp_path / "engine_brain.yaml").write_text(brain.replace("percent: 95,", "percent: 94,", 1))
    key = tmp_path / "router.key"
    assert python("", tmp_path, "-m", "loopfsm", "router", "keygen", str(key)).returncode == 0
    serve = [
        sys.executable,
        "-m",
        "loopfsm",
        "router",
        "serve",
        "--store",
        f"sqlite:///{tmp_path / 'runs.db'}",
        "--port",
        str(free_port()),
        "--key-file",
        str(key),
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT), LOOPFSM_MACHINES=str(tmp_path))
    proc = subprocess.Popen(serve, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr.readline() for _ in range(3)), daemon=True)
    reader.start()
    reader.join(START_S)  # a router that never says the line fails the test instead of hanging it
    proc.terminate()
    proc.wait(timeout=30)
    assert len(lines) == 3, lines
    assert lines[2] == f"machine tables: engine_brain from {tmp_path} (LOOPFSM_MACHINES), the others shipped\n", lines
    (tmp_path / "router_run.yaml").write_text(
        machine_path("router_run").read_text().replace("    default: 86400000\n", "    default: -5\n", 1)
    )
    broken = subprocess.run(serve, env=env, capture_output=True, text=True, timeout=120)
    assert broken.returncode != 0
    assert f"{tmp_path / 'router_run.yaml'}:" in broken.stderr and "default -5 is below the minimum 1" in broken.stderr


def test_the_sweep_reads_the_same_tables(tmp_path):
    import re

    from tests.support.router_support import PLAN_SCRIPT, make

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    router, tc = make(url, "t_", PLAN_SCRIPT, create=True)
    paused = tc.post("/v1/sessions/s/execute", json={"type": "execute", "request_id": "e1", "data": {"prompt": "go"}})
    assert paused.json()["status"] == "awaiting_approval"
    router.close()
    tables = tmp_path / "machines"
    tables.mkdir()
    (tables / "router_run.yaml").write_text(
        re.sub(r"\bAwaitingApproval\b", "AwaitingApprovals", machine_path("router_run").read_text())
    )
    done = python("", tables, "-m", "loopfsm", "store", "sweep", "--prefix", "t_", url)
    assert done.returncode == 0, done.stderr
    assert "1 run(s) these machine tables cannot read kept as saved (s; " in done.stdout
