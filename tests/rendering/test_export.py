"""XState and SCXML exports: valid for their readers, and the table branch for branch."""

from __future__ import annotations

import json
import re
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema
import pytest

from tests.support.docs_pages import page
from statemachine.io import load as load_statechart

from loopfsm.core import loader
from loopfsm.core.spec import Spec
from loopfsm.core.tracing import branch_name
from loopfsm.cli.main import main
from loopfsm.rendering import render
from loopfsm.rendering.scxml import LOOPFSM_NS, SCXML_NS
from loopfsm.rendering.xstate import machine_config

ROOT = Path(__file__).resolve().parents[2]
MACHINES = sorted((ROOT / "machines").glob("*.yaml"))
XSTATE_SCHEMA = json.loads((ROOT / "spec" / "xstate-export.schema.json").read_text())
S = f"{{{SCXML_NS}}}"
L = f"{{{LOOPFSM_NS}}}"


def spec(name: str) -> Spec:
    return loader.load(ROOT / "machines" / f"{name}.yaml")


# A row read back: (state, event, target or None, guard names in order, branch name).
Row = tuple[str, str, "str | None", tuple[str, ...], str]


def _guard_names(guard: dict | None) -> tuple[str, ...]:
    """The guard names an XState guard object combines, in order (``not x`` as ``not x``)."""
    if guard is None:
        return ()
    if guard["type"] in ("loopfsm.and", "loopfsm.or"):
        return tuple(n for g in guard["params"]["guards"] for n in _guard_names(g))
    if guard["type"] == "loopfsm.not":
        return tuple(f"not {n}" for n in _guard_names(guard["params"]["guard"]))
    if guard["type"] == "loopfsm.when":
        return (_when_key(guard["params"]),)
    return (guard["type"],)


def _when_key(c: dict) -> str:
    """A ``when:`` condition as the rows compare it: its argument and its values."""
    return f"when {c['arg']} {c['values']}"


def xstate_rows(config: dict) -> list[Row]:
    return [
        (state, event, t.get("target"), _guard_names(t.get("guard")), t["meta"]["branch"])
        for state, node in config["states"].items()
        for event, ts in node.get("on", {}).items()
        for t in ts
    ]


def scxml_rows(text: str) -> list[Row]:
    root = ET.fromstring(text)
    rows = []
    for el in root:
        for t in el.findall(f"{S}transition"):
            when = json.loads(t.get(f"{L}when", "[]"))
            cond = " and ".join(t.get("cond", "").split(" and ")[len(when) :])  # the when labels come first
            names = re.findall(r"(?:not )?[a-z_][a-z0-9_]*", cond.replace("(", " ").replace(")", " "))
            guards = tuple(_when_key(c) for c in when) + tuple(n for n in names if n not in ("and", "or"))
            rows.append((el.get("id"), t.get("event"), t.get("target"), guards, t.get(f"{L}branch")))
    return rows


def table_rows(s: Spec, *, leaves: bool = True) -> list[Row]:
    """The table's own rows, state by state and feed by feed, terminal states left out."""

    def names(g) -> tuple[str, ...]:
        if g.options:
            return tuple(n for opt in g.options for x in opt for n in names(x))
        return (f"not {g.name}" if g.negate else g.name,)

    rows: dict[str, list[Row]] = {name: [] for name in s.states}
    for ev in s.events.values():
        for state, branches in s.expanded_sources(ev).items():
            if s.states[state].terminal:
                continue
            for b in branches:
                when = tuple(_when_key({"arg": c.arg, "values": list(c.values)}) for c in b.when)
                guards = when + tuple(n for g in b.guards for n in names(g))
                name = branch_name(ev.name, b.source, b.index, b.name)
                rows[state].append((state, ev.name, b.dest, guards, name))
            if ev.otherwise == "raise" and all(b.guarded for b in branches):
                rows[state].append((state, ev.name, None, (), f"{ev.name}/{state}[otherwise]"))
    return [r for name in s.states for r in rows[name]]


