"""The pytest plugin: transition coverage by stable names, excuses, fail-under, and the fixtures."""

from __future__ import annotations

import pytest

from loopfsm.verification.coverage import Collector, measure, rows_of
from loopfsm.core.tracing import TransitionRecord

pytest_plugins = ["pytester"]

GATE = """\
# yaml-language-server: $schema=machine.schema.json
machine: gate
description: A gate for coverage tests.
states:
  shut: {initial: true, description: closed}
  open: {description: open}
  gone: {terminal: true, description: removed}
events:
  knock:
    description: someone knocks
    from:
      shut:
        - guard: {name: is_friend, params: {who: ann}}
          to: open
          name: friend_enters
        - stay: true
      open:
        - stay: true
          untested: knocking on an open gate is harmless; nobody writes that test
  remove:
    description: the gate is taken away
    from:
      "*":
        - to: gone
decisions:
  mood:
    description: how the gate feels
    rules:
      - {name: happy, states: [open], result: {name: say, params: {word: glad}}}
      - {name: grumpy, result: {name: say, params: {word: sad}}}
"""

TEST_FILE = """
import pytest

GATE = {gate!r}

@pytest.fixture
def gate(loopfsm_machine, loopfsm_registry):
    @loopfsm_registry.guard
    def is_friend(m, ctx, *, who: str) -> bool:
        return ctx.args.get("who") == who

    @loopfsm_registry.result
    def say(m, ctx, *, word: str) -> str:
        return word

    text = GATE.replace("description: someone knocks",
                        "description: someone knocks\\n    args: {{who: {{type: string}}}}")
    return loopfsm_machine(text, loopfsm_registry)

def test_friend(gate):
    g = gate.new()
    g.knock(who="bob")
    g.knock(who="ann")
    assert g.state == "open" and g.decide("mood") == "glad"
{extra}
"""


def _project(pytester, extra: str = "") -> None:
    gate = GATE.replace("description: someone knocks", "description: someone knocks\n    args: {who: {type: string}}")
    (pytester.path / "machines").mkdir()
    (pytester.path / "machines" / "gate.yaml").write_text(gate)
    pytester.makepyfile(test_gate=TEST_FILE.format(gate=GATE, extra=extra))


@pytest.mark.slow
def test_report_names_what_was_never_taken(pytester):
    _project(pytester)
    result = pytester.runpytest_subprocess("--loopfsm-coverage", "--loopfsm-machines", "machines")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*loopfsm transition coverage*",
            "gate *3/5 *60.0%, 1 excused",
            "total *60.0% of branches and rules taken",
        ]
    )
    out = result.stdout.str()
    assert "    never taken: branch remove/*[0]  (machines/gate.yaml:25)" in out
    assert "    never taken: rule mood/grumpy  (machines/gate.yaml:31)" in out
    assert "knock/open[0]" not in result.stdout.str()  # excused, not missed
    assert result.ret == 0


@pytest.mark.slow
def test_fail_under_fails_a_green_session_and_passes_when_reached(pytester):
    _project(pytester)
    result = pytester.runpytest_subprocess("--loopfsm-coverage-fail-under=80", "--loopfsm-machines", "machines")
    result.assert_outcomes(passed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["FAIL: 60.0% of branches and rules taken, required 80%"])
    _more = """
def test_rest(gate):
    g = gate.new()
    assert g.decide("mood") == "sad"
    g.remove()
"""
    (pytester.path / "test_more.py").write_text(TEST_FILE.format(gate=GATE, extra=_more))
    result = pytester.runpytest_subprocess("--loopfsm-coverage-fail-under=100", "--loopfsm-machines", "machines")
    result.assert_outcomes(passed=3)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["gate *5/5 *100.0%, 1 excused", "required 100% reached"])


@pytest.mark.slow
def test_without_the_option_nothing_listens(pytester):
    _project(
        pytester,
        extra="""
def test_quiet():
    from loopfsm.core import tracing
    assert not tracing.ACTIVE
""",
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=2)
    assert "transition coverage" not in result.stdout.str()


def test_a_bad_yaml_string_raises_spec_error(loopfsm_machine, loopfsm_registry):
    from loopfsm.core.errors import SpecError

    with pytest.raises(SpecError, match="unknown state"):
        loopfsm_machine(
            """
            machine: m
            description: d
            states:
              a: {initial: true, description: a}
            events:
              go:
                description: g
                from:
                  a:
                    - to: b
            """,
            loopfsm_registry,
        )


def test_collector_counts_by_stable_name():
    import yaml

    doc = yaml.safe_load(GATE)
    rows = rows_of(doc)
    assert [(r.kind, r.name) for r in rows] == [
        ("branch", "friend_enters"),
        ("branch", "knock/shut[1]"),
        ("branch", "knock/open[0]"),
        ("branch", "remove/*[0]"),
        ("rule", "mood/happy"),
        ("rule", "mood/grumpy"),
    ]
    c = Collector()
    c(TransitionRecord("gate", "shut", "knock", "friend_enters", "open"))
    c(TransitionRecord("gate", "open", "knock", "knock/open[0]", "open"))
    c(TransitionRecord("gate", "open", "mood", "happy", "open", "decision"))
    c(TransitionRecord("gate", "open", "knock", None, "open"))  # nothing ran: counts nothing
    c(TransitionRecord("other", "x", "knock", "friend_enters", "y"))  # another machine
    [cov] = measure([("gate", "gate.yaml", rows)], c)
    assert cov.hit() == 2 and len(cov.counted) == 5
    assert [r.name for r in cov.missed] == ["knock/shut[1]", "remove/*[0]", "mood/grumpy"]
    assert [r.name for r in cov.excused_but_taken] == ["knock/open[0]"]


@pytest.mark.slow
def test_fixture_example_runs(pytester):
    from tests.support.docs_pages import page

    block = (
        page("docs/cli.md").split("Fixtures for testing your own machines")[1].split("```python\n")[1].split("```")[0]
    )
    pytester.makepyfile(test_readme_example=block)
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)


@pytest.mark.slow
@pytest.mark.parametrize("threshold", ["nan", "-5", "150", "lots"])
def test_a_threshold_outside_0_to_100_is_a_usage_error(pytester, threshold):
    _project(pytester)
    result = pytester.runpytest_subprocess(
        f"--loopfsm-coverage-fail-under={threshold}", "--loopfsm-machines", "machines"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "percentage" in result.stderr.str()


@pytest.mark.slow
def test_a_gate_that_measured_nothing_fails(pytester):
    _project(pytester)
    result = pytester.runpytest_subprocess("--loopfsm-coverage-fail-under=97", "--loopfsm-machines", "nosuch")
    assert (
        result.ret == pytest.ExitCode.USAGE_ERROR and "--loopfsm-machines nosuch: no such file" in result.stderr.str()
    )
    (pytester.path / "empty").mkdir()
    result = pytester.runpytest_subprocess("--loopfsm-coverage-fail-under=97", "--loopfsm-machines", "empty")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "no machine was measured" in result.stdout.str()
