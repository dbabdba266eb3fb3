"""OpenTelemetry sinks for transition records (``pip install loopfsm[otel]``).

OpenTelemetry is retiring the Span Event API in favour of events emitted as
log records through the Logs API (``Logger.emit(event_name=...)``), correlated
with the active span through the context.  :class:`OtelEventSink` does that,
and is the one to use; :class:`OtelSpanEventSink` adds the same event to the
active span for backends that do not ingest logs yet.  Both emit the same
stable names:

=========================  ===============================================
event name                 ``loopfsm.transition`` (a feed), ``loopfsm.decision``
``loopfsm.machine``        the machine's name
``loopfsm.state.from``     the state before
``loopfsm.state.to``       the state after (equal for stays and decisions)
``loopfsm.feed``           the feed (feeds only)
``loopfsm.branch``         the branch taken (feeds; absent when none ran)
``loopfsm.decision``       the decision asked (decisions only)
``loopfsm.rule``           the rule that answered (decisions only)
=========================  ===============================================

plus every attribute the machine file's ``trace:`` table declares, verbatim.
Records carry only scalars from declared fields, so no prompt, message or tool
payload can reach an exporter through these sinks.

:class:`OtelRunSpans` makes spans of one run instead, after the GenAI
conventions: an ``invoke_agent`` span for the run and an ``execute_tool
{gen_ai.tool.name}`` span for each interval the run spends in a state tagged
``calls_tools``, with every record as an event on the run's span and on the
tool span it falls in.

The router's model calls are spans instead (:func:`record_model_call`): one
``CLIENT`` span ``chat {model}`` per call with the GenAI semantic
conventions' names (``gen_ai.provider.name``, ``gen_ai.request.model``,
``gen_ai.usage.input_tokens`` ...), built from the call's trace row, so they
too carry metadata only.
"""

from __future__ import annotations

from typing import Any

from . import tracing
from .tracing import DECISION, TransitionRecord

TRANSITION_EVENT = "loopfsm.transition"
DECISION_EVENT = "loopfsm.decision"
SCOPE = "loopfsm"


def _require() -> None:
    try:
        import opentelemetry  # noqa: F401
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError("the OpenTelemetry sinks need opentelemetry-api: pip install 'loopfsm[otel]'") from err


def event_name(record: TransitionRecord) -> str:
    return DECISION_EVENT if record.kind == DECISION else TRANSITION_EVENT


def event_attributes(record: TransitionRecord) -> dict[str, Any]:
    """The record as OpenTelemetry attributes with loopfsm's stable names."""
    attrs: dict[str, Any] = {
        "loopfsm.machine": record.machine,
        "loopfsm.state.from": record.from_state,
        "loopfsm.state.to": record.to_state,
    }
    if record.kind == DECISION:
        attrs["loopfsm.decision"] = record.feed
        if record.branch is not None:
            attrs["loopfsm.rule"] = record.branch
    else:
        attrs["loopfsm.feed"] = record.feed
        if record.branch is not None:
            attrs["loopfsm.branch"] = record.branch
    attrs.update(record.attributes)
    return attrs


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("loopfsm")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"


class OtelEventSink:
    """Emits each record as a log-based event (the Logs API's ``event_name``), in the current context.

    ``logger_provider`` defaults to the global one; events go nowhere until
    the application installs an SDK, and cost one ``enabled()`` check then.
    """

    def __init__(self, logger_provider: Any = None) -> None:
        _require()
        from opentelemetry import _logs

        provider = logger_provider if logger_provider is not None else _logs.get_logger_provider()
        self._logger = provider.get_logger(SCOPE, _version())

    def __call__(self, record: TransitionRecord) -> None:
        from opentelemetry import context

        name = event_name(record)
        if not self._logger.enabled(event_name=name):
            return
        self._logger.emit(event_name=name, attributes=event_attributes(record), context=context.get_current())


class OtelSpanEventSink:
    """Adds each record as an event on the active span (the Span Event API, being retired).

    For backends that read span events only; prefer :class:`OtelEventSink`.
    Records made outside a recording span are dropped, as the span API does.
    """

    def __init__(self) -> None:
        _require()

    def __call__(self, record: TransitionRecord) -> None:
        from opentelemetry import trace

        span = trace.get_current_span()
        if span.is_recording():
            span.add_event(event_name(record), event_attributes(record))


