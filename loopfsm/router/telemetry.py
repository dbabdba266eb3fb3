"""``router serve``'s tracer, configured by the OpenTelemetry ``OTEL_*`` environment variables.

A router run by the command line has no code of its user's to hand it a
tracer, so it reads the variables every OpenTelemetry SDK reads:

- ``OTEL_TRACES_EXPORTER``: ``otlp`` (OTLP over HTTP/protobuf), ``console``
  (spans as JSON on stdout) or ``none``.  Unset, tracing is on (``otlp``) only
  when an OTLP endpoint is named (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``): a router nobody configured sends
  nothing anywhere.
- ``OTEL_SDK_DISABLED=true`` turns it off whatever else is set.
- ``OTEL_EXPORTER_OTLP_PROTOCOL``/``..._TRACES_PROTOCOL``: ``http/protobuf``
  only (the gRPC exporter is another package); the endpoint, headers,
  timeout and compression variables are the exporter's own.
- ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` name the service;
  ``loopfsm-router`` when neither does.

:meth:`TracingSetup.from_environment` only reads and checks (a wrong value is
a :class:`~loopfsm.core.errors.ConfigError` at start); :meth:`TracingSetup.start`
builds the provider and its export thread, in each process that serves (after
a worker's fork: a thread does not cross one), and :meth:`Tracing.shutdown`
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
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


@dataclass(frozen=True)
class TracingSetup:
    """What the environment asks for: an exporter (``otlp`` or ``console``) and where, checked, not started."""

    exporter: str
    endpoint: str | None  # otlp: the endpoint variable's value (None: the exporter's default)
    service_named: bool  # OTEL_SERVICE_NAME or a service.name in OTEL_RESOURCE_ATTRIBUTES

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> TracingSetup | None:
        """The setup the variables describe, or None for no tracing; :class:`ConfigError` for a value it cannot
        honour (an unknown exporter, the gRPC protocol, the packages missing)."""
        env = os.environ if environ is None else environ
        if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            return None
        endpoint = next((env[v] for v in _ENDPOINTS if env.get(v, "").strip()), None)
        chosen = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
        exporter = chosen or ("otlp" if endpoint is not None else "none")
        if "," in exporter:
            raise ConfigError(f"OTEL_TRACES_EXPORTER={chosen!r}: router serve exports to one place; name one")
        if exporter not in EXPORTERS:
            raise ConfigError(f"OTEL_TRACES_EXPORTER={chosen!r}: router serve knows {', '.join(EXPORTERS)}")
        if exporter == "none":
            return None
        protocol = next((env[v].strip() for v in _PROTOCOLS if env.get(v, "").strip()), "http/protobuf")
        if exporter == "otlp" and protocol != "http/protobuf":
            raise ConfigError(
                f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: router serve exports OTLP over http/protobuf "
                "(point it at the collector's HTTP port, 4318 by default)"
            )
        _require(exporter)
        attributes = env.get("OTEL_RESOURCE_ATTRIBUTES", "")
        named = bool(env.get("OTEL_SERVICE_NAME", "").strip()) or "service.name=" in attributes
        return cls(exporter, endpoint if exporter == "otlp" else None, named)

    def described(self) -> str:
        """One line for the start message: where spans go."""
        if self.exporter == "console":
            return "tracing: spans to stdout (OTEL_TRACES_EXPORTER=console)"
        return f"tracing: OTLP/HTTP to {self.endpoint or 'the exporter default (http://localhost:4318)'}"

    def start(self) -> Tracing:
        """The provider and its batch export thread, in this process."""
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

        resource = Resource.create({} if self.service_named else {"service.name": DEFAULT_SERVICE})
        exporter: SpanExporter
        if self.exporter == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()  # reads the endpoint, headers, timeout and compression variables
        else:
            exporter = ConsoleSpanExporter()
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(exporter))
        return Tracing(provider, provider.get_tracer("loopfsm.router"))


@dataclass(frozen=True)
class Tracing:
    """A started provider and its tracer; :meth:`shutdown` exports what is buffered and stops its thread."""

    provider: Any
    tracer: Any

    def shutdown(self) -> None:
        self.provider.shutdown()


def _require(exporter: str) -> None:
    try:
        import opentelemetry.sdk.trace  # noqa: F401

        if exporter == "otlp":
            import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
    except ImportError:
        raise ConfigError(
            f"OTEL_TRACES_EXPORTER={exporter}: the OpenTelemetry SDK and OTLP exporter are not installed: "
            "pip install 'loopfsm[router-otel]'"
        ) from None


__all__ = ["DEFAULT_SERVICE", "Tracing", "TracingSetup"]