@pytest.mark.parametrize("path", MACHINES, ids=lambda p: p.stem)
def test_every_machine_exports_xstate_that_fits_the_config_shape(path):
    s = loader.load(path)
    files = render(s, ["xstate"])
    assert list(files) == [f"{s.name}.xstate.json"]
    config = json.loads(files[f"{s.name}.xstate.json"])
    jsonschema.Draft202012Validator(XSTATE_SCHEMA).validate(config)
    assert config["id"] == s.name and config["initial"] == s.initial
    assert config["initial"] in config["states"]
    for node in config["states"].values():
        for ts in node.get("on", {}).values():
            assert all(t.get("target", config["initial"]) in config["states"] for t in ts)
    finals = {n for n, node in config["states"].items() if node.get("type") == "final"}
    assert finals == set(s.terminal_states)
    assert xstate_rows(config) == table_rows(s)


@pytest.mark.parametrize("path", MACHINES, ids=lambda p: p.stem)
def test_every_machine_exports_scxml_that_python_statemachine_loads(path):
    s = loader.load(path)
    text = render(s, ["scxml"])[f"{s.name}.scxml"]
    root = ET.fromstring(text)
    assert root.tag == f"{S}scxml" and root.get("version") == "1.0"
    assert root.get("initial") == s.initial and root.get("name") == s.name
    ids = [el.get("id") for el in root]
    assert ids == list(s.states)
    for el in root:
        assert el.tag == (f"{S}final" if s.states[el.get("id")].terminal else f"{S}state")
        if el.tag == f"{S}final":
            assert not list(el), "an SCXML <final> takes no transitions"
        for t in el.findall(f"{S}transition"):
            assert t.get("event") in s.events and (t.get("target") is None or t.get("target") in ids)
    assert scxml_rows(text) == table_rows(s)
    chart = load_statechart(text, format="scxml")
    assert {st.id for st in chart.states} == set(s.states)
    assert {st.id for st in chart.states if st.final} == set(s.terminal_states)
    assert chart().configuration_values == {s.initial}


def test_turnstile_round_trips_through_both_formats():
    s = spec("turnstile")
    table = [
        ("locked", "coin", "unlocked", ("fare_paid",), "coin/locked[0]"),
        ("locked", "coin", None, (), "coin/locked[1]"),
        ("locked", "push", None, (), "push/locked[0]"),
        ("unlocked", "coin", None, (), "coin/unlocked[0]"),
        ("unlocked", "push", "locked", (), "push/unlocked[0]"),
    ]
    files = render(s, ["xstate", "scxml"])
    config = json.loads(files["turnstile.xstate.json"])
    assert xstate_rows(config) == table
    assert scxml_rows(files["turnstile.scxml"]) == table
    # Parameters and actions survive too: the guard's policy parameter, as written.
    first = config["states"]["locked"]["on"]["coin"][0]
    assert first["guard"] == {"type": "fare_paid", "params": {"fare": {"policy": "fare"}}}
    assert first["actions"] == [{"type": "clear_credit"}] and first["description"] == "it clicks open"
    assert config["meta"] == {"policy": {"fare": 1}}
    t = ET.fromstring(files["turnstile.scxml"]).find(f"{S}state/{S}transition")
    assert json.loads(t.get(f"{L}guards")) == [{"name": "fare_paid", "params": {"fare": {"policy": "fare"}}}]
    assert json.loads(t.get(f"{L}actions")) == [{"name": "clear_credit"}]


def test_turnstile_scxml_runs_in_python_statemachine_as_the_table_does():
    gate = load_statechart(render(spec("turnstile"), ["scxml"])["turnstile.scxml"], format="scxml")()
    gate.model.fare_paid = False  # cond names the guard: the data model holds its verdict
    gate.send("push")
    assert gate.configuration_values == {"locked"}
    gate.send("coin")
    assert gate.configuration_values == {"locked"}  # not paid up: the targetless branch stays
    gate.model.fare_paid = True
    gate.send("coin")
    assert gate.configuration_values == {"unlocked"}
    gate.send("coin")
    assert gate.configuration_values == {"unlocked"}
    gate.send("push")
    assert gate.configuration_values == {"locked"}


