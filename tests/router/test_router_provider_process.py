"""``loopfsm router serve --provider anthropic --fallback-provider openai`` as a real process, with the real client.

The two APIs are a fake server on 127.0.0.1 speaking their streaming
protocols; the router finds it through the SDKs' own environment variables
(``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``) and takes its keys from the
environment, the only place keys come from.  No network beyond loopback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip("anthropic")
pytest.importorskip("openai")

from loopfsm.router.store import open_store  # noqa: E402
from loopfsm.router.streams.synthetic import Block, Reply, anthropic_events, openai_chunks  # noqa: E402

from tests.support.provider_streams import anthropic_body, openai_body  # noqa: E402
from tests.support.router_support import free_port, wait_until_up  # noqa: E402

pytestmark = pytest.mark.slow  # each test starts `loopfsm router serve` as a process

ANTHROPIC_KEY = "sk-ant-test-3b9e5d21-never-echoed"
OPENAI_KEY = "sk-oai-test-7c41aa90-never-echoed"


class FakeAPI:
    """Answers POSTs per path from a queue of ``(status, content type, body)``; keeps what was sent."""

    def __init__(self, answers: dict[str, list[tuple[int, str, bytes]]]):
        self.answers = answers
        self.seen: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server hook
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                api.seen.append((self.path, dict(self.headers), body))
                queue = api.answers.get(self.path) or [(500, "application/json", b'{"error": "unexpected"}')]
                status, ctype, content = queue.pop(0)
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def stream(body: bytes) -> tuple[int, str, bytes]:
    return 200, "text/event-stream", body


def test_serve_with_anthropic_primary_and_openai_fallback(tmp_path):
    from loopfsm.router.client import Client

    overloaded = (529, "application/json", b'{"type": "error", "error": {"type": "overloaded_error", "message": "o"}}')
    blocks = (Block("text", "Reading."), Block("tool", '{"path": "plan.txt"}', "toolu_1", "read_file"))
    tool_turn = Reply(blocks, "tool_use", {"input_tokens": 50, "output_tokens": 8}, model="claude-test-2026")
    final = Reply((Block("text", "The plan says ship it."),), "stop", {"prompt_tokens": 90, "completion_tokens": 7})
    api = FakeAPI(
        {
            "/v1/messages": [stream(anthropic_body(anthropic_events(tool_turn))), overloaded, overloaded, overloaded],
            "/v1/chat/completions": [stream(openai_body(openai_chunks(final)))],
        }
    )
    port = free_port()
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    log = tmp_path / "router.log"
    env = dict(
        os.environ,
        ANTHROPIC_API_KEY=ANTHROPIC_KEY,
        ANTHROPIC_BASE_URL=api.url,
        OPENAI_API_KEY=OPENAI_KEY,
        OPENAI_BASE_URL=api.url + "/v1",
    )
    args = [sys.executable, "-m", "loopfsm", "router", "serve", "--store", store, "--port", str(port),
            "--provider", "anthropic", "--model", "claude-test",
            "--fallback-provider", "openai", "--fallback-model", "gpt-test"]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=out, env=env)
    try:
        wait_until_up(f"http://127.0.0.1:{port}", proc, log.read_text)
        ws = tmp_path / "ws"
        ws.mkdir()
        (ws / "plan.txt").write_text("ship it\n")
        c = Client(f"http://127.0.0.1:{port}", "proc", workspace=str(ws), approver=lambda kind, info: "approved")
        resp = c.run("what does the plan say?")
        c.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        api.close()
    assert resp["status"] == "completed" and resp["data"]["message"] == "The plan says ship it."
    paths = [p for p, _, _ in api.seen]
    assert paths == ["/v1/messages"] * 4 + ["/v1/chat/completions"]  # no SDK retries: the breaker decides
    assert ANTHROPIC_KEY in json.dumps(api.seen[0][1]) and OPENAI_KEY in json.dumps(api.seen[4][1])
    assert "ship it" in json.dumps(api.seen[1][2]["messages"])  # the tool result went back to the model
    assert [b["model"] for _, _, b in api.seen] == ["claude-test"] * 4 + ["gpt-test"]
    with open_store(store) as s:
        calls = [r.meta for r in s.rows("proc", "trace") if r.meta["event"] in ("model.responded", "model.failed")]
        assert [(m["provider"], m["outcome"], m["fallback"]) for m in calls] == [
            ("anthropic", "success", False),
            *[("anthropic", "transient", False)] * 3,
            ("openai", "success", True),
        ]
        assert (calls[0]["input_tokens"], calls[-1]["input_tokens"], calls[-1]["output_tokens"]) == (50, 90, 7)
        assert all(m["latency_ms"] > 0 for m in calls)
        _, rows = s.backend.run("SELECT * FROM loopfsm_rows")
        dump = json.dumps([[str(v) for v in row] for row in rows])
    text = log.read_text()
    for key in (ANTHROPIC_KEY, OPENAI_KEY):
        assert key not in dump and key not in text
    assert "Traceback" not in text and "anthropic" in text and "openai" in text  # the banner names both models


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--provider", "anthropic"], {}, "--provider anthropic needs --model"),
        (["--provider", "anthropic", "--model", "m"], {"ANTHROPIC_API_KEY": ""}, "ANTHROPIC_API_KEY"),
        (["--provider", "openai", "--model", "m"], {"OPENAI_API_KEY": ""}, "OPENAI_API_KEY"),
        (["--fallback-provider", "openai", "--fallback-model", "g"], {"OPENAI_API_KEY": ""}, "OPENAI_API_KEY"),
        (
            ["--provider", "anthropic", "--model", "m", "--fallback-provider", "openai"],
            {"ANTHROPIC_API_KEY": "k"},
            "--fallback-provider openai needs --fallback-model",
        ),
    ],
)
def test_serve_refuses_a_provider_it_cannot_start(tmp_path, args, env, message):
    run = subprocess.run(
        [sys.executable, "-m", "loopfsm", "router", "serve", "--store", f"sqlite:///{tmp_path / 'r.db'}", *args],
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode != 0 and message in run.stderr and "Traceback" not in run.stderr
