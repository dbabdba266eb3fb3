"""Policy edits never strand a saved run: restore is decided by the snapshot's shape, and migrations are declared.

Every shipped machine is edited the ways an operator edits a table (a policy
default, a guard parameter, an added branch, an added field with a default, a
renamed state with and without a migration, a retyped field) and a run saved
under the shipped table is restored under the edited one.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest

from tests.support.docs_pages import page
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopfsm import IncompatibleSnapshot, MigratingRun, Registry, SnapshotError, SpecError, compile_spec, parse
from loopfsm.core.catalog import load_machine
from loopfsm.cli.main import main
from loopfsm.core.shape import shape_of

ROOT = Path(__file__).resolve().parents[2]
MACHINES = sorted(p.stem for p in (ROOT / "machines").glob("*.yaml"))


def doc_of(machine: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / "machines" / f"{machine}.yaml").read_text())


def compiled_from(tmp_path: Path, doc: dict[str, Any], name: str = "edited.yaml") -> Any:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_machine(str(path))


def saved(machine: str) -> dict[str, Any]:
    return load_machine(machine).new().snapshot()


# -- the edits ------------------------------------------------------------------------


def edit_policy_default(doc: dict[str, Any]) -> None:
    """The first policy number's default moved within its bounds; a machine without policy gains one."""
    policy = doc.get("policy")
    if not policy:
        doc["policy"] = {"patience": {"type": "integer", "default": 3, "description": "added by an operator"}}
        return
    p = next(iter(policy.values()))
    if p["type"] == "boolean":
        p["default"] = not p["default"]
    elif "enum" in p:
        p["default"] = next(v for v in p["enum"] if v != p["default"])
    elif p["type"] in ("integer", "number"):
        up = p["default"] + 1
        p["default"] = up if "maximum" not in p or up <= p["maximum"] else p["default"] - 1
    else:
        p["default"] = p["default"] + "x"


def _guard_refs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "name" in node and isinstance(node.get("params"), dict) and node["params"]:
                found.append(node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for ev in (doc.get("events") or {}).values():
        for branches in ev["from"].values():
            for b in branches:
                walk(b.get("guard"))
    for d in (doc.get("decisions") or {}).values():
        for r in d["rules"]:
            walk(r.get("guard"))
    return found


def edit_guard_parameter(doc: dict[str, Any]) -> None:
    """A guard parameter read from policy becomes the policy's value written in; a number is moved by one."""
    for ref in _guard_refs(doc):
        for name, value in ref["params"].items():
            if isinstance(value, dict) and set(value) == {"policy"}:
                ref["params"][name] = doc["policy"][value["policy"]]["default"]
                return
            if type(value) is int:
                ref["params"][name] = value + 1
                return
            if isinstance(value, list) and len(value) > 1:
                ref["params"][name] = value[:-1]
                return
    # A machine whose guards take no parameters (run_lock): a guard itself is negated instead.
    for ev in doc["events"].values():
        for branches in ev["from"].values():
            for b in branches:
                if isinstance(b.get("guard"), str):
                    b["guard"] = {"name": b["guard"], "negate": True}
                    return
    pytest.fail("no guard to edit")


def edit_added_branch(doc: dict[str, Any]) -> None:
    """A feed gains a refusing branch in a live state it did not accept before."""
    states = doc["states"]
    for ev in doc["events"].values():
        if "*" in ev["from"]:
            continue
        for name, s in states.items():
            if not s.get("terminal") and name not in ev["from"]:
                ev["from"][name] = [{"refuse": "not in this state (an operator's rule)"}]
                return
    # Every feed is answered in every live state: a new feed with one branch is added instead.
    initial = next(name for name, s in states.items() if s.get("initial"))
    doc["events"]["operator_hold"] = {
        "description": "an operator's new feed",
        "from": {initial: [{"refuse": "held by the operator"}]},
    }


def edit_added_field(doc: dict[str, Any]) -> None:
    doc["data"]["added_by_operator"] = {"type": "integer", "default": 7, "description": "a new counter"}


def retyped_field(doc: dict[str, Any]) -> tuple[str, str, str]:
    """A machine data field changes type: integer <-> string. Returns (field, old type, new type)."""
    for name, f in doc["data"].items():
        if f.get("list") or f.get("nullable") or f["type"] not in ("integer", "string"):
            continue
        old = f["type"]
        new = "string" if old == "integer" else "integer"
        for key in ("minimum", "maximum", "enum"):
            f.pop(key, None)
        f["type"] = new
        f["default"] = "0" if new == "string" else 0
        return name, old, new
    pytest.fail("no field to retype")


def renamed_state(doc: dict[str, Any], old: str) -> tuple[dict[str, Any], str]:
    """The document with state ``old`` renamed wherever it is named (keys, targets, rule states)."""
    new = old + "Renamed" if old[0].isupper() else old + "_renamed"
    text = yaml.safe_dump(doc, sort_keys=False)
    return yaml.safe_load(re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w])", new, text)), new


