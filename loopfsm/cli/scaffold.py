"""``loopfsm new NAME``: a first machine that checks, renders and passes its test as generated.

Three files and one declaration: the machine's YAML table, the registry
module holding the guards and actions the table names (their signatures are
derived from the table, so the two agree by construction), a test that drives
the machine, and ``NAME = "NAME:REGISTRY"`` under ``[tool.loopfsm]
registries`` so the command line finds the registry.  Nothing existing is
overwritten: a file in the way, or a name that would shadow a module or a
registry already there, stops the command before it writes anything.
"""

from __future__ import annotations

import importlib.util
import keyword
import os
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopfsm.core.errors import ConfigError
from loopfsm.core.pyproject import CONFIG, shown

from loopfsm.cli.project import Project
from loopfsm.core.registries import Registries
from loopfsm.core.resources import schema_path
from loopfsm.core.source import read_source
from loopfsm.core.invariants import BUILTINS
from loopfsm.core.spec import Ref, Spec, build_spec, leaf_refs, policy_ref

SCHEMA_FILE = "machine.schema.json"
MODELINE = f"# yaml-language-server: $schema={SCHEMA_FILE}"
_NAME = re.compile(r"[a-z_][a-z0-9_]*")
MAX_NAME = 64

MACHINE = """\
{modeline}
machine: {name}
description: >
  A job that may fail and be retried: it starts, then finishes or fails; a
  failure sends it back to waiting while attempts remain and gives up for good
  once max_attempts have failed. Edit this table into your own machine, keep
  {module}.py and tests/test_{name}.py in step, and run `loopfsm check`.
registry: {name}

policy:
  max_attempts:
    type: integer
    default: 3
    minimum: 1
    maximum: 100
    description: Attempts allowed before the job gives up.

data:
  attempts:
    type: integer
    default: 0
    description: Attempts started so far.
  last_error:
    type: string
    default: ""
    description: Why the latest attempt failed (empty until one does).

states:
  waiting:
    initial: true
    description: Not running; ready to start an attempt.
  running:
    description: An attempt is under way.
  done:
    terminal: true
    description: An attempt finished.
  gave_up:
    terminal: true
    description: Every allowed attempt failed.

events:
  start:
    description: Begin an attempt.
    from:
      waiting:
        - to: running
          actions: [count_attempt]
          description: a new attempt
  finish:
    description: The attempt succeeded.
    from:
      running:
        - to: done
          description: finished
  fail:
    description: The attempt failed.
    args:
      reason:
        type: string
        description: Why it failed, in a few words.
    from:
      running:
        - guard: {{name: attempts_left, params: {{limit: {{policy: max_attempts}}}}}}
          to: waiting
          actions: [{{name: remember, params: {{field: last_error}}}}]
          description: try again
        - to: gave_up
          actions: [{{name: remember, params: {{field: last_error}}}}]
          description: out of attempts
"""

# Bodies of the template's guards and actions; their signatures come from the table.
BODIES = {
    "count_attempt": ('"""One more attempt begins."""', "m.data.attempts += 1"),
    "attempts_left": (
        '"""Fewer than ``limit`` attempts have been made, so another may start."""',
        "return bool(m.data.attempts < limit)",
    ),
    "remember": (
        '"""Keep the failure\'s reason in the data field named by the table."""',
        'setattr(m.data, field, ctx.args["reason"])',
    ),
}

TEST = '''\
"""Drives the {name} machine through its table; change the YAML and this test together."""

import pytest
from loopfsm import IllegalFeed

from {module} import machine


def test_an_attempt_that_finishes_is_done() -> None:
    job = machine().new()
    job.start()
    job.finish()
    assert job.state == "done" and job.data.attempts == 1


def test_failures_are_retried_until_max_attempts() -> None:
    job = machine().new()
    for _ in range(2):
        job.start()
        job.fail(reason="timeout")
        assert job.state == "waiting"
    job.start()
    job.fail(reason="disk full")
    assert job.state == "gave_up"
    assert job.data.attempts == 3 and job.data.last_error == "disk full"
    assert job.is_terminal()


def test_max_attempts_is_policy() -> None:
    job = machine().new()
    more = machine().Policy(max_attempts=4)
    for _ in range(3):
        job.start()
        job.fail(reason="timeout", policy=more)
    assert job.state == "waiting"


def test_an_illegal_feed_raises_and_changes_nothing() -> None:
    job = machine().new()
    with pytest.raises(IllegalFeed):
        job.finish()
    assert job.state == "waiting" and job.data.attempts == 0


def test_a_snapshot_restores_the_same_job() -> None:
    job = machine().new()
    job.start()
    again = machine().restore(job.snapshot())
    again.finish()
    assert again.state == "done" and again.data.attempts == 1
'''

