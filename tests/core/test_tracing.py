"""The tracing hook: one record per feed that moves or stays, one per decision, none when nobody listens."""

from __future__ import annotations

import pytest

from loopfsm import IllegalFeed, SpecError, parse
from loopfsm.core import tracing
from loopfsm.machines.engine_brain import LoopMachine
from loopfsm.machines.turnstile import Turnstile
from loopfsm.core.tracing import TransitionRecord

from tests.support.specs import dedent, make_registry
from tests.core.test_runtime import COUNTER, compiled


def test_feeds_record_from_feed_branch_to():
    t = Turnstile()
    records: list[TransitionRecord] = []
    with tracing.global_sink(records.append):
        t.coin()
        t.push()
        t.push()
    assert [(r.machine, r.from_state, r.feed, r.branch, r.to_state, r.kind) for r in records] == [
        ("turnstile", "locked", "coin", "coin/locked[0]", "unlocked", "feed"),
        ("turnstile", "unlocked", "push", "push/unlocked[0]", "locked", "feed"),
        ("turnstile", "locked", "push", "push/locked[0]", "locked", "feed"),
    ]
    assert [r.moved for r in records] == [True, True, False]


def test_the_branch_taken_is_named_not_the_first_listed():
    t = Turnstile()
    records: list[TransitionRecord] = []
    fare = Turnstile.compiled.Policy(fare=2)
    with tracing.attached(t, records.append):
        t.coin(policy=fare)
        t.coin(policy=fare)
    assert [r.branch for r in records] == ["coin/locked[1]", "coin/locked[0]"]
    assert [r.to_state for r in records] == ["locked", "unlocked"]


def test_nothing_is_recorded_or_checked_once_sinks_are_gone(loopfsm_coverage_paused):
    t = Turnstile()
    records: list[TransitionRecord] = []
    assert not tracing.ACTIVE
    with tracing.global_sink(records.append):
        assert tracing.ACTIVE
    with tracing.attached(t, records.append):
        assert tracing.ACTIVE
    assert not tracing.ACTIVE
    t.coin()
    assert records == []


def test_an_instance_sink_hears_only_its_instance(loopfsm_coverage_paused):
    a, b = Turnstile(), Turnstile()
    heard: list[TransitionRecord] = []
    everything: list[TransitionRecord] = []
    tracing.attach(a, heard.append)
    try:
        with tracing.global_sink(everything.append):
            a.coin()
            b.coin()
    finally:
        tracing.detach(a, heard.append)
    assert len(heard) == 1 and len(everything) == 2
    assert not tracing.ACTIVE


def test_sinks_are_not_part_of_a_snapshot():
    t = Turnstile()
    heard: list[TransitionRecord] = []
    with tracing.attached(t, heard.append):
        snap = t.snapshot()
        copy = Turnstile.restore(snap)
        copy.coin()
        t.coin()
    assert "sinks" not in str(snap) and len(heard) == 1


def test_an_illegal_feed_is_not_recorded():
    C = compiled()
    m = C.new()
    records: list[TransitionRecord] = []
    with tracing.global_sink(records.append), pytest.raises(IllegalFeed):
        m.tick()
    assert records == []


def test_an_ignored_feed_and_an_unanswered_stay_record_no_branch():
    C = compiled()
    m = C.new()
    records: list[TransitionRecord] = []
    with tracing.global_sink(records.append):
        m.label("b")  # every guard fails, otherwise: stay
        m.start()
        for _ in range(4):
            m.tick()
        assert m.state == "done"
        m.tick()  # terminal_feeds: ignore
    assert (records[0].branch, records[0].to_state) == (None, "idle")
    assert (records[-1].branch, records[-1].from_state, records[-1].to_state) == (None, "done", "done")
    assert [r.branch for r in records[1:-1]] == ["start/idle[0]"] + ["tick/counting[1]"] * 3 + ["tick/counting[0]"]


def test_decisions_record_the_rule_that_answered():
    C = compiled()
    m = C.new()
    records: list[TransitionRecord] = []
    with tracing.global_sink(records.append):
        rule, answer = m.explain("what_next")
    assert (rule, answer) == ("keep_going", "tick")
    (r,) = records
    assert (r.kind, r.feed, r.branch, r.from_state, r.to_state, r.moved) == (
        "decision",
        "what_next",
        "keep_going",
        "idle",
        "idle",
        False,
    )


