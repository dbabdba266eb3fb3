"""The review sheet's "Design review" and "Traced" sections say what the table and the runtime do."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopfsm.core import loader, tracing
from loopfsm.machines import Turnstile
from loopfsm.machines.agent_loop import AgentLoop, arguments_hash
from loopfsm.rendering.matrix import review_sheet
from loopfsm.rendering.review import SNAPSHOT_KEYS

ROOT = Path(__file__).resolve().parents[2]
MACHINES = sorted((ROOT / "machines").glob("*.yaml"))
H = arguments_hash({"q": "refund"})


def sheet(name: str) -> str:
    return review_sheet(loader.load(ROOT / "machines" / f"{name}.yaml"))


def section(text: str, title: str) -> str:
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def answer(text: str, question: str) -> str:
    return section(text, "Design review").split(f"**{question}**", 1)[1].split("\n**", 1)[0].strip()


@pytest.mark.parametrize("path", MACHINES, ids=lambda p: p.stem)
def test_every_sheet_answers_the_six_questions_and_lists_what_is_traced(path):
    text = review_sheet(loader.load(path))
    for q in (
        "What are the terminal states?",
        "Which states can call tools?",
        "Which states require human approval?",
        "Which transitions are retryable?",
        "What state is persisted?",
        "What transition is traced?",
    ):
        assert answer(text, q)
    assert "## Traced" in text


def test_agent_loop_answers_from_its_table_and_tags():
    text = sheet("agent_loop")
    assert answer(text, "What are the terminal states?").startswith("`completed`, `failed`, `expired`;")
    assert "`tool_succeeded`, `tool_failed`, `worker_lost`, `tick` are ignored" in text
    assert answer(text, "Which states can call tools?") == "`executing_tool` (tagged `calls_tools`)."
    assert answer(text, "Which states require human approval?") == "`awaiting_approval` (tagged `awaits_approval`)."
    retry = answer(text, "Which transitions are retryable?")
    into, out = retry.split("- out of `recovering`:")
    assert (
        "`tool_failed` from `executing_tool` → `recovering` (branch `retryable`), if `transient and idempotent_call "
        "and attempts_left(max_attempts=3 (policy.max_attempts))`" in into
    )
    assert "`worker_lost` from `executing_tool` → `recovering`" in into and into.count("  - ") == 2
    assert "`dispatch` from `recovering` → `executing_tool` (branch `retry`)" in out
    assert "`replan` from `recovering` → `planning` (branch `replan`)" in out
    persisted = answer(text, "What state is persisted?")
    assert "  - `awaiting_approval`: `approver`, `expires_at`, `policy_reason`, `allowed_outcomes`, `requested_at`" in (
        persisted
    )
    declared = len(loader.load(ROOT / "machines" / "agent_loop.yaml").source.doc["trace"])
    assert f"with {declared} attributes from the `trace:` table" in answer(text, "What transition is traced?")


def test_a_machine_that_tags_nothing_says_so():
    text = sheet("turnstile")
    assert answer(text, "What are the terminal states?") == "None: no state is terminal, so the machine never ends."
    assert answer(text, "Which states can call tools?").startswith("No state is tagged `calls_tools`")
    assert "No state is tagged `recovering`" in answer(text, "Which transitions are retryable?")
    assert "records carry no attributes of their own" in section(text, "Traced")


def test_the_listed_snapshot_keys_are_the_snapshots():
    assert tuple(Turnstile().snapshot()) == SNAPSHOT_KEYS
    m = AgentLoop.new_run("r", "o", 1_000)
    m.tool_proposed("refund", H, True, 1)
    m.dispatch(2)
    snap = m.snapshot()
    assert tuple(snap) == SNAPSHOT_KEYS and set(snap["state_data"]) == {"attempt", "started_at", "expected_latency_ms"}


def _traced_rows(text: str) -> dict[str, list[str]]:
    rows = [line for line in section(text, "Traced").splitlines() if line.startswith("| `")]
    return {r.split("`")[1]: [c.strip() for c in r.strip("|").split("|")] for r in rows}


def test_traced_rows_say_where_each_attribute_is_recorded_and_traces_agree():
    rows = _traced_rows(sheet("agent_loop"))
    assert list(rows) == list(loader.load(ROOT / "machines" / "agent_loop.yaml").source.doc["trace"])
    assert rows["error.type"][1:3] == ["result `error_type`", "every record where the result answers a value"]
    assert rows["agent_loop.error_class"][1:3] == [
        "state data `error_class`",
        "records that end in `recovering`, `failed`",
    ]
    assert rows["agent_loop.attempts"][1:3] == ["data `attempts`", "every record"]
    assert rows["gen_ai.tool.name"][2] == "every record (left out while null); kept on the move that clears it"
    assert rows["agent_loop.next_obligation"][2] == "records of `observing_result -> planning` (left out while null)"
    assert rows["agent_loop.deadline.remaining_ms"][1] == "result `deadline_remaining`"
    # What the rows claim, against a traced run: approval, a retryable failure, a final one.
    records: list[tracing.TransitionRecord] = []
    m = AgentLoop.new_run("r", "o", 1_000)
    with tracing.attached(m, records.append):
        m.tool_proposed("refund", H, True, 1)
        m.approval_required("alice", 900, "payment", 2)
        m.approval_decided("approve", "alice", H, 3)
        m.tool_failed("timeout", True, 4)
        m.dispatch(5)
        m.tool_failed("bad_request", False, 6)
    assert [r.to_state for r in records][-3:] == ["recovering", "executing_tool", "failed"]
    for r in records:
        ends_with_class = r.to_state in ("recovering", "failed")
        assert ("error.type" in r.attributes) == ends_with_class, r
        assert ("agent_loop.policy_reason" in r.attributes) == (r.to_state == "awaiting_approval"), r
        assert "agent_loop.attempts" in r.attributes
    assert records[-1].attributes["error.type"] == "bad_request"


def test_a_refused_or_illegal_feed_makes_no_record_as_the_traced_section_says():
    from loopfsm import IllegalFeed  # noqa: PLC0415
    from loopfsm.core.errors import FeedRefused  # noqa: PLC0415

    assert "(a feed that is refused or illegal makes none)" in section(sheet("agent_loop"), "Traced")
    records: list[tracing.TransitionRecord] = []
    m = AgentLoop.new_run("r", "o", 1_000)
    with tracing.attached(m, records.append):
        with pytest.raises(IllegalFeed):
            m.dispatch(1)
        with pytest.raises(FeedRefused):
            m.tool_proposed("refund", "sha256:nothex", True, 1)
    assert records == []


def test_a_less_than_sign_in_words_is_drawn_not_read_as_html():
    from loopfsm.rendering import render as render_files

    text = (ROOT / "machines" / "turnstile.yaml").read_text()
    text = text.replace("description: The arm turns for one person.", "description: 'turns <b>once</b>, `a<b` in code'")
    sheet = render_files(loader.parse(text), ["md"])["turnstile.md"]
    row = next(line for line in sheet.splitlines() if line.startswith("| `unlocked` |"))
    assert "turns &lt;b>once&lt;/b>, `a<b` in code" in row
