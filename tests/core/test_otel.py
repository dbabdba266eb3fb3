"""OpenTelemetry sinks: stable names and seed 003's attributes, checked with the SDK's in-memory exporters."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from loopfsm.core import tracing
from loopfsm.drivers.agent_script import drive
from loopfsm.machines.engine_brain import LoopMachine
from loopfsm.core.otel import OtelEventSink, OtelSpanEventSink

from tests.support.brain_helpers import TOOLS, answers, reply_with_tools, step

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "approval_expires.yaml"


@pytest.fixture
def logs():
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    return provider, exporter


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test"), exporter


def exported(exporter) -> list[tuple[str, dict]]:
    return [(r.log_record.event_name, dict(r.log_record.attributes)) for r in exporter.get_finished_logs()]


def drive_example() -> None:
    for _ in drive(yaml.safe_load(EXAMPLE.read_text())):
        pass


def test_agent_loop_run_as_log_based_events(logs, spans):
    provider, exporter = logs
    tracer, span_exporter = spans
    with tracing.global_sink(OtelEventSink(provider)), tracer.start_as_current_span("agent run") as span:
        drive_example()
    events = exported(exporter)
    run = {
        "gen_ai.conversation.id": "run_93a7",
        "gen_ai.agent.id": "support_agent",
        "gen_ai.tool.name": "issue_refund",
        "gen_ai.tool.type": "function",
        "agent_loop.attempts": 0,
        "agent_loop.tool.idempotent": False,
    }
    approval = {"agent_loop.policy_reason": "payment", "agent_loop.approval.expires_at": 900_000}
    assert events == [
        (
            "loopfsm.transition",
            {
                "loopfsm.machine": "agent_loop",
                "loopfsm.state.from": "planning",
                "loopfsm.state.to": "awaiting_tool",
                "loopfsm.feed": "tool_proposed",
                "loopfsm.branch": "proposed",
                **run,
                "agent_loop.deadline.remaining_ms": 3_600_000,
            },
        ),
        (
            "loopfsm.transition",
            {
                "loopfsm.machine": "agent_loop",
                "loopfsm.state.from": "awaiting_tool",
                "loopfsm.state.to": "awaiting_approval",
                "loopfsm.feed": "approval_required",
                "loopfsm.branch": "ask",
                **run,
                **approval,
                "agent_loop.deadline.remaining_ms": 3_599_500,
            },
        ),
        (
            "loopfsm.decision",
            {
                "loopfsm.machine": "agent_loop",
                "loopfsm.state.from": "awaiting_approval",
                "loopfsm.state.to": "awaiting_approval",
                "loopfsm.decision": "resume",
                "loopfsm.rule": "wait_for_approval",
                **run,
                **approval,
                "agent_loop.deadline.remaining_ms": 3_000_000,
            },
        ),
        (
            "loopfsm.transition",
            {
                "loopfsm.machine": "agent_loop",
                "loopfsm.state.from": "awaiting_approval",
                "loopfsm.state.to": "expired",
                "loopfsm.feed": "approval_decided",
                "loopfsm.branch": "approval_lapsed",
                **run,
                "agent_loop.expired.reason": "approval",
                "agent_loop.side_effects.pending": False,
                "agent_loop.deadline.remaining_ms": 2_400_000,
                "agent_loop.deadline.at_ms": 3_600_000,  # on the move into expired only
            },
        ),
        (
            "loopfsm.decision",
            {
                "loopfsm.machine": "agent_loop",
                "loopfsm.state.from": "expired",
                "loopfsm.state.to": "expired",
                "loopfsm.decision": "resume",
                "loopfsm.rule": "terminal_is_forever",
                **run,
                "agent_loop.expired.reason": "approval",
                "agent_loop.side_effects.pending": False,
                "agent_loop.deadline.remaining_ms": 2_400_000,
            },
        ),
    ]
    trace_ids = {r.log_record.trace_id for r in exporter.get_finished_logs()}
    assert trace_ids == {span.get_span_context().trace_id}  # correlated with the active span
    assert span_exporter.get_finished_spans()[0].events == ()  # nothing on the span: events are logs


def test_traces_carry_no_tool_content(logs):
    provider, exporter = logs
    with tracing.global_sink(OtelEventSink(provider)):
        drive_example()
    text = repr(exported(exporter))
    assert "A-1001" not in text and "4200" not in text and "sha256" not in text and "alice" not in text


def test_span_event_sink_adds_the_same_events_to_the_active_span(logs, spans):
    provider, exporter = logs
    tracer, span_exporter = spans
    with tracing.global_sink(OtelSpanEventSink()), tracing.global_sink(OtelEventSink(provider)):
        with tracer.start_as_current_span("agent run"):
            drive_example()
        drive_example()  # outside any span: dropped by the span sink, still logged
    (span,) = span_exporter.get_finished_spans()
    on_span = [(e.name, dict(e.attributes)) for e in span.events]
    assert on_span == exported(exporter)[:5] and len(exported(exporter)) == 10


def test_brain_run_events(logs):
    provider, exporter = logs
    m = LoopMachine()
    with tracing.attached(m, OtelEventSink(provider)):
        m.accept_input("fix the failing tests")
        step(m)
        m.model_response(reply_with_tools("shell"), 1000, TOOLS)
        step(m)
        m.tool_results(answers(m))
    events = exported(exporter)
    assert [name for name, _ in events] == [
        "loopfsm.transition",
        "loopfsm.decision",
        "loopfsm.transition",
        "loopfsm.transition",
        "loopfsm.decision",
        "loopfsm.transition",
        "loopfsm.transition",
    ]
    moves = [
        (a["loopfsm.state.from"], a.get("loopfsm.feed") or a["loopfsm.decision"], a["loopfsm.state.to"])
        for _, a in events
    ]
    assert moves == [
        ("Start", "accept_input", "Start"),
        ("Start", "next_step", "Start"),
        ("Start", "begin", "AwaitingModel"),
        ("AwaitingModel", "model_response", "AwaitingTools"),
        ("AwaitingTools", "next_step", "AwaitingTools"),
        ("AwaitingTools", "begin", "AwaitingTools"),
        ("AwaitingTools", "tool_results", "Start"),
    ]
    assert all(a["loopfsm.machine"] == "engine_brain" and a["engine_brain.cancelled"] is False for _, a in events)
    assert [(a["engine_brain.turns_taken"], a["engine_brain.context_tokens"]) for _, a in events] == (
        [(0, 0)] * 3 + [(1, 1000)] * 4
    )
    assert [a.get("loopfsm.branch") or a["loopfsm.rule"] for _, a in events] == [
        "accept_input/*[0]",
        "call_model",
        "begin/Start[0]",
        "model_response/AwaitingModel[1]",
        "call_tools",
        "begin/AwaitingTools[0]",
        "tool_results/AwaitingTools[0]",
    ]
    assert events[1][1]["loopfsm.rule"] and "loopfsm.branch" not in events[1][1]
    assert "fix the failing tests" not in repr(events)


def test_without_an_sdk_the_sink_is_silent():
    m = LoopMachine()
    with tracing.attached(m, OtelEventSink()), tracing.attached(m, OtelSpanEventSink()):
        m.accept_input("hello")
    assert m.state == "Start"
