"""What an operator graphs and pages on: the router's metrics as Prometheus text, and liveness and readiness
(loopfsm.router.service.metrics, loopfsm.router.http)."""

from __future__ import annotations

import json
import re

from starlette.testclient import TestClient

from loopfsm.router import Router
from loopfsm.router.http import create_app
from loopfsm.router.providers.scripted import ScriptedProvider

SCRIPT = [
    {"text": "looking", "tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "ls"}}]},
    {"text": "done"},
]
#: One sample line of the text format: a name, labels, a number.
SAMPLE = re.compile(r'^[a-z_]+(\{[a-z_]+="[^"\\\n]*"(,[a-z_]+="[^"\\\n]*")*\})? -?[0-9.e+-]+$')


def _post(http, path: str, body: dict) -> dict:
    reply = http.post(path, content=json.dumps(body))
    assert reply.status_code == 200, reply.text
    return reply.json()


def _samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.match(r"^# (HELP|TYPE) loopfsm_router_[a-z_]+ .+$", line), line
            continue
        assert SAMPLE.match(line), line
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


def test_metrics_count_requests_errors_calls_and_results_and_time_each_request(tmp_path):
    router = Router(f"sqlite:///{tmp_path / 'runs.db'}", create=True, provider=ScriptedProvider(SCRIPT))
    http = TestClient(create_app(router, metrics=True))
    execute = {"type": "execute", "request_id": "e1", "data": {"prompt": "go", "permissions": {"shell": "allow"}}}
    (call,) = _post(http, "/v1/sessions/s1/execute", execute)["data"]["tool_requests"]
    results = [{"call_id": call["call_id"], "content": "a.txt", "is_error": False}]
    done = _post(
        http, "/v1/sessions/s1/continue", {"type": "tool_results", "request_id": "r1", "data": {"results": results}}
    )
    assert done["status"] == "completed"
    wrong = _post(
        http, "/v1/sessions/s1/continue", {"type": "tool_results", "request_id": "r2", "data": {"results": []}}
    )
    assert wrong["status"] == "error"
    reply = http.get("/metrics")
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/plain; version=0.0.4")
    got = _samples(reply.text)
    assert got['loopfsm_router_requests_total{type="execute",status="awaiting_tool"}'] == 1
    assert got['loopfsm_router_requests_total{type="tool_results",status="completed"}'] == 1
    assert got['loopfsm_router_requests_total{type="tool_results",status="error"}'] == 1
    assert got[f'loopfsm_router_errors_total{{code="{wrong["data"]["code"]}"}}'] == 1
    assert got['loopfsm_router_model_calls_total{route="primary",outcome="success"}'] == 2
    assert got['loopfsm_router_tool_results_total{outcome="ok"}'] == 1
    assert got['loopfsm_router_request_duration_seconds_count{type="tool_results"}'] == 2
    assert got['loopfsm_router_request_duration_seconds_bucket{type="tool_results",le="+Inf"}'] == 2
    assert got['loopfsm_router_request_duration_seconds_sum{type="execute"}'] > 0
    assert got['loopfsm_router_fallback_breaker_state{state="Primary"}'] == 1
    assert got['loopfsm_router_fallback_breaker_state{state="Fallback"}'] == 0
    # a label never takes what a client sent: an unknown request type is counted as invalid
    _post(http, "/v1/sessions/s1/continue", {"type": "x" * 10_000, "request_id": "r3", "data": {}})
    assert 'type="invalid"' in http.get("/metrics").text and "xxxx" not in http.get("/metrics").text
    router.close()


def test_metrics_are_served_only_when_asked_for(tmp_path):
    router = Router(f"sqlite:///{tmp_path / 'runs.db'}", create=True)
    assert TestClient(create_app(router)).get("/metrics").status_code == 404
    router.close()


def test_readiness_says_whether_the_store_answers_and_liveness_does_not_ask_it(tmp_path):
    ready = Router(f"sqlite:///{tmp_path / 'runs.db'}", create=True)
    reply = TestClient(create_app(ready)).get("/readyz")
    assert reply.status_code == 200 and reply.json() == {"ready": True, "holder": ready.holder, "store": "ok"}
    ready.close()
    gone = Router("postgresql://postgres@127.0.0.1:1/test")  # nothing listens there
    http = TestClient(create_app(gone))
    reply = http.get("/readyz")
    assert reply.status_code == 503
    assert reply.json() == {"ready": False, "holder": gone.holder, "store": "unreachable (StoreError)"}
    assert http.get("/healthz").status_code == 200  # the process serves: a restart would not help
    gone.close()


def test_the_names_docs_router_md_lists_are_the_ones_served(tmp_path):
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs/router.md").read_text()
    block = page.split("### Metrics, liveness and readiness")[1].split("```\n")[1].split("```")[0]
    listed = {line.split("{")[0]: line.split("{")[1].split("}")[0].split(",") for line in block.splitlines()}
    router = Router(f"sqlite:///{tmp_path / 'runs.db'}", create=True, provider=ScriptedProvider(SCRIPT))
    http = TestClient(create_app(router, metrics=True))
    execute = {"type": "execute", "request_id": "e1", "data": {"prompt": "go", "permissions": {"shell": "allow"}}}
    (call,) = _post(http, "/v1/sessions/s1/execute", execute)["data"]["tool_requests"]
    results = [{"call_id": call["call_id"], "content": "", "is_error": True}]
    _post(http, "/v1/sessions/s1/continue", {"type": "tool_results", "request_id": "r1", "data": {"results": results}})
    wrong = {"type": "tool_results", "request_id": "r2", "data": {"results": []}}
    assert _post(http, "/v1/sessions/s1/continue", wrong)["status"] == "error"
    families = {line.split()[2]: line.split()[3] for line in http.get("/metrics").text.splitlines() if "# TYPE" in line}
    served: dict[str, set[str]] = {}
    for line in http.get("/metrics").text.splitlines():
        if not line.startswith("#"):
            name, labels = line.split("{")[0], re.findall(r'([a-z_]+)="', line)
            base = re.sub(r"_(bucket|sum|count)$", "", name) if families.get(name) is None else name
            served.setdefault(base, set()).update(label for label in labels if label != "le")
    assert {name: set(labels) for name, labels in listed.items()} == served
    router.close()
