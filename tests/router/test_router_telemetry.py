"""``router serve`` exports its spans where the ``OTEL_*`` variables say (loopfsm.router.telemetry): read and
checked at start, sent over real OTLP/HTTP to a collector, flushed when the router stops."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from loopfsm.core.errors import ConfigError
from loopfsm.router.telemetry import TracingSetup

from tests.support.router_support import START_S, free_port, stop, wait_until_up


@pytest.mark.parametrize(
    ("env", "exporter", "endpoint"),
    [
        ({}, None, None),  # nobody configured it: nothing is sent anywhere
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "otlp", "http://collector:4318"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, "otlp", "http://c:4318/v1/traces"),
        ({"OTEL_TRACES_EXPORTER": "console"}, "console", None),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, None, None),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"}, None, None),
    ],
)
def test_the_variables_choose_the_exporter(env, exporter, endpoint):
    setup = TracingSetup.from_environment(env)
    assert (setup.exporter if setup else None, setup.endpoint if setup else None) == (exporter, endpoint)


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "router serve knows otlp, console, none"),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, "exports to one place"),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTLP over http/protobuf"),
    ],
)
def test_a_value_it_cannot_honour_stops_the_start_in_one_line(env, said):
    with pytest.raises(ConfigError, match=said):
        TracingSetup.from_environment(env)


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver: keeps each request's decoded spans."""

    received: list = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server name
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportMetricsServiceRequest() if self.path == "/v1/metrics" else ExportTraceServiceRequest()
        request.ParseFromString(body)
        type(self).received.append((self.path, request))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.mark.slow  # a router process and a collector; the variables' reading is held quickly above
def test_router_serve_sends_one_trace_per_turn_to_the_collector_the_variables_name(tmp_path):
    import httpx

    _Collector.received = []
    collector = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    port = free_port()
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(tmp_path),
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.server_address[1]}",
    }
    log = tmp_path / "router.log"
    cmd = [sys.executable, "-m", "loopfsm", "router", "serve", "--store", f"sqlite:///{tmp_path / 'runs.db'}"]
    with open(log, "ab") as out:
        proc = subprocess.Popen([*cmd, "--port", str(port)], stdout=out, stderr=out, env=env)
    try:
        wait_until_up(f"http://127.0.0.1:{port}", proc, log.read_text)
        body = {"type": "execute", "request_id": "e1", "data": {"prompt": "hello there"}}
        reply = httpx.post(f"http://127.0.0.1:{port}/v1/sessions/s1/execute", content=json.dumps(body), timeout=30)
        assert reply.status_code == 200 and reply.json()["status"] == "awaiting_tool"  # the demo script asks a tool
        proc.terminate()  # the spans still buffered go out as it stops
        assert proc.wait(timeout=START_S) in (0, -15)
    finally:
        stop(proc)
        collector.shutdown()
    said = log.read_text()
    where = f"http://127.0.0.1:{collector.server_address[1]}"
    assert f"telemetry: spans by OTLP/HTTP to {where}; metrics by OTLP/HTTP to {where}" in said
    spans, services, counted = [], set(), {}
    for path, request in _Collector.received:
        assert path in ("/v1/traces", "/v1/metrics")
        for rm in getattr(request, "resource_metrics", ()):
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    for point in metric.sum.data_points:
                        labels = tuple(sorted((a.key, a.value.string_value) for a in point.attributes))
                        counted[(metric.name, labels)] = point.as_int
        for rs in getattr(request, "resource_spans", ()):
            services |= {a.value.string_value for a in rs.resource.attributes if a.key == "service.name"}
            spans += [s for ss in rs.scope_spans for s in ss.spans]
    assert services == {"loopfsm-router"}
    by_name = {s.name: s for s in spans}
    turn, chat = by_name["invoke_agent router"], next(s for s in spans if s.name.startswith("chat"))
    assert chat.parent_span_id == turn.span_id and chat.trace_id == turn.trace_id
    attributes = {a.key: a.value.string_value for a in turn.attributes}
    assert attributes["gen_ai.provider.name"] == "scripted" and attributes["gen_ai.conversation.id"] == "s1"
    assert "hello there" not in str(_Collector.received)
    # the metrics too, sent as the router stopped: one execute answered awaiting its tool, one model call
    assert counted[("loopfsm.router.requests", (("status", "awaiting_tool"), ("type", "execute")))] == 1
    assert counted[("loopfsm.router.model_calls", (("outcome", "success"), ("route", "primary")))] == 1


def test_the_command_docs_router_md_shows_turns_tracing_on_where_it_says():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs/router.md").read_text()
    line = next(x for x in page.splitlines() if x.startswith("$ OTEL_"))
    words = line[2:].split()
    env = dict(w.split("=", 1) for w in words if "=" in w and w[0].isupper())
    assert words[len(env) :] == ["loopfsm", "router", "serve"]
    setup = TracingSetup.from_environment(env)
    assert setup is not None and setup.exporter == "otlp" and setup.endpoint == "http://collector:4318"
    assert setup.service_named and setup.metrics_exporter == "otlp"
    where = "http://collector:4318"
    assert setup.described() == f"telemetry: spans by OTLP/HTTP to {where}; metrics by OTLP/HTTP to {where}"
