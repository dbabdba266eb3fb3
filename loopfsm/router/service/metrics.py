"""What an operator graphs and alerts on: the router's counters, its turn latency and its breaker's state.

One registry per router process (:class:`RouterMetrics`), filled as requests
are served, read two ways:

- as Prometheus text at ``GET /metrics`` when ``router serve --metrics`` asks
  for it (:meth:`RouterMetrics.prometheus`);
- as OpenTelemetry metrics when a meter is given (``router serve`` makes one
  from the ``OTEL_*`` variables): observable counters and a gauge read this
  registry at each collection, and the latency histogram is recorded as it
  happens.

=============================================  =====================================================
Prometheus name                                what
=============================================  =====================================================
``loopfsm_router_requests_total``              requests answered, by ``type`` and ``status``
``loopfsm_router_errors_total``                ``error`` answers, by ``code`` (``busy``, ``invalid``...)
``loopfsm_router_model_calls_total``           model calls, by ``route`` and ``outcome``
``loopfsm_router_tool_results_total``          tool results received, by ``outcome``
``loopfsm_router_request_duration_seconds``    histogram of the time to answer, by ``type``
``loopfsm_router_fallback_breaker_state``      1 for the model fallback breaker's current state
=============================================  =====================================================

The OpenTelemetry names are the same with dots (``loopfsm.router.requests``,
``loopfsm.router.request.duration`` in seconds...).  Labels take values from
closed sets (request types, answer statuses, error codes, outcome classes,
states), so their number stays bounded whatever clients send.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from .. import protocol as P

#: The OpenTelemetry names of the metrics (the Prometheus ones with dots; the duration in seconds).
OTEL_NAMES = (
    "loopfsm.router.requests",
    "loopfsm.router.errors",
    "loopfsm.router.model_calls",
    "loopfsm.router.tool_results",
    "loopfsm.router.fallback_breaker.state",
    "loopfsm.router.request.duration",
)
#: Upper bounds (seconds) of the duration histogram's buckets.
DURATION_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
#: The request types a label may name; anything else a client sends is counted as ``invalid``.
_TYPES = frozenset(P.REQUEST_TYPES)


class RouterMetrics:
    """Counters and a histogram, thread-safe; ``breaker_state`` reads the fallback breaker's state when asked."""

    def __init__(self, breaker_state: Callable[[], str], breaker_states: tuple[str, ...]):
        self._lock = threading.Lock()
        self.requests: Counter[tuple[str, str]] = Counter()
        self.errors: Counter[str] = Counter()
        self.model_calls: Counter[tuple[str, str]] = Counter()
        self.tool_results: Counter[str] = Counter()
        self._buckets: dict[str, list[int]] = {}  # type -> count per bucket (and one past the last)
        self._sums: dict[str, float] = {}
        self.breaker_state, self.breaker_states = breaker_state, breaker_states
        self.duration_histogram: Any = None  # an OpenTelemetry histogram, when a meter is configured

    # -- filled while serving --------------------------------------------------------------------
    def answered(self, request: object, response: dict[str, Any], seconds: float) -> None:
        kind = request_label(request)
        status = str(response.get("status") or "unknown")
        code = (response.get("data") or {}).get("code") if status == "error" else None
        with self._lock:
            self.requests[(kind, status)] += 1
            if status == "error":
                self.errors[code if isinstance(code, str) else "unknown"] += 1
            counts = self._buckets.setdefault(kind, [0] * (len(DURATION_BUCKETS_S) + 1))
            counts[next((i for i, b in enumerate(DURATION_BUCKETS_S) if seconds <= b), len(DURATION_BUCKETS_S))] += 1
            self._sums[kind] = self._sums.get(kind, 0.0) + seconds
        if self.duration_histogram is not None:
            self.duration_histogram.record(seconds, {"type": kind, "status": status})

    def model_call(self, route: str, outcome: str) -> None:
        with self._lock:
            self.model_calls[(route, outcome)] += 1

    def tool_result(self, outcome: str) -> None:
        with self._lock:
            self.tool_results[outcome] += 1

    # -- read --------------------------------------------------------------------------------------
    def prometheus(self) -> str:
        """The Prometheus text exposition format (version 0.0.4)."""
        out: list[str] = []

        def family(name: str, kind: str, what: str) -> None:
            out.extend([f"# HELP {name} {what}", f"# TYPE {name} {kind}"])

        with self._lock:
            family("loopfsm_router_requests_total", "counter", "Requests answered, by type and status.")
            for (kind, status), n in sorted(self.requests.items()):
                out.append(f'loopfsm_router_requests_total{{type="{kind}",status="{status}"}} {n}')
            family("loopfsm_router_errors_total", "counter", "Error answers, by code.")
            for code, n in sorted(self.errors.items()):
                out.append(f'loopfsm_router_errors_total{{code="{_label(code)}"}} {n}')
            family("loopfsm_router_model_calls_total", "counter", "Model calls, by route and outcome.")
            for (route, outcome), n in sorted(self.model_calls.items()):
                out.append(f'loopfsm_router_model_calls_total{{route="{route}",outcome="{_label(outcome)}"}} {n}')
            family("loopfsm_router_tool_results_total", "counter", "Tool results received, by outcome.")
            for outcome, n in sorted(self.tool_results.items()):
                out.append(f'loopfsm_router_tool_results_total{{outcome="{outcome}"}} {n}')
            family("loopfsm_router_request_duration_seconds", "histogram", "Time to answer a request, by type.")
            for kind, counts in sorted(self._buckets.items()):
                running = 0
                for bound, n in zip((*DURATION_BUCKETS_S, float("inf")), counts, strict=True):
                    running += n
                    le = "+Inf" if bound == float("inf") else repr(bound)
                    out.append(f'loopfsm_router_request_duration_seconds_bucket{{type="{kind}",le="{le}"}} {running}')
                out.append(f'loopfsm_router_request_duration_seconds_sum{{type="{kind}"}} {self._sums[kind]!r}')
                out.append(f'loopfsm_router_request_duration_seconds_count{{type="{kind}"}} {running}')
        current = self.breaker_state()
        family("loopfsm_router_fallback_breaker_state", "gauge", "1 for the model fallback breaker's state.")
        for state in self.breaker_states:
            out.append(f'loopfsm_router_fallback_breaker_state{{state="{state}"}} {int(state == current)}')
        return "\n".join(out) + "\n"

    def observe_with(self, meter: Any) -> None:
        """Report through an OpenTelemetry ``meter``: observable counters and gauge over this registry, and the
        duration histogram recorded from now on."""
        from opentelemetry.metrics import Observation

        def counter(pick: Callable[[], list[tuple[int, dict[str, str]]]]) -> Callable[[Any], list[Observation]]:
            return lambda options: [Observation(n, attrs) for n, attrs in pick()]

        def snapshot(counts: Counter[Any], keys: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
            with self._lock:
                items = list(counts.items())
            return [(n, dict(zip(keys, k if isinstance(k, tuple) else (k,), strict=True))) for k, n in items]

        meter.create_observable_counter(
            "loopfsm.router.requests", [counter(lambda: snapshot(self.requests, ("type", "status")))], "{request}"
        )
        meter.create_observable_counter(
            "loopfsm.router.errors", [counter(lambda: snapshot(self.errors, ("code",)))], "{request}"
        )
        meter.create_observable_counter(
            "loopfsm.router.model_calls", [counter(lambda: snapshot(self.model_calls, ("route", "outcome")))], "{call}"
        )
        meter.create_observable_counter(
            "loopfsm.router.tool_results", [counter(lambda: snapshot(self.tool_results, ("outcome",)))], "{result}"
        )
        meter.create_observable_gauge(
            "loopfsm.router.fallback_breaker.state",
            [lambda options: [Observation(int(s == self.breaker_state()), {"state": s}) for s in self.breaker_states]],
        )
        self.duration_histogram = meter.create_histogram(
            "loopfsm.router.request.duration", unit="s", description="Time to answer a request."
        )


def request_label(request: object) -> str:
    """A request's type as a label (metrics, spans): one of the protocol's, or ``invalid`` for anything else a
    client sent, so no client can add a value."""
    kind = request.get("type") if isinstance(request, dict) else None
    return kind if isinstance(kind, str) and kind in _TYPES else "invalid"


def _label(value: str) -> str:
    """A label value as the text format writes it (backslash, quote and newline escaped)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


__all__ = ["DURATION_BUCKETS_S", "OTEL_NAMES", "RouterMetrics", "request_label"]
