"""Every kind of bad machine file gets a located, specific error: file, line, column, path, message."""

from __future__ import annotations

import pytest

from loopfsm import SpecError, load, parse
from loopfsm.core.errors import Problem

from tests.support.specs import make_registry, marked_line

HEAD = """\
machine: demo
description: a small machine for tests
data:
  count: {type: integer, default: 0}
  log: {type: string, list: true}
"""

GOOD = (
    HEAD
    + """\
states:
  idle: {initial: true, description: waiting}
  busy: {description: working}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: busy
  finish:
    description: stop
    from:
      busy:
        - to: done
"""
)


def with_policy(line: str) -> str:
    """GOOD with a one-line policy parameter, marked as the line a problem is expected at."""
    return HEAD + f"policy:\n  {line}   # <-\n" + GOOD[len(HEAD) :]


def problems_of(text: str, file: str = "m.yaml") -> list[Problem]:
    with pytest.raises(SpecError) as info:
        parse(text, file, make_registry())
    return info.value.problems


def the_error(text: str) -> Problem:
    errors = [p for p in problems_of(text) if p.severity == "error"]
    assert len(errors) == 1, "\n".join(map(str, errors))
    return errors[0]


def test_good_file_parses():
    spec = parse(GOOD, "m.yaml", make_registry())
    assert list(spec.states) == ["idle", "busy", "done"]
    assert spec.initial == "idle"


CASES = {
    "unknown target state": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  busy: {description: working}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: bussy   # <-
      busy:
        - to: done
""",
        "unknown state 'bussy'; did you mean 'busy'?",
        "events.go.from.idle[0].to",
    ),
    "unknown source state": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: done
      idel:   # <-
        - to: done
""",
        "unknown state 'idel'; did you mean 'idle'?",
        "events.go.from.idel",
    ),
    "unknown guard": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - guard: {name: at_lest, params: {field: count, value: 2}}   # <-
          to: done
        - stay: true
""",
        "unknown guard 'at_lest'; did you mean 'at_least'?",
        "events.go.from.idle[0].guard.name",
    ),
    "unknown action": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: done
          actions: [bumpp]   # <-
""",
        "unknown action 'bumpp'; did you mean 'bump'?",
        "events.go.from.idle[0].actions[0]",
    ),
    "duplicate state": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
  idle: {description: again}   # <-
events:
  go:
    description: start
    from:
      idle:
        - to: done
""",
        "duplicate key 'idle' (first defined at line 7)",
        "states.idle",
    ),
    "unreachable state": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
  orphan: {terminal: true, description: nobody comes here}   # <-
events:
  go:
    description: start
    from:
      idle:
        - to: done
""",
        "state 'orphan' is unreachable from the initial state 'idle'",
        "states.orphan",
    ),
    "non-terminal dead end": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  stuck: {description: no way out}   # <-
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - guard: {name: flag, params: {field: count}}
          to: stuck
        - to: done
""",
        "non-terminal state 'stuck' is a dead end",
        "states.stuck",
    ),
    "transition out of terminal": (
        HEAD
        + """\
terminal_feeds: ignore
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: done
      done:
        - to: idle   # <-
""",
        "transition out of terminal state 'done' to 'idle'",
        "events.go.from.done[0].to",
    ),
    "shadowed branch": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: done
        - guard: {name: flag, params: {field: count}}   # <-
          stay: true
""",
        "branch 1 of 'go' from 'idle' can never be taken: branch 0 before it has no guard",
        "events.go.from.idle[1]",
    ),
    "branch shadowed by an earlier when": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    args:
      outcome: {type: string, enum: [completed, failed, cancelled]}
      encrypted: {type: boolean}
    otherwise: stay
    from:
      idle:
        - when: {outcome: [completed, failed]}
          to: done
        - when: {outcome: completed, encrypted: true}   # <-
          stay: true
