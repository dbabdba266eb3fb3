"""``verify`` on users' own machines (registries from [tool.loopfsm] or --registry), and what it refuses."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import json
from pathlib import Path

from loopfsm.cli.main import main

REGISTRY = '''
from loopfsm import Registry

REGISTRY = Registry("door")


@REGISTRY.guard
def rusty(m, ctx):
    """Crashes once the door has opened twice: the bug verify must find."""
    if m.data.opened >= 2:
        raise KeyError("hinge")
    return False


@REGISTRY.action
def count_open(m, ctx):
    m.data.opened += 1
'''

DOOR = """
machine: door
description: A door that counts how often it opened.
registry: door
policy:
  max_opens: {type: integer, default: 5, minimum: 0, description: opens the invariant allows}
data:
  opened: {type: integer, default: 0, minimum: 0, description: times opened}
states:
  shut: {initial: true, description: shut}
  open: {description: open}
events:
  push:
    description: push it
    from:
      shut:
        - guard: rusty
          stay: true
        - to: open
          actions: [count_open]
  pull:
    description: pull it
    from:
      open:
        - to: shut
invariants:
  opens_bounded:
    description: The door opens at most max_opens times.
    always: {name: field_at_most, params: {field: opened, limit: {policy: max_opens}}}
  opens:
    description: Some run opens the door.
    states: [open]
    reach: true
"""


def _project(tmp_path: Path, monkeypatch, *, declare: bool = True) -> Path:
    (tmp_path / "machines").mkdir()
    (tmp_path / "machines" / "door.yaml").write_text(DOOR)
    (tmp_path / "door_registry.py").write_text(REGISTRY)
    if declare:
        (tmp_path / "pyproject.toml").write_text('[tool.loopfsm]\nregistries = {door = "door_registry:REGISTRY"}\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path / "machines" / "door.yaml"


def test_a_users_machine_is_verified_with_the_projects_registry(tmp_path, monkeypatch, capsys):
    _project(tmp_path, monkeypatch)
    assert main(["verify", "--depth", "3", "-q"]) == 0  # machines/*.yaml by default
    out = capsys.readouterr().out
    assert "door: " in out and "holds        opens_bounded" in out and "reached      opens in 1 feed" in out


def test_a_guard_that_crashes_is_a_finding_with_its_shortest_run(tmp_path, monkeypatch, capsys):
    door = _project(tmp_path, monkeypatch, declare=False)
    assert main(["verify", str(door), "--registry", "door=door_registry:REGISTRY", "--depth", "6", "-q"]) == 1
    out = capsys.readouterr().out
    assert "VIOLATED     no_crash" in out
    assert "door: no_crash violated: door: feed 'push' in state 'shut', branch 'push/shut[0]': " in out
    assert "raised KeyError: 'hinge'" in out
    assert "shortest counterexample, 5 feeds:" in out  # push pull push pull push
    assert main(["replay", str(door), "door.no_crash.trace.yaml", "--registry", "door=door_registry:REGISTRY"]) == 1
    assert "5  push()  CRASHED: door: feed 'push'" in capsys.readouterr().out


def test_a_small_policy_breaks_the_invariant_and_max_states_stops_early(tmp_path, monkeypatch, capsys):
    door = _project(tmp_path, monkeypatch)
    assert main(["verify", str(door), "--set", "max_opens=0", "--depth", "2", "-q"]) == 1
    out = capsys.readouterr().out
    assert "VIOLATED     opens_bounded" in out and "      1  push()  -> open" in out
    assert main(["verify", str(door), "--max-states", "2", "--depth", "5", "-q", "--traces", "machines"]) == 1
    out = capsys.readouterr().out
    assert "every run of up to 1 feed, NOT the bound of 5: stopped by the configuration limit (max_states 2)" in out
    assert "INCOMPLETE   nothing below is proven beyond runs of 1 feed" in out


def test_bad_input_is_exit_2(tmp_path, monkeypatch, capsys):
    door = _project(tmp_path, monkeypatch, declare=False)
    assert main(["verify", str(door), "-q"]) == 2  # its registry is not declared
    assert "registry 'door' is not declared" in capsys.readouterr().err
    (tmp_path / "pyproject.toml").write_text('[tool.loopfsm]\nregistries = {door = "door_registry:REGISTRY"}\n')
    snap = tmp_path / "s.json"
    snap.write_text(json.dumps({"format": 1, "machine": "door"}))
    assert main(["verify", str(door), "--from", str(snap), "-q"]) == 2
    assert "refusing snapshot" in capsys.readouterr().err
    snap.write_text("{")
    assert main(["verify", str(door), "--from", str(snap), "-q"]) == 2
    snap.write_text("[" * 100_000 + "]" * 100_000)
    assert main(["verify", str(door), "--from", str(snap), "-q"]) == 2
    assert "not a readable JSON snapshot (RecursionError)" in capsys.readouterr().err
    assert main(["verify", str(door), "--set", "max_opens=" + "[" * 100_000, "-q"]) == 2
    assert main(["verify", str(door), "--depth", "-1"]) == 2
    assert main(["verify", str(door), "--traces", "nowhere"]) == 2
    assert "--traces nowhere: no such directory" in capsys.readouterr().err


COIN_REGISTRY = """
from dataclasses import dataclass

