"""Misplaced scripts and options: each error names the command that takes it, or where the mistake is."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopfsm.cli.main import main
from loopfsm.core.errors import ScriptError
from loopfsm.router.providers.scripted import ScriptedProvider
from loopfsm.cli import router_commands

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCRIPTED_MODEL = "(this is a scripted model: loopfsm router serve --store URL --script FILE)"
MACHINE_FILE = "(this is a machine file: loopfsm check FILE; a run script drives a shipped machine)"


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
        ("agent_loop", "../machines/turnstile.yaml", MACHINE_FILE),
        ("engine_brain", "../machines/turnstile.yaml", MACHINE_FILE),
        ("router_run", "../machines/agent_loop.yaml", MACHINE_FILE),
    ],
)
def test_run_names_the_command_a_script_is_for(machine, example, hint, capsys):
    assert main(["run", machine, "--script", str(EXAMPLES / example)]) == 1
    err = capsys.readouterr().err
    assert hint in err and err.count("\n") == 1
    assert "ScriptError" not in err  # every driver says what is wrong, not the class it raised


@pytest.mark.parametrize("example,machine", [("fix_tests.yaml", "engine_brain"), ("router_run.yaml", "router_run")])
def test_a_scripted_model_file_that_is_a_run_script_names_its_driver(example, machine):
    with pytest.raises(ScriptError) as info:
        ScriptedProvider.from_file(EXAMPLES / example)
    assert str(info.value) == "a script file is a mapping with a 'replies' list"  # the router knows no drivers
    with pytest.raises(ScriptError) as info:
        router_commands._provider("scripted", None, str(EXAMPLES / example))  # router serve --script FILE
    assert str(info.value) == f"a script file is a mapping with a 'replies' list {for_machine(machine)}"


@pytest.mark.parametrize(
    "call,words",
    [
        ("{id: c1, name: f, arguments: {d: 2024-01-01}}", "a date is not a JSON value"),
        ("{id: c1, name: f, arguments: {a: .nan}}", "nan is not a JSON number"),
        ("{id: c0, name: f}, {id: c0, name: g}", "need distinct ids"),
    ],
)
def test_the_brains_driver_names_the_model_reply_a_message_cannot_hold(tmp_path, capsys, call, words):
    path = tmp_path / "s.yaml"
    path.write_text(
        "input: x\nmodel:\n  - tool_calls: [{id: c9, name: f}]\n    context_tokens: 5\n"
        f"  - tool_calls: [{call}]\n    context_tokens: 5\n"
    )
    assert main(["run", "engine_brain", "--script", str(path)]) == 1
    err = capsys.readouterr().err
    assert "s.yaml: model reply 2: " in err and words in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv,usage",
    [
        (["build", "--format", "dot"], "usage: loopfsm build "),
        (["check", "--bogus"], "usage: loopfsm check "),
        (["client", "run", "hi", "--session", "s1", "--bogus"], "usage: loopfsm client run "),
        (["store", "init", "sqlite:///x.db", "--bogus"], "usage: loopfsm store init "),
    ],
)
def test_an_option_a_command_does_not_take_is_refused_with_that_commands_usage(argv, usage, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith(usage) and "unrecognized arguments: " in err
