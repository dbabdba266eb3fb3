"""Stream assembly's rules: every protocol violation refused with nothing changed, the SDKs' leniency beside it."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopfsm.core.errors import FeedArgumentError, IllegalFeed, LoopFsmError
from loopfsm.router.errors import StreamEventError
from loopfsm.machines.errors import StreamFailed, StreamProtocolError
from loopfsm.machines.json_prefix import classify
from loopfsm.machines.stream_assembly import StreamAssembly
from loopfsm.machines.stream_values import COMPACT_EVERY
from loopfsm.router.streams import AnthropicStream, OpenAIChatStream, assemble_anthropic, assemble_openai_chat
from loopfsm.router.streams.synthetic import Block, Reply, anthropic_events, every, openai_chunks

from tests.support.stream_oracles import anthropic_sdk, openai_sdk

START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "usage": {"input_tokens": 3, "output_tokens": 1},
    },
}


def text_start(i):
    return {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}


def tool_start(i, call_id="toolu_1", name="get"):
    return {
        "type": "content_block_start",
        "index": i,
        "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
    }


def text_delta(i, text="hi"):
    return {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": text}}


def json_delta(i, text):
    return {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": text}}


def stop(i):
    return {"type": "content_block_stop", "index": i}


def message_delta(reason="end_turn"):
    return {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": None},
        "usage": {"output_tokens": 7},
    }


MESSAGE_STOP = {"type": "message_stop"}


def refused(stream, event, rule: str) -> None:
    """The event is refused as a protocol violation naming ``rule``, and the machine is unchanged."""
    before = stream.machine.snapshot()
    with pytest.raises(StreamProtocolError, match=rule):
        stream.feed(event)
    assert stream.machine.snapshot() == before


# Each: events that are fine, then the violating one, the rule we name, and what the Anthropic SDK does.
ANTHROPIC_VIOLATIONS = {
    "block placed by wrong index": ([START], text_start(1), "block 1 started where the next block is 0", "placed at 0"),
    "duplicate start": (
        [START, text_start(0), text_delta(0)],
        text_start(0),
        "block 0 was already started",
        "adds an empty block",
    ),
    "delta after block stop": (
        [START, text_start(0), text_delta(0), stop(0)],
        text_delta(0, "late"),
        "block 0 already closed",
        "appends",
    ),
    "delta for unstarted block": ([START], text_delta(0), "never started", "IndexError"),
    "delta of another lane": ([START, tool_start(0)], text_delta(0), "a text fragment for tool block 0", "dropped"),
    "second message_start": ([START], START, "illegal in state 'Streaming': the message already started", None),
    "stop with a block open": ([START, text_start(0)], message_delta(), r"blocks still open \(text \[0\]\)", None),
    "second stop": ([START, message_delta()], message_delta(), "stop reason already arrived", None),
    "block after the stop": ([START, message_delta()], text_start(0), "stop reason already arrived", None),
    "message_stop before the stop reason": (
        [START, text_start(0)],
        MESSAGE_STOP,
        "illegal in state 'Streaming': the stop reason has not arrived",
        None,
    ),
    "event after message_stop": (
        [START, message_delta(), MESSAGE_STOP],
        {"type": "ping"},
        "message already finished",
        None,
    ),
    "event before message_start": ([], text_start(0), "message has not started", None),
    "second signature": (
        [
            START,
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            },
            {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "s1"}},
        ],
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "s2"}},
        "already signed",
        "keeps the last",
    ),
}


@pytest.mark.parametrize("name", ANTHROPIC_VIOLATIONS)
def test_anthropic_violation_is_refused_and_changes_nothing(name):
    before, event, rule, _ = ANTHROPIC_VIOLATIONS[name]
    stream = AnthropicStream()
    stream.feed_all(before)
    refused(stream, event, rule)


def test_the_sdk_repairs_what_we_refuse():
    """The leniency the issue measured, pinned so a change in the SDK is noticed."""
    sdk, _ = anthropic_sdk([START, text_start(1), text_delta(0, "x")])
    assert [b.text for b in sdk.content] == ["x"]  # announced at 1, placed (and filled) at 0
    sdk, _ = anthropic_sdk([START, text_start(0), text_delta(0, "a"), text_start(0)])
    assert [b.text for b in sdk.content] == ["a", ""]  # an empty block added
    sdk, _ = anthropic_sdk([START, text_start(0), text_delta(0, "a"), stop(0), text_delta(0, "late")])
    assert sdk.content[0].text == "alate"  # appended after its stop
    with pytest.raises(IndexError):
        anthropic_sdk([START, text_delta(0)])
    chunks = [
        _chunk({"role": "assistant", "tool_calls": [_call(0, "call_A", "f", "{")]}),
        _chunk({"role": "assistant", "tool_calls": [_call(0, "call_A", None, "}")]}),
    ]
    msg = openai_sdk(chunks).choices[0].message
    assert msg.role == "assistantassistant" and msg.tool_calls[0].id == "call_Acall_A"


def _chunk(delta, finish=None, chunk_id="chatcmpl-1"):
    return {
        "id": chunk_id,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "gpt",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _call(index, call_id=None, name=None, args=None):
    fn = {k: v for k, v in (("name", name), ("arguments", args)) if v is not None}
    return {"index": index, **({"id": call_id, "type": "function"} if call_id else {}), "function": fn}


def test_openai_restated_header_equal_is_accepted_never_concatenated():
    s = OpenAIChatStream()
    s.feed(_chunk({"role": "assistant", "tool_calls": [_call(0, "call_A", "f", '{"a"')]}))
    s.feed(_chunk({"role": "assistant", "tool_calls": [_call(0, "call_A", "f", ": 1}")]}))
    s.feed(_chunk({}, "tool_calls"))
    s.finish()
    call = s.result().message.tool_calls[0]
    assert (call.id, call.name, call.arguments) == ("call_A", "f", {"a": 1})


@pytest.mark.parametrize(
    "chunk,rule",
    [
        (_chunk({"tool_calls": [_call(0, "call_B", None, "}")]}), "announced as id 'call_A'.*restated as id 'call_B'"),
        (_chunk({"tool_calls": [_call(0, None, "g", "}")]}), "name 'f'.*restated as id None, name 'g'"),
        (_chunk({"role": "user"}), "role 'assistant'.*restated as id None, role 'user'"),
        (_chunk({"content": "x"}, chunk_id="chatcmpl-2"), "restated as id 'chatcmpl-2'"),
        (_chunk({"tool_calls": [_call(1, None, None, '{"x": 1}')]}), "argument fragment for block 1, which was never"),
    ],
)
def test_openai_violation_is_refused_and_changes_nothing(chunk, rule):
    s = OpenAIChatStream()
    s.feed(_chunk({"role": "assistant", "tool_calls": [_call(0, "call_A", "f", "{")]}))
    refused(s, chunk, rule)


def test_openai_sdk_fills_calls_with_none_for_arguments_before_their_header():
    msg = (
        openai_sdk(
            [_chunk({"role": "assistant", "tool_calls": [_call(0, None, None, '{"x": 1}')]}), _chunk({}, "tool_calls")]
        )
        .choices[0]
        .message
    )
    assert msg.tool_calls[0].id is None and msg.tool_calls[0].function.name is None
    with pytest.raises(StreamProtocolError, match="never started"):
        assemble_openai_chat([_chunk({"role": "assistant", "tool_calls": [_call(0, None, None, '{"x": 1}')]})])


def test_openai_second_choice_is_refused():
    s = OpenAIChatStream()
    s.feed(_chunk({"role": "assistant"}))
    with pytest.raises(StreamEventError, match="one choice"):
        s.feed({**_chunk({"content": "x"}), "choices": [{"index": 1, "delta": {"content": "x"}}]})


@pytest.mark.parametrize(
    "calls,rule",
    [
        ([_call(2, "call_C", "f", "{}")], "tool call 2 announced while the next is 0"),
        ([_call(1, "call_B", "g", "{}"), _call(0, "call_A", "f", "{}")], "tool call 1 announced while the next is 0"),
    ],
    ids=["gap", "out of order"],
)
def test_openai_tool_index_gap_and_out_of_order_headers_are_protocol_errors(calls, rule):
    """The stream assembly page's rule for a block at the wrong index: StreamProtocolError, nothing changed."""
    s = OpenAIChatStream()
    s.feed(_chunk({"role": "assistant", "content": "hi"}))
    refused(s, _chunk({"tool_calls": calls}), rule)