def test_agent_loop_branches_keep_table_order_guards_and_refusals():
    config = machine_config(spec("agent_loop"))
    states = config["states"]
    failed = states["executing_tool"]["on"]["tool_failed"]
    assert [t["meta"]["branch"] for t in failed] == ["deadline", "retryable", "attempts_exhausted", "final"]
    assert failed[1]["target"] == "recovering"
    assert failed[1]["guard"] == {
        "type": "loopfsm.and",
        "params": {
            "guards": [
                {"type": "transient"},
                {"type": "idempotent_call"},
                {"type": "attempts_left", "params": {"max_attempts": {"policy": "max_attempts"}}},
            ]
        },
    }
    assert failed[3]["actions"] == [
        {"type": "clamp_clock"},
        {"type": "fail_with", "params": {"error_class": None}},
    ]
    # A refusal stays and runs nothing but the refusal, and keeps its place in the order.
    asked = states["awaiting_tool"]["on"]["approval_required"]
    other = next(t for t in asked if t["meta"]["branch"] == "other_action")
    assert "target" not in other
    assert other["guard"] == {"type": "loopfsm.not", "params": {"guard": {"type": "same_action"}}}
    assert other["actions"][0]["type"] == "loopfsm.refuse"
    assert asked[-1]["target"] == "awaiting_approval"
    # '*' is every live state that does not name the feed; a state that names it keeps its own branches.
    assert all("fail" in states[n]["on"] for n in ("planning", "recovering", "awaiting_approval"))
    assert [t["meta"]["branch"] for t in states["awaiting_approval"]["on"]["tick"]] == [
        "deadline",
        "approval_lapsed",
        "still_waiting",
    ]
    assert [t["meta"]["branch"] for t in states["planning"]["on"]["tick"]] == ["deadline", "still_valid"]
    for name in ("completed", "failed", "expired"):
        assert states[name]["type"] == "final" and "on" not in states[name]
    assert states["executing_tool"]["tags"] == ["calls_tools"]


def test_engine_brain_terminal_lists_the_feeds_it_still_takes():
    config = machine_config(spec("engine_brain"))
    assert config["states"]["Terminal"]["meta"] == {"terminal_feeds": ["commit_pending", "discard_pending"]}
    root = ET.fromstring(render(spec("engine_brain"), ["scxml"])["engine_brain.scxml"])
    final = root.find(f"{S}final")
    assert final is not None and final.get(f"{L}terminal_feeds") == "commit_pending discard_pending"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gate.yaml"
    path.write_text(text)
    return path


def test_otherwise_raise_closes_the_list_and_any_guards_become_or(tmp_path):
    path = _write(
        tmp_path,
        """
machine: gate
description: A gate that needs a key or a badge.
states:
  shut: {initial: true, description: shut}
  open: {terminal: true, description: open}
events:
  knock:
    description: someone knocks
    otherwise: raise
    from:
      shut:
        - guard: {any: [has_key, [has_badge, {name: on_duty, negate: true}]]}
          to: open
          description: let in
""",
    )
    s = loader.load(path, lookup=lambda name: None)  # rendering needs the names only, as the command line
    files = render(s, ["xstate", "scxml"])
    config = json.loads(files["gate.xstate.json"])
    jsonschema.Draft202012Validator(XSTATE_SCHEMA).validate(config)
    knock = config["states"]["shut"]["on"]["knock"]
    assert knock[0]["guard"] == {
        "type": "loopfsm.or",
        "params": {
            "guards": [
                {"type": "has_key"},
                {
                    "type": "loopfsm.and",
                    "params": {
                        "guards": [
                            {"type": "has_badge"},
                            {"type": "loopfsm.not", "params": {"guard": {"type": "on_duty"}}},
                        ]
                    },
                },
            ]
        },
    }
    assert knock[1] == {
        "actions": [{"type": "loopfsm.raise", "params": {"error": "NoBranchMatched"}}],
        "description": "no branch holds: raises NoBranchMatched",
        "meta": {"branch": "knock/shut[otherwise]"},
    }
    t = ET.fromstring(files["gate.scxml"]).findall(f"{S}state/{S}transition")
    assert t[0].get("cond") == "(has_key or (has_badge and not on_duty))"
    assert t[1].get("cond") is None and t[1].get(f"{L}raise") == "NoBranchMatched"


