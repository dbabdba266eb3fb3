"""A feed's ``first:`` branches: said once, tried in every state the feed is fed in (or a branch's
``states:``) ahead of the state's own, and in every way the table that copies them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.docs_pages import page
from tests.support.specs import dedent, marked_line

from loopfsm import FeedRefused, Registry, SpecError, compile_spec, parse
from loopfsm.core import tracing
from loopfsm.core.spec import _first_in_place
from loopfsm.core.tracing import TransitionRecord
from loopfsm.rendering import scxml, xstate
from loopfsm.verification.coverage import rows_of

ROOT = Path(__file__).resolve().parents[2]

SHARED = dedent("""
    machine: queue
    description: jobs wait, run and finish; a cancelled job is refused everywhere
    registry: queue
    states:
      waiting: {initial: true, description: queued}
      running: {description: on a worker}
      paused: {description: held}
      done: {terminal: true, description: finished}
    events:
      poke:
        description: someone asks after the job
        args:
          n: {type: integer}
        first:
          - guard: cancelled
            refuse: "the job was cancelled"
            description: nothing moves a cancelled job
          - guard: {name: above, params: {limit: 5}}
            states: [running, paused]
            to: done
            description: too many pokes while it ran
        from:
          waiting:
            - guard: {name: above, params: {limit: 0}}
              to: running
            - stay: true
          running:
            - stay: true
          paused: []
        otherwise: stay
      hold:
        description: an operator holds the job
        from:
          running:
            - to: paused
      tick:
        description: time passes
        first:
          - guard: cancelled
            stay: true
        from:
          "*":
            - stay: true
""")

# The same machine with the shared branches copied into each state, as a table without `first:` says it.
COPIED = dedent("""
    machine: queue
    description: jobs wait, run and finish; a cancelled job is refused everywhere
    registry: queue
    states:
      waiting: {initial: true, description: queued}
      running: {description: on a worker}
      paused: {description: held}
      done: {terminal: true, description: finished}
    events:
      poke:
        description: someone asks after the job
        args:
          n: {type: integer}
        from:
          waiting:
            - &cancelled
              guard: cancelled
              refuse: "the job was cancelled"
              description: nothing moves a cancelled job
            - guard: {name: above, params: {limit: 0}}
              to: running
            - stay: true
          running:
            - *cancelled
            - &above
              guard: {name: above, params: {limit: 5}}
              to: done
              description: too many pokes while it ran
            - stay: true
          paused:
            - *cancelled
            - *above
        otherwise: stay
      hold:
        description: an operator holds the job
        from:
          running:
            - to: paused
      tick:
        description: time passes
        from:
          "*":
            - guard: cancelled
              stay: true
            - stay: true
