"""``loopfsm paths``: a pytest module of shortest feed paths that together take every row the explorer reached.

The explorer of :mod:`.verify` notes, for every branch, refusal and decision
rule, the first (so a shortest) run that took it.  Each becomes one test: the
run's feeds in order, each followed by an assertion of the state after it (a
refused feed by ``pytest.raises``), ending with the feed or question that takes
the row.  Run under ``--loopfsm-coverage``, the module alone takes every row
listed; the rows no run within the bound reached are named in its docstring.

A row some policy setting shuts (a rule that fires only under
``disclosure: every_call``, a branch a threshold of 1 makes unreachable) is
looked for under other policies: every other value of each enum and boolean
setting, then each ``--variant`` given.  A policy is explored only while rows
are still missed, and its tests are only those for rows earlier ones missed;
each test feeds the policy it was found under.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loopfsm.core.errors import LoopFsmError
from loopfsm.core.registry import BUILTIN_CODECS

from loopfsm.verification.verify import Explorer, Result, Taken
from loopfsm.verification.verify_inputs import Step


@dataclass(frozen=True)
class Path_:
    """One generated test: the row it takes, and the run that takes it."""

    row: tuple[str, str]
    key: bytes  # the configuration the last step was fed in (its start is the run's)
    steps: tuple[Step, ...]
    last: Step
    decision: bool


def _ident(text: str) -> str:
    out = "".join(c if c.isalnum() else "_" for c in text).strip("_").lower()
    while "__" in out:
        out = out.replace("__", "_")
    return out or "row"


@dataclass
class Exploration:
    """One policy explored for paths: what was given (``--set`` and the variant), the explorer and its result."""

    given: dict[str, Any]
    explorer: Explorer
    result: Result
    rows: set[tuple[str, str]] = field(default_factory=set)  # the rows this policy's tests take


def policy_variants(spec: Any, given: dict[str, Any]) -> list[dict[str, Any]]:
    """Every other value of each enum and boolean policy setting not given: one policy each."""
    out = []
    for p in spec.policy.values():
        if p.name in given:
            continue
        values = list(p.enum) if p.enum is not None else [False, True] if p.type == "boolean" else []
        out += [{**given, p.name: v} for v in values if v != p.default]
    return out


def explore_policies(
    policies: list[dict[str, Any]], explore: Callable[[dict[str, Any]], tuple[Explorer, Result]]
) -> list[Exploration]:
    """Explore ``policies`` in order while rows are missed; each keeps the rows no earlier one took."""
    out: list[Exploration] = []
    taken: set[tuple[str, str]] = set()
    for given in policies:
        explorer, res = explore(given)
        new = {(r.kind, r.name) for r in res.coverage.counted if (r.kind, r.name) in res.coverage.taken} - taken
        if out and not new:
            continue
        out.append(Exploration(given, explorer, res, new if out else set(res.coverage.taken)))
        taken |= new
        if all((r.kind, r.name) in taken for r in res.coverage.counted):
            break
    return out


def paths_of(explorer: Explorer, res: Result, only: set[tuple[str, str]] | None = None) -> list[Path_]:
    """One path per row taken (of ``only``, when given), in the file's row order; a row taken by an
    identical run shares its test."""
    out: list[Path_] = []
    seen: set[str] = set()  # runs by their repr: argument values may be lists
    for row in res.coverage.rows:
        taken: Taken | None = explorer.first_taken.get((row.kind, row.name))
        if taken is None or (only is not None and (row.kind, row.name) not in only):
            continue
        steps = tuple(explorer.path_to(taken.key))
        run = repr((explorer.start_of(taken.key), steps, taken.step))
        if run in seen:
            continue
        seen.add(run)
        out.append(Path_((row.kind, row.name), taken.key, steps, taken.step, taken.decision))
    return out


def _literal(compiled: Any, feed: str, name: str, value: Any) -> str:
    """An argument's value as Python source: a registry type's value through its codec (``_value``)."""
    taker = compiled.spec.events.get(feed) or compiled.spec.decisions.get(feed)
    f = taker.args.get(name) if taker is not None else None
    codec = compiled.registry.codecs.get(f.type) if f is not None else None
    if f is None or codec is None or value is None or f.type in BUILTIN_CODECS:
        return repr(value)
    if f.list:
        return f"_value({f.type!r}, {[codec.to_json(v) for v in value]!r}, listed=True)"
    return f"_value({f.type!r}, {codec.to_json(value)!r})"


def _call(compiled: Any, var: str, step: Step, decision: bool, policy: str = "POLICY") -> str:
    args = "".join(f", {k}={_literal(compiled, step.feed, k, v)}" for k, v in step.args)
    if decision:
        return f"{var}.explain({step.feed!r}, policy={policy}{args})[0]"
    return f"{var}.feed({step.feed!r}, policy={policy}{args})"


def missed_rows(explorations: list[Exploration]) -> list[str]:
    """The rows no explored policy's runs took, as ``kind name``."""
    taken = set().union(*(e.rows for e in explorations))
    return [f"{r.kind} {r.name}" for r in explorations[0].result.coverage.counted if (r.kind, r.name) not in taken]