_PY_TYPES = {"integer": "int", "number": "float", "string": "str", "boolean": "bool"}


def _param_type(spec: Spec, value: Any) -> str:
    ref = policy_ref(value)
    if ref is not None:
        pol = spec.policy.get(ref)
        return _PY_TYPES.get(pol.type, "Any") if pol is not None else "Any"
    for py, name in (
        (bool, "bool"),
        (int, "int"),
        (float, "float"),
        (str, "str"),
        (list, "list[Any]"),
        (dict, "dict[str, Any]"),
    ):
        if isinstance(value, py):
            return name
    return "Any"


def _refs(spec: Spec) -> list[tuple[str, Ref]]:
    """(kind, ref) for every guard, action, result and generator the table names, in file order."""
    out: list[tuple[str, Ref]] = []
    out += [("action", a) for a in spec.before]
    for ev in spec.events.values():
        out += [("action", a) for a in ev.before]
        for branches in ev.sources.values():
            for b in branches:
                out += [("guard", g) for g in leaf_refs(b.guards)] + [("action", a) for a in b.actions]
    for d in spec.decisions.values():
        for r in d.rules:
            out += [("guard", g) for g in leaf_refs(r.guards)] + [("result", r.result)]
    for inv in spec.invariants.values():  # the built-in invariant guards need no registry function
        out += [("guard", g) for g in inv.refs() if g.name not in BUILTINS.entries["guard"]]
    for args in [*(e.args for e in spec.events.values()), *(d.args for d in spec.decisions.values())]:
        out += [("generator", g) for f in args.values() if f.verify is not None for g in f.verify.generators]
    return out


def registry_module(spec: Spec, machine_file: str) -> str:
    """Python source of a registry whose signatures are exactly what ``spec``'s table asks for.

    A parameter every use gives is required; one only some uses give defaults
    to None.  Functions the template does not know get a body that raises, so
    ``loopfsm check`` passes and the test shows what is left to write.
    """
    seen: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    for kind, ref in _refs(spec):
        seen.setdefault(ref.name, (kind, []))[1].append(ref.params)
    kinds = {kind for kind, _ in seen.values()}
    ctx_type = {"guard": "FeedData", "action": "FeedData", "result": "QueryData", "generator": "Any"}
    lines = [
        f'"""Guards and actions of the {spec.name} machine ({machine_file}); the table is in the YAML.',
        "",
        "Each function's keyword-only parameters are the ``params`` the YAML gives it;",
        "`loopfsm check` compares the two, so rename or retype them together.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "import functools",
        "from pathlib import Path",
        "",
        "from loopfsm import CompiledMachine, MachineInstance, Registry, compile_file",
    ]
    ctx_imports = sorted({ctx_type[k] for k in kinds})
    if "FeedData" in ctx_imports:
        lines.append("from loopfsm.core.interpreter import FeedData")
    if "QueryData" in ctx_imports:
        lines.append("from loopfsm.core.instance import QueryData")
    lines += [
        "",
        f'MACHINE_FILE = Path(__file__).resolve().parent / "{machine_file}"',
        f'REGISTRY = Registry("{spec.registry or spec.name}")',
        "",
        "",
        "@functools.cache",
        "def machine() -> CompiledMachine:",
        '    """The compiled machine, compiled on first use: importing this module (as `loopfsm check` does)',
        '    stays cheap."""',
        "    return compile_file(MACHINE_FILE, REGISTRY)",
    ]
    own_types = _own_types(spec)
    if own_types:
        lines += [
            "",
            "",
            "# The table's own field types: how each value travels into and out of a snapshot.",
            "# TODO: the Python type and converters (values pass through unchanged until then).",
        ]
        lines += [f'REGISTRY.codec("{t}", object, lambda value: value, lambda value: value)' for t in own_types]
    for name, (kind, uses) in seen.items():
        params: list[str] = []
        all_names = [p for use in uses for p in use]
        for pname in dict.fromkeys(all_names):
            types = {_param_type(spec, use[pname]) for use in uses if pname in use}
            annotation = types.pop() if len(types) == 1 else "Any"
            if all(pname in use for use in uses):
                params.append(f"{pname}: {annotation}")
            else:
                params.append(f"{pname}: {annotation} | None = None")
        returns = {"guard": "bool", "action": "None", "result": "Any", "generator": "list[Any]"}[kind]
        doc, body = BODIES.get(name, (f'"""TODO: what {name} does."""', f'raise NotImplementedError("{kind} {name}")'))
        signature = ", ".join([f"m: MachineInstance, ctx: {ctx_type[kind]}"] + (["*"] + params if params else []))
        unused = [] if name in BODIES or not params else [f"    del {', '.join(p.split(':')[0] for p in params)}"]
        lines += [
            "",
            "",
            f"@REGISTRY.{kind}",
            f"def {name}({signature}) -> {returns}:",
            f"    {doc}",
            *unused,
            f"    {body}",
        ]
    text = "\n".join(lines) + "\n"
    if "Any" in text.split("REGISTRY = ", 1)[1]:
        text = text.replace("from pathlib import Path\n", "from pathlib import Path\nfrom typing import Any\n", 1)
    return text