def test_max_tokens_cut_arguments_are_reported_not_cut_to_what_parses():
    reply = Reply(
        (
            Block("text", "Let me look."),
            Block("tool", '{"path": "a.txt", "mode": "re', "toolu_1", "read"),
        ),
        "max_tokens",
    )
    events = list(anthropic_events(reply, every(5)))
    result = assemble_anthropic(events)
    assert not result.ok and result.message.tool_calls == ()
    (p,) = result.problems
    assert (p.kind, p.call_id, p.name, p.raw) == ("incomplete", "toolu_1", "read", '{"path": "a.txt", "mode": "re')
    assert "incomplete after 29 characters" in str(p)
    sdk, _ = anthropic_sdk(events)
    assert sdk.content[1].input == {"path": "a.txt"}  # what the SDK would have handed on


@pytest.mark.parametrize(
    "args,kind",
    [
        ('{"a": 1}}', "invalid"),
        ("[1, 2]", "invalid"),
        ('"text"', "invalid"),
        ("[" * 100_000, "incomplete"),
        ("[" * 100_000 + "]" * 100_001, "invalid"),
        ('{"a": "\\ud83d', "incomplete"),
        ('{"a": tru', "incomplete"),
    ],
    ids=["extra brace", "array", "string", "deep open", "deep over-closed", "cut escape", "cut literal"],
)
def test_arguments_that_are_not_one_object_are_problems(args, kind):
    result = assemble_anthropic(anthropic_events(Reply((Block("tool", args, "t1", "f"),), "end_turn"), every(7)))
    assert [p.kind for p in result.problems] == [kind]


