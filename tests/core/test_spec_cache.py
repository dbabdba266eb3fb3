"""The spec cache: an unchanged machine file skips YAML and the JSON Schema, and the cache is never trusted blindly."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loopfsm import Registry, SpecError, compile_file, load
from loopfsm.core import speccache
from loopfsm.core.resources import machine_path

from tests.support.specs import dedent, make_registry

MACHINE = dedent("""
    machine: cached
    description: A machine for the cache tests.
    data:
      n: {type: integer, default: 0, description: a counter}
    states:
      idle: {initial: true, description: waiting}
      busy: {terminal: true, description: working}
    events:
      go:
        description: start
        from:
          idle:
            - to: busy
              actions: [{name: bump, params: {field: n}}]
""")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(speccache.ENV_VAR, str(folder))
    return folder


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json")) if folder.exists() else []


def write(tmp_path: Path, text: str = MACHINE) -> Path:
    path = tmp_path / "cached.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def forbid_parsing(monkeypatch) -> None:
    from loopfsm.core import loader
    from loopfsm.core import source

    def boom(*a, **k):
        raise AssertionError("the file was parsed although its cache entry is good")

    monkeypatch.setattr(source, "read_file", boom)
    monkeypatch.setattr(loader, "schema_problems", boom)


def test_second_load_comes_from_the_cache_and_behaves_the_same(cache, tmp_path, monkeypatch):
    path, reg = write(tmp_path), make_registry()
    first = load(path, reg)
    assert len(entries(cache)) == 1
    forbid_parsing(monkeypatch)
    second = load(path, reg)
    assert second.source.doc == first.source.doc
    assert second.fingerprint == first.fingerprint
    inst = compile_file(path, reg).new()
    inst.feed("go")
    assert (inst.state, inst.data.n) == ("busy", 1)


def test_a_cached_spec_parses_its_file_once_however_many_places_are_asked_for(cache, tmp_path, monkeypatch):
    """Positions come from parsing the text again, once: verify's report locates every row of a table."""
    from loopfsm.core import source

    path, reg = write(tmp_path), make_registry()
    load(path, reg)
    parsed = []
    real = source.read_source
    monkeypatch.setattr(source, "read_source", lambda *a, **k: parsed.append(1) or real(*a, **k))
    cached = load(path, reg)
    lines = [cached.source.locate(("events", "go", "from", "idle", 0))[0], cached.source.locate(("states", "busy"))[0]]
    assert lines == [13, 7] and len(parsed) == 1


def test_an_edited_file_is_checked_again(cache, tmp_path):
    path, reg = write(tmp_path), make_registry()
    load(path, reg)
    write(tmp_path, MACHINE.replace("to: busy", "to: bussy"))
    with pytest.raises(SpecError, match="unknown state 'bussy'") as err:
        load(path, reg)
    errors = [p for p in err.value.problems if p.severity == "error"]
    assert errors[0].line == next(i for i, line in enumerate(MACHINE.splitlines(), 1) if "to: busy" in line)


def test_a_changed_registry_is_checked_again(cache, tmp_path):
    path = write(tmp_path)
    load(path, make_registry())
    other = Registry("demo")  # same name, but no 'bump' action
    with pytest.raises(SpecError, match="unknown action 'bump'"):
        load(path, other)


def test_warnings_survive_the_cache_and_problems_from_a_hit_are_located(cache, tmp_path):
    path, reg = write(tmp_path), make_registry()
    first = load(path, reg)  # the demo registry's unused guards and actions are warned about
    second = load(path, reg)
    assert second.warnings == first.warnings and first.warnings
    # a position asked of a cached spec is read from the file again, on demand
    assert second.source.locate(("states", "busy")) == first.source.locate(("states", "busy"))


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"not json",
        b"[]",
        b'{"format": 1}',
        b"{" * 100000,
        "wrong key",
        "doc not a mapping",
        "bad warnings",
        "doc the schema would refuse",
    ],
)
def test_a_damaged_or_forged_entry_is_ignored_and_replaced(cache, tmp_path, damage):
    path, reg = write(tmp_path), make_registry()
    good = load(path, reg)
    (entry,) = entries(cache)
    raw = json.loads(entry.read_text())
    if damage == "wrong key":
        raw["key"] = "0" * 64
        raw["doc"]["states"]["idle"]["description"] = "forged"
        data = json.dumps(raw).encode()
    elif damage == "doc not a mapping":
        data = json.dumps(dict(raw, doc=[1, 2])).encode()
    elif damage == "bad warnings":
        data = json.dumps(dict(raw, warnings=[["f", "1", 1, "", "m", "warning"]])).encode()
    elif damage == "doc the schema would refuse":
        data = json.dumps(dict(raw, doc={"machine": 3})).encode()
    else:
        data = damage
    entry.write_bytes(data)
    again = load(path, reg)
    assert again.source.doc == good.source.doc
    assert json.loads(entry.read_text())["doc"] == good.source.doc  # rewritten from the file