""",
        "branch 1 of 'go' from 'idle' can never be taken: branch 0 before it has no guard and takes every "
        "feed it does (outcome in [completed, failed])",
        "events.go.from.idle[1]",
    ),
    "missing initial state": (
        HEAD
        + """\
states:   # <-
  idle: {description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: done
""",
        "no initial state",
        "states",
    ),
    "double initial state": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  busy: {initial: true, description: also first}   # <-
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: done
      busy:
        - to: done
""",
        "second initial state 'busy' (already 'idle')",
        "states.busy.initial",
    ),
    "unknown guard parameter": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    otherwise: stay
    from:
      idle:
        - guard:
            name: at_least
            params:
              field: count
              valeu: 3   # <-
          to: done
""",
        "guard 'at_least' has no parameter 'valeu'; did you mean 'value'?",
        "events.go.from.idle[0].guard.params.valeu",
    ),
    "guard parameter of wrong type": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    otherwise: stay
    from:
      idle:
        - guard:
            name: at_least
            params:
              field: count
              value: "three"   # <-
          to: done
""",
        "parameter 'value' of guard 'at_least' expects int, got str 'three'",
        "events.go.from.idle[0].guard.params.value",
    ),
    "missing guard parameter": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    otherwise: stay
    from:
      idle:
        - guard: {name: at_least, params: {field: count}}   # <-
          to: done
""",
        "guard 'at_least' needs parameter 'value'",
        "events.go.from.idle[0].guard",
    ),
    "all guarded without otherwise": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:   # <-
        - guard: {name: flag, params: {field: count}}
          to: done
""",
        "every branch of 'go' from 'idle' is guarded, but the event does not declare what happens when none holds",
        "events.go.from.idle",
    ),
    "unknown key (schema)": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, discription: finished}   # <-
events:
  go:
    description: start
    from:
      idle:
        - to: done
""",
        "unknown key 'discription'",
        "states.done.discription",
    ),
    "comma in a flow mapping (schema)": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting, then working}   # <-
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: done
""",
        "a comma inside a flow mapping {...} ends the value before it",
        "states.idle.then working",
    ),
    "boolean key (schema)": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    otherwise: stay
    from:
      idle:
        - guard:
            name: flag
            params:
              true: count   # <-
          to: done
""",
        "unquoted true/false are booleans",
        "events.go.from.idle[0].guard.params.True",
    ),
    "enum item of another type": (
        HEAD
        + """\
policy:
  mode: {type: string, default: fast, enum: [fast, 2], description: how}   # <-
states:
  idle: {initial: true, description: waiting}
""",
        "enum item 2 of policy 'mode' is of type integer, but its type is string",
        "policy.mode.enum[1]",
    ),
    "enum item of another type in a feed argument": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    args:
      level: {type: integer, enum: [1, 2, three]}   # <-
    from:
      idle:
        - to: done
""",
        "enum item 'three' of field 'level' is of type string, but its type is integer",
        "events.go.args.level.enum[2]",
    ),
    "duplicate rule name": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: done
decisions:
  ask:
    description: what next
    rules:
      - name: answer
        states: [idle]
        result: {name: constant, params: {value: go}}
      - name: answer   # <-
        result: {name: constant, params: {value: stop}}
""",
        "rule name 'answer' is used twice in 'ask' (first at rule 0)",
        "decisions.ask.rules[1].name",
    ),
    "branch shadowed by a first: branch": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    args:
      outcome: {type: string, enum: [completed, failed]}
      encrypted: {type: boolean}
    otherwise: stay
    first:
      - {when: {outcome: completed}, to: done}
    from:
      idle:
        - {when: {outcome: completed, encrypted: true}, stay: true}   # <-
""",
        # its own place (0 under idle), and the first: branch by its path and line: "branch 0" of idle is itself
        "branch 0 of 'go' from 'idle' (traced as go/idle[1]) can never be taken: the branch events.go.first[0] "
        "(line 17) before it has no guard and takes every feed it does (outcome=completed)",
        "events.go.from.idle[0]",
    ),
    "decision rule shadowed by an earlier when": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: done
