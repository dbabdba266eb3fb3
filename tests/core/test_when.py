"""A branch's ``when:``: a condition on a feed argument's value, stated in the table, needing no Python guard."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.docs_pages import page

from loopfsm import NoBranchMatched, Registry, SpecError, compile_spec, parse
from loopfsm.rendering.diff import diff_specs, load_for_diff
from loopfsm.rendering import dot, matrix, mermaid
from loopfsm.rendering.overview import overview

from tests.support.specs import dedent, marked_line

MACHINE = dedent("""
    machine: review
    description: a reviewer's verdict moves a change on
    registry: review
    states:
      open: {initial: true, description: waiting for a verdict}
      held: {description: held for another look}
      merged: {terminal: true, description: merged}
      closed: {terminal: true, description: closed}
    events:
      verdict:
        description: the reviewer's verdict
        otherwise: raise
        args:
          verdict: {type: string, enum: [approve, reject, hold, skip]}
          urgent: {type: boolean, default: false}
          score: {type: integer, default: 0}
        from:
          open:
            - when: {verdict: approve, urgent: true}
              to: merged
            - when: {verdict: approve}
              guard: reviewed
              to: merged
            - when: {verdict: [reject, hold]}
              guard: {name: score_below, params: {n: 0}}
              to: closed
            - when: {verdict: [reject, hold]}
              to: held
          held:
            - when: {score: 3}
              to: merged
            - when: {score: [0, 1]}
              stay: true
""")


ASKED: list[str] = []  # the guards asked, in order


def machine(text: str = MACHINE):
    ASKED.clear()
    reg = Registry("review")

    @reg.guard
    def reviewed(m, ctx) -> bool:
        ASKED.append("reviewed")
        return ctx.args["score"] > 0

    @reg.guard
    def score_below(m, ctx, *, n: int) -> bool:
        ASKED.append("score_below")
        return ctx.args["score"] < n

    return compile_spec(parse(text, "review.yaml", reg), reg)


def test_a_branch_is_taken_only_when_the_argument_has_its_value():
    m = machine().new()
    m.verdict("approve", urgent=True)
    assert m.state == "merged" and ASKED == []  # the first branch's when held: no guard asked


def test_every_argument_of_a_when_must_hold_and_the_when_is_checked_before_the_guards():
    m = machine().new()
    with pytest.raises(NoBranchMatched):
        m.verdict("skip")  # no branch's when holds; no guard was asked for it
    assert m.state == "open" and ASKED == []
    m.verdict("approve", score=2)  # urgent is false: the second branch, and only its guard, is asked
    assert m.state == "merged" and ASKED == ["reviewed"]


def test_a_list_is_a_choice_of_values():
    m = machine().new()
    m.verdict("hold")
    assert m.state == "held" and ASKED == ["score_below"]
    m.verdict("skip", score=1)  # held: score 1 is one of [0, 1]
    assert m.state == "held"
    m.verdict("skip", score=3)
    assert m.state == "merged"


def test_can_answers_what_a_feed_would_do():
    m = machine().new()
    assert m.can("verdict", "reject") and m.can("verdict", "approve", True)
    assert not m.can("verdict", "skip") and not m.can("verdict", "approve")  # not urgent, not reviewed
    assert ASKED == ["score_below", "reviewed"]


def test_an_enum_argument_in_a_when_narrows_the_branches_per_value():
    compiled = machine()
    feed = compiled.events["verdict"]
    assert feed.narrow_on == "verdict"
    rows = feed.rows("open", {"verdict": "skip", "urgent": False, "score": 0}, compiled.default_policy)
    assert rows == ()  # no branch can hold for skip: none is even tried
    names = [r.branch.name for r in feed.rows("open", {"verdict": "hold"}, compiled.default_policy)]
    assert names == ["verdict/open[2]", "verdict/open[3]"]


def test_the_transitions_machine_names_the_condition():
    machine_ = machine().machine
    first = machine_.events["verdict"].transitions["open"][0]
    assert [c.func.__name__ for c in first.conditions] == ["verdict=approve", "urgent=true"]
    third = machine_.events["verdict"].transitions["open"][2]
    assert [c.func.__name__ for c in third.conditions] == ["verdict in [reject, hold]", "score_below"]
    model = machine().new()
    model.verdict("hold")
    assert model.state == "held"


WHEN_FEED = dedent("""
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
          verdict: {type: string, enum: [approve, reject]}
          urgent: {type: boolean, default: false}
          score: {type: integer, minimum: 0, default: 0}
          tags: {type: string, list: true}
          extra: {type: json, default: {}}
          maybe: {type: boolean, nullable: true, default: null}
        from:
          a:
            - when: WHEN
              to: b