def test_a_directory_others_may_write_to_is_not_used(cache, tmp_path):
    if not hasattr(os, "geteuid"):
        pytest.skip("POSIX permissions")
    cache.mkdir(mode=0o700)
    os.chmod(cache, 0o777)
    path, reg = write(tmp_path), make_registry()
    load(path, reg)
    assert entries(cache) == []


def test_an_empty_setting_turns_the_cache_off(tmp_path, monkeypatch):
    monkeypatch.setenv(speccache.ENV_VAR, "")
    assert speccache.cache_dir() is None
    load(write(tmp_path), make_registry())


def test_documents_json_cannot_carry_are_not_cached(cache, tmp_path):
    text = MACHINE.replace("description: a counter", "description: a counter\n      x-since: 2024-01-01")
    path = write(tmp_path, text)
    try:
        load(path, make_registry())
    except SpecError:
        pass  # whatever the schema says of the date, nothing may be cached for it
    assert entries(cache) == []


def test_entries_are_json_and_private(cache, tmp_path):
    load(write(tmp_path), make_registry())
    (entry,) = entries(cache)
    assert json.loads(entry.read_text())["format"] == speccache.ENTRY_FORMAT
    if hasattr(os, "geteuid"):
        assert os.stat(cache).st_mode & 0o077 == 0
        assert os.stat(entry).st_mode & 0o077 == 0


def test_a_warm_cold_start_imports_neither_yaml_nor_jsonschema(cache):
    code = (
        "import sys\nimport loopfsm.machines as m\nfor n in m.__all__: getattr(m, n)\n"
        "print(sorted(x for x in ('yaml', 'jsonschema', 'fastjsonschema', 'importlib.metadata') "
        "if x in sys.modules))"
    )
    env = dict(os.environ, **{speccache.ENV_VAR: str(cache)})
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
    warm = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    assert warm.stdout.strip() == "[]"
    assert len(entries(cache)) >= 4


def test_shipped_machines_load_the_same_from_the_cache(cache):
    from loopfsm.machines import engine_brain

    path = machine_path("engine_brain")
    first = load(path, engine_brain.REGISTRY)
    second = load(path, engine_brain.REGISTRY)
    assert first.fingerprint == second.fingerprint
    assert second.source.doc == first.source.doc


def _mutations(doc, rng, n):
    """Documents one random edit away from ``doc``: a key dropped or added, a value of another type."""
    import copy

    def nodes(node, path=()):
        yield path, node
        if isinstance(node, dict):
            for k, v in node.items():
                yield from nodes(v, path + (k,))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from nodes(v, path + (i,))

    every = list(nodes(doc))
    for _ in range(n):
        out = copy.deepcopy(doc)
        path, _node = rng.choice(every[1:])
        parent = out
        for part in path[:-1]:
            parent = parent[part]
        kind = rng.randrange(4)
        if kind == 0 and isinstance(parent, dict):
            del parent[path[-1]]
        elif kind == 1 and isinstance(parent, dict):
            parent["x" + str(rng.randrange(9))] = 1
        else:
            parent[path[-1]] = rng.choice([None, 1, 1.5, "s", True, [], {}, ["s"], {"k": "v"}, "Bad Name"])
        yield out


@pytest.mark.slow
def test_the_fast_schema_check_never_accepts_what_jsonschema_refuses():
    import random

    import yaml

    from loopfsm.core import loader

    rng = random.Random(10)
    checked = refused = agreed = 0
    for name in ("turnstile", "tool_breaker", "engine_brain", "agent_loop", "stream_assembly", "router_run"):
        doc = yaml.safe_load(machine_path(name).read_text())
        assert loader._fast_valid(copy.deepcopy(doc)), name  # a valid file never needs jsonschema
        for mutated in _mutations(doc, rng, 50):
            slow_ok = not list(loader._validator().iter_errors(mutated))
            fast_ok = loader._fast_valid(mutated)
            assert not (fast_ok and not slow_ok), mutated
            checked += 1
            refused += not slow_ok
            agreed += fast_ok == slow_ok
    assert refused > checked // 4  # the mutations really do break the schema often
    assert agreed == checked  # and the fast check's schema (annotations dropped, const as enum) means the same


@pytest.mark.slow
def test_checking_a_cached_file_on_the_command_line_loads_only_what_checking_needs(cache):
    """``loopfsm check`` runs on every save and every commit: a cached file parses nothing and draws nothing."""
    code = (
        "import sys\nfrom loopfsm.cli.main import main\n"
        f"assert main(['check', {str(machine_path('tool_breaker'))!r}]) == 0\n"
        "print(sorted(x for x in ('yaml', 'jsonschema', 'fastjsonschema', 'graphviz', 'difflib', "
        "'loopfsm.core.checks', 'loopfsm.router.service', 'loopfsm.router.store') if x in sys.modules))"
    )
    env = dict(os.environ, **{speccache.ENV_VAR: str(cache)})
    first = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    assert "fastjsonschema" in first.stdout and "loopfsm.core.checks" in first.stdout  # a miss checks the file
    warm = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    assert warm.stdout.strip().endswith("[]"), warm.stdout