def test_empty_arguments_mean_an_empty_object():
    result = assemble_anthropic(anthropic_events(Reply((Block("tool", "", "t1", "f"),), "tool_use")))
    assert result.message.tool_calls[0].arguments == {}


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=5),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
            max_leaves=8,
        ),
        max_size=4,
    ),
    st.booleans(),
)
def test_every_proper_prefix_of_an_object_is_incomplete(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert classify(text) == "complete"
    for end in range(len(text)):
        assert classify(text[:end]) == "incomplete", text[:end]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='{}[]":,\\ 0123456789.eE+-truefalsn', max_size=20))
def test_classify_agrees_with_json_loads(text):
    try:
        json.loads(text)
        parses = True
    except ValueError:
        parses = False
    assert (classify(text) == "complete") == parses


def test_error_event_fails_the_stream():
    s = AnthropicStream()
    s.feed_all([START, text_start(0), {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}])
    assert s.machine.state == "Failed"
    with pytest.raises(StreamFailed, match="overloaded_error") as err:
        s.result()
    assert err.value.kind == "overloaded_error"
    with pytest.raises(StreamProtocolError, match="already failed"):
        s.feed(text_delta(0))


def test_result_before_the_stop_reason_raises():
    s = AnthropicStream()
    s.feed_all([START, text_start(0)])
    with pytest.raises(LoopFsmError, match="no answer in state 'Streaming'"):
        s.result()


