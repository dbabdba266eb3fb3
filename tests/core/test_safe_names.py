"""Names that become Python (fields, policy, arguments, feeds) are refused at load unless they are safe."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopfsm import SpecError, compile_spec, parse
from loopfsm.core.errors import LoopFsmError

from tests.support.specs import make_registry, marked_line

TEMPLATE = """\
machine: demo
description: names
policy:
  {policy}: {{type: integer, default: 1, description: a number}}
data:
  {data}: {{type: integer, default: 0}}
  flag_on: {{type: boolean, default: false}}
states:
  idle: {{initial: true, description: waiting}}
  busy:
    description: working
    data:
      {state_data}: {{type: integer}}
  done: {{terminal: true, description: finished}}
events:
  {feed}:
    description: start
    args:
      n: {{type: integer}}
      {arg}: {{type: integer, default: 0}}
    from:
      idle:
        - to: busy
          actions: [{{name: enter_with, params: {{key: {state_data}}}}}]
  finish:
    description: stop
    from:
      busy:
        - guard: {{name: flag, params: {{field: flag_on}}}}
          to: done
        - to: idle
"""

SAFE = {"policy": "limit", "data": "count", "state_data": "n", "feed": "go", "arg": "extra"}

REFUSED = {
    "data": ["class", "__init__", "__dict__", "__slots__", "_state", "_private", "None", "lambda"],
    "policy": ["class", "self", "__init__", "_state", "__post_init__"],
    "state_data": ["self", "class", "__dict__"],
    "feed": [
        "compiled",
        "state",
        "snapshot",
        "restore",
        "feed",
        "data",
        "state_data",
        "_state",
        "class",
        "__init__",
        "is_terminal",
        "get_graph",  # transitions binds these on a model of a machine of its own
        "may_go",
        "is__state_idle",
    ],
    "arg": ["self", "policy", "event", "class", "__init__"],
}


def text_with(**names: str) -> str:
    return TEMPLATE.format(**dict(SAFE, **names))


def compile_text(text: str):
    reg = make_registry()
    return compile_spec(parse(text, "m.yaml", reg), reg)


def test_template_with_safe_names_compiles_and_runs():
    c = compile_text(text_with())
    m = c.new()
    m.go(3)
    assert m.state == "busy" and m.state_data == {"n": 3}
    assert c.restore(m.snapshot()).state_data == {"n": 3}


@pytest.mark.parametrize("kind,name", [(k, n) for k, names in REFUSED.items() for n in names])
def test_unsafe_name_is_refused_at_its_line(kind, name):
    text = text_with(**{kind: name})
    with pytest.raises(SpecError) as info:
        compile_text(text)
    errors = [p for p in info.value.problems if p.severity == "error"]
    assert errors, info.value
    line_of_name = next(i for i, line in enumerate(TEMPLATE.splitlines(), 1) if "{" + kind + "}:" in line)
    assert text.splitlines()[line_of_name - 1].strip().startswith(f"{name}:")
    assert any(p.line == line_of_name for p in errors), "\n".join(map(str, errors))


@pytest.mark.parametrize(
    "kind,name",
    [
        ("data", "self"),
        ("data", "state"),
        ("data", "compiled"),
        ("data", "data"),
        ("policy", "state"),
        ("arg", "data"),
        ("feed", "self_test"),
        ("feed", "is_ready"),
        ("feed", "maybe_go"),
        ("state_data", "state"),
    ],
)
def test_names_that_only_look_special_work(kind, name):
    c = compile_text(text_with(**{kind: name}))
    m = c.new()
    m.feed(dict(SAFE, **{kind: name})["feed"], 2)
    assert m.state == "busy"
    again = c.restore(m.snapshot())
    assert again.snapshot() == m.snapshot()


def test_guard_parameter_naming_a_data_field_is_checked_at_load():
    text = text_with().replace("field: flag_on}}", "field: flag_onn}}   # <-")
    with pytest.raises(SpecError) as info:
        compile_text(text)
    (problem,) = [p for p in info.value.problems if p.severity == "error"]
    assert problem.line == marked_line(text)
    assert "no data field 'flag_onn'; did you mean 'flag_on'?" in problem.message


def test_brain_flag_guard_names_a_declared_field():
    from loopfsm.machines.engine_brain import REGISTRY
    from loopfsm.core.resources import machine_path

    text = machine_path("engine_brain").read_text().replace("field: cancelled}", "field: canceled}")
    with pytest.raises(SpecError) as info:
        parse(text, "engine_brain.yaml", REGISTRY)
    assert any("no data field 'canceled'" in p.message for p in info.value.problems)


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(sorted(SAFE)),
    name=st.one_of(
        st.from_regex(r"\A[a-z_][a-z0-9_]{0,12}\Z"),
        st.sampled_from(
            [
                "self",
                "class",
                "def",
                "state",
                "compiled",
                "snapshot",
                "policy",
                "event",
                "feed",
                "_",
                "__",
                "match",
                "case",
                "type",
                "print",
                "restore",
            ]
        ),
    ),
)
def test_any_accepted_name_compiles_and_runs(kind, name):
    """A name either is refused by `check`, or the machine compiles, runs a feed and round-trips."""
    names = dict(SAFE, **{kind: name})
    if name in set(SAFE.values()) | {"n", "flag_on", "finish", "idle", "busy", "done"}:
        return  # a duplicate of another name in the template: a different test
    try:
        c = compile_text(TEMPLATE.format(**names))
    except SpecError:
        return
    m = c.new()
    m.feed(names["feed"], 1)
    assert c.restore(m.snapshot()).snapshot() == m.snapshot()
    try:
        m.feed("finish")
    except LoopFsmError:
        pass
    assert m.state in ("idle", "done")


def test_a_trailing_newline_never_passes_a_name_pattern(tmp_path):
    """``re.match`` with ``$`` accepts ``"name\\n"``: every name pattern is matched whole."""
    from loopfsm.core.errors import LoopFsmError as Refused
    from loopfsm.machines.router_run import _IS_REF
    from loopfsm.cli.project import find_project
    from loopfsm.router import Router
    from loopfsm.cli.scaffold import _name_problem
    from loopfsm.router.store.sql import check_prefix

    is_ref = _IS_REF[1]
    assert is_ref("diff:d1") and not is_ref("diff:d1\n")
    assert _name_problem("door", find_project(tmp_path)) is None
    assert "snake_case" in str(_name_problem("door\n", find_project(tmp_path)))
    assert check_prefix("loopfsm_") == "loopfsm_"
    with pytest.raises(Refused):
        check_prefix("loopfsm_\n")
    router = Router(f"sqlite:///{tmp_path / 'runs.db'}", create=True)
    answer = router.handle("s1\n", {"type": "execute", "request_id": "r1", "data": {"prompt": "hi"}})
    assert answer["status"] == "error" and "session id" in answer["data"]["error"]
