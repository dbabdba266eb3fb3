"""Invariants in the table, ``loopfsm verify`` and ``loopfsm replay``: proofs, counterexamples, trace files."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopfsm.core import loader
from loopfsm.core.errors import SpecError
from loopfsm.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
BREAKER = (ROOT / "machines" / "tool_breaker.yaml").read_text(encoding="utf-8")

# A small policy and few argument values: deep enough runs in a second or two.
SMALL = [
    *("--set", "trip_after=1", "--set", "cooldown_ms=2", "--set", "max_cooldown_ms=2"),
    *("--set", "probe_ttl_ms=3", "--set", "half_open_max_ms=5", "--set", "recover_after=1"),
    *("--values", "generation=[0,1]", "--values", 'call_id=["a"]', "--forget", "stats", "-q"),
]

INVARIANTS = """
invariants:
  probes_bounded:
    description: HalfOpen holds at most max_probes probe leases.
    always: {name: length_at_most, params: {field: leases, limit: {policy: max_probes}}}
  stale_never_moves:
    description: A stale result never changes the state.
    states: [Closed, Open, ForcedOpen, Disabled]
    step: {feeds: [record], when: stale, then: [state_unchanged, {name: field_unchanged, params: {field: generation}}]}
  reaches_half_open:
    description: Some run reaches HalfOpen.
    states: [HalfOpen]
    reach: true
