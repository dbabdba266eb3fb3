"""An argument's ``verify:`` block: where verify and paths take its values in the current configuration,
checked by ``check`` like the rest of the table, and left out of the fingerprint."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from loopfsm.core.compiler import compile_file
from loopfsm.cli.main import main

REGISTRY = '''
from loopfsm import Registry

REGISTRY = Registry("keys")


@REGISTRY.guard
def room(m, ctx, *, limit: int):
    return len(m.data.held) < limit


@REGISTRY.guard
def holding(m, ctx):
    return ctx.args["key"] in m.data.held


@REGISTRY.action
def take(m, ctx):
    m.data.held = [*m.data.held, ctx.args["key"]]


@REGISTRY.action
def give(m, ctx):
    m.data.held = [k for k in m.data.held if k != ctx.args["key"]]


@REGISTRY.generator
def fresh_key(m, ctx, *, prefix: str):
    """A key no one holds yet: made from the configuration, so no fixed list of symbols has it."""
    return [f"{prefix}{len(m.data.held)}"]
'''

KEYS = """
machine: keys
description: A key box; keys are handed out and given back.
registry: keys
policy:
  max_held: {type: integer, default: 2, minimum: 0, description: keys out at once}
data:
  held: {type: string, list: true, description: keys handed out}
states:
  box: {initial: true, description: the box}
events:
  take:
    description: hand out a key
    args:
      key: {type: string, description: the key, verify: {generator: {name: fresh_key, params: {prefix: k}}}}
    from:
      box:
        - guard: {name: room, params: {limit: {policy: max_held}}}
          stay: true
          actions: [take]
        - refuse: the box is empty
  give:
    description: give a key back
    args:
      key: {type: string, description: the key, verify: {from_data: held, values: [stranger]}}
    from:
      box:
        - guard: holding
          stay: true
          actions: [give]
        - refuse: not one of ours
invariants:
  bounded:
    description: At most max_held keys are out.
    always: {name: length_at_most, params: {field: held, limit: {policy: max_held}}}
"""


def _project(tmp_path: Path, monkeypatch, text: str = KEYS, registry: str = REGISTRY) -> Path:
    (tmp_path / "keys.yaml").write_text(text)
    (tmp_path / "keys_registry.py").write_text(registry)
    sys.modules.pop("keys_registry", None)  # this test's copy, not another test's
    (tmp_path / "pyproject.toml").write_text('[tool.loopfsm]\nregistries = {keys = "keys_registry:REGISTRY"}\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path / "keys.yaml"


def test_values_come_from_the_configuration(tmp_path, monkeypatch, capsys):
    path = _project(tmp_path, monkeypatch)
    assert main(["verify", str(path), "--depth", "3", "-q"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    # giving back a held key (from_data) and refusing a stranger (values) are both taken
    assert "branches and decision rules taken: 4/4" in out
    assert main(["paths", str(path), "--depth", "2", "-q"]) == 0
    module = capsys.readouterr().out
    assert "m.feed('take', policy=POLICY, key='k0')" in module  # the generator's fresh key
    assert "m.feed('give', policy=POLICY, key='k0')" in module  # the key held, from the data
    assert "m.feed('give', policy=POLICY, key='stranger')" in module  # the literal
    assert "key='a'" not in module  # no symbol of the type's rule


def test_a_generated_value_shows_in_the_counterexample(tmp_path, monkeypatch, capsys):
    path = _project(tmp_path, monkeypatch, KEYS.replace("{limit: {policy: max_held}}", "{limit: 3}"))
    assert main(["verify", str(path), "--depth", "3", "-q"]) == 1
    out = capsys.readouterr().out
    assert "take(key='k0')" in out and "take(key='k1')" in out and "take(key='k2')" in out
    assert main(["replay", str(path), "keys.bounded.trace.yaml"]) == 1


def test_check_places_each_mistake(tmp_path, monkeypatch, capsys):
    bad = (
        KEYS.replace("{from_data: held, values: [stranger]}", "{from_data: hold, key: id, values: [3]}")
        .replace("{generator: {name: fresh_key,", "{generator: {name: fresh_kye,")
        .replace("verify: {from_data: hold", "verify: {from_state_data: nowhere, from_data: hold")
    )
    path = _project(tmp_path, monkeypatch, bad)
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:15:" in err and "unknown generator 'fresh_kye'; did you mean 'fresh_key'?" in err
    assert "unknown data field 'hold'; did you mean 'held'?" in err
    assert "no state carries a data field 'nowhere'" in err
    assert "value 3 is not a string" in err


def test_key_needs_a_source(tmp_path, monkeypatch, capsys):
    path = _project(tmp_path, monkeypatch, KEYS.replace("{from_data: held, values: [stranger]}", "{key: id}"))
    assert main(["check", str(path)]) == 1
    assert "'key' picks from the values of from_data or from_state_data: give one" in capsys.readouterr().err


def test_the_schema_refuses_an_unknown_source(tmp_path, monkeypatch, capsys):
    path = _project(tmp_path, monkeypatch, KEYS.replace("{from_data: held,", "{from_dat: held,"))
    assert main(["check", str(path)]) == 1
    assert "from_dat" in capsys.readouterr().err


def test_verify_blocks_are_left_out_of_the_fingerprint(tmp_path, monkeypatch):
    path = _project(tmp_path, monkeypatch)
    sys.modules.pop("keys_registry", None)  # this test's copy, not another test's
    registry = importlib.import_module("keys_registry").REGISTRY
    bare = tmp_path / "bare.yaml"
    bare.write_text(KEYS.replace(", verify: {from_data: held, values: [stranger]}", ""))
    assert "from_data" not in bare.read_text()
    assert compile_file(path, registry).fingerprint == compile_file(bare, registry).fingerprint
    other = tmp_path / "other.yaml"
    other.write_text(
        KEYS.replace("description: the key, verify: {from", "description: the key, default: x, verify: {from")
    )
    assert compile_file(path, registry).fingerprint != compile_file(other, registry).fingerprint


def test_diff_lists_a_changed_verify_block_as_no_behaviour_change(tmp_path, monkeypatch, capsys):
    path = _project(tmp_path, monkeypatch)
    other = tmp_path / "other.yaml"
    other.write_text(KEYS.replace("values: [stranger]", "values: [stranger, thief]"))
    assert main(["diff", str(path), str(other)]) == 0
    out = capsys.readouterr().out
    assert "keys: invariants and descriptions only" in out
    assert "! values verify feeds give(key) changed" in out


def test_a_new_registry_module_stubs_the_generators_the_table_names():
    from loopfsm.core.source import read_source
    from loopfsm.core.spec import build_spec
    from loopfsm.cli.scaffold import registry_module

    source = registry_module(build_spec(read_source(KEYS, "keys.yaml")), "keys.yaml")
    assert "@REGISTRY.generator\ndef fresh_key(m: MachineInstance, ctx: Any, *, prefix: str) -> list[Any]:" in source


HOSTILE = (
    REGISTRY
    + """

