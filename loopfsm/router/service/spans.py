"""One request, one span tree: what a router turn looks like in a tracing backend.

With a tracer (``Router(tracer=...)``, or ``router serve`` configured by the
``OTEL_*`` variables, :mod:`loopfsm.router.telemetry`), each request the
router serves is one ``invoke_agent router`` span, after the OpenTelemetry
GenAI conventions, and what happens within it are its children:

- ``chat {model}``, one per model call (:func:`loopfsm.core.otel.record_model_call`,
  made while the request's span is the current one);
- ``execute_tool {name}``, one per tool result a ``tool_results`` request
  brings, from when the run paused for its tools to when the result arrived
  (the client ran it in between);

and every move of the machines it drives meanwhile (the run's phase, its lock,
the engine brain, the breakers) is an event on the request's span, named and
shaped as :mod:`loopfsm.core.otel` names records.

A request carrying a W3C ``traceparent`` (and ``tracestate``) header continues
that trace: a client's turns, its tool runs and the router's spans then sit in
one trace.  Spans carry metadata only (ids, names, counts, outcome classes),
never a prompt, message, argument or result.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from loopfsm.core import tracing
from loopfsm.core.otel import event_attributes, event_name

#: ``gen_ai.agent.name`` of the router's spans.
AGENT_NAME = "router"

_serving = threading.local()  # .span: the span of the request this thread serves, if any


class _TurnEvents:
    """A global trace sink: each transition record of a machine the router drives while it serves a request
    (its phase, its lock, the engine brain, the breakers) as an event on that request's span.  Records made
    outside a request (a sweep, a test driving a machine) go nowhere."""

    wants_refusals = False

    def __call__(self, record: tracing.TransitionRecord) -> None:
        span = getattr(_serving, "span", None)
        if span is not None:
            span.add_event(event_name(record), event_attributes(record))


#: A global sink while any traced request is being served (only then do the process's machines pay for tracing).
TURN_EVENTS = _TurnEvents()
_installed = threading.Lock()
_serving_count = [0]


def _enter() -> None:
    with _installed:
        if _serving_count[0] == 0:
            tracing.add_global_sink(TURN_EVENTS)
        _serving_count[0] += 1


def _leave() -> None:
    with _installed:
        _serving_count[0] -= 1
        if _serving_count[0] == 0:
            tracing.remove_global_sink(TURN_EVENTS)


class TurnSpan:
    """The span of one request, open while it is served."""

    def __init__(self, span: Any, tracer: Any):
        self.span, self._tracer = span, tracer

    def answered(self, response: Mapping[str, Any]) -> None:
        """What the request was answered: its status, and ``error.type`` (the error code) for an error."""
        status = response.get("status")
        if isinstance(status, str):
            self.span.set_attribute("loopfsm.response.status", status)
        if status == "error":
            from opentelemetry.trace import Status, StatusCode

            code = (response.get("data") or {}).get("code")
            self.span.set_attribute("error.type", code if isinstance(code, str) else "error")
            self.span.set_status(Status(StatusCode.ERROR))

    def tool_ran(self, name: str, call_id: str, since_ms: int | None, now_ms: int, is_error: bool) -> None:
        """A tool result arrived: an ``execute_tool {name}`` span from the pause (when known) to now."""
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        start_ms = since_ms if since_ms is not None and since_ms <= now_ms else now_ms
        name, call_id = str(tracing.fit_attribute("gen_ai.tool.name", name)), str(tracing.fit_attribute("id", call_id))
        child = self._tracer.start_span(
            f"execute_tool {name}",
            context=trace.set_span_in_context(self.span),
            kind=trace.SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": call_id,
                "gen_ai.agent.name": AGENT_NAME,
            },
            start_time=start_ms * 1_000_000,
        )
        if is_error:
            child.set_attribute("error.type", "tool_error")
            child.set_status(Status(StatusCode.ERROR))
        child.end(end_time=now_ms * 1_000_000)


@contextlib.contextmanager
def turn(
    tracer: Any,
    session_id: str | None,
    request_type: str,
    provider: str,
    carrier: Mapping[str, str] | None,
) -> Iterator[TurnSpan]:
    """The span of one request (current while the block runs), continuing ``carrier``'s trace when it names one."""
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    parent = TraceContextTextMapPropagator().extract(dict(carrier)) if carrier else None
    span = tracer.start_span(
        f"invoke_agent {AGENT_NAME}",
        context=parent,
        kind=trace.SpanKind.INTERNAL,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": AGENT_NAME,
            "gen_ai.provider.name": provider,
            "loopfsm.request.type": request_type,
        },
    )
    if session_id is not None:  # a well-formed one only: a client's garbage is no attribute
        span.set_attribute("gen_ai.conversation.id", session_id)
    out = TurnSpan(span, tracer)
    _enter()
    _serving.span = span
    try:
        with trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=True):
            yield out
    finally:
        _serving.span = None
        _leave()