def module_text(explorations: list[Exploration], machine_path: str, starts: list[dict[str, Any]]) -> str:
    """The generated pytest module: one test per path; after every feed, its reply (or the error it raised),
    the state, the state data and the data are asserted.

    ``machine_path`` is the machine file relative to its project's root (the module finds the root above
    itself); ``starts`` are the snapshots explored from, a new instance's included (a machine that names
    itself at random, the fallback breaker, then starts every test the same way); each test starts from the
    one its run began at.
    """
    first = explorations[0]
    compiled = first.explorer.compiled
    missed = missed_rows(explorations)
    lines = [
        f'"""Shortest feed paths through {compiled.name} that together take every branch, refusal and decision rule',
        f"reached within the bound ({first.result.depth} feeds). "
        "Generated by `loopfsm paths`: regenerate, do not edit.",
    ]
    if missed:
        lines.append("")
        lines.append("Not reached within the bound: " + ", ".join(missed) + ".")
    errors: dict[str, str] = {}  # the error classes the module raises: name -> import line
    body: list[str] = []
    names: set[str] = set()
    for i, e in enumerate(explorations):
        policy = "POLICY" if i == 0 else f"POLICY_{i + 1}"
        for path in paths_of(e.explorer, e.result, None if i == 0 else e.rows):
            name = "test_" + _ident(path.row[1])
            while name in names:
                name += "_"
            names.add(name)
            index = _index_of(starts, e.explorer.start_of(path.key), compiled)
            body += ["", "", f"def {name}():", f'    """{path.row[0]} {path.row[1]}"""']
            body.append(f"    m = _start({index})" if index else "    m = _start()")
            body += _body(e.explorer, path, starts[index], policy, errors)
    lines += [
        '"""',
        "",
        "import pytest",
        "",
        *sorted(set(errors.values())),
        "from loopfsm.cli.project import project_machine",
        "",
        f"MACHINE = project_machine(__file__, {machine_path!r})",
    ]
    for i, e in enumerate(explorations):
        lines.append(f"POLICY{'' if i == 0 else f'_{i + 1}'} = MACHINE.policy({e.given!r})")
    lines += [
        f"STARTS = {starts!r}",
        "",
        "",
        "def _start(i=0):",
        "    return MACHINE.restore(STARTS[i])",
        "",
        "",
        "def _now(m):",
        '    """The state data and data, as a snapshot holds them."""',
        "    snap = m.snapshot()",
        '    return snap["state_data"], snap["data"]',
        "",
        "",
        "def _value(type_, json_value, listed=False):",
        '    """A value of a type the registry declares, from its JSON (as a snapshot holds it)."""',
        "    codec = MACHINE.registry.codecs[type_]",
        "    return [codec.from_json(v) for v in json_value] if listed else codec.from_json(json_value)",
        *body,
    ]
    return "\n".join(lines) + "\n"


def _index_of(starts: list[dict[str, Any]], start: dict[str, Any] | None, compiled: Any) -> int:
    """Which of the given starts a run began at (the explorer holds each as the machine's own snapshot)."""
    for i, s in enumerate(starts):
        if start is None or compiled.restore(s).snapshot() == start:
            return i
    return 0


def _error_name(cls: type, errors: dict[str, str]) -> str:
    """The name the module raises ``cls`` by, with the import it needs noted in ``errors``."""
    import importlib  # noqa: PLC0415

    module = cls.__module__
    try:
        found = getattr(importlib.import_module(module), cls.__qualname__, None) is cls
    except ImportError:
        found = False
    if not found or "." in cls.__qualname__:
        errors["LoopFsmError"] = "from loopfsm import LoopFsmError"
        return "LoopFsmError"  # a class no module names: its root, which every loopfsm error has
    errors[cls.__qualname__] = f"from {module} import {cls.__qualname__}"
    return cls.__qualname__


def _state_asserts(inst: Any) -> list[str]:
    snap = inst.snapshot()
    return [f"    assert m.state == {inst.state!r}", f"    assert _now(m) == {(snap['state_data'], snap['data'])!r}"]


def _body(explorer: Explorer, path: Path_, start: dict[str, Any], policy: str, errors: dict[str, str]) -> list[str]:
    """A path's feeds, each followed by what it answered and the configuration it leaves (replayed here)."""
    compiled = explorer.compiled
    lines: list[str] = []
    inst = compiled.restore(start)
    for step in (*path.steps, path.last):
        if step is path.last and path.decision:
            rule = path.row[1].split("/", 1)[1]
            lines.append(f"    assert {_call(compiled, 'm', step, True, policy)} == {rule!r}")
            break
        call = _call(compiled, "m", step, False, policy)
        try:
            reply = inst.feed(step.feed, policy=explorer.policy, **step.kwargs())
        except LoopFsmError as err:
            lines += [f"    with pytest.raises({_error_name(type(err), errors)}):", f"        {call}"]
            lines += _state_asserts(inst)
            continue
        shown = repr(reply)
        if reply is None:
            lines.append(f"    assert {call} is None")
        elif " at 0x" in shown or len(shown) > 2000:  # a reply with no repr of its own: not compared
            lines.append(f"    {call}")
        else:
            lines.append(f"    assert repr({call}) == {shown!r}")
        lines += _state_asserts(inst)
    return lines