@pytest.mark.parametrize(
    "event,fragment",
    [
        ({"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x"}}, "KeyError"),
        ({"type": "content_block_delta", "index": 0, "delta": {"type": "bogus_delta"}}, "unsupported delta"),
        ({"type": "content_block_start", "index": 1, "content_block": {"type": "mcp_tool_use"}}, "unsupported"),
        ({"type": "content_block_start", "index": 1, "content_block": {"type": "server_tool_use"}}, "KeyError: 'id'"),
        ({"type": "surprise"}, "unknown event type"),
        (["not", "a", "dict"], "an event is an object with a .type., got a list"),
        ({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": 5}, "usage is not an object"),
    ],
)
def test_malformed_events_raise_typed_errors_and_change_nothing(event, fragment):
    s = AnthropicStream()
    s.feed_all([START, text_start(0)])
    before = s.machine.snapshot()
    with pytest.raises(StreamEventError, match=fragment):
        s.feed(event)
    assert s.machine.snapshot() == before


def test_wrong_types_are_refused_by_the_table():
    s = AnthropicStream()
    s.feed_all([START, text_start(0)])
    with pytest.raises(FeedArgumentError):
        s.feed({"type": "content_block_delta", "index": "0", "delta": {"type": "text_delta", "text": "x"}})
    with pytest.raises(FeedArgumentError):
        s.feed({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 5}})


def test_limits_are_policy():
    policy = StreamAssembly.compiled.Policy(max_blocks=2, max_chars=10)
    s = AnthropicStream(policy=policy)
    s.feed_all([START, text_start(0), text_delta(0, "0123456789"), stop(0), text_start(1)])
    refused(s, text_delta(1, "x"), "more than max_chars=10")
    s.feed(stop(1))
    refused(s, text_start(2), "more than max_blocks=2")


def test_open_slots_per_lane_and_interleaved_parallel_calls():
    m = StreamAssembly()
    m.start("chatcmpl-1", "gpt")
    m.open_block(0, "text")
    m.open_block(1, "tool", "call_1", "f")
    m.open_block(2, "tool", "call_2", "g")
    assert m.open_slots() == {"text": [0], "tool": [1, 2]}
    m.delta(2, "tool", '{"b"')
    m.delta(1, "tool", '{"a": 1}')
    m.delta(0, "text", "both")
    m.delta(2, "tool", ": 2}")
    m.close_block(1)
    assert m.open_slots() == {"text": [0], "tool": [2]}
    m.close_block(2)
    m.close_block(0)
    m.stop("tool_calls")
    result = m.result()
    assert [c.arguments for c in result.message.tool_calls] == [{"a": 1}, {"b": 2}]


