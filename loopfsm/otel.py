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
"""

from __future__ import annotations

from typing import Any

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