""")


@pytest.mark.parametrize(
    "edit, message",
    [
        ("{verdit: approve}  # <-", "feed 'go' has no argument 'verdit'; did you mean 'verdict'?"),
        ("{verdict: aprove}  # <-", "argument 'verdict' of feed 'go' is never string 'aprove' (it is one of"),
        ("{urgent: 1}  # <-", "argument 'urgent' of feed 'go' is never integer 1 (it is boolean)"),
        ("{score: -1}  # <-", "argument 'score' of feed 'go' is never integer -1 (it is integer, at least 0)"),
        ("{score: null}  # <-", "argument 'score' of feed 'go' is never null (it is integer, at least 0)"),
        ("{tags: x}  # <-", "'when' compares integer, number, string and boolean arguments; argument 'tags'"),
        ("{extra: x}  # <-", "'when' compares integer, number, string and boolean arguments; argument 'extra'"),
    ],
)
def test_a_when_the_feed_cannot_meet_is_reported_at_its_line(edit, message):
    text = WHEN_FEED.replace("WHEN", edit)
    with pytest.raises(SpecError) as err:
        parse(text, "m.yaml")
    (problem,) = err.value.problems
    assert problem.line == marked_line(text) and message in problem.message
    assert problem.path.startswith("events.go.from.a[0].when.")


@pytest.mark.parametrize(
    "edit, path",
    [
        ("{verdict: [approve, reject]}  # <-", "events.go.from.a[0].when.verdict"),
        ("{urgent: [true, false]}  # <-", "events.go.from.a[0].when.urgent"),
        ("{maybe: [true, false, null]}  # <-", "events.go.from.a[0].when.maybe"),
    ],
)
def test_a_when_that_lists_every_value_the_argument_can_take_is_refused(edit, path):
    """It always holds: the branch is unconditional in all but name, and the branches after it never run."""
    text = WHEN_FEED.replace("WHEN", edit)
    with pytest.raises(SpecError) as err:
        parse(text, "m.yaml")
    (problem,) = err.value.problems
    assert problem.line == marked_line(text) and problem.path == path
    assert "so this condition always holds: remove it, or list only the values the branch is for" in problem.message


def test_a_when_that_leaves_out_null_or_a_value_is_a_condition():
    for when in ("{maybe: [true, false]}", "{verdict: [approve]}", "{urgent: [true]}"):
        parse(WHEN_FEED.replace("WHEN", when), "m.yaml")


def test_a_value_listed_twice_is_reported_at_the_second():
    text = WHEN_FEED.replace("WHEN", "{score: [1, 2, 1]}")
    with pytest.raises(SpecError) as err:
        parse(text, "m.yaml")
    (problem,) = err.value.problems
    assert problem.path == "events.go.from.a[0].when.score[2]" and "integer 1 is listed twice" in problem.message


def test_a_value_in_a_list_is_reported_at_its_own_place():
    text = MACHINE.replace("[reject, hold]", "[reject, hld]", 1)
    with pytest.raises(SpecError) as err:
        machine(text)
    (problem,) = err.value.problems
    assert problem.path == "events.verdict.from.open[2].when.verdict[1]"
    assert "never string 'hld'" in problem.message and "did you mean 'hold'?" in problem.message


def test_a_when_on_an_argument_whose_enum_is_itself_wrong_reports_the_enum_and_does_not_crash():
    """Found by the loader fuzz: an enum item that is a list made the when check raise TypeError."""
    text = MACHINE.replace("enum: [approve, reject, hold, skip]", "enum: [[], approve, reject, hold, skip]")
    with pytest.raises(SpecError) as err:
        machine(text)
    assert any("enum" in p.message for p in err.value.problems)
    assert all("never" not in p.message for p in err.value.problems)


def test_a_when_that_is_not_a_value_or_a_list_of_values_is_refused_by_the_schema():
    text = MACHINE.replace("when: {score: 3}", "when: {score: {at_least: 3}}")
    with pytest.raises(SpecError) as err:
        machine(text)
    (problem,) = err.value.problems
    assert problem.path == "events.verdict.from.held[0].when.score"
    assert "a 'when' condition is a value (string, number, boolean or null) or a list of values" in problem.message


def test_a_branch_with_only_a_when_is_a_guarded_branch():
    """It can fail to hold, so it shadows nothing and a state of such branches must say what happens otherwise."""
    text = MACHINE.replace("    otherwise: raise\n", "")
    with pytest.raises(SpecError, match="every branch of 'verdict' from 'held' is guarded"):
        machine(text)


def test_views_print_the_condition():
    spec = machine().spec
    detailed = mermaid.state_diagram(spec, detailed=True)
    assert "open --> merged: verdict [verdict=approve and urgent=true]" in detailed
    assert "open --> closed: verdict [verdict in [reject, hold] and score_below(n=0)]" in detailed
    assert "verdict [score=3]" in dot.state_graph(spec, detailed=True).source
    sheet = matrix.review_sheet(spec)
    assert "if `verdict=approve and reviewed` → `merged`" in sheet
    assert "if `score in [0, 1]` stay; none holds: raises `NoBranchMatched`" in sheet
    edge = next(e for e in overview(spec).edges if (e.src, e.dst) == ("open", "held"))
    assert edge.guarded and edge.feeds == {"verdict": ["verdict in [reject, hold]"]}  # no description: its condition


def test_diff_reports_a_changed_when_as_behaviour(tmp_path: Path):
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(MACHINE)
    new.write_text(MACHINE.replace("when: {score: 3}", "when: {score: 4}"))
    d = diff_specs(load_for_diff(str(old)), load_for_diff(str(new)))
    assert [c.text for c in d.changes] == ["verdict from held [0]: when score=3 -> score=4"]
    assert d.behaviour_changed and d.snapshots_restore  # a when: is a rule, not a shape: saved runs restore


def test_the_docs_excerpt_is_router_run_as_shipped():
    root = Path(__file__).resolve().parents[2]
    section = page("docs/format.md").split("### Conditions on an argument: `when`", 1)[1]
    excerpt = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    shipped = (root / "machines" / "router_run.yaml").read_text()
    assert "when: {outcome: gate}" in excerpt and excerpt in shipped
    quoted = "when: {request: [break, inject], lock: [held, expired]}"
    assert (
        quoted in section.split("### ", 1)[0] and quoted in shipped.split("\n  admit:", 1)[1].split("\n  respond:")[0]
    )


# -- decision rules ------------------------------------------------------------------------

TRIAGE = dedent("""
    machine: triage
    description: which queue a ticket goes to
    registry: triage
    states:
      open: {initial: true, description: taking tickets}
    decisions:
      queue:
        description: the queue for a ticket
        args:
          kind: {type: string, enum: [bug, question, spam]}
          paying: {type: boolean, default: false}
        rules:
          - name: drop
            when: {kind: spam}
            result: {name: answer, params: {value: trash}}
          - name: priority
            when: {kind: [bug, question], paying: true}
            result: {name: answer, params: {value: priority}}
          - name: engineers
            when: {kind: bug}
            guard: weekday
            result: {name: answer, params: {value: engineers}}
          - name: everyone
            result: {name: answer, params: {value: support}}