decisions:
  ask:
    description: what next
    args:
      kind: {type: string, enum: [a, b, c]}
    rules:
      - name: first
        when: {kind: [a, b]}
        result: {name: constant, params: {value: go}}
      - name: second   # <-
        states: [idle]
        when: {kind: a}
        result: {name: constant, params: {value: stop}}
      - name: rest
        result: {name: constant, params: {value: wait}}
""",
        "rule 'second' of 'ask' can never be chosen: rule 'first' before it has no guard, answers in its states "
        "and takes every call it does (kind in [a, b])",
        "decisions.ask.rules[1]",
    ),
    "decision rule taken by earlier rules together": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: done
decisions:
  ask:
    description: what next
    args:
      kind: {type: string, enum: [a, b, c]}
      urgent: {type: boolean}
    rules:
      - name: first
        when: {kind: [a, b]}
        result: {name: constant, params: {value: go}}
      - name: second
        when: {kind: c}
        result: {name: constant, params: {value: stop}}
      - name: third   # <-
        states: [idle]
        when: {urgent: true}
        result: {name: constant, params: {value: wait}}
      - name: rest
        result: {name: constant, params: {value: wait}}
""",
        "rule 'third' of 'ask' can never be chosen: rules 'first' and 'second' before it have no guard, answer in "
        "its states and together take every call it does (kind in [a, b]; kind=c)",
        "decisions.ask.rules[2]",
    ),
    "unknown error class in outcomes": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: done
outcomes:
  Stopped:
    description: stopped
    error: Stoped   # <-
""",
        "unknown error class 'Stoped'",
        "outcomes.Stopped.error",
    ),
    "initial state that is terminal": (
        HEAD
        + """\
states:
  idle: {initial: true, terminal: true, description: waiting}   # <-
events:
  go:
    description: start
    from:
      idle:
        - stay: true
""",
        "initial state 'idle' is terminal",
        "states.idle.terminal",
    ),
    "policy minimum above maximum": (
        HEAD
        + """\