def test_snapshot_mid_stream_resumes_exactly():
    reply = Reply(
        (
            Block("thinking", "hmm " * 50, signature="sig"),
            Block("text", "answer " * 300),
            Block("tool", json.dumps({"q": "é😀" * 100}), "toolu_9", "search"),
        ),
        "tool_use",
        {"input_tokens": 5, "output_tokens": 9},
    )
    events = list(anthropic_events(reply, every(3)))
    whole = assemble_anthropic(events)
    for cut_at in (1, 5, 200, len(events) // 2, len(events) - 2):
        first = AnthropicStream()
        first.feed_all(events[:cut_at])
        snap = json.loads(json.dumps(first.machine.snapshot()))
        resumed = AnthropicStream(StreamAssembly.restore(snap))
        resumed.feed_all(events[cut_at:])
        assert resumed.result() == whole


def test_fragments_are_kept_not_copied():
    m = StreamAssembly()
    m.start("m", "x")
    m.open_block(0, "tool", "t", "f")
    pieces = [f'"{i:06d}",' for i in range(COMPACT_EVERY - 1)]
    for p in pieces:
        m.delta(0, "tool", p)
    assert all(a is b for a, b in zip(m.data.slots[0].parts, pieces, strict=True))


@pytest.mark.slow
def test_memory_stays_near_the_size_of_the_text():
    text = json.dumps({"data": ["x" * 50] * 6_000})  # about 330 kB
    events = anthropic_events(Reply((Block("tool", text, "t", "f"),), "tool_use"), every(8))
    # Compile the machine first: run alone, this test would otherwise count the one-time compile.
    assemble_anthropic(anthropic_events(Reply((Block("tool", "{}", "t0", "f"),), "tool_use"), every(8)))
    tracemalloc.start()
    try:
        json.loads(text)
        _, loads_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        result = assemble_anthropic(events)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(result.message.tool_calls[0].arguments["data"]) == 6_000
    # 40,000 fragments, held as pieces, joined once, parsed once: what json.loads
    # needs plus about two copies of the text, never a copy per fragment
    assert peak < loads_peak + 3 * len(text), (peak, loads_peak)


def test_illegal_feed_hierarchy():
    assert issubclass(StreamProtocolError, IllegalFeed) and issubclass(StreamEventError, LoopFsmError)


def test_thinking_travels_with_the_message_through_json():
    from loopfsm.machines.messages import Message, Thinking

    msg = Message.assistant("hi", thinking=[Thinking("because", "sig"), Thinking("", None, "opaque")])
    assert Message.from_json(json.loads(json.dumps(msg.to_json()))) == msg
    assert "thinking" not in Message.assistant("hi").to_json()


def test_a_chunk_is_refused_whole():
    s = OpenAIChatStream()
    s.feed(_chunk({"role": "assistant", "content": "hi", "tool_calls": [_call(0, "call_A", "f", "{")]}))
    # text fragment and a new call's header are fine, the restated id is not: none of it stays
    refused(
        s,
        _chunk({"content": " there", "tool_calls": [_call(1, "call_B", "g", "{}"), _call(0, "call_X")]}),
        "restated as id 'call_X'",
    )
    s.feed(_chunk({"content": " there"}))
    s.feed(_chunk({"tool_calls": [_call(0, None, None, "}")]}, "tool_calls"))
    s.finish()
    assert s.result().message.text == "hi there" and len(s.result().message.tool_calls) == 1


def test_citations_are_kept_in_order_never_dropped():
    first, second = {"type": "char_location", "cited_text": "x"}, {"type": "char_location", "cited_text": "y"}
    cited_start = {"type": "content_block_start", "index": 0, "content_block": {**text_start(0)["content_block"]}}
    cited_start["content_block"]["citations"] = [first]
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": second}}
    s = AnthropicStream()
    s.feed_all([START, cited_start, text_delta(0, "Paris"), delta, stop(0), message_delta(), MESSAGE_STOP])
    assert s.result().message.text == "Paris" and [c.data for c in s.result().message.citations] == [first, second]
    s = AnthropicStream()  # a citation for a block that was closed is refused, and changes nothing
    s.feed_all([START, text_start(0), text_delta(0, "Paris"), stop(0)])
    snap = s.machine.snapshot()
    with pytest.raises(StreamProtocolError, match="a citation for block 0, not an open text block"):
        s.feed(delta)
    assert s.machine.snapshot() == snap and s.citations == []
    s = AnthropicStream()  # an empty citations list carries nothing: the block is plain text
    empty = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "", "citations": []}}
    s.feed_all([START, empty, text_delta(0, "Paris"), stop(0), message_delta(), MESSAGE_STOP])
    assert s.result().message.text == "Paris" and s.result().message.citations == ()


@pytest.mark.parametrize(
    "usage, words",
    [
        ({"input_tokens": -5}, "usage.input_tokens is -5, not a token count"),
        ({"input_tokens": 1.5}, "usage.input_tokens is a float, not a token count"),
        ({"input_tokens": 10**30}, "not a token count"),
        ({"output_tokens": "lots"}, "usage.output_tokens is a str, not a token count"),
        ({"cache_creation": {"ephemeral_5m_input_tokens": -1}}, "usage.cache_creation.ephemeral_5m_input_tokens is -1"),
    ],
)
def test_token_counts_that_are_not_whole_counts_are_a_malformed_event(usage, words):
    bad = {**START, "message": {**START["message"], "usage": usage}}
    stream = AnthropicStream()
    with pytest.raises(StreamEventError, match=words):
        stream.feed(bad)
    assert stream.machine.state == "Idle"
    chat = OpenAIChatStream()
    chunk = {"id": "c1", "model": "m", "choices": [], "usage": {"prompt_tokens": -1, "completion_tokens": "a"}}
    with pytest.raises(StreamEventError, match="not a token count"):
        chat.feed_all([chunk])