""")


def triage(text: str = TRIAGE):
    reg = Registry("triage")

    @reg.guard
    def weekday(m, ctx) -> bool:
        ASKED.append("weekday")
        return True

    @reg.result
    def answer(m, ctx, *, value: str) -> str:
        return value

    ASKED.clear()
    return compile_spec(parse(text, "triage.yaml", reg), reg)


def test_a_decision_rule_applies_only_when_its_arguments_have_their_values():
    m = triage().new()
    assert m.explain("queue", kind="spam", paying=True) == ("drop", "trash")
    assert m.explain("queue", kind="question", paying=True) == ("priority", "priority")
    assert m.explain("queue", kind="question") == ("everyone", "support") and ASKED == []  # bug only: no guard
    assert m.explain("queue", kind="bug") == ("engineers", "engineers") and ASKED == ["weekday"]


def test_a_rule_with_a_when_answers_no_state_outright():
    text = TRIAGE.replace("      - name: everyone\n        result: {name: answer, params: {value: support}}\n", "")
    with pytest.raises(SpecError, match="decision 'queue' has no answer in state"):
        triage(text)


def test_a_decision_when_is_checked_against_the_decisions_arguments():
    with pytest.raises(SpecError) as err:
        triage(TRIAGE.replace("when: {kind: spam}", "when: {knd: spam}"))
    (problem,) = err.value.problems
    assert problem.path == "decisions.queue.rules[0].when.knd"
    assert "decision 'queue' has no argument 'knd'; did you mean 'kind'?" in problem.message


def test_decision_views_and_diff_print_the_rules_condition(tmp_path: Path):
    spec = triage().spec
    d = spec.decisions["queue"]
    chart = mermaid.decision_flowchart(spec, d)
    assert '{"2. priority?"}' in chart and '|"yes: kind in [bug, question] and<br/>paying=true"| a1' in chart
    assert '>kind=bug<BR ALIGN="LEFT"/>weekday<BR ALIGN="LEFT"/>' in dot.decision_graph(spec, d).source
    assert "| 3 | `engineers` | any | kind=bug and weekday | `answer(value=engineers)` |" in matrix.review_sheet(spec)
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(TRIAGE)
    new.write_text(TRIAGE.replace("when: {kind: spam}", "when: {kind: [spam, question]}"))
    changes = [c.text for c in diff_specs(load_for_diff(str(old)), load_for_diff(str(new))).changes]
    assert changes == ["decision queue rule drop: when kind=spam -> kind in [spam, question]"]


def _branches(*whens: str) -> str:
    """WHEN_FEED with one branch per ``when:``, each to ``b``, and the arguments a bounded integer and a number."""
    text = WHEN_FEED.replace(
        "      maybe:",
        "      level: {type: integer, minimum: 0, maximum: 2, default: 0}\n"
        "      ratio: {type: number, default: 0}\n      maybe:",
    )
    rows = "".join(f"        - when: {w}\n          to: b\n" for w in whens)
    return text.replace("        - when: WHEN\n          to: b\n", rows)


@pytest.mark.parametrize(
    "whens, taken_by",
    [
        # a boolean's two values, then a branch on another argument
        (("{urgent: true}", "{urgent: false}", "{verdict: approve}  # <-"), "(urgent=true; urgent=false)"),
        # an enum's values spread over two branches
        (("{verdict: approve}", "{verdict: reject, score: 1}", "{score: 1}  # <-"), "together"),
        # an unbounded integer: the later branch lists only values the earlier ones take
        (("{score: 1}", "{score: [2, 3]}", "{score: [1, 3], urgent: true}  # <-"), "together"),
        # a bounded integer's every value
        (("{level: [0, 1]}", "{level: 2}", "{urgent: true}  # <-"), "together"),
        # 1.0 is the feed's 1 to a number argument
        (("{ratio: 1}", "{ratio: 2}", "{ratio: [1.0, 2.0]}  # <-"), "together"),
    ],
)
def test_a_branch_earlier_unguarded_branches_take_together_is_refused(whens, taken_by):
    """Each earlier one takes part of what it would, none all of it: it is never tried all the same."""
    text = _branches(*whens)
    with pytest.raises(SpecError) as err:
        parse(text, "m.yaml")
    (problem,) = err.value.problems
    assert problem.line == marked_line(text) and problem.path == "events.go.from.a[2]"
    assert "branch 2 of 'go' from 'a' can never be taken: branch 0 and branch 1 before it have no guard" in (
        problem.message
    )
    assert "together take every feed it does" in problem.message and taken_by in problem.message


@pytest.mark.parametrize(
    "whens",
    [
        ("{maybe: true}", "{maybe: false}", "{verdict: approve}"),  # null is neither
        ("{score: 1}", "{score: 2}", "{score: [1, 3]}"),  # 3 is the third's own
        ("{score: 1}", "{score: 2}", "{urgent: true}"),  # any other score
        ("{level: 0}", "{level: 1}", "{urgent: true}"),  # level 2
        ("{verdict: approve, urgent: true}", "{verdict: reject}", "{verdict: approve}"),  # approve, not urgent
    ],
)
def test_a_branch_some_feed_reaches_past_the_earlier_ones_is_kept(whens):
    parse(_branches(*whens), "m.yaml")


def test_every_value_of_a_bounded_integer_listed_always_holds():
    text = _branches("{level: [0, 1, 2]}  # <-")
    with pytest.raises(SpecError) as err:
        parse(text, "m.yaml")
    (problem,) = err.value.problems
    assert problem.line == marked_line(text) and problem.path == "events.go.from.a[0].when.level"
    assert "so this condition always holds" in problem.message


def test_a_number_listed_as_an_integer_and_a_float_is_listed_twice():
    text = _branches("{ratio: [1, 2, 1.0]}")
    with pytest.raises(SpecError) as err:
        parse(text, "m.yaml")
    (problem,) = err.value.problems
    assert problem.path == "events.go.from.a[0].when.ratio[2]" and "number 1.0 is listed twice" in problem.message


def test_a_branch_with_neither_when_nor_guard_after_lists_that_take_every_value_is_the_otherwise():
    """A state whose branches are all guarded must say what happens otherwise: the last plain branch may say it."""
    spec = parse(_branches("{urgent: true}", "{urgent: false}") + "        - stay: true\n", "m.yaml")
    assert len(spec.events["go"].sources["a"]) == 3


def test_a_file_of_too_many_branches_is_looked_at_up_to_its_comparisons_and_warns_where_they_ran_out(monkeypatch):
    """Each branch is compared with every earlier one: a 1 MiB file of 4,000 took 20 s; now about a second."""
    from loopfsm.core import when_checks

    monkeypatch.setattr(when_checks, "COMPARISONS", 60)
    whens = [f"{{score: {i}}}" for i in range(3, 15)]
    text = _branches("{score: [1, 2]}", "{score: 1}", *whens)  # branch 1 is taken by 0 alone: found in budget
    with pytest.raises(SpecError) as err:
        parse(text + "        - {when: {score: 3}, stay: true}\n", "m.yaml")  # taken by branch 2: past them
    (error,) = [p for p in err.value.problems if p.severity == "error"]
    assert error.path == "events.go.from.a[1]"
    # branch k costs the k earlier ones and every value listed up to it (k + 1 + (k + 1)): 4 + 6 + ... + 14 = 54
    # for branches 1 to 6; branch 7 would make 70 (a 60,000-value list counts as what it is, not as one)
    (warning,) = [p for p in err.value.problems if p.severity == "warning"]
    assert warning.path == "events.go.from.a[7]" and "from this one on, they were not looked for" in warning.message


EXHAUSTIVE = dedent("""
    machine: m
    description: d
    states:
      a: {initial: true, description: a}
      b: {terminal: true, description: b}
    events:
      go:
        description: go
        args:
          urgent: {type: boolean}
        from:
          a:
            - {when: {urgent: true}, to: b}
            - {when: {urgent: false}, to: b}
