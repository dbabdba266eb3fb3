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


# -- a run as GenAI spans -------------------------------------------------------------------------


def _retried_run(tracer):
    from loopfsm.core.otel import OtelRunSpans
    from loopfsm.machines.agent_loop import AgentLoop, arguments_hash

    m = AgentLoop.new_run("run_9", "support_agent", 100_000)
    sink = OtelRunSpans.attach(m, tracer)
    h = arguments_hash({"q": "refund policy"})
    m.tool_proposed("search_docs", h, True, 0, model="claude-sonnet-4", call_id="toolu_7")
    m.dispatch(1, expected_latency_ms=300)
    m.tool_failed("timeout", True, 2)
    m.dispatch(3)
    m.tool_succeeded(4, status="ok", result_size=10, validation="valid")
    m.result_accepted(5, accepted_facts=1, rejected_fields=0)
    m.tool_proposed("send_email", h, False, 6, call_id="toolu_8")
    m.dispatch(7)
    m.tool_failed("http_400", False, 8)
    m.resume(9)  # after the run's span ended: not exported
    tracing.detach(m, sink)
    return m


def test_a_run_is_an_invoke_agent_span_with_an_execute_tool_span_per_executing_interval(spans):
    tracer, exporter = spans
    _retried_run(tracer)
    finished = exporter.get_finished_spans()
    assert [s.name for s in finished] == [
        "execute_tool search_docs",
        "execute_tool search_docs",
        "execute_tool send_email",
        "invoke_agent agent_loop",
    ]
    first, retry, email, run = finished
    assert dict(run.attributes) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "agent_loop",
        "gen_ai.conversation.id": "run_9",
        "gen_ai.agent.id": "support_agent",
        "error.type": "http_400",
    }
    assert dict(first.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search_docs",
        "gen_ai.tool.call.id": "toolu_7",
        "gen_ai.tool.type": "function",
        "gen_ai.request.model": "claude-sonnet-4",
        "error.type": "timeout",
    }
    assert first.status.status_code.name == "ERROR" and retry.status.status_code.name == "UNSET"
    assert email.attributes["error.type"] == "http_400" and email.status.status_code.name == "ERROR"
    for tool in (first, retry, email):
        assert tool.parent.span_id == run.context.span_id and tool.context.trace_id == run.context.trace_id
    # each tool span holds the records from dispatch to the result, as events
    moves = [(e.attributes["loopfsm.state.from"], e.attributes["loopfsm.state.to"]) for e in first.events]
    assert moves == [("awaiting_tool", "executing_tool"), ("executing_tool", "recovering")]
    assert [e.attributes["loopfsm.feed"] for e in retry.events] == ["dispatch", "tool_succeeded"]
    # the run's span holds every record up to the terminal one, each once
    assert [e.attributes["loopfsm.feed"] for e in run.events] == [
        "tool_proposed",
        "dispatch",
        "tool_failed",
        "dispatch",
        "tool_succeeded",
        "result_accepted",
        "tool_proposed",
        "dispatch",
        "tool_failed",
    ]
    assert {e.name for e in run.events} == {"loopfsm.transition"}
    assert dict(run.events[1].attributes) == dict(first.events[0].attributes)


def test_run_span_events_equal_the_log_events(spans, logs):
    tracer, exporter = spans
    provider, log_exporter = logs
    from loopfsm.core.otel import OtelRunSpans
    from loopfsm.machines.agent_loop import AgentLoop, arguments_hash

    m = AgentLoop.new_run("run_9", "support_agent", 100_000)
    with tracing.attached(m, OtelEventSink(provider)), tracing.attached(m, OtelRunSpans(tracer, m.compiled)):
        m.tool_proposed("search_docs", arguments_hash({}), True, 0)
        m.dispatch(1)
        m.tick(100_000)
    (tool, run) = exporter.get_finished_spans()
    assert [(e.name, dict(e.attributes)) for e in run.events] == exported(log_exporter)
    assert tool.events[-1].attributes["agent_loop.expired.reason"] == "deadline"
    assert tool.status.status_code.name == "UNSET" and "error.type" not in tool.attributes


