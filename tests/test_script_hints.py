"""A script handed to the wrong command names the command that takes it, whichever command was given."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopfsm.cli import main
from loopfsm.errors import ScriptError
from loopfsm.providers.scripted import ScriptedProvider

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SCRIPTED_MODEL = "(this is a scripted model: loopfsm router serve --store URL --script FILE)"


def for_machine(name: str) -> str:
    return f"(this is a script for {name}: loopfsm run {name} --script FILE)"


@pytest.mark.parametrize(
    "machine,example,hint",
    [
        ("router_run", "approval_expires.yaml", for_machine("agent_loop")),
        ("router_run", "fix_tests.yaml", for_machine("engine_brain")),
        ("router_run", "approvals.yaml", SCRIPTED_MODEL),
        ("agent_loop", "approvals.yaml", SCRIPTED_MODEL),
        ("engine_brain", "approvals.yaml", SCRIPTED_MODEL),
        ("agent_loop", "router_run.yaml", for_machine("router_run")),
    ],
)
def test_run_names_the_command_a_script_is_for(machine, example, hint, capsys):
    assert main(["run", machine, "--script", str(EXAMPLES / example)]) == 1
    err = capsys.readouterr().err
    assert hint in err and err.count("\n") == 1


@pytest.mark.parametrize("example,machine", [("fix_tests.yaml", "engine_brain"), ("router_run.yaml", "router_run")])
def test_a_scripted_model_file_that_is_a_run_script_names_its_driver(example, machine):
    with pytest.raises(ScriptError) as info:
        ScriptedProvider.from_file(EXAMPLES / example)
    assert str(info.value) == f"a script file is a mapping with a 'replies' list {for_machine(machine)}"