def _own_types(spec: Spec) -> list[str]:
    """Field types the table uses beyond the built-in ones: the registry must declare a codec for each."""
    from loopfsm.core.registry import BUILTIN_CODECS

    groups = (
        [spec.data]
        + [s.data for s in spec.states.values()]
        + [e.args for e in spec.events.values()]
        + [o.data for o in spec.outcomes.values()]
        + [d.args for d in spec.decisions.values()]
    )
    return sorted({f.type for fields in groups for f in fields.values()} - set(BUILTIN_CODECS))


@dataclass(frozen=True)
class Plan:
    files: dict[Path, str]  # new files and their text
    schema: Path  # the schema copy the modeline points at (refreshed, it is generated)
    pyproject: Path
    pyproject_text: str | None  # the new pyproject.toml text; None if the user must add the line
    declaration: str  # the registries line, for the message
    hint: str | None = None  # what the user still has to do for the test to run under a plain ``pytest``


def _name_problem(name: str, project: Project) -> str | None:
    if len(name) > MAX_NAME:
        return f"a name of {len(name)} characters is too long (at most {MAX_NAME})"
    if not _NAME.fullmatch(name) or keyword.iskeyword(name):
        return f"'{name}' is not a snake_case identifier (letters, digits, underscores; not a Python keyword)"
    if name in sys.stdlib_module_names or name in ("loopfsm", "tests", "test"):
        return f"'{name}' would shadow the Python module of that name: choose another name"
    if name.startswith("_"):
        return f"'{name}' starts with '_', which marks a private name in Python: choose another name"
    if name in ("conftest", "setup", "noxfile"):
        return f"'{name}.py' means something to Python's tools (pytest, setuptools, nox): choose another name"
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a module loaded without a spec: it exists all the same
        found = None if name not in sys.modules else sys.modules[name].__spec__
    origin = getattr(found, "origin", None) if found else None
    if found and not (origin and Path(origin).resolve().parent == project.root):
        return f"a module named '{name}' is already importable ({origin or 'namespace package'}): choose another name"
    if name in Registries().names():
        return f"a registry named '{name}' is already installed: choose another name"
    return None


def _declare(pyproject: Path, name: str, target: str) -> str | None:
    """pyproject.toml's text with ``name = "target"`` under [tool.loopfsm] registries, or None if unsure.

    Edits are textual (the user's comments and layout stay) and kept only if
    the result parses to exactly the old settings plus the new registry.
    """
    old = pyproject.read_text(encoding="utf-8") if pyproject.exists() else ""
    try:
        before = tomllib.loads(old)
    except tomllib.TOMLDecodeError:
        return None
    table = before.get("tool", {}).get("loopfsm")
    entry = f'{name} = "{target}"'
    if table is None:
        sep = "" if not old or old.endswith("\n\n") else ("\n" if old.endswith("\n") else "\n\n")
        candidates = [old + sep + f"[tool.loopfsm]\nregistries = {{{entry}}}\n"]
    elif "registries" not in table:
        candidates = [old + ("" if old.endswith("\n") else "\n") + f"\n[tool.loopfsm.registries]\n{entry}\n"]
    else:
        candidates = [
            re.sub(
                r"(?m)^(\[tool\.loopfsm\.registries\][ \t]*(#.*)?\n)", lambda m: m.group(1) + entry + "\n", old, count=1
            ),
            re.sub(
                r"(?m)^(registries[ \t]*=[ \t]*\{)([ \t]*)(\}?)",
                lambda m: m.group(1) + entry + ("" if m.group(3) else ", ") + m.group(3),
                old,
                count=1,
            ),
        ]
    want = dict(table or {})
    want["registries"] = {**want.get("registries", {}), name: target}
    for text in candidates:
        try:
            after = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            continue
        rest_same = {k: v for k, v in after.items() if k != "tool"} == {k: v for k, v in before.items() if k != "tool"}
        tool_same = {k: v for k, v in after.get("tool", {}).items() if k != "loopfsm"} == {
            k: v for k, v in before.get("tool", {}).items() if k != "loopfsm"
        }
        if rest_same and tool_same and after["tool"].get("loopfsm") == want:
            return text
    return None