# -- a run as GenAI spans -------------------------------------------------------------------------
#: Record attributes copied onto the spans they describe (the GenAI conventions' names).
RUN_SPAN_ATTRIBUTES = ("gen_ai.conversation.id", "gen_ai.agent.id", "gen_ai.provider.name")
TOOL_SPAN_ATTRIBUTES = ("gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.tool.type", "gen_ai.request.model")
CALLS_TOOLS = "calls_tools"
#: Set (true) on spans :meth:`OtelRunSpans.close` ended before the run reached a terminal state.
UNFINISHED = "loopfsm.run.unfinished"


class OtelRunSpans:
    """Spans for one run: ``invoke_agent {name}`` from its first record to a terminal state, and
    ``execute_tool {gen_ai.tool.name}`` for each interval spent in a state tagged ``calls_tools``.

    Attach it to one instance (:meth:`attach`): it keeps which spans are open.  The
    run's span starts at the first record, in the current context, and ends when a
    record enters a terminal state; a tool span starts on the record that enters a
    ``calls_tools`` state and ends on the one that leaves it (a retry opens a new
    one).  Every record is an event on the run's span and, while one is open, on
    the tool span; records after the run's span ended (a terminal state ignoring
    late news, a ``resume`` audit) are not exported, nor is anything of a run that
    had ended before the sink saw it (a restored run audited).  A record carrying
    ``error.type`` that ends a span marks it as an error with that class (a tool
    span cut short by expiry is not: its last event says why).  The spans carry
    ``gen_ai.operation.name`` and the record's ``gen_ai.*`` names listed in :data:`RUN_SPAN_ATTRIBUTES` and
    :data:`TOOL_SPAN_ATTRIBUTES`, never content.  A run the sink stops watching
    before it ends needs :meth:`close`, or its open spans are never exported.
    """

    def __init__(
        self, tracer: Any, machine: Any, agent_name: str | None = None, *, provider_name: str | None = None
    ) -> None:
        """``provider_name`` is the run's ``gen_ai.provider.name`` (``openai``, ``anthropic``...), which the
        GenAI conventions require on the run's span; without it a record carrying that attribute gives it."""
        _require()
        self._tracer = tracer
        self._provider = provider_name
        spec = machine.spec
        self._tool_states = frozenset(s.name for s in spec.states.values() if CALLS_TOOLS in s.tags)
        self._terminal = frozenset(machine.terminal_states)
        self._agent = agent_name or machine.name
        self.run_span: Any = None
        self.tool_span: Any = None
        self.ended = False  # the run's span ended: later records (late news, audits) go nowhere

    @classmethod
    def attach(
        cls, instance: tracing.Traced, tracer: Any, agent_name: str | None = None, *, provider_name: str | None = None
    ) -> OtelRunSpans:
        """A sink for ``instance``'s run, attached to it (detach with ``tracing.detach``)."""
        sink = cls(tracer, instance.compiled, agent_name, provider_name=provider_name)
        tracing.attach(instance, sink)
        return sink

    def __call__(self, record: TransitionRecord) -> None:
        from opentelemetry import trace

        if self.ended:
            return
        if self.run_span is None and record.from_state in self._terminal:
            self.ended = True  # the run ended before this sink watched it: an audit is no second run
            return
        attrs = record.attributes
        name, event = event_name(record), event_attributes(record)
        if self.run_span is None:
            self.run_span = self._tracer.start_span(
                f"invoke_agent {self._agent}",
                kind=trace.SpanKind.INTERNAL,
                attributes={
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": self._agent,
                    **({"gen_ai.provider.name": self._provider} if self._provider is not None else {}),
                    **{k: attrs[k] for k in RUN_SPAN_ATTRIBUTES if k in attrs},
                },
            )
        entering = record.to_state in self._tool_states and record.from_state not in self._tool_states
        if entering and self.tool_span is None:
            self.tool_span = self._tracer.start_span(
                f"execute_tool {attrs.get('gen_ai.tool.name', '')}".rstrip(),
                context=trace.set_span_in_context(self.run_span),
                kind=trace.SpanKind.INTERNAL,
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    **{k: attrs[k] for k in TOOL_SPAN_ATTRIBUTES if k in attrs},
                },
            )
        self.run_span.add_event(name, event)
        if self.tool_span is not None:
            self.tool_span.add_event(name, event)
            if record.to_state not in self._tool_states:
                _end(self.tool_span, attrs)
                self.tool_span = None
        if record.to_state in self._terminal:
            _end(self.run_span, attrs)
            self.ended = True

    def close(self) -> None:
        """End the spans still open, for a run this sink stops watching before it ends.

        A driver that detaches the sink, shuts down or hands the run to another
        process calls it; otherwise an open span is never exported.  The spans
        end without an error status and carry ``loopfsm.run.unfinished`` (true),
        so a reader sees the run went on elsewhere or was abandoned; later records
        are not exported.  Closing twice, or after the run ended, does nothing.
        """
        if self.tool_span is not None:
            self.tool_span.set_attribute(UNFINISHED, True)
            self.tool_span.end()
            self.tool_span = None
        if self.run_span is not None and not self.ended:
            self.run_span.set_attribute(UNFINISHED, True)
            self.run_span.end()
        self.ended = True