"""


def _problems(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        loader.parse(text, "m.yaml")
    return [str(p) for p in info.value.problems if p.severity == "error"]


def _without_invariants(text: str) -> str:
    return text.split("\ninvariants:")[0]


def test_invariants_are_checked_like_guards_with_positions_and_suggestions():
    text = _without_invariants(BREAKER) + (
        "\ninvariants:\n"
        "  a:\n"
        "    description: x\n"
        "    step: {feeds: [recrd], then: {name: field_unchaged, params: {field: generation}}}\n"
        "  b:\n"
        "    description: y\n"
        "    always: state_unchanged\n"
        "  c:\n"
        "    description: z\n"
        "    states: [Halfopen]\n"
        "    always: {name: length_at_most, params: {field: lease, limit: 1}}\n"
        "  d:\n"
        "    description: w\n"
        "    reach: {name: stale, params: {by: 1}}\n"
    )
    line = len(_without_invariants(BREAKER).splitlines()) + 2
    problems = _problems(text)
    assert f"m.yaml:{line + 3}:20: invariants.a.step.feeds[0]: unknown feed 'recrd'; did you mean 'record'?" in problems
    assert any(
        p.startswith(f"m.yaml:{line + 3}:") and "unknown guard 'field_unchaged'; did you mean 'field_unchanged'?" in p
        for p in problems
    )
    assert any(
        "invariants.b.always: guard 'state_unchanged' compares with the configuration before" in p for p in problems
    )
    assert any("unknown state 'Halfopen'; did you mean 'HalfOpen'?" in p for p in problems)
    assert any("no data field 'lease'; did you mean 'leases'?" in p for p in problems)
    assert any("guard 'stale' has no parameter 'by'" in p for p in problems)


def test_invariants_do_not_change_the_fingerprint():
    plain = loader.parse(_without_invariants(BREAKER), "m.yaml")
    proven = loader.parse(_without_invariants(BREAKER) + INVARIANTS, "m.yaml")
    assert len(proven.invariants) == 3 and plain.fingerprint == proven.fingerprint


@pytest.fixture
def breaker(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "tb.yaml"
    path.write_text(_without_invariants(BREAKER) + INVARIANTS, encoding="utf-8")
    return path


def test_verify_proves_to_the_bound_and_reports_goals_and_coverage(breaker, capsys):
    assert main(["verify", str(breaker), "--depth", "4", *SMALL]) == 0
    out = capsys.readouterr().out
    assert "explored every run of up to 4 feeds" in out
    assert "holds        probes_bounded" in out and "holds        stale_never_moves" in out
    assert "reached      reaches_half_open in 3 feeds" in out
    assert "holds        no_crash" in out and "branches and decision rules taken:" in out
    assert not list(breaker.parent.glob("*.trace.yaml"))


@pytest.mark.slow  # two call ids to depth 4: about three seconds
def test_a_planted_fault_gives_the_shortest_counterexample_and_replay_reproduces_it(breaker, capsys):
    faulty = breaker.parent / "faulty.yaml"
    text = breaker.read_text()
    fault = text.replace(
        "probe_slot_free, params: {max_probes: {policy: max_probes}}", "probe_slot_free, params: {max_probes: 2}"
    )
    assert fault != text
    faulty.write_text(fault)
    # Two call ids: one id holds one probe lease at most (a second acquire is rejected).
    two_ids = [a if a != 'call_id=["a"]' else 'call_id=["a","b"]' for a in SMALL]
    assert main(["verify", str(faulty), "--depth", "4", *two_ids]) == 1
    out = capsys.readouterr().out
    assert "VIOLATED     probes_bounded" in out
    assert "shortest counterexample, 4 feeds:" in out
    assert "      4  acquire(now=2, call_id='b')  -> HalfOpen" in out
    trace = breaker.parent / "tool_breaker.probes_bounded.trace.yaml"
    assert main(["replay", str(faulty), str(trace)]) == 1
    out = capsys.readouterr().out
    assert "invariant probes_bounded violated after step 4" in out
    assert main(["replay", str(breaker), str(trace)]) == 0  # the fixed table: same states, nothing broken


def test_replay_exits_1_where_the_trace_and_the_machine_part(breaker, tmp_path, capsys):
    trace = tmp_path / "t.yaml"
    trace.write_text(
        "machine: tool_breaker\nsteps:\n"
        "  - {feed: acquire, args: {now: 0, call_id: a}, state: Closed}\n"
        "  - {feed: record, args: {now: 0, call_id: b, outcome: success, generation: 0}, refused: true}\n"
        "  - {feed: force_open, args: {now: 1}, state: Closed}\n"
    )
    assert main(["replay", str(breaker), str(trace)]) == 1
    out = capsys.readouterr().out
    assert "2  record(" in out and "refused:" in out
    assert "the trace expects state Closed, the machine is in ForcedOpen" in out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("steps: 3\n", "expected a mapping with a 'steps' list"),
        ("machine: tool_breaker\nsteps: [{feed: acquire, argz: {}}]\n", "step 1 has unknown key 'argz'"),
        ("machine: turnstile\nsteps: []\n", "the trace is of machine 'turnstile', not tool_breaker"),
        ("machine: [\n", "not valid YAML at line"),
        ("a: &x [1, 2]\nb: [*x, *x]\nsteps: []\n", "anchors and aliases (*name) are not allowed"),
        ("steps: [{feed: tick, args: {now: " + "9" * 5000 + "}}]\n", "not readable YAML (ValueError)"),
        # PyYAML's scanner takes about three seconds to reach the recursion limit in 3000 nested lists
        pytest.param("steps: " + "[" * 3000 + "]" * 3000 + "\n", "not", marks=pytest.mark.slow, id="3000_nested_lists"),
    ],
)
def test_a_bad_trace_file_is_bad_input(breaker, tmp_path, capsys, text, message):
    trace = tmp_path / "t.yaml"
    trace.write_text(text)
    assert main(["replay", str(breaker), str(trace)]) == 2
    assert message in capsys.readouterr().err


def test_bad_verify_options_are_bad_input(breaker, capsys):
    assert main(["verify", str(breaker), "--values", "nope=[1]", "-q"]) == 2
    assert "--values nope: no feed argument of that name" in capsys.readouterr().err
    assert main(["verify", str(breaker), "--set", "max_probes=0", "-q"]) == 2
    assert "max_probes" in capsys.readouterr().err
    assert main(["verify", str(breaker), "--forget", "stat", "-q"]) == 2
    assert "--forget stat: the machine has no data field" in capsys.readouterr().err


def test_an_invariant_whose_guard_crashes_is_violated_and_says_why(breaker, capsys):
    text = breaker.read_text() + (
        "  reads_a_feed_argument:\n"
        "    description: half_open_overdue reads `now`, which no configuration has.\n"
        "    states: [HalfOpen]\n"
        "    always: {name: half_open_overdue, negate: true, params: {max_ms: 5}}\n"
    )
    breaker.write_text(text)
    assert main(["verify", str(breaker), "--depth", "3", *SMALL]) == 1
    out = capsys.readouterr().out
    assert "reads_a_feed_argument violated: its guards raised KeyError: 'now' (in state HalfOpen)" in out


def test_a_broken_step_says_which_feed_moved_what(breaker, capsys):
    stale = "      - guard: stale\n        states: [Closed, Disabled]\n"
    text = breaker.read_text()
    assert stale in text
    breaker.write_text(text.replace(stale, stale.replace("Closed, ", ""), 1))  # Closed's stale branch is gone
    assert main(["verify", str(breaker), "--depth", "2", *SMALL]) == 1
    assert "stale_never_moves violated: does not hold after record, Closed to Open" in capsys.readouterr().out


def test_diff_says_invariants_changed_and_behaviour_did_not(tmp_path, capsys):
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    base = _without_invariants(BREAKER)
    old.write_text(base + INVARIANTS)
    new.write_text(
        base
        + """