def test_brain_next_step_is_traced_with_the_rule_explain_gives():
    m = LoopMachine()
    records: list[TransitionRecord] = []
    with tracing.attached(m, records.append):
        m.accept_input("hello")
        rule, _ = m.explain("next_step")
    assert records[0].feed == "accept_input" and records[0].to_state == m.state
    assert records[-1].kind == "decision" and records[-1].branch == rule


def test_a_failing_sink_warns_and_the_move_stands():
    t = Turnstile()

    def broken(record: TransitionRecord) -> None:
        raise RuntimeError("exporter down")

    with tracing.global_sink(broken), pytest.warns(tracing.TraceSinkWarning, match="exporter down"):
        t.coin()
    assert t.state == "unlocked"


def test_yaml_branch_names_replace_the_derived_ones():
    text = COUNTER.replace("        - to: counting\n", "        - to: counting\n          name: begin\n")
    C = compiled(text)
    m = C.new()
    records: list[TransitionRecord] = []
    with tracing.global_sink(records.append):
        m.start()
    assert records[0].branch == "begin"


def test_duplicate_branch_names_from_one_state_are_refused_with_a_location():
    old = "          stay: true\n          actions: [{name: log, params: {text: "
    text = COUNTER.replace(old, old.replace("stay: true\n", "stay: true\n          name: same\n"))
    assert text.count("name: same") == 2
    with pytest.raises(SpecError, match=r"counter.yaml:\d+:\d+: events.label.from.idle\[1\].name: .*'same'"):
        parse(text, "counter.yaml", make_registry())


@pytest.mark.parametrize("compiled_machine", [Turnstile.compiled, LoopMachine.compiled], ids=lambda c: c.name)
def test_every_branch_of_a_shipped_machine_has_a_unique_name(compiled_machine):
    for name, event in compiled_machine.events.items():
        names = [t.name for branches in event.branches.values() for t in branches]
        assert all(names)
        # one branch written under '*' is shared by the states it expands to: same name, same branch
        written = {t.name: id(t) for branches in event.branches.values() for t in branches}
        assert len(written) <= len(names)
        assert all(n.startswith(f"{name}/") for n in names)


def test_record_text_and_dict():
    r = TransitionRecord("m", "a", "go", "go/a[0]", "b", attributes={"attempts": 2})
    assert str(r) == "m: go [go/a[0]] a -> b  attempts=2"
    assert r.as_dict() == {
        "machine": "m",
        "kind": "feed",
        "from": "a",
        "feed": "go",
        "branch": "go/a[0]",
        "to": "b",
        "attributes": {"attempts": 2},
    }


TRACED = COUNTER + dedent("""
    trace:
      count: {data: count}
      counter.n: {state_data: n}
      kind: {arg: kind}
      verdict: {result: {name: constant, params: {value: fine}}}
""")


def test_declared_attributes_are_read_after_the_feed():
    m = compiled(TRACED).new()
    records: list[TransitionRecord] = []
    with tracing.global_sink(records.append):
        m.label("a")
        m.start(5)
        m.tick()
        m.explain("what_next")
    assert [dict(r.attributes) for r in records] == [
        {"count": 0, "kind": "a", "verdict": "fine"},
        {"count": 0, "counter.n": 5, "verdict": "fine"},
        {"count": 1, "counter.n": 5, "verdict": "fine"},
        {"count": 1, "counter.n": 5, "verdict": "fine"},
    ]


KEPT = COUNTER + dedent("""
    trace:
      n_after: {state_data: n}
      n_kept: {state_data: n, read: after_or_before}
      count_on_finish: {data: count, moves: ["counting -> done"]}
      count_on_stays: {data: count, moves: ["counting -> counting", "* -> done"]}
""")


def test_a_value_the_feed_cleared_is_kept_only_where_the_table_says():
    m = compiled(KEPT).new()
    records: list[TransitionRecord] = []
    with tracing.global_sink(records.append):
        m.start(5)
        for _ in range(4):
            m.tick()
        m.explain("what_next")
    moves = [(r.from_state, r.to_state, dict(r.attributes)) for r in records]
    assert moves[0] == ("idle", "counting", {"n_after": 5, "n_kept": 5})
    assert moves[1] == ("counting", "counting", {"n_after": 5, "n_kept": 5, "count_on_stays": 1})
    # counting -> done leaves n behind: read after, it is gone; read after_or_before, it is kept
    assert moves[4] == ("counting", "done", {"n_kept": 5, "count_on_finish": 3, "count_on_stays": 3})
    assert moves[5] == ("done", "done", {})  # a decision carries no attribute limited to moves