def plan(project: Project, name: str) -> Plan:
    problem = _name_problem(name, project)
    if problem:
        raise ConfigError(problem)
    if project.declared and any(d.name == name for d in project.declared):
        raise ConfigError(f"registry '{name}' is already declared in {shown(project.config or project.root)}")
    root = project.root
    machine_path = project.machines / f"{name}.yaml"
    module_path = root / f"{name}.py"
    test_path = root / "tests" / f"test_{name}.py"
    machine_rel = Path(os.path.relpath(machine_path, root)).as_posix()
    yaml_text = MACHINE.format(modeline=MODELINE, name=name, module=name)
    spec = build_spec(read_source(yaml_text, str(machine_path)))
    files = {
        machine_path: yaml_text,
        module_path: registry_module(spec, machine_rel),
        test_path: TEST.format(name=name, module=name),
    }
    for path in files:
        if path.exists():
            raise ConfigError(f"{shown(path)} already exists; nothing was written")
    pyproject = project.config or root / CONFIG
    target = f"{name}:REGISTRY"
    text = _declare(pyproject, name, target)
    hint = None
    if text is not None and project.config is None and not pyproject.exists():
        text += '\n[tool.pytest.ini_options]\npythonpath = ["."]\n'
    elif "pythonpath" not in (pyproject.read_text(encoding="utf-8") if pyproject.is_file() else ""):
        hint = (
            f"the test imports {name}.py from the project folder: run it with `python -m pytest`, or add "
            f'`pythonpath = ["."]` under [tool.pytest.ini_options] in {shown(pyproject)}'
        )
    return Plan(files, project.machines / SCHEMA_FILE, pyproject, text, f'{name} = "{target}"', hint)


def _replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a crash leaves the old file or the new, never half)."""
    target = path.resolve()  # a symlinked pyproject.toml keeps its link; its target gets the text
    tmp = target.with_name(f".{target.name}.loopfsm-new")
    try:
        with tmp.open("x", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write(p: Plan) -> list[str]:
    """Write the plan; the lines to print (what was written, what the user still has to do).

    All or nothing: if any write fails, the files and folders this call
    created are removed again and the user's files are as they were.
    """
    out: list[str] = []
    created: list[Path] = []
    current: Path | None = None
    try:
        for path, text in p.files.items():
            current = path
            missing = [d for d in (path.parent, *path.parent.parents) if not d.exists()]
            path.parent.mkdir(parents=True, exist_ok=True)
            created += reversed(missing)
            with path.open("x", encoding="utf-8") as f:  # never overwrite, even if one appeared meanwhile
                created.append(path)
                f.write(text)
            out.append(f"wrote {shown(path)}")
        current = p.pyproject
        if p.pyproject_text is not None:
            existed = p.pyproject.exists()
            _replace(p.pyproject, p.pyproject_text)
            verb = "declared" if existed else "wrote"
            out.append(f"{verb} {shown(p.pyproject)}: [tool.loopfsm] registries {p.declaration}")
        else:
            out.append(f"add to [tool.loopfsm] registries in {shown(p.pyproject)}: {p.declaration}")
    except OSError as err:
        for made in reversed(created):
            try:
                made.rmdir() if made.is_dir() else made.unlink()
            except OSError:
                pass
        where = current or p.pyproject
        blocked = next((d for d in where.parents if d.exists() and not d.is_dir()), None)
        why = f"{shown(blocked)} is not a folder" if blocked else err.strerror
        raise ConfigError(f"cannot write {shown(where)}: {why}; nothing was written") from None
    schema = schema_path().read_text(encoding="utf-8")
    try:  # only a convenience for editors: failing to refresh it is not worth undoing the rest
        if not p.schema.exists() or p.schema.read_text(encoding="utf-8") != schema:
            _replace(p.schema, schema)
            out.insert(len(p.files), f"wrote {shown(p.schema)} (for editors: the machine file's modeline points at it)")
    except OSError as err:
        out.append(f"could not write {shown(p.schema)} ({err.strerror}); `loopfsm schema > {shown(p.schema)}` makes it")
    if p.hint:
        out.append(p.hint)
    return out