from loopfsm import Registry

REGISTRY = Registry("bank")


@dataclass(frozen=True)
class Coin:
    cents: int


REGISTRY.codec(
    "coin", Coin, lambda c: {"cents": c.cents}, lambda v: Coin(v["cents"]), examples=[Coin(1), Coin(50)]
)


@REGISTRY.action
def deposit(m, ctx):
    m.data.balance += ctx.args["coin"].cents
"""

BANK = """
machine: bank
description: A box that takes coins.
registry: bank
policy:
  max_balance: {type: integer, default: 100, minimum: 0, description: what the box may hold}
data:
  balance: {type: integer, default: 0, minimum: 0, description: cents held}
states:
  open: {initial: true, description: open}
events:
  insert:
    description: a coin goes in
    args:
      coin: {type: coin, description: the coin}
    from:
      open:
        - stay: true
          actions: [deposit]
invariants:
  bounded:
    description: The box holds at most max_balance cents.
    always: {name: field_at_most, params: {field: balance, limit: {policy: max_balance}}}
"""


def test_a_registry_type_is_fed_its_codecs_examples_and_traces_carry_its_json(tmp_path, monkeypatch, capsys):
    (tmp_path / "bank.yaml").write_text(BANK)
    (tmp_path / "bank_registry.py").write_text(COIN_REGISTRY)
    (tmp_path / "pyproject.toml").write_text('[tool.loopfsm]\nregistries = {bank = "bank_registry:REGISTRY"}\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["verify", "bank.yaml", "--depth", "3", "-q"]) == 1
    out = capsys.readouterr().out
    assert "shortest counterexample, 3 feeds:" in out  # 50 + 50 + 1 > 100
    assert "insert(coin=Coin(cents=50))" in out
    trace = tmp_path / "bank.bounded.trace.yaml"
    assert "  args:\n    coin: {cents: 50}\n" in trace.read_text()
    assert main(["replay", "bank.yaml", str(trace)]) == 1
    assert "invariant bounded violated after step 3" in capsys.readouterr().out
    trace.write_text("machine: bank\nsteps: [{feed: insert, args: {coin: 5}}]\n")
    assert main(["replay", "bank.yaml", str(trace)]) == 2
    assert "argument 'coin' of insert is not a valid coin: TypeError" in capsys.readouterr().err


def test_values_given_for_a_registry_type_are_decoded_by_its_codec(tmp_path, monkeypatch, capsys):
    """--values coin='[{"cents": 60}]' feeds Coin(60), as a snapshot's JSON would be read; one the codec
    refuses exits 2 with its words."""
    (tmp_path / "bank.yaml").write_text(BANK)
    (tmp_path / "bank_registry.py").write_text(COIN_REGISTRY)
    (tmp_path / "pyproject.toml").write_text('[tool.loopfsm]\nregistries = {bank = "bank_registry:REGISTRY"}\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["verify", "bank.yaml", "--depth", "2", "-q", "--values", 'coin=[{"cents": 60}]']) == 1
    out = capsys.readouterr().out
    assert "shortest counterexample, 2 feeds:" in out and "insert(coin=Coin(cents=60))" in out
    assert main(["verify", "bank.yaml", "--depth", "3", "-q", "--values", 'coin=[{"cents": 10}]']) == 0
    capsys.readouterr()
    assert main(["verify", "bank.yaml", "--depth", "2", "-q", "--values", 'coin=[{"dollars": 1}]']) == 2
    err = capsys.readouterr().err
    assert "--values coin: value {'dollars': 1} is not a coin: KeyError" in err and "Traceback" not in err


def _door_and_bank(tmp_path: Path, monkeypatch) -> None:
    """A project of two machines, each with its registry declared in pyproject.toml."""
    _project(tmp_path, monkeypatch)
    (tmp_path / "machines" / "bank.yaml").write_text(BANK)
    (tmp_path / "bank_registry.py").write_text(COIN_REGISTRY)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.loopfsm]\nregistries = {door = "door_registry:REGISTRY", bank = "bank_registry:REGISTRY"}\n'
    )


def _cpu_free(report: str) -> str:
    return re.sub(r"in [0-9.]+s of CPU", "in Ns of CPU", report)


def _verify_command(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``loopfsm verify`` as a user runs it: a process of its own, so its workers fork a single-threaded process
    (a test process under pytest-xdist has its worker's threads, and a fork there may deadlock)."""
    return subprocess.run(
        [sys.executable, "-m", "loopfsm", "verify", *args], cwd=folder, capture_output=True, text=True, timeout=300
    )