def test_the_tracing_page_attaches_a_run_as_it_says(spans):
    from tests.support.docs_pages import page

    from loopfsm.machines.agent_loop import AgentLoop, arguments_hash

    tracer, exporter = spans
    block = page("docs/tracing.md").split("### A run as spans")[1].split("```python\n")[1].split("```")[0]
    run = AgentLoop.new_run("run_1", "owner", 1_000)
    scope = {"run": run, "tracer": tracer}
    exec(compile(block, "docs/tracing.md", "exec"), scope)
    run.tool_proposed("search_docs", arguments_hash({}), True, 0)
    run.dispatch(1)
    run.tool_succeeded(2)
    tracing.detach(run, scope["sink"])
    (tool,) = exporter.get_finished_spans()
    assert tool.name == "execute_tool search_docs" and scope["sink"].run_span.is_recording()
    assert scope["sink"].run_span.attributes["gen_ai.provider.name"] == "openai"


def test_close_ends_the_spans_of_a_run_the_sink_stops_watching(spans):
    from loopfsm.core.otel import UNFINISHED, OtelRunSpans
    from loopfsm.machines.agent_loop import AgentLoop, arguments_hash

    tracer, exporter = spans
    run = AgentLoop.new_run("run_1", "owner", 10_000)
    sink = OtelRunSpans.attach(run, tracer)
    run.tool_proposed("send_email", arguments_hash({}), False, 0)
    run.dispatch(1)
    tracing.detach(run, sink)  # the worker shuts down mid-call; the run goes on elsewhere
    assert exporter.get_finished_spans() == ()
    sink.close()
    sink.close()  # twice does nothing
    tool, whole = exporter.get_finished_spans()
    assert (tool.name, whole.name) == ("execute_tool send_email", "invoke_agent agent_loop")
    assert tool.attributes[UNFINISHED] is True and whole.attributes[UNFINISHED] is True
    assert whole.status.status_code.name == "UNSET" and "error.type" not in whole.attributes
    with tracing.attached(run, sink):  # a record after close goes nowhere
        run.tick(10_000)
    assert len(exporter.get_finished_spans()) == 2


def test_close_after_the_run_ended_changes_nothing(spans):
    from loopfsm.core.otel import UNFINISHED, OtelRunSpans
    from loopfsm.machines.agent_loop import AgentLoop

    tracer, exporter = spans
    run = AgentLoop.new_run("run_1", "owner", 10)
    sink = OtelRunSpans.attach(run, tracer)
    run.tick(10)
    tracing.detach(run, sink)
    sink.close()
    (whole,) = exporter.get_finished_spans()
    assert UNFINISHED not in whole.attributes


def test_auditing_a_restored_finished_run_exports_no_second_run(spans):
    from loopfsm.core.otel import OtelRunSpans
    from loopfsm.machines.agent_loop import AgentLoop, arguments_hash

    tracer, exporter = spans
    run = AgentLoop.new_run("run_1", "owner", 10_000)
    run.tool_proposed("send_email", arguments_hash({}), False, 0)
    run.dispatch(1)
    run.tool_failed("http_500", False, 2)  # the run failed, and its spans were exported then
    restored = AgentLoop.restore(run.snapshot())
    with tracing.attached(restored, OtelRunSpans(tracer, restored.compiled)) as sink:
        assert restored.resume(3) == "audit"
        restored.tick(4)
    assert exporter.get_finished_spans() == () and sink.run_span is None


def test_a_model_call_span_is_named_after_the_model_or_the_operation_alone(spans):
    from loopfsm.core.otel import record_model_call

    tracer, exporter = spans
    record_model_call(tracer, {"provider": "anthropic", "model": "claude-sonnet-4", "outcome": "success"}, 1, 2)
    record_model_call(tracer, {"provider": "anthropic", "outcome": "timeout"}, 3, 4)  # the model was never named
    named, unnamed = exporter.get_finished_spans()
    assert (named.name, unnamed.name) == ("chat claude-sonnet-4", "chat")
    assert unnamed.attributes["error.type"] == "timeout" and "gen_ai.request.model" not in unnamed.attributes
