"""A number is finite wherever it lives: in a machine file, a feed, a policy, a snapshot and the exports.

JSON has no NaN or infinity.  A data field whose default was ``.nan`` made every snapshot
``{"x": NaN}``, which ``json.dumps`` writes and no JSON parser, store column or client
accepts, and a ``when:`` value of ``.inf`` put ``Infinity`` into the XState export.
"""

from __future__ import annotations

import json
import math

import pytest

from loopfsm import FeedArgumentError, PolicyError, SnapshotError, SpecError, compile_spec, parse

from tests.support.specs import dedent, make_registry

MACHINE = dedent("""
    machine: numbers
    description: a number argument, a number policy and a number data field
    policy:
      cap: {type: number, default: 1.5, description: a cap}
    data:
      ratio: {type: number, default: 0.5, description: the last ratio}
    states:
      idle: {initial: true, description: waiting}
      high: {description: above one, terminal: true}
    events:
      measure:
        description: a ratio is measured
        otherwise: stay
        args:
          ratio: {type: number, description: the ratio}
        from:
          idle:
            - when: {ratio: [2.5, 3]}
              to: high
""")


def compiled(text: str = MACHINE):
    reg = make_registry()
    return compile_spec(parse(text, "numbers.yaml", reg), reg)


def problems(text: str) -> list:
    with pytest.raises(SpecError) as info:
        compiled(text)
    return [p for p in info.value.problems if p.severity == "error"]


@pytest.mark.parametrize("written", [".nan", ".inf", "-.inf", "1.0e+400"])
@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("default: 0.5,", "default: {v},"),
        ("cap: {type: number, default: 1.5,", "cap: {type: number, default: {v},"),
        ("when: {ratio: [2.5, 3]}", "when: {ratio: [2.5, {v}]}"),
    ],
    ids=["data default", "policy default", "when value"],
)
def test_a_machine_file_number_that_is_not_finite_is_refused_at_its_line(written, old, new):
    text = MACHINE.replace(old, new.replace("{v}", written))
    line = next(i for i, row in enumerate(text.splitlines(), 1) if written in row)
    [problem] = problems(text)
    assert problem.line == line and "finite" in problem.message, problem


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_feed_a_policy_and_a_restore_refuse_a_number_that_is_not_finite(value):
    C = compiled()
    m = C.new()
    before = m.snapshot()
    with pytest.raises(FeedArgumentError, match=r"argument 'ratio' must be number \(finite\)"):
        m.measure(value)
    assert not m.can("measure", value) and m.snapshot() == before
    with pytest.raises(PolicyError, match="finite"):
        m.measure(2.5, policy={"cap": value})
    snap = json.loads(json.dumps(before))
    snap["data"]["ratio"] = value
    with pytest.raises(SnapshotError):
        C.restore(snap)