policy:
  limit:
    type: integer
    default: 5
    minimum: 10   # <-
    maximum: 1
    description: a limit
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: done
""",
        "minimum 10 is above maximum 1",
        "policy.limit.minimum",
    ),
    "branch with neither to nor stay (schema)": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - actions: [bump]   # <-
""",
        "a branch needs exactly one of 'to: <State>' or 'stay: true'",
        "events.go.from.idle[0]",
    ),
    "unknown policy reference": (
        HEAD
        + """\
policy:
  limit: {type: integer, default: 3, description: a limit}
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    otherwise: stay
    from:
      idle:
        - guard: {name: at_least, params: {field: count, value: {policy: limt}}}   # <-
          to: done
""",
        "unknown policy parameter 'limt'; did you mean 'limit'?",
        "events.go.from.idle[0].guard.params.value.policy",
    ),
    "policy default of the wrong type, used by a guard, is reported once": (
        HEAD
        + """\
policy:
  limit: {type: integer, default: true, description: a limit}   # <-
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    otherwise: stay
    from:
      idle:
        - guard: {name: at_least, params: {field: count, value: {policy: limit}}}
          to: done
""",
        "default must be integer, got boolean true",
        "policy.limit.default",
    ),
    "a key off by a letter": (
        GOOD + "decision: {}   # <-\n",
        "unknown key 'decision'; did you mean 'decisions'?",
        "decision",
    ),
    "a type name in the wrong case": (
        with_policy("limit: {type: Integer, default: 3, description: a limit}"),
        "'Integer' is not one of ['integer', 'boolean', 'string', 'number']; did you mean 'integer'?",
        "policy.limit.type",
    ),
    "policy default outside the 64-bit integers": (
        with_policy("limit: {type: integer, default: 99999999999999999999, description: a limit}"),
        "default 99999999999999999999 is outside the signed 64-bit integer range",
        "policy.limit.default",
    ),
    "policy default out of bounds": (
        HEAD
        + """\
policy:
  threshold:
    type: integer
    default: 180   # <-
    minimum: 0
    maximum: 100
    description: percent
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: done
""",
        "default 180 is above the maximum 100",
        "policy.threshold.default",
    ),
    "decision without an answer in some state": (
        HEAD
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: done
decisions:
  ask:
    description: what next
    rules:   # <-
      - states: [idle]
        result: {name: constant, params: {value: go}}
""",
        "decision 'ask' has no answer in state(s) done",
        "decisions.ask.rules",
    ),
    "unknown field type": (
        HEAD.replace("log: {type: string, list: true}", "log: {type: strng, list: true}   # <-")
        + """\
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: done
""",
        "unknown type 'strng'; did you mean 'string'?",
        "data.log.type",
    ),
    "not YAML at all": (
        HEAD
        + """\
states:
  idle: {initial: true, description: [unclosed}   # <-
""",
        "not valid YAML",
        "",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_file_is_located(case):
    text, message, path = CASES[case]
    err = the_error(text)
    assert message in err.message
    assert err.path == path
    assert err.line == marked_line(text)
    assert err.file == "m.yaml"
    assert str(err).startswith(f"m.yaml:{err.line}:{err.column}:")


def test_python_tags_are_refused(tmp_path):
    text = GOOD.replace(
        "description: a small machine for tests", "description: !!python/object/apply:os.system ['echo pwned']   # <-"
    )
    f = tmp_path / "evil.yaml"
    f.write_text(text)
    with pytest.raises(SpecError) as info:
        load(f, make_registry())
    (err,) = info.value.problems
    assert "could not determine a constructor" in err.message and "safe loader" in err.message
    assert err.line == marked_line(text)
    assert err.file == str(f)


def test_every_error_in_a_file_is_reported_at_once():
    text = (
        HEAD
        + """\
policy:
  limit: {type: integer, default: -1, minimum: 0, description: a limit}
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: dnoe
          actions: [bumpp]
"""
    )
    found = [p for p in problems_of(text) if p.severity == "error"]
    assert [p.line for p in found] == sorted(p.line for p in found)
    msgs = [p.message for p in found]
    assert len(msgs) == 3
    assert any("unknown state 'dnoe'" in m for m in msgs)
    assert any("unknown action 'bumpp'" in m for m in msgs)
    assert any("below the minimum 0" in m for m in msgs)


def test_unused_registered_guards_are_warnings_not_errors():
    spec = parse(GOOD, "m.yaml", make_registry())
    warned = {p.message.split("'")[1] for p in spec.warnings if "used by no rule" in p.message}
    assert {"flag", "at_least", "arg_is"} <= warned
    assert all(p.severity == "warning" for p in spec.warnings)


def test_unknown_registry_is_located():
    text = GOOD.replace(
        "description: a small machine for tests", "description: a small machine for tests\nregistry: nonesuch"
    )
    with pytest.raises(SpecError) as info:
        parse(text, "m.yaml")
    (err,) = info.value.problems
    assert "unknown registry 'nonesuch'" in err.message and err.path == "registry" and err.line == 3


def test_schema_validator_is_compiled_once(monkeypatch):
    from jsonschema import Draft202012Validator

    parse(GOOD, "m.yaml", make_registry())  # the first load in a process builds the validator
    calls = []
    monkeypatch.setattr(Draft202012Validator, "check_schema", classmethod(lambda cls, s, **kw: calls.append(1)))
    for _ in range(3):
        parse(GOOD, "m.yaml", make_registry())
    assert calls == []  # already built before this test, never rebuilt per load


@pytest.mark.parametrize(
    ("old", "new", "path", "message"),
    [
        (
            "busy: {description: working}",
            "busy: {description: working, tags: calls_tools}   # <-",
            "states.busy.tags",
            "expected a list ([a, b]) here, got string 'calls_tools'",
        ),
        (
            "busy: {description: working}",
            "busy: {description: 12}   # <-",
            "states.busy.description",
            "expected a string here, got integer 12",
        ),
        (
            "      idle:\n        - to: busy",
            "      idle: busy   # <-",
            "events.go.from.idle",
            "expected a list ([a, b]) here, got string 'busy'",
        ),
    ],
)
def test_a_value_of_the_wrong_type_says_what_was_expected_in_yaml_words(old, new, path, message):
    """jsonschema says "'calls_tools' is not of type 'array'", which names neither YAML's words nor the fix."""
    text = GOOD.replace(old, new, 1)
    [problem] = problems_of(text)
    assert (problem.line, problem.path, problem.message) == (marked_line(text), path, message)


@pytest.mark.parametrize(("key", "shown"), [("1", "integer 1"), ("2.5", "number 2.5"), ("null", "null")])
def test_a_key_read_as_a_number_or_null_is_located_at_the_key(key, shown):
    text = GOOD.replace(
        "  busy: {description: working}", f"  busy: {{description: working}}\n  {key}: {{description: x}}   # <-", 1
    )
    [problem] = problems_of(text)
    assert (problem.line, problem.column) == (marked_line(text), 3)
    assert problem.message == f"a key was read as {shown}: names are text, so quote the key or choose another name"


@pytest.mark.parametrize(
    ("text", "stopped", "opened"),
    [
        # an unclosed bracket: reading stops two lines below, where the next key turns up
        ("machine: x\nstates: [a, b\ninitial: a\nx: 1\n", (3, 8), "the '[' opened at 2:9"),
        ("machine: x\nstates: {a: 1\ninitial: a\n", (3, 8), "the '{' opened at 2:9"),
        # an unclosed quote runs to the end of the file
        ('machine: x\ndescription: "abc\n\nstates: {}\n', (5, 1), "the quote opened at 2:14"),
        # any other context is named in PyYAML's words
        ("machine: x\nstates:\n  a: 1\n b: 2\n", (4, 2), "parsing a block mapping that began at 1:1"),
    ],
)
def test_a_syntax_error_names_where_the_bracket_or_quote_opened(text, stopped, opened):
    err = the_error(text)
    assert (err.line, err.column) == stopped
    assert err.message.startswith("not valid YAML: ")
    assert err.message.endswith(f"({opened})")


def test_a_syntax_error_whose_context_is_where_reading_stopped_says_it_once():
    err = the_error("machine: x\npolicy:\n  fare: [\n")
    assert (err.line, err.column) == (4, 1)
    assert err.message == "not valid YAML: did not find expected node content"


def test_a_policy_number_nothing_in_the_table_reads_is_a_warning_unless_read_by_says_who():
    unread = with_policy("limit: {type: integer, default: 3, description: nobody reads this}")
    spec = parse(unread, "m.yaml", make_registry())
    (warning,) = [p for p in spec.warnings if "policy 'limit'" in p.message]
    assert warning.severity == "warning" and warning.line == marked_line(unread) and warning.path == "policy.limit"
    assert "is read by no guard, action or rule of the table" in warning.message and "'read_by:'" in warning.message
    told = unread.replace("description: nobody reads this}", "description: x, read_by: the store}")
    quiet = parse(told, "m.yaml", make_registry())
    assert not [p for p in quiet.warnings if "policy 'limit'" in p.message]
    assert quiet.policy["limit"].read_by == "the store"
    assert quiet.fingerprint == parse(unread.replace("nobody reads this", "x"), "m.yaml", make_registry()).fingerprint
    used = told.replace(", read_by: the store", "").replace(
        "        - to: busy\n",
        "        - to: busy\n          guard: {name: at_least, params: {field: count, value: {policy: limit}}}\n"
        "        - to: idle\n",
    )
    read = parse(used, "m.yaml", make_registry())
    assert not [p for p in read.warnings if "policy 'limit'" in p.message]