def test_real_usage_shapes_with_words_and_nested_counts_are_kept():
    usage = {"input_tokens": 5, "cache_creation": {"ephemeral_5m_input_tokens": 0}, "service_tier": "standard"}
    stream = AnthropicStream()
    stream.feed({**START, "message": {**START["message"], "usage": usage}})
    assert stream.machine.data.usage == usage


def test_openai_error_object_mid_stream_fails_the_stream_and_bad_indices_are_named():
    from loopfsm.machines.errors import StreamFailed

    chat = OpenAIChatStream()
    chat.feed({"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}]})
    before = chat.machine.snapshot()
    tool = {"index": "0", "id": "t", "function": {"name": "ls", "arguments": ""}}
    with pytest.raises(StreamEventError, match="a tool call's index is a whole number, got '0'"):
        chat.feed({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [tool]}}]})
    assert chat.machine.snapshot() == before
    chat.feed({"error": {"type": "overloaded_error", "message": "busy"}})
    with pytest.raises(StreamFailed, match="overloaded_error"):
        chat.result()


def test_anthropic_events_without_a_type_and_a_negative_block_index_name_their_rule():
    for event in ({"no": "type"}, 5):
        with pytest.raises(StreamEventError, match="an event is an object with a 'type'"):
            AnthropicStream().feed(event)
    stream = AnthropicStream()
    stream.feed(START)
    refused(
        stream,
        {"type": "content_block_start", "index": -1, "content_block": {"type": "text", "text": ""}},
        "an index is 0 or more",
    )


# -- a bad tool call is reported, the rest of the reply kept (issue 21, item 9) --------------------


def _deep(levels: int) -> dict:
    """An object nested ``levels`` containers deep, the object itself included."""
    inner: object = 0
    for _ in range(levels - 1):
        inner = [inner]
    return {"a": inner}


@pytest.mark.slow
@pytest.mark.parametrize(
    "args,kind,words",
    [
        ('{"a": NaN}', "not_finite", "not finite"),
        ('{"a": [1, -Infinity]}', "not_finite", "not finite"),
        ('{"a": 1e400}', "not_finite", "past a double's range"),
        ('{"a": -1' + "0" * 5000 + "}", "not_finite", "past a double's range"),  # more digits than Python reads
        (json.dumps(_deep(65)), "too_deep", "nest deeper than 64 levels"),
        ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", "too_deep", "nest deeper than 64 levels"),
        ("[" * 5000 + "]" * 5000, "invalid", "invalid after 10000 characters"),
        ('{"a": [' + "0," * 1_000_000 + "0]}", "too_many_values", "more than 1,000,000 values"),
        ('{"a": "\\ud83d"}', "lone_surrogate", "half a surrogate pair"),
        ('{"\\udc00": 1}', "lone_surrogate", "half a surrogate pair"),
    ],
    ids=[
        "NaN",
        "-Infinity",
        "1e400",
        "5001 digits",
        "65 levels",
        "past json.loads",
        "deep array",
        "values",
        "surrogate",
        "key",
    ],
)
def test_arguments_a_message_cannot_carry_are_a_problem_and_the_rest_is_kept(args, kind, words):
    for assemble, render, stop_reason in (
        (assemble_anthropic, anthropic_events, "tool_use"),
        (assemble_openai_chat, openai_chunks, "tool_calls"),
    ):
        reply = Reply(
            (Block("text", "Two calls:"), Block("tool", args, "t1", "bad"), Block("tool", '{"ok": 1}', "t2", "good")),
            stop_reason,
        )
        result = assemble(render(reply, every(4096)))  # whole: nothing is lost before result()
        assert result.message.text == "Two calls:"
        assert [(c.id, c.arguments) for c in result.message.tool_calls] == [("t2", {"ok": 1})]
        (p,) = result.problems
        assert (p.index, p.call_id, p.name, p.raw, p.kind) == (1, "t1", "bad", args, kind)
        assert words in str(p) and not result.ok