invariants:
  probes_bounded:
    description: HalfOpen holds at most max_probes probe leases.
    always: {name: length_at_most, params: {field: leases, limit: 2}}
  reaches_half_open:
    description: A run reaches HalfOpen.
    states: [HalfOpen]
    reach: true
"""
    )
    assert main(["diff", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "tool_breaker: invariants and descriptions only" in out
    assert "! invariant probes_bounded changed" in out
    assert "! invariant stale_never_moves removed" in out
    assert '~ invariant reaches_half_open: description "Some run reaches HalfOpen." -> "A run reaches HalfOpen."' in out


def test_progress_lines_say_how_far_it_got(breaker, capsys):
    import io

    from loopfsm.core.compiler import compile_file
    from loopfsm.verification.verify import Explorer
    from loopfsm.verification.verify_report import progress_line
    from loopfsm.verification.verify_inputs import domains_for

    compiled = compile_file(breaker)
    policy = compiled.policy({"trip_after": 1})
    err = io.StringIO()
    explorer = Explorer(
        compiled,
        policy,
        domains_for(compiled.spec, policy, {}),
        progress=progress_line(err, "tool_breaker"),
        progress_every=0.0,
    )
    explorer.run([compiled.new().snapshot()], 2, 100_000)
    lines = err.getvalue().splitlines()
    assert lines and lines[0].startswith("verify tool_breaker: depth 1, ") and "configurations" in lines[0]
    assert lines[-1].startswith("verify tool_breaker: depth 2, ") and lines[-1].endswith(" configurations/s")


def test_the_review_sheet_lists_the_invariants():
    from loopfsm.rendering.matrix import review_sheet

    sheet = review_sheet(loader.parse(_without_invariants(BREAKER) + INVARIANTS, "m.yaml"))
    assert "## Invariants (checked by `loopfsm verify`, to a bound)" in sheet
    assert (
        "| `stale_never_moves` | step | Closed, Open, ForcedOpen, Disabled | after record when stale: "
        "state_unchanged and field_unchanged(field=generation) | A stale result never changes the state. |"
    ) in sheet
    assert "| `reaches_half_open` | reach | HalfOpen | any | Some run reaches HalfOpen. |" in sheet
    assert "## Invariants" not in review_sheet(loader.parse(_without_invariants(BREAKER), "m.yaml"))


KINDS = """
machine: kinds
description: One feed with an argument of every kind verify derives values for.
policy:
  wait_ms: {type: integer, default: 7, minimum: 0, description: a duration}
  tries: {type: integer, default: 3, minimum: 0, description: not a duration}