def test_render_command_writes_the_exports_only_when_asked(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["render", "--format", "xstate,scxml", "-o", str(out), str(ROOT / "machines" / "turnstile.yaml")]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["turnstile.scxml", "turnstile.xstate.json"]
    assert main(["render", "--format", "md", "-o", str(out), str(ROOT / "machines" / "turnstile.yaml")]) == 0
    assert (out / "turnstile.md").exists()
    assert main(["render", "--format", "yaml", "-o", str(out)]) == 2
    assert "choose from svg, dot, mermaid, md, xstate, scxml" in capsys.readouterr().err


DOC = page("docs/export.md")


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC, re.S)


def test_the_docs_command_writes_both_exports_and_build_writes_neither(tmp_path, monkeypatch):
    (command,) = _blocks("sh")
    (tmp_path / "machines").mkdir()
    (tmp_path / "machines" / "turnstile.yaml").write_text((ROOT / "machines" / "turnstile.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    words = command.split()
    assert words[0] == "loopfsm" and main(words[1:]) == 0
    assert sorted(p.name for p in (tmp_path / "exported").iterdir()) == ["turnstile.scxml", "turnstile.xstate.json"]
    listed = (ROOT / "diagrams" / ".loopfsm-generated").read_text().split()
    assert not [n for n in listed if n.endswith((".scxml", ".json"))]


def test_the_docs_xstate_excerpt_is_the_turnstiles(monkeypatch):
    (excerpt,) = _blocks("json")
    assert json.loads(excerpt) == machine_config(spec("turnstile"))["states"]["locked"]["on"]["coin"]


def test_the_docs_python_example_runs(monkeypatch):
    (example,) = _blocks("python")
    monkeypatch.chdir(ROOT)
    exec(compile(example, "docs/export.md", "exec"), {})


def test_the_docs_tag_example_is_the_agent_loops():
    import yaml  # noqa: PLC0415

    (block,) = _blocks("yaml")
    shown = yaml.safe_load(block)["states"]["executing_tool"]
    real = spec("agent_loop").source.doc["states"]["executing_tool"]
    assert {k: real[k] for k in shown} == shown


def test_scxml_keeps_tags_policy_and_refusals():
    root = ET.fromstring(render(spec("agent_loop"), ["scxml"])["agent_loop.scxml"])
    assert json.loads(root.get(f"{L}policy")) == {"max_attempts": 3}
    states = {el.get("id"): el for el in root}
    assert states["executing_tool"].get(f"{L}tags") == "calls_tools"
    other = next(t for t in states["awaiting_tool"] if t.get(f"{L}branch") == "other_action")
    assert other.get("cond") == "not same_action" and other.get("target") is None
    assert other.get(f"{L}refuse") == "the action named is not the tool call awaiting a decision"
    assert other.get(f"{L}actions") is None  # a refusal runs nothing else


def test_the_docs_caveat_a_guard_with_two_sets_of_parameters_is_one_name_in_cond():
    """docs/export.md says a name holds one verdict, so a guard used with two sets of parameters is ambiguous
    in ``cond``; the example it gives is the real export."""
    root = ET.fromstring(render(spec("tool_breaker"), ["scxml"])["tool_breaker.scxml"])
    closed = next(el for el in root if el.get("id") == "Closed")
    t = next(t for t in closed if t.get(f"{L}branch") == "record/Closed[2]")
    cond = t.get("cond")
    assert f"`{cond}`" in page("docs/export.md")
    params = [
        g["params"] for alt in json.loads(t.get(f"{L}guards"))[0]["any"] for g in alt if g["name"] == "outcome_in"
    ]
    assert cond.count("outcome_in") == len(params) == 2 and params[0] != params[1]


def test_the_command_table_names_every_format_render_writes():
    from loopfsm.rendering import EXPORTS, FORMATS  # noqa: PLC0415

    (row,) = [line for line in page("docs/cli.md").splitlines() if line.startswith("| `loopfsm render ")]
    written = row.split("--format ", 1)[1].split(" ", 1)[0].split(",")
    assert written == [*FORMATS, *EXPORTS]