""")


def test_a_state_whose_when_lists_take_every_feed_between_them_needs_no_otherwise():
    """``otherwise`` says what happens when no branch holds; with ``{urgent: true}`` and ``{urgent: false}``
    that never happens, and asking for it made the table declare a case that cannot arise."""
    text = EXHAUSTIVE
    compiled = compile_spec(parse(text, "m.yaml"))
    for engine in ("transitions", "interpreter"):
        for urgent in (True, False):
            run = compiled.new(engine=engine)
            run.go(urgent=urgent)
            assert run.state == "b"
    sheet = matrix.review_sheet(compiled.spec)
    assert "if `urgent=false` → `b`; one holds for every feed (the `when:` lists take every value) |" in sheet
    nullable = text.replace("{type: boolean}", "{type: boolean, nullable: true}")
    with pytest.raises(SpecError) as err:
        parse(nullable, "m.yaml")  # null is neither: a feed with urgent=null takes no branch
    (problem,) = err.value.problems
    assert problem.message.endswith(
        "is guarded, but the event does not declare what happens when none holds: add 'otherwise: stay' or "
        "'otherwise: raise' (a feed with urgent=null takes none of them)"
    )


def test_were_no_branch_of_such_a_state_to_hold_the_feed_would_raise_not_stay(monkeypatch):
    """check lets a state go without ``otherwise`` only where its lists take every feed; the compiled feed
    still raises should none hold (here check is told they do, for a flag that may be null)."""
    from loopfsm.core import checks  # noqa: PLC0415

    monkeypatch.setattr(checks, "falls_short", lambda *_: False)
    text = EXHAUSTIVE.replace("{type: boolean}", "{type: boolean, nullable: true}")
    compiled = compile_spec(parse(text, "m.yaml"))
    for engine in ("transitions", "interpreter"):
        run = compiled.new(engine=engine)
        with pytest.raises(NoBranchMatched):
            run.go(urgent=None)
        assert run.state == "a"


def test_past_its_comparisons_check_refuses_no_state_for_wanting_an_otherwise(monkeypatch):
    """Once they ran out, a state whose lists take every feed was told to add ``otherwise``: an error for
    a table that is right.  Past them nothing is refused for it; the warning says where looking stopped."""
    from loopfsm.core import when_checks  # noqa: PLC0415

    burn = "".join(f"        - {{when: {{n: {k}}}, to: b}}\n" for k in range(12))
    text = (
        "machine: m\ndescription: d\nstates:\n  a: {initial: true, description: a}\n"
        "  b: {terminal: true, description: b}\nevents:\n"
        "  burn:\n    description: spends the comparisons\n    otherwise: raise\n"
        "    args:\n      n: {type: integer}\n    from:\n      a:\n" + burn + "  go:\n    description: go\n"
        "    args:\n      x: {type: boolean}\n    from:\n      a:\n"
        "        - {when: {x: true}, to: b}\n        - {when: {x: false}, to: b}\n"
    )
    assert parse(text, "m.yaml").events["go"].otherwise is None  # with comparisons to spare: no otherwise needed
    monkeypatch.setattr(when_checks, "COMPARISONS", 20)
    spec = parse(text, "m.yaml")  # not refused: before, "every branch of 'go' from 'a' is guarded ..."
    assert spec.events["go"].otherwise is None


def _errors(text: str) -> list[str]:
    with pytest.raises(SpecError) as err:
        parse(text, "m.yaml")
    return [f"{p.path}: {p.message}" for p in err.value.problems if p.severity == "error"]


def test_an_integer_bounded_by_float_bounds_has_its_every_value_listed_too():
    """``minimum: 0.0`` bounds an integer as ``0`` does: a list of 0, 1 and 2 always holds either way."""
    for low, high in (("0", "2"), ("0.0", "2.0"), ("-0.5", "2.5")):
        text = _branches("{level: [0, 1, 2]}").replace("minimum: 0, maximum: 2", f"minimum: {low}, maximum: {high}")
        assert any("so this condition always holds" in e for e in _errors(text)), (low, high)
    text = _branches("{level: [0, 1]}").replace("minimum: 0, maximum: 2", "minimum: 0.0, maximum: 2.5")
    parse(text, "m.yaml")  # 2 is left: the branch is a real condition


def test_an_integral_float_on_an_integer_argument_is_refused_with_the_integer_to_write():
    """The feed's 1 equals 1.0, but the table says what it means: "is never 1.0" was untrue, "write 1" is the fix."""
    (error,) = _errors(_branches("{score: 1.0}"))
    assert error == "events.go.from.a[0].when.score: argument 'score' of feed 'go' is an integer: write 1, not 1.0"
    (error,) = _errors(_branches("{score: 1.5}"))
    assert "is never number 1.5 (it is integer, at least 0)" in error


