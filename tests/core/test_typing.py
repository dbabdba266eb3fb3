"""Type checkers see the machines: feeds are real methods, the package ships py.typed, mypy --strict is clean."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs mypy --strict over the package

mypy_api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parents[2]

GOOD = """
    from loopfsm import load_machine
    from loopfsm.machines import FallbackBreaker, LoopMachine, Reject, ToolBreaker, ToolHealth, Turnstile
    from loopfsm.machines.engine_brain import CallLLM, Message

    gate = Turnstile()
    gate.coin()
    gate.push(policy={"fare": 2})
    name: str = gate.state
    ok: bool = gate.can("coin")

    brain = LoopMachine()
    brain.accept_input("hi")
    step = brain.next_step()
    brain.begin(step)
    if isinstance(step, CallLLM):
        brain.model_response(Message.assistant("done"), 10, ["shell"])

    breaker = ToolBreaker()
    permit = breaker.acquire(0, "c1")
    if not isinstance(permit, Reject):
        breaker.record(1, permit, "success")
    health = ToolHealth()
    fallback = FallbackBreaker()
    route = fallback.route(0)
    feeds: tuple[str, ...] = load_machine("turnstile").new().allowed_feeds()
"""

BAD = {
    "gate.coinn()": 'has no attribute "coinn"',
    "brain.next_stepp()": 'has no attribute "next_stepp"',
    "breaker.acquire('now', 'c1')": 'incompatible type "str"; expected "int"',
    "breaker.record(1, breaker.acquire(2, 'c2'), 'ok')  # both wrong": "incompatible type \"Literal['ok']\"",
    "brain.next_step(None)": "Too many positional arguments",
}


def run_mypy(tmp_path: Path, source: str) -> tuple[str, int]:
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(source))
    out, err, status = mypy_api.run(
        [
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            "--config-file",
            str(ROOT / "pyproject.toml"),
            str(script),
        ]
    )
    return out + err, status


def test_a_script_using_real_feeds_is_clean_and_a_wrong_one_is_an_error(tmp_path):
    out, status = run_mypy(tmp_path, GOOD)
    assert status == 0, out
    wrong = GOOD + "".join(f"    {line}\n" for line in BAD)
    out, status = run_mypy(tmp_path, wrong)
    assert status == 1
    for line, message in BAD.items():
        assert message in out, (line, out)
    assert out.count("error:") == len(BAD) + 1, out  # the record line is wrong twice (permit, outcome)


def test_the_package_ships_py_typed_and_is_strict_clean():
    assert (ROOT / "loopfsm" / "py.typed").exists()
    out, err, status = mypy_api.run(["--config-file", str(ROOT / "pyproject.toml"), str(ROOT / "loopfsm")])
    assert status == 0, out + err
