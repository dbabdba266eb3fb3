"""A machine's ``verify:`` section: the bound ``loopfsm verify`` uses without options, checked with the table;
and verdicts that say what they cover (not exercised, incomplete, hints for rows never taken)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from loopfsm.core.compiler import compile_file
from loopfsm.cli.main import main
from loopfsm.verification.verify import Explorer
from loopfsm.verification.verify_report import Options, verify_machine
from loopfsm.verification.verify_inputs import domains_for

from tests.support.docs_pages import page
from tests.support.planted import planted_copy
from tests.support.specs import dedent

ROOT = Path(__file__).resolve().parents[2]
MACHINES = ROOT / "machines"

DOOR = dedent("""
    machine: door
    description: a door that opens on a code and locks again
    policy:
      code: {type: integer, default: 7, minimum: 0, description: the code that opens it}
    data:
      opened: {type: integer, default: 0}
    states:
      shut: {initial: true, description: shut}
      open: {description: open}
      broken: {terminal: true, description: broken for good}
    events:
      enter:
        description: a code is entered
        otherwise: stay
        args:
          code: {type: integer, minimum: 0, maximum: 9}
        from:
          shut:
            - when: {code: 9}
              to: broken
            - guard: {name: code_is, params: {code: {policy: code}}}
              to: open
              actions: [count]
      close:
        description: it is pushed shut
        from:
          open: [{to: shut}]
    invariants:
      opens_only_on_the_code:
        description: the door is open only after the code was entered
        states: [open]
        always: {name: opened_at_least, params: {n: 1}}
    verify:
      description: every run of three feeds, codes 0 and 7
      depth: 3
      values: {code: [0, 7]}
""")

DOOR_REGISTRY = dedent("""
    from loopfsm import Registry

    REG = Registry("door")


    @REG.guard
    def code_is(m, ctx, *, code: int) -> bool:
        return bool(ctx.args["code"] == code)


    @REG.guard
    def opened_at_least(m, ctx, *, n: int) -> bool:
        return bool(m.data.opened >= n)


    @REG.action
    def count(m, ctx) -> None:
        m.data.opened += 1
