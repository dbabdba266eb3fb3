"""Decision chains with arguments: a pure question about a request, bound and checked like a feed."""

from __future__ import annotations

import pytest

from loopfsm import FeedArgumentError, SpecError, compile_spec, parse
from loopfsm.rendering import render

from tests.support.specs import dedent, make_registry

ADMIT = dedent("""
    machine: gate
    description: a gate that answers who may pass
    registry: demo
    data:
      count: {type: integer, default: 0}
    states:
      open: {initial: true, description: letting people through}
      shut: {description: closed}
    events:
      close:
        description: shut it
        from:
          open: [{to: shut}]
      reopen:
        description: open it
        from:
          shut: [{to: open}]
    decisions:
      admit:
        description: may this visitor pass?
        args:
          kind: {type: string, enum: [member, guest], description: who asks}
          tickets: {type: integer, default: 1, description: how many}
        rules:
          - name: closed
            states: [shut]
            result: {name: constant, params: {value: refused}}
          - name: members_pass
            guard: {name: arg_is, params: {name: kind, value: member}}
            result: {name: constant, params: {value: admitted}}
          - name: guests_wait
            result: {name: constant, params: {value: wait}}
""")


def _compiled(text: str = ADMIT):
    reg = make_registry()
    return compile_spec(parse(text, "gate.yaml", reg), reg)


def test_guards_read_the_bound_arguments():
    m = _compiled().new()
    assert m.decide("admit", kind="member") == "admitted"
    assert m.explain("admit", kind="guest", tickets=3) == ("guests_wait", "wait")
    m.close()
    assert m.explain("admit", kind="member") == ("closed", "refused")


def test_policy_still_rides_beside_the_arguments():
    m = _compiled().new()
    assert m.decide("admit", policy=None, kind="member") == "admitted"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, r"decision 'admit\(kind, tickets=1\)': missing a required argument: 'kind'"),
        ({"kind": "stranger"}, r"argument 'kind' must be string \(one of 'member', 'guest'\)"),
        ({"kind": "member", "tickets": "2"}, r"argument 'tickets' must be integer, got str"),
        ({"kind": "member", "tickets": True}, r"argument 'tickets' must be integer, got bool"),
        ({"kind": "member", "who": "x"}, r"unexpected keyword argument 'who'"),
    ],
)
def test_bad_arguments_raise_before_any_rule_runs(kwargs, message):
    m = _compiled().new()
    before = m.snapshot()
    with pytest.raises(FeedArgumentError, match=message):
        m.decide("admit", **kwargs)
    assert m.snapshot() == before


def test_checker_refuses_bad_argument_declarations():
    bad = ADMIT.replace(
        "tickets: {type: integer, default: 1, description: how many}",
        "tickets: {type: integr, default: 1, description: how many}\n      policy: {type: integer, default: 0}",
    )
    assert "policy: {type" in bad
    with pytest.raises(SpecError) as err:
        _compiled(bad)
    text = str(err.value)
    assert "decisions.admit.args.tickets.type: unknown type 'integr'" in text
    assert "decisions.admit.args.policy: a decision argument may not be named 'policy'" in text


def test_schema_refuses_a_misspelt_argument_key():
    with pytest.raises(SpecError, match="unknown key 'typ'"):
        _compiled(ADMIT.replace("kind: {type: string,", "kind: {typ: string,"))


def test_arguments_are_part_of_the_fingerprint():
    a = _compiled()
    b = _compiled(ADMIT.replace("default: 1, description: how many", "default: 2, description: how many"))
    c = _compiled(ADMIT.replace("description: how many", "description: how many tickets"))
    assert a.fingerprint != b.fingerprint
    assert a.fingerprint == c.fingerprint


def test_review_sheet_and_charts_show_the_arguments():
    reg = make_registry()
    spec = parse(ADMIT, "gate.yaml", reg)
    out = render(spec, ["md", "mermaid", "dot"])
    sheet = out["gate.md"]
    assert '| `kind` | string ("member" \\| "guest") | who asks |' in sheet
    assert "| `tickets` | integer | how many |" in sheet
    assert 'ask["admit(kind, tickets, policy)"]' in out["gate.admit.mmd"]
    assert "admit(kind, tickets, policy)" in out["gate.admit.dot"]