data:
  gen: {type: integer, default: 4, minimum: 0, description: a number arguments of the same name follow}
  due: {type: integer, default: 20, description: an instant ahead of the clock}
states:
  s: {initial: true, description: the only state}
events:
  go:
    description: every kind of argument
    args:
      now: {type: integer, description: the clock}
      gen: {type: integer, minimum: 0, description: follows the data field}
      n: {type: integer, minimum: 1, description: just an integer}
      mode: {type: string, enum: [x, y], nullable: true, description: an enum}
      flag: {type: boolean, description: a boolean}
      name: {type: string, description: a string}
      size: {type: number, description: a number}
      blob: {type: json, description: json}
      tags: {type: string, list: true, description: a list}
      note: {type: string, default: hi, description: has a default}
    from:
      s:
        - stay: true
"""


def test_the_values_each_kind_of_argument_takes():
    from loopfsm.core.compiler import compile_spec
    from loopfsm.core.registry import Registry
    from loopfsm.verification.verify_inputs import domains_for

    reg = Registry("kinds")
    spec = loader.parse(KINDS, "kinds.yaml", reg)
    compiled = compile_spec(spec, reg)
    domains = domains_for(spec, compiled.policy(), {"go.flag": [True]})
    inst = compiled.new()
    steps = domains.steps(inst, 10, ("go",))
    values = {name: sorted({repr(dict(s.args)[name]) for s in steps}) for name in spec.events["go"].args}
    assert values["now"] == ["10", "11", "17", "19", "20"]  # clock + 0, 1, wait_ms; due - 1, due
    assert values["gen"] == ["0", "1", "3", "4", "5"]  # 0, 1, and the data field gen with its neighbours
    assert values["n"] == ["1"]  # 0 is below its minimum
    assert values["mode"] == ["'x'", "'y'", "None"]
    assert values["flag"] == ["True"]  # --values go.flag
    assert values["name"] == ["'a'", "'b'"]
    assert values["size"] == ["0", "1"] and values["blob"] == ["{}"]
    assert values["tags"] == ["['a']", "[]"] and values["note"] == ["'hi'"]
    assert len(steps) == 5 * 5 * 1 * 3 * 1 * 2 * 2 * 1 * 2 * 1


def test_a_global_trace_sink_hears_verifys_runs(breaker, capsys):
    from loopfsm.core import tracing
    from loopfsm.verification.coverage import Collector

    collector = Collector()
    with tracing.global_sink(collector):
        assert main(["verify", str(breaker), "--depth", "3", *SMALL]) == 0
    assert ("branch", "acquire/Closed[0]") in collector.taken["tool_breaker"]


def test_a_trace_file_too_deep_or_too_long_is_refused_within_a_second(tmp_path):
    """A file of 200,000 nested brackets, or of millions of steps, is refused before PyYAML builds it."""
    import time

    from loopfsm.verification import tracefile
    from loopfsm.verification.errors import ReviewError

    deep = b"machine: turnstile\nsteps: []\nx: " + b"[" * 200_000 + b"]" * 200_000
    long = b"machine: turnstile\nsteps:\n" + b"- {feed: coin, args: {}}\n" * 400_000
    # libyaml builds may stop deep brackets first, with their own nesting limit: refused either way
    deep_words = "nested more than 64 deep|not valid YAML"
    for raw, words in ((deep, deep_words), (long, "more than 1,000,000 YAML values")):
        began = time.process_time()
        with pytest.raises(ReviewError, match=words):
            tracefile.loads(raw, "t.yaml")
        assert time.process_time() - began < 5  # a budget, not a benchmark: the full parse took minutes