def migration_for(machine: str, renames: dict[str, str]) -> dict[str, Any]:
    shape = shape_of(load_machine(machine).spec)
    reads: dict[str, Any] = {"states": shape.states}
    if shape.data:
        reads["data"] = shape.data
    return {"from": 1, "reads": reads, "states": renames}


# -- every shipped machine x every edit ------------------------------------------------


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("edit", [edit_policy_default, edit_guard_parameter, edit_added_branch])
def test_rule_edits_restore_the_same_run(tmp_path, machine, edit):
    doc = doc_of(machine)
    edit(doc)
    edited = compiled_from(tmp_path, doc)
    assert edited.fingerprint != load_machine(machine).fingerprint  # the edit is a real one
    snap = saved(machine)
    restored = edited.restore(snap)
    assert restored.state == snap["state"]
    assert {k: v for k, v in restored.snapshot().items() if k in ("state", "state_data", "data")} == {
        k: snap[k] for k in ("state", "state_data", "data")
    }


@pytest.mark.parametrize("machine", MACHINES)
def test_a_field_added_with_a_default_restores_with_the_default(tmp_path, machine):
    doc = doc_of(machine)
    edit_added_field(doc)
    restored = compiled_from(tmp_path, doc).restore(saved(machine))
    assert restored.data.added_by_operator == 7
    assert restored.state == saved(machine)["state"]


@pytest.mark.parametrize("machine", MACHINES)
def test_a_renamed_state_is_refused_by_name_without_a_migration(tmp_path, machine):
    snap = saved(machine)
    doc, new = renamed_state(doc_of(machine), snap["state"])
    edited = compiled_from(tmp_path, doc)
    with pytest.raises(IncompatibleSnapshot) as info:
        edited.restore(snap)
    assert info.value.problems == (f"state '{snap['state']}' no longer exists",)
    assert "declares no migrations" in str(info.value)


@pytest.mark.parametrize("machine", MACHINES)
def test_a_renamed_state_restores_through_a_migration(tmp_path, machine):
    snap = saved(machine)
    doc, new = renamed_state(doc_of(machine), snap["state"])
    doc = {"version": 2, "migrations": [migration_for(machine, {snap["state"]: new})], **doc}
    edited = compiled_from(tmp_path, doc)
    restored = edited.restore(snap)
    assert restored.state == new
    again = restored.snapshot()
    assert again["version"] == 2 and again["data"] == snap["data"]
    assert edited.restore(again).snapshot() == again


@pytest.mark.parametrize("machine", MACHINES)
def test_a_retyped_field_is_refused_by_name(tmp_path, machine):
    doc = doc_of(machine)
    field, old, new = retyped_field(doc)
    with pytest.raises(IncompatibleSnapshot) as info:
        compiled_from(tmp_path, doc).restore(saved(machine))
    assert info.value.problems == (f"field {field} changed from {old} to {new}",)


# -- the turnstile, in detail ------------------------------------------------------------

TURNSTILE = (ROOT / "machines" / "turnstile.yaml").read_text()


def turnstile_v2(tmp_path: Path, migration: str, name: str = "v2.yaml") -> Any:
    """The turnstile with ``unlocked`` renamed ``open``, ``credit`` renamed ``coins``, and a field ``shift``."""
    text = (
        TURNSTILE.replace("unlocked", "open")
        .replace("  credit:\n", "  coins:\n")
        .replace("registry: turnstile\n", "registry: turnstile\nversion: 2\n" + migration)
        .replace(
            "  passages:\n",
            "  shift:\n    type: string\n    default: day\n    description: which shift saw the coin\n  passages:\n",
        )
    )
    path = tmp_path / name
    path.write_text(text)
    return path