""")


@pytest.fixture
def door(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "machines").mkdir()
    (tmp_path / "machines" / "door.yaml").write_text(
        DOOR.replace("description: a door", "registry: door\ndescription: a door")
    )
    (tmp_path / "door_reg.py").write_text(DOOR_REGISTRY)
    (tmp_path / "pyproject.toml").write_text('[tool.loopfsm]\nregistries = {door = "door_reg:REG"}\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path / "machines" / "door.yaml"


def test_bare_verify_uses_the_declared_bound_and_says_so(door: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "-q"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "explored every run of up to 3 feeds" in out and "bound from machines/door.yaml's verify: section" in out
    assert "holds        opens_only_on_the_code" in out
    # code 9 is not among the declared values, so the branch to broken is never taken, and the hint says why
    assert "states reached: 2/3; never: broken" in out
    assert "never taken: branch enter/shut[0]" in out and "state broken" not in out.split("never taken")[1]


def test_the_command_line_overrides_the_declared_bound(door: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "-q", "--depth", "1", "--values", "code=[9]"]) == 1
    out = capsys.readouterr().out
    assert "explored every run of up to 1 feed;" in out and "verify: section and the command line" in out
    assert "states reached: 2/3; never: open" in out
    assert "NOT EXERCISED opens_only_on_the_code" in out  # code 7 is no longer fed: open is never reached


def test_an_invariant_whose_states_are_never_reached_is_not_exercised_and_fails(
    door: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    door.write_text(door.read_text().replace("values: {code: [0, 7]}", "values: {code: [0]}"))
    assert main(["verify", "-q"]) == 1
    out = capsys.readouterr().out
    shown = page("docs/verify.md").split("```console\n$ loopfsm verify machines/door.yaml -q\n")[1].split("```")[0]
    timeless = re.sub(r"in \d+\.\ds", "in 0.0s", out)
    for line in shown.splitlines():  # docs/verify.md shows this run
        assert line.strip() == "..." or re.sub(r"in \d+\.\ds", "in 0.0s", line) in timeless
    assert "NOT EXERCISED opens_only_on_the_code: its states (open) were never reached; nothing was proven of it" in out
    assert "holds        opens_only_on_the_code" not in out
    assert main(["verify", "-q", "--accept-unexercised", "opens_only_on_the_code"]) == 0
    assert "not exercised opens_only_on_the_code (accepted: accepted on the command line)" in capsys.readouterr().out
    door.write_text(door.read_text() + "  unexercised: {opens_only_on_the_code: the code is never given here}\n")
    assert main(["verify", "-q"]) == 0
    assert "(accepted: the code is never given here)" in capsys.readouterr().out


def test_a_stopped_search_is_incomplete_says_how_far_it_got_and_fails(
    door: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", "-q", "--max-states", "2"]) == 1
    out = capsys.readouterr().out
    assert "2 configurations" in out and "NOT the bound of 3: stopped by the configuration limit (max_states 2)" in out
    head, _, verdicts = out.partition("INCOMPLETE   nothing below is proven beyond runs of ")
    assert head and verdicts.startswith(("0 feeds", "1 feed\n", "2 feeds"))


@pytest.mark.parametrize("limit", ["-1", "nan", "inf", "x"])
def test_a_time_limit_that_is_not_a_number_of_seconds_is_refused(
    door: Path, capsys: pytest.CaptureFixture[str], limit: str
) -> None:
    with pytest.raises(SystemExit) if limit == "x" else contextlib.nullcontext():  # argparse: not a number
        assert main(["verify", "-q", "--time-limit", limit]) == 2
    assert "--time-limit" in capsys.readouterr().err


def _door_explorer(door: Path) -> tuple[object, Explorer]:
    import door_reg  # the fixture's registry module, on sys.path

    compiled = compile_file(door, door_reg.REG)
    policy = compiled.policy()
    return compiled, Explorer(compiled, policy, domains_for(compiled.spec, policy, {"code": [0, 7]}))


def test_the_time_limit_and_an_interrupt_stop_at_once_with_what_was_explored(door: Path) -> None:
    compiled, explorer = _door_explorer(door)
    res = explorer.run([compiled.new().snapshot()], 50, 10_000, time_limit=0.0)  # type: ignore[attr-defined]
    assert res.truncated and res.stopped_by == "time_limit" and res.configurations >= 1

    def interrupt(res: object, level: int) -> None:
        raise KeyboardInterrupt

    compiled, explorer = _door_explorer(door)
    explorer.progress, explorer.progress_every = interrupt, 0.0
    res = explorer.run([compiled.new().snapshot()], 3, 10_000)  # type: ignore[attr-defined]
    assert res.truncated and res.stopped_by == "interrupt" and res.coverage is not None
    out = io.StringIO()
    assert verify_machine(compiled, Options(depth=50, time_limit=0.0, progress=False), out=out) == 1
    assert "stopped by the time limit (0 s of CPU)" in out.getvalue()


def test_a_bad_verify_section_is_reported_at_each_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = planted_copy(
        MACHINES / "tool_breaker.yaml",
        tmp_path,
        "  values: {call_id: [a]}\n  forget: [stats]\n",
        "  values: {call_id: [a, 3], colid: [x]}\n  forget: [stat]\n  start: [{state: Opn}]\n"
        "  unexercised: {probes_bound: no}\n",
    )
    bad.write_text(bad.read_text().replace("policy: {trip_after: 1,", "policy: {trip_aftr: 1,"))
    assert main(["check", str(bad)]) == 1
    err = capsys.readouterr()
    lines = [line for line in (err.out + err.err).splitlines() if "verify." in line]
    text = "\n".join(lines)
    assert "verify.policy.trip_aftr: no policy number 'trip_aftr'; did you mean 'trip_after'?" in text
    assert "verify.values.call_id[1]: value 3 is not a string: argument 'call_id' takes it" in text
    assert "verify.values.colid: no argument 'colid'; did you mean 'call_id'?" in text
    assert "verify.forget[0]: unknown data field 'stat'; did you mean 'stats'?" in text
    assert "verify.start[0].state: unknown state 'Opn'; did you mean 'Open'?" in text
    assert "verify.unexercised.probes_bound: no invariant 'probes_bound'; did you mean 'probes_bounded'?" in text
    assert len(lines) == 6 and all(line.startswith(f"{bad}:") or "tool_breaker.yaml:" in line for line in lines)


def test_the_verify_section_is_outside_the_fingerprint(tmp_path: Path) -> None:
    shipped = compile_file(MACHINES / "run_lock.yaml")
    deeper = planted_copy(MACHINES / "run_lock.yaml", tmp_path, "  depth: 5\n", "  depth: 6\n")
    assert compile_file(deeper).fingerprint == shipped.fingerprint


def test_a_planted_fault_is_found_by_bare_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The agent loop's retry guard without idempotent_call: the declared bound finds it with no options."""
    faulty = planted_copy(
        MACHINES / "agent_loop.yaml",
        tmp_path,
        "guard: [transient, idempotent_call, {name: attempts_left",
        "guard: [transient, {name: attempts_left",
    )
    assert main(["verify", "-q", "--traces", str(tmp_path), str(faulty)]) == 1
    out = capsys.readouterr().out
    assert "VIOLATED     no_retry_of_a_non_idempotent_call" in out and "shortest counterexample, 3 feeds" in out


