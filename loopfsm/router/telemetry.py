"""``router serve``'s tracer and meter, configured by the OpenTelemetry ``OTEL_*`` environment variables.

A router run by the command line has no code of its user's to hand it a
tracer, so it reads the variables every OpenTelemetry SDK reads:

- ``OTEL_TRACES_EXPORTER``: ``otlp`` (OTLP over HTTP/protobuf), ``console``
  (spans as JSON on stdout) or ``none``.  Unset, tracing is on (``otlp``) only
  when an OTLP endpoint is named (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``): a router nobody configured sends
  nothing anywhere.
- ``OTEL_METRICS_EXPORTER``: the same choices for the router's metrics
  (:mod:`loopfsm.router.service.metrics`), on (``otlp``) when
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``
  names an endpoint; exported every ``OTEL_METRIC_EXPORT_INTERVAL`` ms (60 s).
- ``OTEL_SDK_DISABLED=true`` turns it off whatever else is set.
- ``OTEL_EXPORTER_OTLP_PROTOCOL``/``..._TRACES_PROTOCOL``: ``http/protobuf``
  only (the gRPC exporter is another package); the endpoint, headers,
  timeout and compression variables are the exporter's own.
- ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` name the service;
  ``loopfsm-router`` when neither does.

:meth:`TracingSetup.from_environment` only reads and checks (a wrong value is
a :class:`~loopfsm.core.errors.ConfigError` at start); :meth:`TracingSetup.start`
builds the providers and their export threads, in each process that serves
(after a worker's fork: a thread does not cross one), and :meth:`Tracing.shutdown`
sends what is still buffered when the process stops.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loopfsm.core.errors import ConfigError

EXPORTERS = ("otlp", "console", "none")
DEFAULT_SERVICE = "loopfsm-router"


@dataclass(frozen=True)
class TracingSetup:
    """What the environment asks for, checked, not started: where spans go and where metrics go (``otlp`` or
    ``console`` each, or None)."""

    exporter: str | None  # spans
    endpoint: str | None  # otlp spans: the endpoint variable's value (None: the exporter's default)
    service_named: bool  # OTEL_SERVICE_NAME or a service.name in OTEL_RESOURCE_ATTRIBUTES
    metrics_exporter: str | None = None
    metrics_endpoint: str | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> TracingSetup | None:
        """The setup the variables describe, or None for neither spans nor metrics; :class:`ConfigError` for a
        value it cannot honour (an unknown exporter, the gRPC protocol, the packages missing)."""
        env = os.environ if environ is None else environ
        if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            return None
        spans, span_endpoint = _signal(env, "TRACES")
        metrics, metric_endpoint = _signal(env, "METRICS")
        if spans is None and metrics is None:
            return None
        attributes = env.get("OTEL_RESOURCE_ATTRIBUTES", "")
        named = bool(env.get("OTEL_SERVICE_NAME", "").strip()) or "service.name=" in attributes
        return cls(spans, span_endpoint, named, metrics, metric_endpoint)

    def described(self) -> str:
        """One line for the start message: where spans and metrics go."""
        parts = []
        for what, exporter, endpoint, variable in (
            ("spans", self.exporter, self.endpoint, "OTEL_TRACES_EXPORTER"),
            ("metrics", self.metrics_exporter, self.metrics_endpoint, "OTEL_METRICS_EXPORTER"),
        ):
            if exporter == "console":
                parts.append(f"{what} to stdout ({variable}=console)")
            elif exporter == "otlp":
                parts.append(f"{what} by OTLP/HTTP to {endpoint or 'the exporter default (http://localhost:4318)'}")
        return "telemetry: " + "; ".join(parts)

    def start(self) -> Tracing:
        """The providers and their export threads, in this process."""
        from opentelemetry.sdk.resources import Resource

        resource = Resource.create({} if self.service_named else {"service.name": DEFAULT_SERVICE})
        tracer = provider = meter = meter_provider = None
        if self.exporter is not None:
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

            exporter: SpanExporter
            if self.exporter == "otlp":
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

                exporter = OTLPSpanExporter()  # reads the endpoint, headers, timeout and compression variables
            else:
                exporter = ConsoleSpanExporter()
            provider = TracerProvider(resource=resource)
            provider.add_span_processor(BatchSpanProcessor(exporter))
            tracer = provider.get_tracer("loopfsm.router")
        if self.metrics_exporter is not None:
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import (
                ConsoleMetricExporter,
                MetricExporter,
                PeriodicExportingMetricReader,
            )

            metric_exporter: MetricExporter
            if self.metrics_exporter == "otlp":
                from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

                metric_exporter = OTLPMetricExporter()
            else:
                metric_exporter = ConsoleMetricExporter()
            meter_provider = MeterProvider(
                resource=resource, metric_readers=[PeriodicExportingMetricReader(metric_exporter)]
            )
            meter = meter_provider.get_meter("loopfsm.router")
        return Tracing(provider, tracer, meter_provider, meter)


def _signal(env: Mapping[str, str], kind: str) -> tuple[str | None, str | None]:
    """One signal's exporter (``TRACES`` or ``METRICS``) and OTLP endpoint, checked: (None, None) when off."""
    endpoint = next(
        (
            env[v]
            for v in (f"OTEL_EXPORTER_OTLP_{kind}_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
            if env.get(v, "").strip()
        ),
        None,
    )
    variable = f"OTEL_{kind}_EXPORTER"
    chosen = env.get(variable, "").strip().lower()
    exporter = chosen or ("otlp" if endpoint is not None else "none")
    if "," in exporter:
        raise ConfigError(f"{variable}={chosen!r}: router serve exports to one place; name one")
    if exporter not in EXPORTERS:
        raise ConfigError(f"{variable}={chosen!r}: router serve knows {', '.join(EXPORTERS)}")
    if exporter == "none":
        return None, None
    protocols = (f"OTEL_EXPORTER_OTLP_{kind}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
    protocol = next((env[v].strip() for v in protocols if env.get(v, "").strip()), "http/protobuf")
    if exporter == "otlp" and protocol != "http/protobuf":
        raise ConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: router serve exports OTLP over http/protobuf "
            "(point it at the collector's HTTP port, 4318 by default)"
        )
    _require(exporter, variable)
    return exporter, endpoint if exporter == "otlp" else None


@dataclass(frozen=True)
class Tracing:
    """The started providers (None where that signal is off); :meth:`shutdown` exports what is buffered and stops
    their threads."""

    provider: Any
    tracer: Any
    meter_provider: Any = None
    meter: Any = None

    def shutdown(self) -> None:
        for p in (self.provider, self.meter_provider):
            if p is not None:
                p.shutdown()


def _require(exporter: str, variable: str) -> None:
    try:
        import opentelemetry.sdk.metrics  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401

        if exporter == "otlp":
            import opentelemetry.exporter.otlp.proto.http  # noqa: F401
    except ImportError:
        raise ConfigError(
            f"{variable}={exporter}: the OpenTelemetry SDK and OTLP exporter are not installed: "
            "pip install 'loopfsm[router-otel]'"
        ) from None


__all__ = ["DEFAULT_SERVICE", "Tracing", "TracingSetup"]