def _end(span: Any, attrs: Any) -> None:
    from opentelemetry.trace import Status, StatusCode

    if "error.type" in attrs:
        span.set_attribute("error.type", attrs["error.type"])
        span.set_status(Status(StatusCode.ERROR))
    span.end()


# -- model calls as GenAI client spans ----------------------------------------------------------
#: A model call's trace row (see the router) -> OpenTelemetry GenAI semantic-convention attributes.
GENAI_ATTRIBUTES = {
    "provider": "gen_ai.provider.name",
    "model": "gen_ai.request.model",
    "response_model": "gen_ai.response.model",
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
}
#: Fields the conventions have no name for, under loopfsm's own.
LOOPFSM_ATTRIBUTES = {
    "route": "loopfsm.model.route",
    "fallback": "loopfsm.model.fallback",
    "outcome": "loopfsm.model.outcome",
    "latency_ms": "loopfsm.model.latency_ms",
}


#: A tool call's trace row (the router's ``tool_call`` row metadata) -> the same names the machines trace.
TOOL_CALL_ATTRIBUTES = {
    "name": "gen_ai.tool.name",
    "call_id": "gen_ai.tool.call.id",
}


def tool_call_attributes(meta: dict[str, Any]) -> dict[str, Any]:
    """A tool call row's metadata under the names the agent loop and engine brain trace it with.

    ``gen_ai.operation.name`` is ``execute_tool``; a result the router marked as an
    error carries ``error.type`` ``tool_error`` (the row holds no finer class).
    """
    attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool"}
    for key, name in TOOL_CALL_ATTRIBUTES.items():
        if meta.get(key) is not None:
            attrs[name] = meta[key]
    if meta.get("is_error"):
        attrs["error.type"] = "tool_error"
    return attrs


def model_call_attributes(call: dict[str, Any]) -> dict[str, Any]:
    """A model call's metadata under the GenAI semantic conventions' names (``gen_ai.*``, ``error.type``).

    Only what the router's trace row holds: no prompt, message or tool payload.
    A failed call carries its outcome class as ``error.type``.
    """
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat"}
    for key, name in (*GENAI_ATTRIBUTES.items(), *LOOPFSM_ATTRIBUTES.items()):
        if call.get(key) is not None:
            attrs[name] = call[key]
    if call.get("stop_reason") is not None:
        attrs["gen_ai.response.finish_reasons"] = [call["stop_reason"]]
    if call.get("outcome") not in (None, "success"):
        attrs["error.type"] = call["outcome"]
    return attrs


def record_model_call(tracer: Any, call: dict[str, Any], start_ns: int, end_ns: int) -> None:
    """One finished model call as a CLIENT span named ``chat {model}`` (``chat`` when no model is named)."""
    _require()
    from opentelemetry.trace import SpanKind, Status, StatusCode

    span = tracer.start_span(
        f"chat {call.get('model') or ''}".rstrip(),
        kind=SpanKind.CLIENT,
        attributes=model_call_attributes(call),
        start_time=start_ns,
    )
    if call.get("outcome") not in (None, "success"):
        span.set_status(Status(StatusCode.ERROR))
    span.end(end_time=end_ns)