def test_instants_inside_lists_records_and_dataclasses_are_offered_to_now() -> None:
    """A lease's expires_at inside a list of leases is an instant the clock must be able to reach (and the one
    before it), as a top-level deadline is; the tool breaker keeps its probe leases that way."""
    from dataclasses import dataclass

    from loopfsm.machines import ToolBreaker
    from loopfsm.verification.verify_inputs import _instants_after

    @dataclass
    class Lease:
        expires_at: int

    breaker = ToolBreaker()
    breaker.data.leases = [{"call_id": "a", "expires_at": 40}]
    breaker.data.permits = [Lease(70)]  # not its real type: any dataclass value is looked into
    breaker.data.last_now = 5
    assert _instants_after(breaker, 10) >= {39, 40, 69, 70}
    assert not _instants_after(breaker, 100) & {39, 40, 69, 70}
    deep: list[object] = [[[[[[[99]]]]]]]
    breaker.data.leases = deep
    assert 99 not in _instants_after(breaker, 10)  # nesting is bounded


def test_the_explorers_copy_is_deep_and_keeps_what_a_value_holds() -> None:
    """Configurations are copied field by field: nothing is shared that a feed could change in place."""
    from dataclasses import dataclass, field

    from loopfsm.machines.engine_brain import Message, ToolCall
    from loopfsm.verification.verify import _copy

    @dataclass
    class Box:
        items: list[int] = field(default_factory=list)

    message = Message.assistant("", [ToolCall("c1", "shell", {"cmd": ["ls"]})])
    box = Box([1])
    box.extra = "kept"  # type: ignore[attr-defined]  # not a field: copied whole, by copy.deepcopy
    original = [message, (box, {"k": [2]}), Box([3])]
    copied = _copy(original)
    assert copied == original and copied[0] is not message
    assert copied[0].tool_calls[0].arguments is not message.tool_calls[0].arguments
    copied[1][1]["k"].append(9)
    copied[2].items.append(9)
    assert original[1][1] == {"k": [2]} and original[2].items == [3]
    assert copied[1][0].extra == "kept" and copied[1][0] is not box

    from loopfsm.machines.stream_values import Slot

    slot = Slot(0, "tool", "b1", "shell", '{"a"')
    slot.add(": [1]}")
    twin = _copy(slot)
    assert twin is not slot and twin.parts == slot.parts and twin.parts is not slot.parts and twin.index == 0
    twin.add("x")
    twin.close()
    assert slot.open and slot.parts == ['{"a"', ": [1]}"] and twin.text == '{"a": [1]}x'