V1_READS = """\
    reads:
      data: {credit: integer, passages: integer}
      states: {locked: {}, unlocked: {}}
"""
FULL_MIGRATION = (
    "migrations:\n  - from: 1\n"
    + V1_READS
    + "    states: {unlocked: open}\n    fields: {credit: coins}\n    defaults: {shift: night}\n"
)


def test_the_readme_quickstart_edit_keeps_an_old_run(tmp_path):
    """The Quickstart's own edit (fare 1 -> 2), then a run saved before it: it restores, judged by the new fare."""
    from loopfsm.machines.turnstile import Turnstile

    gate = Turnstile()
    gate.coin()
    gate.push()  # one person through, locked again
    gate_saved = gate.snapshot()
    path = tmp_path / "turnstile.yaml"
    path.write_text(TURNSTILE.replace("    default: 1\n", "    default: 2        # was 1\n", 1))
    edited = load_machine(str(path))
    assert edited.fingerprint != Turnstile.compiled.fingerprint
    back = edited.restore(gate_saved)
    assert back.state == "locked" and back.data.passages == 1
    back.coin()
    assert back.state == "locked" and back.data.credit == 1  # the new table's fare: one coin is not enough
    back.coin()
    assert back.state == "unlocked"


def test_a_migration_renames_states_and_fields_and_fills_defaults(tmp_path):
    from loopfsm.machines.turnstile import Turnstile

    gate = Turnstile()
    gate.coin()
    v2 = load_machine(str(turnstile_v2(tmp_path, FULL_MIGRATION)))
    run = v2.restore(gate.snapshot())
    assert run.state == "open" and run.data.coins == 0 and run.data.shift == "night" and run.data.passages == 0


def test_without_the_rename_every_element_is_named(tmp_path):
    from loopfsm.machines.turnstile import Turnstile

    gate = Turnstile()
    gate.coin()
    path = tmp_path / "v2.yaml"
    path.write_text(
        TURNSTILE.replace("unlocked", "open")
        .replace("  credit:\n    type: integer\n", "  credit:\n    type: string\n")
        .replace("default: 0\n    minimum: 0\n    description: Coins", 'default: "0"\n    description: Coins', 1)
    )
    with pytest.raises(IncompatibleSnapshot) as info:
        load_machine(str(path)).restore(gate.snapshot())
    assert info.value.problems == ("field credit changed from integer to string", "state 'unlocked' no longer exists")


def test_a_removed_state_strands_only_the_runs_saved_in_it(tmp_path):
    from loopfsm.machines.turnstile import Turnstile

    renamed = tmp_path / "renamed.yaml"
    renamed.write_text(TURNSTILE.replace("unlocked", "open"))
    open_gate = Turnstile()
    open_gate.coin()
    with pytest.raises(IncompatibleSnapshot):
        load_machine(str(renamed)).restore(open_gate.snapshot())
    assert load_machine(str(renamed)).restore(Turnstile().snapshot()).state == "locked"
    v2 = turnstile_v2(tmp_path, FULL_MIGRATION.replace("    states: {unlocked: open}\n", ""))
    with pytest.raises(SpecError, match=r"do not carry version 1 to this table: state 'unlocked' no longer exists"):
        load_machine(str(v2))  # check proves the chain incomplete