def test_a_condition_on_a_misspelt_argument_is_reported_once_and_hides_no_branch():
    """A typo's condition takes no feed at all: it made the next branch on the same typo "never taken" too."""
    errors = _errors(_branches("{scroe: 1}", "{scroe: 1, urgent: true}"))
    assert errors == [
        "events.go.from.a[0].when.scroe: feed 'go' has no argument 'scroe'; did you mean 'score'? (it takes: "
        "verdict, urgent, score, tags, extra, level, ratio, maybe)",
        "events.go.from.a[1].when.scroe: feed 'go' has no argument 'scroe'; did you mean 'score'? (it takes: "
        "verdict, urgent, score, tags, extra, level, ratio, maybe)",
    ]


@pytest.mark.parametrize(
    "enum, pick, where, message",
    [
        ("[1, 5], maximum: 3", 5, "enum[1]", "enum item 5 of field 'pick' is above its maximum 3: no value is"),
        ("[-1, 2], minimum: 0", -1, "enum[0]", "enum item -1 of field 'pick' is below its minimum 0: no value is"),
        ("[1, 2, 1]", 2, "enum[2]", "enum item 1 of field 'pick' is listed twice (item 0 is 1)"),
    ],
)
def test_an_enum_item_no_value_could_be_or_listed_twice_is_refused_at_its_place(enum, pick, where, message):
    """A ``when:`` naming such an item read "is never integer 5 (it is one of 1, 5)": the enum is the mistake."""
    text = _branches(f"{{pick: {pick}}}").replace(
        "      maybe:", f"      pick: {{type: integer, enum: {enum}}}\n      maybe:"
    )
    assert _errors(text) == [f"events.go.args.pick.{where}: {message}"]