def test_the_sdk_keeps_what_we_report():
    """What the Anthropic SDK hands on for arguments a message cannot carry, pinned."""
    reply = Reply((Block("tool", '{"a": NaN, "b": 1e400}', "t1", "f"),), "tool_use")
    sdk, _ = anthropic_sdk(anthropic_events(reply))
    assert sdk.content[0].input["b"] == float("inf")


def test_the_depth_limit_is_the_messages_own():
    """64 levels go into the message (a ToolCall takes them), 65 are a problem: the limits agree."""
    from loopfsm.core.fieldtypes import MAX_JSON_DEPTH, json_problem

    assert MAX_JSON_DEPTH == 64 and json_problem(_deep(64)) is None and json_problem(_deep(65)) is not None
    reply = Reply((Block("tool", json.dumps(_deep(64)), "t1", "f"),), "tool_use")
    assert assemble_anthropic(anthropic_events(reply)).message.tool_calls[0].arguments == _deep(64)


@pytest.mark.parametrize("leaf", [0, 1.5, float("nan"), float("-inf"), "x", None, {}])
def test_the_argument_rules_accept_what_a_tool_call_accepts(leaf):
    """parse_arguments keeps exactly the values ToolCall takes (strings of whole characters aside)."""
    from loopfsm.core.fieldtypes import json_problem
    from loopfsm.machines.stream_values import _value_problem

    for levels in range(60, 70):
        inner: object = leaf
        for i in range(levels - 1):
            inner = [inner] if i % 2 else {"k": inner}
        value = {"a": inner, "b": [leaf] * 3}
        assert (_value_problem(value) is None) == (json_problem(value) is None), levels


def test_a_surrogate_pair_escape_is_one_character_and_fine():
    reply = Reply((Block("tool", '{"a": "\\ud83d\\ude00"}', "t1", "f"),), "tool_use")
    assert assemble_anthropic(anthropic_events(reply)).message.tool_calls[0].arguments == {"a": "😀"}


def test_text_with_half_a_surrogate_pair_is_kept_as_both_sdks_keep_it():
    """Only arguments are held to whole characters; text is the provider's, kept as sent."""
    anthropic = Reply((Block("text", "a\ud83d"),), "end_turn")
    sdk, _ = anthropic_sdk(anthropic_events(anthropic))
    assert assemble_anthropic(anthropic_events(anthropic)).message.text == sdk.content[0].text == "a\ud83d"
    chat = Reply((Block("text", "a\ud83d"),), "stop")
    sdk_message = openai_sdk(openai_chunks(chat, include_usage=False)).choices[0].message
    assert assemble_openai_chat(openai_chunks(chat)).message.text == sdk_message.content == "a\ud83d"


def test_a_repeated_tool_call_id_keeps_the_first_call_and_reports_the_second():
    for assemble, render in ((assemble_anthropic, anthropic_events), (assemble_openai_chat, openai_chunks)):
        reply = Reply(
            (
                Block("text", "Both:"),
                Block("tool", '{"n": 1}', "same", "f"),
                Block("tool", '{"n": 2}', "same", "g"),
                Block("tool", '{"n": 3}', "other", "h"),
            ),
            "tool_use",
        )
        result = assemble(render(reply))
        assert result.message.text == "Both:"
        assert [(c.id, c.arguments) for c in result.message.tool_calls] == [("same", {"n": 1}), ("other", {"n": 3})]
        (p,) = result.problems
        assert (p.index, p.call_id, p.name, p.raw, p.kind) == (2, "same", "g", '{"n": 2}', "duplicate_id")
        assert "already used by an earlier tool call" in str(p)
    sdk, _ = anthropic_sdk(anthropic_events(reply))
    assert [b.id for b in sdk.content if b.type == "tool_use"] == ["same", "same", "other"]


# -- OpenAI deltas: reasoning carried, what cannot be carried refused (issue 21, item 10) ----------