def test_diff_says_through_which_migration(tmp_path, capsys):
    v2 = turnstile_v2(tmp_path, FULL_MIGRATION)
    assert main(["diff", str(ROOT / "machines" / "turnstile.yaml"), str(v2)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "  saved runs restore through the migration from version 1"
    broken = turnstile_v2(tmp_path, FULL_MIGRATION.replace("    states: {unlocked: open}\n", ""), "broken.yaml")
    main(["diff", str(ROOT / "machines" / "turnstile.yaml"), str(broken)])
    verdict, check = capsys.readouterr().out.splitlines()[-2:]
    assert verdict == (
        "  saved runs in unlocked are refused even through the migration from version 1: "
        "state 'unlocked' no longer exists; runs in other states restore"
    )
    assert check == (  # check refuses an incomplete chain, and diff says so under its verdict
        "  the new version does not pass `loopfsm check`: 11:5: migrations[0]: "
        "the migrations do not carry version 1 to this table: state 'unlocked' no longer exists"
    )
    retyped = tmp_path / "retyped.yaml"
    retyped.write_text(TURNSTILE.replace("  passages:\n    type: integer\n", "  passages:\n    type: string\n"))
    main(["diff", str(ROOT / "machines" / "turnstile.yaml"), str(retyped)])
    assert capsys.readouterr().out.splitlines()[-2] == (
        "  saved runs are refused: field passages changed from integer to string"
    )


# -- check: the chain and its words, at file:line:col ------------------------------------


@pytest.mark.parametrize(
    "migration,message",
    [
        (FULL_MIGRATION.replace("{unlocked: open}", "{unlockd: open}"), "version 1 has no state 'unlockd'"),
        (FULL_MIGRATION.replace("{unlocked: open}", "{unlocked: opne}"), "state 'opne' does not exist"),
        (FULL_MIGRATION.replace("{credit: coins}", "{credits: coins}"), "version 1 has no field 'credits'"),
        (FULL_MIGRATION.replace("{shift: night}", "{shifts: night}"), "'shifts' is not a field of the version"),
        (FULL_MIGRATION.replace("{shift: night}", "{shift: 3}"), "default 3 is not a string"),
        (FULL_MIGRATION.replace("- from: 1", "- from: 2"), "reads a version not older than this table's 2"),
        (FULL_MIGRATION.replace("    fields: {credit: coins}\n", ""), "field credit no longer exists"),
        (FULL_MIGRATION + "    transform: nothing_like_it\n", "unknown migration 'nothing_like_it'"),
    ],
)
def test_check_reports_a_broken_chain_where_it_is(tmp_path, migration, message):
    path = turnstile_v2(tmp_path, migration)
    with pytest.raises(SpecError) as info:
        load_machine(str(path))
    text = str(info.value)
    assert message in text
    assert re.search(r"v2\.yaml:\d+:\d+: migrations\[0\]", text), text


def test_migrations_need_a_version(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(TURNSTILE.replace("registry: turnstile\n", "registry: turnstile\n" + FULL_MIGRATION))
    with pytest.raises(SpecError, match=r"t\.yaml:\d+:\d+: migrations: migrations need a 'version:'"):
        load_machine(str(path))


def test_the_schema_refuses_a_shape_it_cannot_read(tmp_path):
    path = turnstile_v2(tmp_path, FULL_MIGRATION.replace("credit: integer", "credit: Integer!"))
    with pytest.raises(SpecError, match=r"v2\.yaml:\d+:\d+: migrations\[0\]\.reads\.data\.credit"):
        load_machine(str(path))


# -- a registry transform, codec versions, and old formats ---------------------------------

COUNTER_V1 = dedent("""
    machine: counter
    description: counts
    data:
      count: {type: integer, default: 0}
    states:
      idle: {initial: true, description: waiting}
      busy:
        terminal: true
        description: working
        data:
          since: {type: integer}
    events:
      go:
        description: start
        from:
          idle:
            - {to: busy, actions: [enter]}
""")
COUNTER_V2 = COUNTER_V1.replace("count: {type: integer, default: 0}", 'count: {type: string, default: "0"}').replace(
    "machine: counter\n", "machine: counter\nversion: 2\n"
).replace("since: {type: integer}", "since_ms: {type: integer}") + dedent("""
    migrations:
      - from: 1
        reads:
          data: {count: integer}
          states: {idle: {}, busy: {since: integer}}
        fields: {busy.since: since_ms}
        transform: count_as_text
    """)


def counter(text: str, transform: Any = None, codec_version: int | None = None) -> Any:
    reg = Registry("counter_test")

    @reg.action
    def enter(m: Any, ctx: Any) -> None:
        ctx.enter(**({"since_ms": 5000} if "since_ms" in text else {"since": 5}))

    if transform is not None:
        reg.migration(transform, name="count_as_text")
    if codec_version is not None:
        reg.codec("stamp", int, int, int, {"type": "integer"}, version=codec_version)
    return compile_spec(parse(text, "counter.yaml", reg), reg)


def as_text(run: MigratingRun) -> MigratingRun:
    run.data["count"] = str(run.data["count"])
    if run.state == "busy":
        run.state_data["since_ms"] *= 1000
    return run


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(count=st.integers(min_value=-(2**40), max_value=2**40), busy=st.booleans())
def test_migrated_snapshots_round_trip(count, busy):
    old, new = counter(COUNTER_V1), counter(COUNTER_V2, as_text)
    m = old.new()
    m.data.count = count
    if busy:
        m.go()
    snap = m.snapshot()
    before = copy.deepcopy(snap)
    run = new.restore(snap)
    assert snap == before  # restoring never edits the caller's snapshot
    assert run.state == m.state and run.data.count == str(count)
    assert run.state_data == ({"since_ms": 5000} if busy else {})
    again = run.snapshot()
    assert new.restore(again).snapshot() == again  # a migrated run is an ordinary run of the new table


def test_a_transform_that_fails_is_named_without_its_values():
    def broken(run: MigratingRun) -> MigratingRun:
        raise ValueError(f"secret {run.data}")

    snap = counter(COUNTER_V1).new().snapshot()
    with pytest.raises(SnapshotError) as info:
        counter(COUNTER_V2, broken).restore(snap)
    assert "migration transform count_as_text failed (ValueError)" in str(info.value)
    assert "secret" not in str(info.value)


def test_a_codec_version_change_is_refused_by_name():
    text = COUNTER_V1.replace("count: {type: integer, default: 0}", "count: {type: stamp, default: 0}")
    snap = counter(text, codec_version=1).new().snapshot()
    assert snap["shape"]["codecs"]["stamp"] == 1
    assert counter(text, codec_version=1).restore(snap).data.count == 0
    with pytest.raises(IncompatibleSnapshot) as info:
        counter(text, codec_version=2).restore(snap)
    assert info.value.problems == ("field count: codec stamp changed from version 1 to 2",)


def test_a_run_saved_under_a_newer_version_restores_only_when_its_shape_fits():
    v1 = counter(COUNTER_V1)
    newer = dict(v1.new().snapshot(), version=5)
    assert v1.restore(newer).state == "idle"  # a rollback of a policy change: same shape
    newer["shape"] = {"data": {"count": "string"}, "states": {"idle": {}}, "codecs": {}}
    with pytest.raises(IncompatibleSnapshot, match="taken under version 5, newer than this table's 1"):
        v1.restore(newer)


def test_restore_checks_migrated_values_against_the_new_table():
    def nothing(run: MigratingRun) -> MigratingRun:
        return run  # forgets to convert: the count is still an integer

    with pytest.raises(SnapshotError, match="data.count must be string"):
        counter(COUNTER_V2, nothing).restore(counter(COUNTER_V1).new().snapshot())


def test_a_state_field_added_without_a_default_needs_one_from_the_migration():
    v1 = counter(COUNTER_V1)
    busy = v1.new()
    busy.go()
    added = COUNTER_V1.replace("since: {type: integer}", "since: {type: integer}\n      owner: {type: string}")
    with pytest.raises(IncompatibleSnapshot) as info:
        counter(added).restore(busy.snapshot())
    assert info.value.problems == ("field owner of state busy was added without a default",)
    assert counter(added).restore(v1.new().snapshot()).state == "idle"  # a run in another state is not stranded
    migrated = added.replace("machine: counter\n", "machine: counter\nversion: 2\n") + dedent("""
    migrations:
      - from: 1
        reads: {data: {count: integer}, states: {idle: {}, busy: {since: integer}}}
        defaults: {busy.owner: nobody}
    """)
    assert counter(migrated).restore(busy.snapshot()).state_data == {"since": 5, "owner": "nobody"}


# -- docs/saved-runs.md, held to the code ------------------------------------------------

SECTION = page("docs/saved-runs.md")


def readme_block(marker: str, lang: str) -> str:
    return SECTION.split(f"<!-- example: {marker} -->\n", 1)[1].split(f"```{lang}\n", 1)[1].split("```", 1)[0]


def test_the_docs_example_runs():
    exec(compile(readme_block("saved-runs", "python"), "docs-saved-runs", "exec"), {})


def test_the_docs_migration_reads_an_old_run(tmp_path):
    from loopfsm.machines.turnstile import Turnstile

    gate = Turnstile()
    gate.coin()
    path = tmp_path / "turnstile.yaml"
    path.write_text(
        TURNSTILE.replace("unlocked", "open").replace("  credit:\n", "  coins:\n") + readme_block("migration", "yaml")
    )
    run = load_machine(str(path)).restore(gate.snapshot())
    assert run.state == "open" and run.data.coins == 0


def test_the_docs_diff_example_is_what_diff_prints(tmp_path, capsys):
    cli = page("docs/cli.md")
    block = cli.split("$ loopfsm diff old/turnstile.yaml machines/turnstile.yaml\n", 1)[1].split("```", 1)[0]
    old = tmp_path / "old.yaml"
    old.write_text(TURNSTILE.replace("the arm is released", "it clicks open"))
    new = tmp_path / "new.yaml"
    new.write_text(
        TURNSTILE.replace("default: 1\n", "default: 2\n", 1).replace("it clicks open", "the arm is released")
    )
    main(["diff", str(old), str(new)])
    out = capsys.readouterr().out.splitlines()[1:]
    assert out == block.splitlines()[1:]


def test_widened_types_and_implicit_defaults_read_as_before():
    v1 = counter(COUNTER_V1)
    m = v1.new()
    m.data.count = 41
    m.go()
    widened = (
        COUNTER_V1.replace("count: {type: integer, default: 0}", "count: {type: number, default: 0}")
        .replace("since: {type: integer}", "since: {type: integer, nullable: true}")
        .replace("states:\n", "  notes: {type: string, list: true}\n  owner: {type: string, nullable: true}\nstates:\n")
    )
    run = counter(widened).restore(m.snapshot())
    assert (run.data.count, run.data.notes, run.data.owner, run.state_data) == (41, [], None, {"since": 5})
    narrowed = COUNTER_V1.replace("count: {type: integer, default: 0}", "count: {type: number, default: 0}")
    with pytest.raises(IncompatibleSnapshot, match="field count changed from number to integer"):
        v1.restore(counter(narrowed).new().snapshot())


def test_a_version_bumped_without_a_migration_restores_what_fits():
    bumped = counter(COUNTER_V1.replace("machine: counter\n", "machine: counter\nversion: 3\n"))
    run = bumped.restore(counter(COUNTER_V1).new().snapshot())
    assert run.state == "idle" and run.snapshot()["version"] == 3


@pytest.mark.parametrize(
    "returned,message",
    [
        (lambda run: {"state": "idle"}, "migration transform count_as_text failed (TypeError)"),
        (lambda run: MigratingRun(["idle"], {}, {"count": "0"}), "after migration its state ['idle'] does not exist"),
        (lambda run: MigratingRun("idle", {}, []), "a migration transform returned something other than a run"),
    ],
)
def test_what_a_transform_returns_is_checked(returned, message):
    with pytest.raises(SnapshotError) as info:
        counter(COUNTER_V2, lambda run: returned(run)).restore(counter(COUNTER_V1).new().snapshot())
    assert message in str(info.value)


def test_a_transform_editing_nested_values_in_place_leaves_the_callers_snapshot_alone():
    text = COUNTER_V1.replace("count: {type: integer, default: 0}", "count: {type: json, default: {}}")
    v2 = text.replace("machine: counter\n", "machine: counter\nversion: 2\n") + dedent("""
    migrations:
      - from: 1
        reads: {data: {count: json}, states: {idle: {}, busy: {since: integer}}}
        transform: count_as_text
    """)

    def tag(run: MigratingRun) -> None:
        run.data["count"]["migrated"] = True

    snap = counter(text).new().snapshot()
    assert counter(v2, tag).restore(snap).data.count == {"migrated": True}
    assert snap["data"]["count"] == {}


def test_a_run_older_than_the_chain_is_refused_with_its_version_named():
    v1 = counter(COUNTER_V1)
    busy = v1.new()
    busy.go()
    # Version 3 migrates from version 2 on, whose count was already a string: no transform.
    v3 = (
        COUNTER_V2.replace("version: 2", "version: 3")
        .replace("- from: 1", "- from: 2")
        .replace("{count: integer}", "{count: string}")
        .replace("    transform: count_as_text\n", "")
    )
    with pytest.raises(IncompatibleSnapshot) as info:
        counter(v3).restore(busy.snapshot())
    assert info.value.problems == (
        "it was taken under version 1, older than the oldest this table migrates (2)",
        "field count changed from integer to string",
    )


def test_loopfsm_check_reports_an_incomplete_chain_at_its_line(tmp_path, capsys):
    path = turnstile_v2(tmp_path, FULL_MIGRATION.replace("    fields: {credit: coins}\n", ""))
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr()
    text = out.out + out.err
    line = next(i for i, x in enumerate(path.read_text().splitlines(), 1) if x == "  - from: 1")
    assert f"v2.yaml:{line}:5: migrations[0]: the migrations do not carry version 1 to this table: " in text
    assert "field credit no longer exists" in text
    assert main(["check", str(turnstile_v2(tmp_path, FULL_MIGRATION, "ok.yaml"))]) == 0


@settings(max_examples=60, deadline=None)
@given(coins=st.lists(st.sampled_from(["coin", "push"]), max_size=12), fare=st.integers(1, 4))
def test_turnstile_runs_round_trip_through_the_readme_migration(tmp_path_factory, coins, fare):
    from loopfsm.machines.turnstile import Turnstile, TurnstilePolicy

    gate = Turnstile()
    for feed in coins:
        getattr(gate, feed)(policy=TurnstilePolicy(fare=fare))
    v2 = load_machine(str(turnstile_v2(tmp_path_factory.mktemp("v2"), FULL_MIGRATION)))
    run = v2.restore(gate.snapshot())
    expected_state = {"locked": "locked", "unlocked": "open"}[gate.state]
    assert (run.state, run.data.coins, run.data.passages, run.data.shift) == (
        expected_state,
        gate.data.credit,
        gate.data.passages,
        "night",
    )
    assert v2.restore(run.snapshot()).snapshot() == run.snapshot()


def test_a_hostile_shape_is_refused_in_a_bounded_message():
    v1 = counter(COUNTER_V1)
    snap = v1.new().snapshot()
    snap["shape"]["data"].update({f"f{i}": "integer" for i in range(5000)})
    snap["data"].update({f"f{i}": 0 for i in range(5000)})  # values as the shape says: the shape is judged
    with pytest.raises(IncompatibleSnapshot) as info:
        v1.restore(snap)
    assert len(str(info.value)) < 1000 and "; and 4990 more" in str(info.value)
    assert len(info.value.problems) == 100


# -- loopfsm shape: the reads: block printed, not written by hand -----------------------------------


def _indented(block: str, by: str) -> str:
    return "".join(by + line + "\n" for line in block.splitlines())


def test_loopfsm_shape_prints_the_reads_block_a_migration_pastes_whole(tmp_path, capsys):
    from loopfsm.machines.turnstile import Turnstile

    assert main(["shape", str(ROOT / "machines" / "turnstile.yaml")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# {ROOT / 'machines' / 'turnstile.yaml'}, version 1: the shape its snapshots record.")
    block = out[out.index("reads:\n") :]
    assert yaml.safe_load(block)["reads"] == Turnstile().snapshot()["shape"]  # what snapshots record, codecs too
    migration = "migrations:\n  - from: 1\n" + _indented(block, "    ")
    migration += "    states: {unlocked: open}\n    fields: {credit: coins}\n"
    v2 = load_machine(str(turnstile_v2(tmp_path, migration)))  # check accepts the pasted block
    gate = Turnstile()
    gate.coin()
    again = v2.restore(gate.snapshot())
    assert again.state == "open" and again.data.coins == 0 and again.data.shift == "day"


def test_a_snapshots_shape_pastes_as_reads_and_its_codec_versions_are_held_to_the_registrys(tmp_path):
    from loopfsm.machines.turnstile import Turnstile

    shape = Turnstile().snapshot()["shape"]
    pasted = "migrations:\n  - from: 1\n" + _indented(yaml.safe_dump({"reads": shape}), "    ")
    pasted += "    states: {unlocked: open}\n    fields: {credit: coins}\n"
    load_machine(str(turnstile_v2(tmp_path, pasted)))
    bumped = pasted.replace("integer: 1", "integer: 2")
    assert bumped != pasted
    with pytest.raises(SpecError, match=r"codec integer changed from version 2 to 1"):
        load_machine(str(turnstile_v2(tmp_path, bumped, "bumped.yaml")))
