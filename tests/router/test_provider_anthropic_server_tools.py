"""A web-search reply from Anthropic is a reply, not a failed turn: the server tool's call and result and the
text's citations are kept on the message (equal to what the Anthropic SDK accumulates), handed back on the next
turn, and a stream that misplaces them is refused, not repaired."""

from __future__ import annotations

import json

import pytest

from loopfsm.machines.messages import Message
from loopfsm.machines.stream_assembly import StreamAssembly
from loopfsm.router.errors import StreamEventError
from loopfsm.router.providers import ModelRequest
from loopfsm.router.providers.anthropic_api import to_api_messages
from loopfsm.router.streams import assemble_anthropic
from loopfsm.machines.errors import StreamProtocolError

from tests.support.provider_streams import Recorder, anthropic_body, anthropic_provider, sse
from tests.support.stream_oracles import anthropic_sdk

CITATION = {
    "type": "web_search_result_location",
    "url": "https://example.org/tides",
    "title": "Tides",
    "encrypted_index": "EqQBCgIYAhIM",
    "cited_text": "High tide is at 6 pm.",
}
RESULTS = [
    {
        "type": "web_search_result",
        "url": "https://example.org/tides",
        "title": "Tides",
        "encrypted_content": "EqgfCioIARgBIiQ3",
        "page_age": "April 30, 2025",
    }
]


def web_search_events() -> list[dict]:
    """A Messages stream as the API sends a web search: text, the server's call, its result, cited text."""
    return [
        {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me look."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1,
         "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "input_json_delta", "partial_json": '{"query": '}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "input_json_delta", "partial_json": '"tides"}'}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {
            "type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": RESULTS}},
        {"type": "content_block_stop", "index": 2},
        {"type": "content_block_start", "index": 3, "content_block": {"type": "text", "text": "", "citations": []}},
        {"type": "content_block_delta", "index": 3, "delta": {"type": "citations_delta", "citation": CITATION}},
        {"type": "content_block_delta", "index": 3, "delta": {"type": "text_delta", "text": "High tide is at 6 pm."}},
        {"type": "content_block_stop", "index": 3},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 40, "server_tool_use": {"web_search_requests": 1}}},
        {"type": "message_stop"},
    ]  # fmt: skip


def test_a_web_search_reply_is_kept_whole_and_agrees_with_the_sdk():
    events = web_search_events()
    ours = assemble_anthropic(events)
    assert ours.ok and ours.stop_reason == "end_turn"
    msg = ours.message
    assert msg.text == "Let me look.High tide is at 6 pm."
    assert [(b.kind, b.id, b.name, b.content) for b in msg.server_blocks] == [
        ("server_tool_use", "srvtoolu_1", "web_search", {"query": "tides"}),
        ("web_search_tool_result", "srvtoolu_1", None, RESULTS),
    ]
    assert [c.data for c in msg.citations] == [CITATION]
    sdk, _ = anthropic_sdk(events)
    blocks = [b.model_dump(exclude_none=True) for b in sdk.content]
    assert blocks[1] == {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "tides"},
    }
    assert blocks[2]["type"] == "web_search_tool_result" and blocks[2]["content"] == RESULTS
    assert blocks[3]["citations"] == [CITATION]
    assert Message.from_json(json.loads(json.dumps(msg.to_json()))) == msg  # a saved brain keeps them


def test_the_next_turn_hands_the_server_blocks_back_before_the_text():
    msg = assemble_anthropic(web_search_events()).message
    _, turns = to_api_messages((Message.user("tides?"), msg, Message.user("and tomorrow?")))
    content = turns[1]["content"]
    assert [b["type"] for b in content] == ["server_tool_use", "web_search_tool_result", "text"]
    assert content[0] == {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "tides"},
    }
    assert content[1] == {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": RESULTS}


def test_the_provider_completes_a_web_search_reply_and_sends_it_back():
    rec = Recorder(sse(anthropic_body(web_search_events())), sse(anthropic_body(web_search_events())))
    provider = anthropic_provider(rec)
    reply = provider.complete(ModelRequest("claude-x", (Message.user("tides?"),)))
    assert reply.stop_reason == "end_turn" and len(reply.message.server_blocks) == 2
    provider.complete(ModelRequest("claude-x", (Message.user("tides?"), reply.message, Message.user("more"))))
    sent = rec.bodies[1]["messages"][1]["content"]
    assert [b["type"] for b in sent] == ["server_tool_use", "web_search_tool_result", "text"]


def _with(events: list[dict], at: int, event: dict) -> list[dict]:
    return [*events[:at], event, *events[at:]]


@pytest.mark.parametrize(
    ("change", "error"),
    [
        # a citation for the server tool's block, not a text block
        (lambda ev: _with(ev, 6, {"type": "content_block_delta", "index": 1,
                                  "delta": {"type": "citations_delta", "citation": CITATION}}), StreamProtocolError),
        # a citation that is not an object with a type
        (lambda ev: _with(ev, 12, {"type": "content_block_delta", "index": 3,
                                   "delta": {"type": "citations_delta", "citation": "see above"}}), StreamEventError),
        # a result that does not name its call
        (lambda ev: [*ev[:8], {"type": "content_block_start", "index": 2,
                               "content_block": {"type": "web_search_tool_result", "content": []}}, *ev[9:]],
         StreamEventError),
        # a server call whose input never becomes one JSON object
        (lambda ev: [e for e in ev if e.get("delta", {}).get("partial_json") != '"tides"}'], None),
        # MCP blocks are not carried: refused, not dropped
        (lambda ev: [*ev[:4], {"type": "content_block_start", "index": 1,
                               "content_block": {"type": "mcp_tool_use", "id": "m", "name": "x", "server_name": "s",
                                                 "input": {}}}, *ev[5:]], StreamEventError),
    ],
)  # fmt: skip
def test_a_stream_that_misplaces_them_is_refused(change, error):
    events = change(web_search_events())
    if error is None:  # assembled, and the reply is not ok: the turn fails as for a tool call's bad arguments
        result = assemble_anthropic(events)
        assert not result.ok and result.problems[0].call_id == "srvtoolu_1"
        return
    with pytest.raises(error):
        assemble_anthropic(events)


def test_a_server_block_needs_its_header_in_the_table():
    m = StreamAssembly()
    m.start("m", "x", "assistant", {})
    with pytest.raises(StreamProtocolError, match="a server_result block needs its id and name"):
        m.open_block(0, "server_result", None, None, '{"content": []}')
    with pytest.raises(StreamProtocolError, match="a text block carries no id or name"):
        m.open_block(0, "text", "x", "y")
    m.open_block(0, "server_tool", "s1", "web_search")
    assert m.data.slots[0].lane == "server_tool"
