"""Model providers: the scripted one, and the Anthropic / OpenAI adapters against the real SDKs over a mock transport.

No test touches the network: every HTTP exchange is answered by a MockTransport of
the HTTP library the SDK itself uses (httpx, or its successor httpx2 in newer SDK
releases), which also records the request bodies the SDKs actually sent.
"""

from __future__ import annotations

import json
from typing import Any


import pytest

from loopfsm.core.errors import LoopFsmError, ScriptError
from loopfsm.router.errors import ProviderError
from loopfsm.machines.messages import Message, ToolCall
from loopfsm.router.providers import FAILURE_CLASSES, ModelRequest, ToolSpec
from loopfsm.router.providers.scripted import ScriptedProvider

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

from tests.support.provider_streams import (  # noqa: E402
    Recorder,
    anthropic_body,
    anthropic_error as _a,
    anthropic_provider,
    httpx,
    openai_body,
    openai_error as _o,
    openai_provider,
    openai_reply,
    sse,
)
from loopfsm.router.streams.synthetic import Block, Reply, anthropic_events, openai_chunks  # noqa: E402


CONVERSATION = (
    Message("system", "be brief"),
    Message.user("list the folder"),
    Message.assistant("", [ToolCall("c1", "list_dir", {"path": "."}), ToolCall("c2", "stat", {"path": "a"})]),
    Message.tool_result("c1", "a.txt"),
    Message.tool_result("c2", "no such file", is_error=True),
)
REQUEST = ModelRequest(
    "m-1", CONVERSATION, (ToolSpec("list_dir", "lists", {"type": "object", "properties": {"path": {}}}),)
)


ANTHROPIC_REPLY = Reply(
    (Block("text", "Reading it."), Block("tool", '{"path": "a.txt"}', "t9", "read_file")),
    "tool_use",
    {"input_tokens": 120, "output_tokens": 30},
    model="m-1-20260101",
)


def test_anthropic_request_and_reply_translate_both_ways() -> None:
    rec = Recorder(sse(anthropic_body(anthropic_events(ANTHROPIC_REPLY))))
    reply = anthropic_provider(rec).complete(REQUEST)
    assert reply.model == "m-1-20260101"
    assert reply.message == Message.assistant("Reading it.", [ToolCall("t9", "read_file", {"path": "a.txt"})])
    assert (reply.stop_reason, reply.input_tokens, reply.output_tokens, reply.context_tokens) == (
        "tool_use",
        120,
        30,
        150,
    )
    sent = rec.bodies[0]
    assert sent["system"] == "be brief" and sent["model"] == "m-1" and sent["stream"] is True
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    results = sent["messages"][2]["content"]
    assert [b["tool_use_id"] for b in results] == ["c1", "c2"] and results[1]["is_error"] is True
    assert sent["messages"][1]["content"][0] == {
        "type": "tool_use",
        "id": "c1",
        "name": "list_dir",
        "input": {"path": "."},
    }
    assert sent["tools"][0]["name"] == "list_dir"


def test_openai_request_and_reply_translate_both_ways() -> None:
    rec = Recorder(openai_reply(calls=(("t9", "read_file", {"path": "a.txt"}),), input_tokens=100, output_tokens=7))
    reply = openai_provider(rec).complete(REQUEST)
    assert reply.message == Message.assistant("", [ToolCall("t9", "read_file", {"path": "a.txt"})])
    assert (reply.stop_reason, reply.context_tokens) == ("tool_use", 107)
    assert rec.bodies[0]["stream"] is True and rec.bodies[0]["stream_options"] == {"include_usage": True}
    sent = rec.bodies[0]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert json.loads(sent[2]["tool_calls"][0]["function"]["arguments"]) == {"path": "."}
    assert sent[3] == {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}


def test_openai_tool_arguments_that_are_not_an_object_fail_the_call() -> None:
    bad = Reply((Block("tool", '{"pa', "t", "x"),), "tool_calls", {"prompt_tokens": 1})
    with pytest.raises(ProviderError) as err:
        openai_provider(Recorder(sse(openai_body(openai_chunks(bad))))).complete(REQUEST)
    assert err.value.outcome == "transient" and "incomplete" in str(err.value)


