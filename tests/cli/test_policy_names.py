"""A policy number named wrong, from a library call or verify's and paths' --set and --variant, is said plainly:
the name refused, a did-you-mean, the machine named once, no Python signature; a --from refused is named too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopfsm.core.compiler import compile_file
from loopfsm.core.errors import PolicyError
from loopfsm.cli.main import main

MACHINE = str(Path(__file__).parents[2] / "machines" / "tool_breaker.yaml")


def test_a_library_call_names_the_unknown_policy_number():
    with pytest.raises(PolicyError) as err:
        compile_file(MACHINE).policy({"max_probe": 2})
    assert str(err.value) == "tool_breaker: no policy number 'max_probe'; did you mean 'max_probes'?"


@pytest.mark.parametrize("option", ["--set", "--variant"])
def test_paths_names_the_unknown_policy_number(option, capsys):
    assert main(["paths", MACHINE, "--depth", "1", "-q", option, "max_probe=2"]) == 2
    err = capsys.readouterr().err
    assert err == "loopfsm paths: tool_breaker: no policy number 'max_probe'; did you mean 'max_probes'?\n"


def test_verify_names_the_machine_once(capsys):
    assert main(["verify", MACHINE, "--depth", "1", "-q", "--set", "max_probes=abc"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("loopfsm verify: tool_breaker: policy 'max_probes'"), err


@pytest.mark.parametrize("command", ["verify", "paths"])
def test_a_refused_from_snapshot_is_named(command, tmp_path, capsys):
    """With several --from, the one refused is the one named."""
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    snap = compile_file(MACHINE).new().snapshot()
    good.write_text(json.dumps(snap))
    bad.write_text(json.dumps({**snap, "state": "Nowhere"}))
    assert main([command, MACHINE, "--depth", "1", "-q", "--from", str(good), "--from", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err == f"loopfsm {command}: --from {bad}: tool_breaker: refusing snapshot: unknown state 'Nowhere'\n"


@pytest.mark.parametrize(
    "given",
    [["--variant", "max_probes=1,max_probes=2"], ["--set", "max_probes=1", "--set", "max_probes=2"]],
)
def test_a_policy_number_given_twice_is_refused(given, capsys):
    """The second value silently replaced the first."""
    assert main(["paths", MACHINE, "--depth", "1", "-q", *given]) == 2
    assert f"{given[0]} max_probes: given twice" in capsys.readouterr().err