def test_a_number_enum_listing_1_and_1_0_lists_one_value_twice_and_so_does_a_policy():
    text = _branches("{pick: 2}").replace("      maybe:", "      pick: {type: number, enum: [1, 2, 1.0]}\n      maybe:")
    assert _errors(text) == ["events.go.args.pick.enum[2]: enum item 1.0 of field 'pick' is listed twice (item 0 is 1)"]
    text = (
        _branches("{pick: 2}")
        .replace(
            "\nstates:",
            "\npolicy:\n  limit: {type: number, enum: [1, 1.0], default: 1, read_by: a test, description: l}\nstates:",
        )
        .replace("      maybe:", "      pick: {type: number}\n      maybe:")
    )
    assert _errors(text) == ["policy.limit.enum[1]: enum item 1.0 of policy 'limit' is listed twice (item 0 is 1)"]


def test_yaml_1_2_floats_are_numbers():
    """YAML 1.1 reads ``1e3`` (no dot) and ``2.5e3`` (no sign) as strings: ``maximum: 1e3`` was refused."""
    text = _branches("{ratio: 2.5e3}").replace(
        "ratio: {type: number, default: 0}", "ratio: {type: number, maximum: 1e4}"
    )
    spec = parse(text, "m.yaml")
    assert spec.events["go"].args["ratio"].maximum == 10_000.0
    assert spec.events["go"].sources["a"][0].when[0].values == (2500.0,)
    quoted = _branches("{verdict: '1e3'}")
    assert "is never string '1e3'" in _errors(quoted)[0]  # quoted, it stays a string


def test_the_docs_give_the_search_bounds_the_code_has():
    from loopfsm.core import when_checks  # noqa: PLC0415

    text = " ".join(page("docs/format.md").split())
    assert f"at most {when_checks._MOST_POINTS:,} per branch" in text
    assert f"at most {when_checks.COMPARISONS:,} comparisons per file" in text