AT = r"counter.yaml:\d+:\d+: "


@pytest.mark.parametrize(
    "entry,message",
    [
        (
            'c: {data: count, moves: ["idle -> nowhere"]}',
            AT + r"trace.c.moves\[0\]: trace attribute 'c': no state 'nowhere'",
        ),
        (
            'c: {data: count, moves: ["done -> idle"]}',
            AT + r"trace.c.moves\[0\]: .*no branch of the table moves done -> idle",
        ),
        ("c: {arg: kind, read: after_or_before}", r"trace.c.read: .*an argument has no value before the feed"),
        ('c: {data: count, moves: ["idle to done"]}', r"does not match"),
    ],
)
def test_bad_moves_and_readings_are_refused_with_a_location(entry, message):
    with pytest.raises(SpecError, match=message):
        parse(COUNTER + "trace:\n  " + entry + "\n", "counter.yaml", make_registry())


def test_an_integer_outside_64_bits_is_saturated_loudly():
    reg = make_registry()

    @reg.result
    def huge(m, q) -> int:
        return -(2**70)

    from loopfsm import compile_spec

    C = compile_spec(parse(COUNTER + "trace:\n  big: {result: huge}\n", "counter.yaml", reg), reg)
    records: list[TransitionRecord] = []
    with tracing.global_sink(records.append), pytest.warns(tracing.TraceSinkWarning, match="saturated"):
        C.new().start()
    assert records[0].attributes["big"] == -(2**63)


def test_the_trace_table_does_not_change_the_fingerprint():
    assert compiled(TRACED).fingerprint == compiled(COUNTER).fingerprint


@pytest.mark.parametrize(
    "entry,message",
    [
        ("log: {data: log}", r"trace.log.data: trace attribute 'log': 'log' is a list of string"),
        ("nope: {data: nope}", r"trace.nope.data: trace attribute 'nope': no field 'nope' in the machine's data"),
        ("n: {arg: n2}", r"no field 'n2' in the arguments of any feed or decision"),
        ("loopfsm.count: {data: count}", r"'loopfsm.' prefix is reserved"),
        ("x: {result: nothing_here}", r"unknown result 'nothing_here'"),
    ],
)
def test_bad_trace_attributes_are_refused_with_a_location(entry, message):
    text = COUNTER + "trace:\n  " + entry + "\n"
    with pytest.raises(SpecError, match=r"counter.yaml:\d+:\d+: " + message if "trace." in message else message):
        parse(text, "counter.yaml", make_registry())


def test_a_result_attribute_that_is_not_a_scalar_is_left_out_loudly():
    reg = make_registry()

    @reg.result
    def everything(m, q) -> object:
        return {"prompt": "secret"}

    from loopfsm import compile_spec

    C = compile_spec(parse(COUNTER + "trace:\n  leak: {result: everything}\n", "counter.yaml", reg), reg)
    records: list[TransitionRecord] = []
    with tracing.global_sink(records.append), pytest.warns(tracing.TraceSinkWarning, match="not a scalar"):
        C.new().start()
    assert dict(records[0].attributes) == {}


REFUSING = COUNTER.replace(
    """          stay: true
          actions: [{name: log, params: {text: a}}]""",
    """          refuse: "kind a is not accepted here\"""",
)


def test_a_refuse_branch_raises_its_words_changes_nothing_and_records_nothing():
    from loopfsm import FeedRefused

    assert "refuse:" in REFUSING
    m = compiled(REFUSING).new()
    records: list[TransitionRecord] = []
    with tracing.global_sink(records.append), pytest.raises(FeedRefused, match="kind a is not accepted here") as info:
        m.label("a")
    assert info.value.reason == "kind a is not accepted here" and m.data.log == [] and records == []
    assert not m.can("label", "a") and m.can("label", "c")
    m.label("c")
    assert m.data.log == ["not-b"]


def test_a_refusal_runs_no_actions():
    text = COUNTER.replace(
        """          stay: true
          actions: [{name: log, params: {text: a}}]""",
        """          refuse: "no"
          actions: [{name: log, params: {text: a}}]""",
    )
    with pytest.raises(SpecError, match=r"events.label.from.idle\[0\].actions: a refusal changes nothing"):
        parse(text, "counter.yaml", make_registry())