def test_openai_reasoning_content_is_carried_as_thinking():
    chunks = [
        _chunk({"role": "assistant", "reasoning_content": ""}),
        _chunk({"reasoning_content": "Let "}),
        _chunk({"reasoning_content": "me think"}),
        _chunk({"content": "hi", "reasoning_content": None}),
        _chunk({}, "stop"),
    ]
    result = assemble_openai_chat(chunks)
    assert [(t.text, t.signature) for t in result.message.thinking] == [("Let me think", None)]
    assert result.message.text == "hi" and result.ok
    assert openai_sdk(chunks).choices[0].message.reasoning_content == "Let me think"


def test_openai_empty_reasoning_content_opens_no_thinking():
    result = assemble_openai_chat([_chunk({"role": "assistant", "reasoning_content": ""}), _chunk({}, "stop")])
    assert result.message.thinking == ()


@pytest.mark.parametrize(
    "delta,rule",
    [
        ({"function_call": {"name": "f", "arguments": ""}}, "a legacy function_call delta is unsupported"),
        ({"function_call": {"arguments": '{"a": 1}'}}, "a legacy function_call delta is unsupported"),
        ({"audio": {"transcript": "hello"}}, "unsupported delta field 'audio'"),
        ({"content": "x", "reasoning": "y"}, "unsupported delta field 'reasoning'"),
    ],
)
def test_openai_deltas_that_cannot_be_carried_are_refused_and_change_nothing(delta, rule):
    s = OpenAIChatStream()
    s.feed(_chunk({"role": "assistant", "content": "hi"}))
    before = s.machine.snapshot()
    with pytest.raises(StreamEventError, match=rule):
        s.feed(_chunk(delta))
    assert s.machine.snapshot() == before


def test_openai_empty_fields_carry_nothing_and_pass():
    s = OpenAIChatStream()
    s.feed(_chunk({"role": "assistant", "content": "hi", "function_call": None, "audio": None, "annotations": []}))
    s.feed(_chunk({}, "stop"))
    s.finish()
    assert s.result().message.text == "hi"


def test_the_openai_sdk_keeps_a_legacy_function_call_we_refuse():
    chunks = [
        _chunk({"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}),
        _chunk({}, "function_call"),
    ]
    assert openai_sdk(chunks).choices[0].message.function_call.name == "f"


# -- content carried in message_start (issue 21, item 12) ------------------------------------------


def _start_with(content):
    return {**START, "message": {**START["message"], "content": content}}


def test_content_in_message_start_becomes_the_first_blocks():
    carried = [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "text", "text": "Hello "},
        {"type": "tool_use", "id": "toolu_0", "name": "f", "input": {"a": 1}},
        {"type": "redacted_thinking", "data": "opaque"},
    ]
    events = [_start_with(carried), text_start(4), text_delta(4, "world"), stop(4), message_delta("tool_use")]
    s = AnthropicStream()
    s.feed_all(events)
    result = s.result()
    assert result.message.text == "Hello world"
    assert [(c.id, c.arguments) for c in result.message.tool_calls] == [("toolu_0", {"a": 1})]
    assert [(t.text, t.signature, t.redacted) for t in result.message.thinking] == [
        ("hmm", "sig", None),
        ("", None, "opaque"),
    ]
    sdk, _ = anthropic_sdk(events)
    assert "".join(b.text for b in sdk.content if b.type == "text") == "Hello world"
    s = AnthropicStream()
    s.feed(_start_with(carried))
    refused(s, text_start(0), "block 0 was already started")


@pytest.mark.parametrize(
    "content,words",
    [
        ([{"type": "text", "text": "a"}, {"type": "mcp_tool_use", "id": "s"}], "unsupported content block type"),
        ([{"type": "text", "text": "a"}, {"type": "server_tool_use", "id": "s"}], "malformed 'message_start' event"),
        ([{"type": "tool_use", "name": "f", "input": {}}], "malformed 'message_start' event"),
        ("text", "message content is a str, not a list"),
    ],
)
def test_content_in_message_start_that_cannot_be_carried_is_refused_whole(content, words):
    s = AnthropicStream()
    with pytest.raises(StreamEventError, match=words):
        s.feed(_start_with(content))
    assert s.machine.state == "Idle" and s.machine.snapshot() == AnthropicStream().machine.snapshot()