""")


def registry(flag: list[bool]) -> Registry:
    reg = Registry("queue")

    @reg.guard
    def cancelled(m: Any, ctx: Any) -> bool:
        return flag[0]

    @reg.guard
    def above(m: Any, ctx: Any, *, limit: int) -> bool:
        return int(ctx.args["n"]) > limit

    return reg


def compiled(text: str, cancelled: list[bool]) -> Any:
    reg = registry(cancelled)
    return compile_spec(parse(text, "queue.yaml", reg), reg)


def branches(text: str) -> dict[str, list[tuple[str, int, str | None, str | None]]]:
    spec = parse(text, "queue.yaml", registry([False]))
    return {
        f"{feed}/{state}": [(b.source, b.index, b.dest, b.refusal) for b in bs]
        for feed, ev in spec.events.items()
        for state, bs in ev.sources.items()
    }


def test_shared_branches_are_placed_ahead_of_each_states_own_as_the_copied_table_has_them():
    assert branches(SHARED) == branches(COPIED)
    assert [d for _, _, d, _ in branches(SHARED)["poke/waiting"]] == [None, "running", None]
    assert [d for _, _, d, _ in branches(SHARED)["poke/paused"]] == [None, "done"]  # the scope's second state


def test_the_fingerprint_is_the_copied_tables_so_saved_runs_are_not_orphaned():
    shared, copied = parse(SHARED, "a.yaml", registry([False])), parse(COPIED, "b.yaml", registry([False]))
    assert shared.fingerprint == copied.fingerprint
    scoped_elsewhere = SHARED.replace("        states: [running, paused]\n", "")  # waiting tries it too
    assert parse(scoped_elsewhere, "c.yaml", registry([False])).fingerprint != shared.fingerprint


@pytest.mark.parametrize("engine", ["transitions", "interpreter"])
def test_both_engines_take_the_same_branches_with_the_same_names(engine: str):
    def run(text: str) -> list[tuple[str, str | None, str]]:
        cancelled = [False]
        m = compiled(text, cancelled).new(engine=engine)
        records: list[TransitionRecord] = []
        with tracing.attached(m, records.append):
            m.tick()
            m.poke(n=1)
            m.poke(n=2)
            cancelled[0] = True
            with pytest.raises(FeedRefused, match="the job was cancelled"):
                m.poke(n=9)
            m.tick()
            cancelled[0] = False
            m.poke(n=9)
        assert m.state == "done"
        return [(r.feed, r.branch, r.to_state) for r in records]

    taken = run(SHARED)
    assert taken == run(COPIED)
    assert taken == [
        ("tick", "tick/*[1]", "waiting"),
        ("poke", "poke/waiting[1]", "running"),
        ("poke", "poke/running[2]", "running"),
        ("tick", "tick/*[0]", "running"),
        ("poke", "poke/running[1]", "done"),
    ]


def test_coverage_counts_a_shared_branch_once_per_state_at_its_line_in_first():
    src = parse(SHARED, "queue.yaml", registry([False])).source
    rows = {r.name: r.line for r in rows_of(src.doc, lambda p: src.locate(p)[0])}
    refusal_line = marked_line(SHARED, 'refuse: "the job was cancelled"') - 1
    assert [rows[f"poke/{s}[0]"] for s in ("waiting", "running", "paused")] == [refusal_line] * 3
    assert rows["poke/paused[1]"] == rows["poke/running[1]"] == marked_line(SHARED, "limit: 5")
    assert "poke/waiting[3]" not in rows and "poke/paused[2]" not in rows
    copied = parse(COPIED, "queue.yaml", registry([False])).source
    assert sorted(rows) == sorted(r.name for r in rows_of(copied.doc))


def test_exports_draw_each_states_copy():
    shared, copied = (compiled(t, [False]) for t in (SHARED, COPIED))
    assert xstate.machine_json(shared.spec) == xstate.machine_json(copied.spec)
    assert scxml.document(shared.spec) == scxml.document(copied.spec)


def problems(text: str) -> list[str]:
    with pytest.raises(SpecError) as err:
        parse(text, "queue.yaml", registry([False]))
    return [f"{p.line}: {p.message}" for p in err.value.problems if p.severity == "error"]


def test_a_scope_on_a_branch_under_from_is_refused_at_its_line():
    text = SHARED.replace(
        "        - stay: true\n      running:",
        "        - stay: true\n          states: [waiting]  # <-\n      running:",
    )
    (found,) = problems(text)
    assert found.startswith(f"{marked_line(text)}: 'states:' scopes a branch of 'poke's 'first:' list")


def test_a_scope_naming_a_state_reached_only_through_the_wildcard_is_refused():
    text = SHARED.replace(
        "      - guard: cancelled\n        stay: true",
        "      - guard: cancelled\n        states: [paused]  # <-\n        stay: true",
    )
    (found,) = problems(text)
    assert found.startswith(f"{marked_line(text)}: 'tick' is not fed in 'paused' by name: list 'paused' under 'from:'")


def test_a_misspelt_scope_is_an_unknown_state_with_a_suggestion():
    text = SHARED.replace("states: [running, paused]", "states: [running, pasued]")
    (found,) = problems(text)
    assert (
        found.startswith(f"{marked_line(text, 'pasued')}: unknown state 'pasued'") and "did you mean 'paused'" in found
    )


def test_a_state_left_with_no_branch_is_refused():
    text = SHARED.replace("        - to: paused\n", "        - to: paused\n      paused: []  # <-\n")
    (found,) = problems(text)
    assert (
        found
        == f"{marked_line(text)}: 'hold' from 'paused' has no branches: neither its own nor a 'first:' one tried there"
    )


def test_an_unguarded_shared_branch_hides_the_states_own_branches():
    text = SHARED.replace("      - guard: cancelled\n        refuse:", "      - refuse:")
    found = problems(text)
    assert any(
        # the state's own branch 0, after the shared one, named by its path: "branch 1" was its place in the
        # copied list, and "branch 0 before it" the shared branch, which is no branch 0 of the state's; the
        # trace's name for it (poke/waiting[1], counted after the shared one) said beside
        p.startswith(
            f"{marked_line(text, 'limit: 0')}: branch 0 of 'poke' from 'waiting' (traced as poke/waiting[1]) can "
            "never be taken: the branch "
            "events.poke.first[0] (line "
        )
        for p in found
    )


SHIPPED_WITH_FIRST = sorted(
    p.name
    for p in (ROOT / "machines").glob("*.yaml")
    if any("first" in e for e in (yaml.safe_load(p.read_text()).get("events") or {}).values())
)


def test_some_shipped_tables_say_shared_branches_once():
    assert {"agent_loop.yaml", "fallback_breaker.yaml", "tool_breaker.yaml"} <= set(SHIPPED_WITH_FIRST)


@pytest.mark.parametrize("name", SHIPPED_WITH_FIRST)
def test_each_shipped_table_is_its_copied_form(name: str, tmp_path: Path):
    from loopfsm import load  # noqa: PLC0415

    shipped = load(ROOT / "machines" / name)
    doc = yaml.safe_load((ROOT / "machines" / name).read_text())
    doc["events"] = {feed: _first_in_place(e) for feed, e in doc["events"].items()}
    assert not any("first" in e for e in doc["events"].values())
    (tmp_path / name).write_text(yaml.safe_dump(doc, sort_keys=False))
    copied = load(tmp_path / name)
    assert copied.fingerprint == shipped.fingerprint

    def table(spec: Any) -> dict[str, list[tuple[Any, ...]]]:
        return {
            f"{feed}/{state}": [
                (
                    b.name,
                    b.source,
                    b.index,
                    b.dest,
                    b.refusal,
                    b.guards and [g.name for g in b.guards],
                    [a.name for a in b.actions],
                )
                for b in bs
            ]
            for feed, ev in spec.events.items()
            for state, bs in ev.sources.items()
        }

    assert table(copied) == table(shipped)


def test_the_docs_excerpt_is_fallback_breaker_as_shipped():
    section = page("docs/format.md").split("### Branches every state shares: `first`", 1)[1]
    excerpt = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    shipped = (ROOT / "machines" / "fallback_breaker.yaml").read_text()
    assert "states: [Primary, Fallback]" in excerpt and excerpt in shipped
