"""Guards registered with ``reads=``: the interpreter narrows branch lists once per value of an enum argument.

Narrowing is the interpreter's: the ``transitions`` engine asks every guard in order, as its conditions.
"""

from __future__ import annotations

import pytest

from loopfsm import NoBranchMatched, Registry, RegistryError, compile_spec, parse

from tests.support.specs import dedent

MACHINE = dedent("""
    machine: narrow
    description: shuts on a skip, or on a bad outcome once two were seen
    data:
      bad: {type: integer, default: 0}
      log: {type: string, list: true}
    states:
      open: {initial: true, description: taking outcomes}
      shut: {terminal: true, description: done taking them}
    events:
      report:
        description: one outcome
        otherwise: raise
        args:
          outcome: {type: string, enum: [ok, bad, skip], nullable: true}
        from:
          open:
            - guard:
                any:
                  - {name: outcome_is, params: {value: skip}}
                  - [{name: outcome_is, params: {value: bad}}, {name: bad_at_least, params: {n: 2}}]
              to: shut
              actions: [{name: note, params: {text: shut}}]
            - guard: {name: outcome_is, params: {value: bad}}
              stay: true
              actions: [{name: note, params: {text: bad}}, count_bad]
            - guard: {name: outcome_is, params: {value: ok}, negate: true}
              stay: true
              actions: [{name: note, params: {text: not-ok}}]
""")


def machine(honest: bool = True):
    reg = Registry("narrow")
    asked: list[str] = []

    @reg.guard(reads=("outcome",))
    def outcome_is(m, ctx, *, value: str) -> bool:
        asked.append(value)
        return ctx.args["outcome"] == value if honest else m.data.bad >= 0

    @reg.guard
    def bad_at_least(m, ctx, *, n: int) -> bool:
        return m.data.bad >= n

    @reg.action
    def note(m, ctx, *, text: str) -> None:
        m.data.log.append(text)

    @reg.action
    def count_bad(m, ctx) -> None:
        m.data.bad += 1

    return compile_spec(parse(MACHINE, "narrow.yaml", reg), reg), asked


def test_branches_follow_the_table_and_the_guard_is_asked_once_per_value():
    c, asked = machine()
    m = c.new(engine="interpreter")
    m.report("bad")
    answered_once = len(asked)
    assert answered_once > 0
    for _ in range(5):
        with pytest.raises(NoBranchMatched):
            m.report("ok")  # no branch holds for ok: otherwise raise, nothing changed
    m.report(None)  # not ok: the negated guard holds
    m.report("bad")
    assert (m.state, m.data.bad, m.data.log) == ("open", 2, ["bad", "not-ok", "bad"])
    assert m.can("report", "bad") and not m.can("report", "ok")
    m.report("bad")  # the any: guard's second option now holds
    assert (m.state, m.data.log[-1]) == ("shut", "shut")
    assert len(asked) == answered_once  # decided when the branch lists were built, never per feed


def test_skip_takes_the_any_guard_at_once():
    c, _ = machine()
    m = c.new(engine="interpreter")
    m.report("skip")
    assert m.state == "shut" and m.data.log == ["shut"]


def test_a_guard_that_reads_more_than_it_declared_is_named_when_the_machine_is_compiled():
    """Refused for both engines before any instance exists: the transitions engine never narrows, so a
    first feed would answer on one engine and raise on the other."""
    with pytest.raises(RegistryError, match="guard 'outcome_is' is registered with reads=\\['outcome'\\]"):
        machine(honest=False)