def test_attaching_from_many_threads_keeps_the_count():
    import threading

    machines = [Turnstile() for _ in range(8)]
    heard: list[TransitionRecord] = []

    def churn(t: Turnstile) -> None:
        for _ in range(200):
            tracing.attach(t, heard.append)
            tracing.detach(t, heard.append)

    threads = [threading.Thread(target=churn, args=(t,)) for t in machines]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert tracing._instance_sinks == 0
    with tracing.attached(machines[0], heard.append):
        machines[0].coin()
    assert len(heard) == 1


def test_a_sink_that_cannot_be_called_is_refused_when_attached():
    from loopfsm.core import tracing
    from loopfsm.machines import Turnstile

    t = Turnstile()
    active, global_sinks = tracing.ACTIVE, tracing._global  # a coverage run has a global sink of its own
    with pytest.raises(TypeError, match="a trace sink is a callable"):
        tracing.attach(t, "not callable")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a trace sink is a callable"):
        tracing.add_global_sink(42)  # type: ignore[arg-type]
    assert tracing.sinks_of(t) == () and (tracing.ACTIVE, tracing._global) == (active, global_sinks)


def test_a_sink_attached_twice_hears_each_record_once_and_detaching_an_absent_one_says_so():
    from loopfsm.core import tracing
    from loopfsm.machines import Turnstile

    t, heard = Turnstile(), []
    tracing.attach(t, heard.append)
    tracing.attach(t, heard.append)
    t.coin()
    assert len(heard) == 1
    tracing.detach(t, heard.append)
    with pytest.raises(ValueError, match="is not attached to this instance"):
        tracing.detach(t, heard.append)
    with pytest.raises(TypeError, match="attach to a machine instance, got object"):
        tracing.attach(object(), heard.append)  # type: ignore[arg-type]


def test_records_carry_no_attributes_when_every_sink_says_it_wants_none():
    """A coverage collector reads only which row was taken; the attributes are not even computed for it."""
    from loopfsm.machines import AgentLoop

    class RowsOnly:
        wants_attributes = False

        def __init__(self):
            self.records = []

        def __call__(self, record):
            self.records.append(record)

    rows, plain = RowsOnly(), []
    run = AgentLoop()
    run.data.run_id, run.data.owner, run.data.deadline_at = "r", "o", 100
    with tracing.attached(run, rows):
        run.feed("tool_proposed", tool="t", arguments_hash="sha256:" + "a" * 64, idempotent=True, now=0)
    assert rows.records and all(r.attributes == {} for r in rows.records)
    with tracing.attached(run, rows), tracing.attached(run, plain.append):  # one sink wants them: both get them
        run.feed("dispatch", now=1)
    assert plain[0].attributes and rows.records[-1].attributes == plain[0].attributes


@pytest.mark.parametrize("engine", ["transitions", "interpreter"])
def test_a_branch_whose_action_refuses_is_heard_as_a_refusal_by_sinks_that_want_them(engine):
    """The run lock's fenced_out action raises FencedOut: the branch was taken and refused, as a refuse: branch
    is, so coverage counts it; ordinary sinks hear nothing, as of any refused feed."""
    from loopfsm import FencedOut
    from loopfsm.machines import RunLock

    class Refusals(list):
        wants_refusals = True

        def __call__(self, record):
            self.append(record)

    lock = RunLock(engine=engine)
    lock.acquire(100, "A", 50)
    lock.acquire(200, "B", 50)  # a takeover: A's fence is stale
    refusals, plain = Refusals(), []
    with tracing.attached(lock, refusals), tracing.attached(lock, plain.append):
        with pytest.raises(FencedOut):
            lock.renew(210, 1, 50)
    assert [(r.kind, r.branch, r.from_state, r.to_state) for r in refusals] == [
        ("refusal", "renew/Held[1]", "Held", "Held")
    ]
    assert plain == []


def test_heard_only_by_says_when_one_global_sink_is_all_that_listens(loopfsm_coverage_paused):
    mine, other = [].append, [].append
    assert not tracing.heard_only_by(mine) and not tracing.is_global_sink(mine)
    with tracing.global_sink(mine):
        assert tracing.heard_only_by(mine) and tracing.is_global_sink(mine)
        with tracing.global_sink(other):
            assert not tracing.heard_only_by(mine)
        machine = Turnstile()
        with tracing.attached(machine, other):
            assert not tracing.heard_only_by(mine)  # a sink on one instance listens too
        assert tracing.heard_only_by(mine)
    assert not tracing.is_global_sink(mine)