def test_workers_verify_machines_at_once_and_print_the_same_reports_in_the_same_order(tmp_path, monkeypatch, capsys):
    _door_and_bank(tmp_path, monkeypatch)
    alone_run = _verify_command(tmp_path, "--depth", "3", "--set", "max_opens=0", "-q")
    together_run = _verify_command(tmp_path, "--depth", "3", "--set", "max_opens=0", "-q", "--workers", "2")
    assert alone_run.returncode == together_run.returncode == 1, (alone_run.stderr, together_run.stderr)
    alone, together = alone_run.stdout, together_run.stdout
    assert _cpu_free(together) == _cpu_free(alone)
    assert together.index("bank: ") < together.index("door: ") and "VIOLATED     opens_bounded" in together
    with pytest.raises(SystemExit) as stopped:  # argparse's own usage error
        main(["verify", "--workers", "0"])
    assert stopped.value.code == 2
    assert "--workers: must be a whole number of processes, at least 1, got '0'" in capsys.readouterr().err


def test_several_machines_each_take_the_options_they_declare(tmp_path, monkeypatch, capsys):
    _door_and_bank(tmp_path, monkeypatch)
    assert main(["verify", "--depth", "2", "--set", "max_opens=0", "-q"]) == 1  # only the door has max_opens
    out = capsys.readouterr().out
    assert "door: " in out and "VIOLATED     opens_bounded" in out and "bank: " in out
    assert main(["verify", "--set", "max_open=0", "-q"]) == 2
    assert "--set max_open: none of the machines has a policy number of that name" in capsys.readouterr().err


WORKERS_SCRIPT = """
import json, os, signal
from loopfsm.cli.verify_workers import run_all

def own_pid(out):
    out.write(str(os.getpid()))
    return 0

def dies(out):
    os.kill(os.getpid(), signal.SIGKILL)
    return 0

reports = []
codes = run_all([own_pid, own_pid], 2, reports.append, 1)
dead = []
codes_dead = run_all([own_pid, dies], 2, dead.append, 1)
print(json.dumps({"pid": os.getpid(), "codes": codes, "reports": reports, "dead": codes_dead, "said": dead}))
"""


def test_workers_are_forked_processes_and_a_dead_one_is_reported_not_hung(tmp_path):
    """Run in a process of its own, single-threaded as the command is (see ``_verify_command``)."""
    (tmp_path / "workers.py").write_text(WORKERS_SCRIPT)
    ran = subprocess.run([sys.executable, "workers.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    got = json.loads(ran.stdout)
    assert got["codes"] == [0, 0] and all(int(r) != got["pid"] for r in got["reports"])
    assert got["dead"][1] == 1 and "a verify worker stopped before reporting" in got["said"][1]


@pytest.mark.slow
def test_ctrl_c_stops_every_worker_and_each_prints_its_incomplete_report():
    """docs/verify.md: with --workers, Ctrl-C reaches every process; each stops and reports what it explored."""
    import os
    import signal
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parents[2]
    args = ["machines/tool_breaker.yaml", "machines/fallback_breaker.yaml", "--workers", "2", "--depth", "40"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "loopfsm", "verify", *args, "--time-limit", "0", "--max-states", "100000000", "-q"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the terminal's Ctrl-C reaches the command and its workers
    )
    time.sleep(4)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert out.count("stopped by an interrupt (Ctrl-C)") == 2 and out.count("INCOMPLETE") == 2
    assert out.index("tool_breaker: ") < out.index("fallback_breaker: ")


FICKLE_REGISTRY = '''
from loopfsm import Registry

REGISTRY = Registry("fickle")
ASKED = [0]


@REGISTRY.guard
def on_second_asking(m, ctx):
    """Holds every second time it is asked: not a function of the machine and the feed."""
    ASKED[0] += 1
    return ASKED[0] % 2 == 0
'''

FICKLE = """
machine: fickle
description: A switch whose guard answers differently when asked again.
registry: fickle
states:
  off: {initial: true, description: off}
  on: {description: on}
events:
  flip:
    description: flip it
    otherwise: raise
    from:
      off:
        - guard: on_second_asking
          to: on
      on:
        - to: off
"""


def test_a_guard_that_is_not_pure_is_a_finding_and_stops_that_configuration(tmp_path, monkeypatch, capsys):
    """Verify asks a feed's guards before copying a configuration (a feed they refuse changes nothing, so
    it is fed to the configuration itself): a guard that refuses, then accepts, is reported, not explored."""
    (tmp_path / "machines").mkdir()
    machine = tmp_path / "machines" / "fickle.yaml"
    machine.write_text(FICKLE)
    (tmp_path / "fickle_registry.py").write_text(FICKLE_REGISTRY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["verify", str(machine), "--registry", "fickle=fickle_registry:REGISTRY", "--depth", "2", "-q"]) == 1
    out = capsys.readouterr().out
    assert "VIOLATED     no_crash" in out
    assert "flip() was refused by its guards, then accepted: a guard is not pure" in out
