"""A field's own declaration (core/field_checks.py) and what a hostile user found in the first version of it:
enums and bounds no value meets, integers written as floats, and files whose problems had no bound."""

from __future__ import annotations

import pytest

from loopfsm import SpecError, parse
from loopfsm.core import when_checks

from tests.support.specs import dedent

FILE = dedent("""
    machine: m
    description: d
    states:
      a: {initial: true, description: a}
      b: {terminal: true, description: b}
    events:
      go:
        description: go
        otherwise: stay
        args:
          ARGS
        from:
          a:
            BRANCHES
""")


def _file(args: list[str], whens: list[str], head: str = "") -> str:
    branches = "\n".join(f"        - {{when: {w}, to: b}}" for w in whens)
    text = FILE.replace("      ARGS", "\n".join(f"      {a}" for a in args)).replace("        BRANCHES", branches)
    return head + text


def _errors(text: str) -> list[str]:
    try:
        parse(text, "m.yaml")
    except SpecError as err:
        return [f"{p.path}: {p.message}" for p in err.problems if p.severity == "error"]
    return []


def test_an_argument_is_checked_once_however_many_conditions_name_it(monkeypatch):
    """A 40,000-item enum named by 100 conditions took five minutes: each value was a scan of the enum, and
    the enum was looked over again for every condition."""
    made = []
    real = when_checks.python_checker
    monkeypatch.setattr(when_checks, "python_checker", lambda f, codec: made.append(f.name) or real(f, codec))
    enum = ", ".join(map(str, range(2000)))
    assert _errors(_file([f"x: {{type: integer, enum: [{enum}]}}"], [f"{{x: {i}}}" for i in range(100)])) == []
    assert made == ["x"]


def test_a_json_enum_of_lists_is_checked_without_a_traceback():
    assert (
        _errors(_file(["x: {type: integer}"], ["{x: 1}"], "data:\n  l: {type: json, default: [1], enum: [[1], [2]]}\n"))
        == []
    )
    errors = _errors(
        _file(["x: {type: integer}"], ["{x: 1}"], "data:\n  l: {type: json, default: [1], enum: [[1], [1]]}\n")
    )
    assert errors == ["data.l.enum[1]: enum item [1] of field 'l' is listed twice (item 0 is [1])"]


def test_a_shared_enum_is_refused_with_the_name_of_the_field_whose_bounds_it_breaks():
    """An anchored enum is located at its anchor, so the message says whose maximum it is."""
    errors = _errors(
        _file(
            ["x: {type: integer, maximum: 10, enum: &e [1, 5]}", "y: {type: integer, maximum: 3, enum: *e}"], ["{x: 1}"]
        )
    )
    assert errors == ["events.go.args.x.enum[1]: enum item 5 of field 'y' is above its maximum 3: no value is"]


@pytest.mark.parametrize(
    "field, message",
    [
        ("{type: number, minimum: .inf}", "events.go.args.w.minimum: minimum .inf is not a finite number"),
        ("{type: integer, maximum: 1e999}", "events.go.args.w.maximum: maximum .inf is not a finite number"),
        ("{type: number, minimum: .nan}", "events.go.args.w.minimum: minimum .nan is not a finite number"),
        (
            "{type: integer, minimum: 0.5, maximum: 0.7}",
            "events.go.args.w.minimum: no integer lies between minimum 0.5 and maximum 0.7",
        ),
        (
            "{type: integer, minimum: 1e19}",
            "events.go.args.w.minimum: minimum 1e+19 is above every 64-bit integer, the only integers a feed brings",
        ),
    ],
)
def test_bounds_no_value_meets_are_refused_and_no_value_is_judged_against_them(field, message):
    """``minimum: .inf`` read "is never integer 5 (it is integer, at least inf)" at every condition."""
    assert _errors(_file([f"w: {field}"], ["{w: 5}"])) == [message]


def test_a_policy_default_outside_its_bounds_is_said_beside_its_enum_item_outside_them():
    head = "policy:\n  p: {type: integer, default: 9, maximum: 3, enum: [1, 9], read_by: t, description: p}\n"
    assert _errors(_file(["x: {type: integer}"], ["{x: 1}"], head)) == [
        "policy.p.default: default 9 is above the maximum 3",
        "policy.p.enum[1]: enum item 9 of policy 'p' is above its maximum 3: no value is",
    ]


def test_a_value_is_refused_once_and_a_long_list_of_them_in_twenty_lines():
    assert _errors(_file(["y: {type: integer}"], ["{y: [1, 1.0]}"])) == [
        "events.go.from.a[0].when.y[1]: argument 'y' of feed 'go' is an integer: write 1, not 1.0"
    ]
    errors = _errors(_file(["y: {type: integer}"], ["{y: [" + ", ".join(["1.0"] * 31) + "]}"]))
    assert len(errors) == 21 and errors[-1] == (
        "events.go.from.a[0].when.y[20]: and 11 more values of this list are refused as those above"
    )
    errors = _errors(
        _file(
            ["x: {type: integer}"], ["{x: 1}"], "data:\n  d: {type: integer, default: 0, enum: [" + "0, " * 30 + "0]}\n"
        )
    )
    assert (
        len(errors) == 21 and errors[-1] == "data.d.enum[21]: and 10 more items of this enum are refused as those above"
    )


def test_a_misspelt_value_hides_no_branch_and_asks_for_no_otherwise():
    """``{verdict: aprove}`` takes no feed: the branch after it, on the same typo, was "never taken"."""
    args = ["verdict: {type: string, enum: [approve, reject]}", "urgent: {type: boolean}"]
    errors = _errors(_file(args, ["{verdict: aprove}", "{verdict: aprove, urgent: true}"]))
    assert len(errors) == 2 and all("is never string 'aprove'" in e for e in errors)
    text = _file(["urgent: {type: boolean}"], ["{urgent: true}", "{urgnet: false}"]).replace(
        "        otherwise: stay\n", ""
    )
    assert _errors(text) == [
        "events.go.from.a[1].when.urgnet: feed 'go' has no argument 'urgnet'; did you mean 'urgent'? (it takes: urgent)"
    ]


def test_whole_numbers_are_integers_where_the_table_counts():
    """YAML 1.2 reads ``1e1`` as 10.0, which JSON Schema's "integer" takes: ``verify`` then failed on it."""
    text = _file(["x: {type: integer}"], ["{x: 1}"]) + "verify: {description: v, depth: 1e1}\nversion: 2.0\n"
    assert _errors(text) == [
        "verify.depth: expected an integer here, got number 10.0 (write 10)",
        "version: expected an integer here, got number 2.0 (write 2)",
    ]


def test_digits_with_a_leading_zero_stay_the_strings_yaml_1_1_reads():
    spec = parse(_file(["zip: {type: string}"], ["{zip: 08}", "{zip: '1e3'}"]), "m.yaml")
    assert [b.when[0].values for b in spec.events["go"].sources["a"]] == [("08",), ("1e3",)]