@pytest.mark.parametrize(
    ("answer", "outcome", "retry"),
    [
        (_a(429, "rate_limit_error", "slow", **{"retry-after": "2"}), "rate_limited", 2000),
        (_a(401, "authentication_error", "key"), "auth", None),
        (_a(529, "overloaded_error", "busy"), "transient", None),
        (_a(500, "api_error", "oops"), "transient", None),
        (_a(400, "invalid_request_error", "prompt is too long: 300000 tokens"), "context_length", None),
        (_a(400, "invalid_request_error", "messages: bad"), "invalid_request", None),
        (_a(400, "billing_error", "credit"), "quota", None),
        (httpx.ConnectError("refused"), "transient", None),
    ],
)
def test_anthropic_failures_are_classified_for_the_breaker(answer: Any, outcome: str, retry: int | None) -> None:
    with pytest.raises(ProviderError) as err:
        anthropic_provider(Recorder(answer)).complete(REQUEST)
    assert (err.value.outcome, err.value.retry_after_ms) == (outcome, retry)
    assert "list the folder" not in str(err.value) and "test-key" not in str(err.value)


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        (_o(429, "insufficient_quota", "insufficient_quota"), "quota"),
        (_o(429, "requests", "rate_limit_exceeded"), "rate_limited"),
        (_o(400, "invalid_request_error", "context_length_exceeded"), "context_length"),
        (_o(400, "invalid_request_error", "content_policy_violation"), "content_policy"),
        (_o(400, "invalid_request_error", None), "invalid_request"),
        (_o(401, "invalid_request_error", "invalid_api_key"), "auth"),
        (_o(503, "server_error", None), "transient"),
        (httpx.ReadTimeout("slow"), "transient"),
    ],
)
def test_openai_failures_are_classified_for_the_breaker(answer: Any, outcome: str) -> None:
    with pytest.raises(ProviderError) as err:
        openai_provider(Recorder(answer)).complete(REQUEST)
    assert err.value.outcome == outcome and err.value.outcome in FAILURE_CLASSES


def test_scripted_provider_serves_in_order_then_says_it_ran_out(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "model.yaml"
    path.write_text(
        "replies:\n"
        "  - tool_calls: [{id: c1, name: list_dir, arguments: {path: .}}]\n"
        "    input_tokens: 1000\n"
        "  - error: rate_limited\n"
        "    retry_after_ms: 500\n"
        "  - {text: done, output_tokens: 3}\n"
    )
    model = ScriptedProvider.from_file(path)
    first = model.complete(REQUEST)
    assert first.stop_reason == "tool_use" and first.message.tool_calls[0].arguments == {"path": "."}
    with pytest.raises(ProviderError) as err:
        model.complete(REQUEST)
    assert (err.value.outcome, err.value.retry_after_ms) == ("rate_limited", 500)
    assert model.complete(REQUEST).message.text == "done" and model.remaining == 0
    with pytest.raises(ScriptError, match="no reply left"):
        model.complete(REQUEST)
    assert len(model.calls) == 3


@pytest.mark.parametrize(
    "text",
    [
        "replies: 5",
        "[1, 2]",
        "replies: [{text: 5}]",
        "replies: [{error: boom}]",
        "replies: [{colour: red}]",
        "replies: [{tool_calls: [{id: 1, name: x}]}]",
        "replies: [{input_tokens: -1}]",
        "replies: [{stop_reason: bored}]",
        "replies: [\n  - a: [",
        "replies: !!python/object:os.system [echo]",
    ],
)
def test_scripted_provider_refuses_bad_scripts(tmp_path, text: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ScriptError):
        ScriptedProvider.from_file(path)
    with pytest.raises(ScriptError, match="cannot read"):
        ScriptedProvider.from_file(tmp_path / "missing.yaml")
    assert issubclass(ScriptError, LoopFsmError) and issubclass(ProviderError, LoopFsmError)


def test_a_scripted_model_drives_the_brain_to_completion() -> None:
    from loopfsm.machines.engine_brain import CallLLM, CallTools, Done, LoopMachine, MachinePolicy

    model = ScriptedProvider(
        [
            {"tool_calls": [{"id": "c1", "name": "list_dir", "arguments": {"path": "."}}], "input_tokens": 900},
            {"text": "Two files.", "input_tokens": 950, "output_tokens": 5},
        ]
    )
    brain, policy = LoopMachine(), MachinePolicy(max_turns=5)
    brain.accept_input("what is here?")
    for _ in range(10):
        step = brain.next_step(policy=policy)
        brain.begin(step)
        if isinstance(step, CallLLM):
            reply = model.complete(ModelRequest("m", tuple(brain.history()) + tuple(brain.data.pending)))
            brain.model_response(reply.message, context_tokens=reply.context_tokens, available_tools=["list_dir"])
        elif isinstance(step, CallTools):
            brain.tool_results([Message.tool_result(p.call.id, "a.txt b.txt") for p in step.calls])
        elif isinstance(step, Done):
            break
    assert isinstance(step, Done) and brain.to_loop_error() is None
    assert [r.messages[-1].role for r in model.calls] == ["user", "tool"]


def test_a_missing_sdk_is_a_setup_error_not_a_failed_call() -> None:
    """Never a ProviderError: the fallback breaker must not count a missing package as the model failing."""
    from loopfsm.core.errors import ConfigError
    from loopfsm.router.providers import import_sdk

    with pytest.raises(ConfigError, match=r"loopfsm\[no_such_sdk\]") as err:
        import_sdk("no_such_sdk")
    assert not isinstance(err.value, ProviderError)
    assert import_sdk("anthropic") is anthropic