@REGISTRY.generator
def raises(m, ctx):
    raise RuntimeError("no keys today")


@REGISTRY.generator
def a_number(m, ctx):
    return 5


@REGISTRY.generator
def a_string(m, ctx):
    return "abc"


@REGISTRY.generator
def wrong_type(m, ctx):
    return ["k", 7]


@REGISTRY.generator
def endless(m, ctx):
    i = 0
    while True:
        i += 1
        yield f"k{i}"
"""
)


def _generated_by(tmp_path: Path, monkeypatch, name: str) -> Path:
    return _project(
        tmp_path,
        monkeypatch,
        KEYS.replace("{generator: {name: fresh_key, params: {prefix: k}}}", f"{{generator: {name}}}"),
        HOSTILE,
    )


def test_a_generator_that_raises_is_named_in_one_line(tmp_path, monkeypatch, capsys):
    path = _generated_by(tmp_path, monkeypatch, "raises")
    assert main(["verify", str(path), "--depth", "2", "-q"]) == 2
    err = capsys.readouterr().err
    assert "keys: generator 'raises' of take(key) raised RuntimeError: no keys today" in err
    assert "Traceback" not in err
    assert main(["paths", str(path), "--depth", "2", "-q"]) == 2
    assert "generator 'raises' of take(key) raised RuntimeError: no keys today" in capsys.readouterr().err


def test_a_generator_returns_a_list_of_values(tmp_path, monkeypatch, capsys):
    for name, got in (("a_number", "int 5"), ("a_string", "str 'abc'")):
        path = _generated_by(tmp_path, monkeypatch, name)
        assert main(["verify", str(path), "--depth", "2", "-q"]) == 2
        err = capsys.readouterr().err
        assert f"generator '{name}' of take(key) returned {got}, not a list of values" in err, err
        assert "Traceback" not in err


def test_a_generated_value_of_the_wrong_type_is_refused(tmp_path, monkeypatch, capsys):
    path = _generated_by(tmp_path, monkeypatch, "wrong_type")
    assert main(["verify", str(path), "--depth", "2", "-q"]) == 2
    err = capsys.readouterr().err
    assert "generator 'wrong_type' of take(key) returned 7 (int): take(key) is a string" in err, err


def test_a_generator_that_never_ends_is_stopped(tmp_path, monkeypatch, capsys):
    from loopfsm.verification.verify_inputs import MAX_GENERATED

    path = _generated_by(tmp_path, monkeypatch, "endless")
    assert main(["verify", str(path), "--depth", "2", "-q"]) == 2
    err = capsys.readouterr().err
    assert f"generator 'endless' of take(key) returned more than {MAX_GENERATED} values" in err, err


def test_check_refuses_a_source_of_another_type(tmp_path, monkeypatch, capsys):
    counted = KEYS.replace(
        "  held: {type: string, list: true, description: keys handed out}",
        "  held: {type: string, list: true, description: keys handed out}\n"
        "  count: {type: integer, default: 0, description: keys ever handed out}",
    )
    for source, said in (
        ("{from_data: count}", "data field 'count' holds integer, argument 'key' takes string"),
        ("{from_data: held, key: id}", "data field 'held' holds string, which has no 'id' to pick"),
    ):
        path = _project(tmp_path, monkeypatch, counted.replace("{from_data: held, values: [stranger]}", source))
        assert main(["check", str(path)]) == 1, source
        err = capsys.readouterr().err
        assert f"{path}:26:" in err and said in err, err


def test_a_list_argument_takes_no_items_of_a_list_field(tmp_path, monkeypatch, capsys):
    listed = KEYS.replace(
        "key: {type: string, description: the key, verify: {from_data: held, values: [stranger]}}",
        "key: {type: string, list: true, description: the keys, verify: {from_data: held}}",
    )
    path = _project(tmp_path, monkeypatch, listed)
    assert main(["check", str(path)]) == 1
    assert "data field 'held' gives one string at a time, argument 'key' takes a list" in capsys.readouterr().err


def test_replay_calls_no_generator(tmp_path, monkeypatch, capsys):
    """Replay feeds the values the trace file holds: a generator that raises is never called."""
    path = _generated_by(tmp_path, monkeypatch, "raises")
    trace = tmp_path / "t.trace.yaml"
    trace.write_text("machine: keys\npolicy: {}\nsteps:\n- feed: take\n  args: {key: k0}\n  state: box\n")
    assert main(["replay", str(path), str(trace)]) == 0, capsys.readouterr().err
    assert "replayed 1 step: as the trace expects" in capsys.readouterr().out


def test_a_values_option_of_the_wrong_type_is_refused(tmp_path, monkeypatch, capsys):
    """--values is checked as the YAML's values are: a value no feed would take exits 2 naming it, before any
    feed (it was fed, refused, and "holds" printed about runs never explored)."""
    path = _project(tmp_path, monkeypatch)
    for given, said in (
        ("give.key=5", "--values give.key: value 5 is not a string: argument 'give.key' takes it"),
        ("key=null", "--values key: value None is not a string: argument 'key' takes it"),
        ('key=["k0", 3]', "--values key: value 3 is not a string: argument 'key' takes it"),
    ):
        for command in ("verify", "paths"):
            assert main([command, str(path), "--depth", "2", "-q", "--values", given]) == 2, given
            out, err = capsys.readouterr()
            assert err == f"loopfsm {command}: keys: {said}\n", err
            assert "holds" not in out
    assert main(["verify", str(path), "--depth", "2", "-q", "--values", 'give.key=["k0", "stranger"]']) == 0
    assert "holds        bounded" in capsys.readouterr().out


BOUNDED = KEYS.replace(
    "      key: {type: string, description: the key, verify: {from_data: held, values: [stranger]}}",
    "      key: {type: string, enum: [k0, stranger], description: the key,"
    " verify: {from_data: held, values: [stranger]}}"
    "\n      count: {type: integer, nullable: true, default: null, minimum: 1, maximum: 3, description: how many}",
)


def test_a_values_option_outside_the_enum_or_bounds_is_refused(tmp_path, monkeypatch, capsys):
    path = _project(tmp_path, monkeypatch, BOUNDED)
    for given, said in (
        ("give.key=thief", "value 'thief' is not a string (one of 'k0', 'stranger'): argument 'give.key' takes it"),
        ("count=[1, 4]", "value 4 is not an integer (at least 1, at most 3): argument 'count' takes it"),
        ("give.count=0", "value 0 is not an integer (at least 1, at most 3): argument 'give.count' takes it"),
        ("count=true", "value True is not an integer (at least 1, at most 3): argument 'count' takes it"),
    ):
        assert main(["verify", str(path), "--depth", "2", "-q", "--values", given]) == 2, given
        assert capsys.readouterr().err == f"loopfsm verify: keys: --values {given.partition('=')[0]}: {said}\n"
    assert main(["verify", str(path), "--depth", "2", "-q", "--values", "count=[null, 1, 3]"]) == 0
    capsys.readouterr()


def test_check_refuses_a_yaml_value_outside_the_enum_or_bounds(tmp_path, monkeypatch, capsys):
    bad = BOUNDED.replace("values: [stranger]}}", "values: [thief]}}").replace(
        "description: how many}", "description: how many, verify: {values: [2, 9]}}"
    )
    path = _project(tmp_path, monkeypatch, bad + "verify:\n  values: {take.key: [k9], give.key: [k9]}\n")
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 3, err
    assert "give.args.key.verify.values[0]: value 'thief' is not a string (one of 'k0', 'stranger'): " in err
    assert "verify.values[1]: value 9 is not an integer (at least 1, at most 3): argument 'count' takes it" in err
    assert "verify.values.give.key[0]: value 'k9' is not a string (one of 'k0', 'stranger'): argument " in err
