"""Whatever a stream sends, the adapters answer with the stream's result or a LoopFsmError, nothing else."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from loopfsm.core.errors import LoopFsmError
from loopfsm.router.streams import AnthropicStream, OpenAIChatStream
from loopfsm.router.streams.synthetic import Block, Reply, anthropic_events, every, openai_chunks

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.text(max_size=4)
    | st.sampled_from(
        ["text", "tool_use", "thinking", "text_delta", "input_json_delta", "end_turn", "assistant", "user"]
    ),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "index",
                    "delta",
                    "text",
                    "partial_json",
                    "id",
                    "name",
                    "function",
                    "arguments",
                    "role",
                    "content",
                    "tool_calls",
                    "choices",
                    "finish_reason",
                    "usage",
                    "message",
                    "content_block",
                    "stop_reason",
                    "error",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=10,
)

REPLY = Reply(
    (Block("thinking", "hm", signature="s"), Block("text", "hello"), Block("tool", '{"a": [1, "x"]}', "t1", "f")),
    "tool_use",
    {"input_tokens": 1, "output_tokens": 2},
)
OPENAI_REPLY = Reply(
    (Block("text", "hello"), Block("tool", '{"a": 1}', "c1", "f"), Block("tool", "{}", "c2", "g")),
    "tool_calls",
    {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
)


def mutate(events: list, data) -> list:
    """Drop, duplicate, swap or replace a few events, or a field inside one."""
    events = list(events)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(events) - 1))
        op = data.draw(st.sampled_from(["drop", "dup", "swap", "field", "replace"]))
        if op == "drop" and len(events) > 1:
            del events[i]
        elif op == "dup":
            events.insert(i, events[i])
        elif op == "swap":
            j = data.draw(st.integers(0, len(events) - 1))
            events[i], events[j] = events[j], events[i]
        elif op == "field" and isinstance(events[i], dict) and events[i]:
            key = data.draw(st.sampled_from(sorted(events[i])))
            events[i] = {**events[i], key: data.draw(json_values)}
        else:
            events[i] = data.draw(json_values)
    return events


def drive(stream, events, finish: bool) -> None:
    try:
        for e in events:
            stream.feed(e)
        if finish:
            stream.finish()
        stream.result()
    except LoopFsmError:
        pass


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_anthropic_adapter_never_raises_anything_else(data):
    events = mutate(list(anthropic_events(REPLY, every(3))), data)
    drive(AnthropicStream(), events, finish=False)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_openai_adapter_never_raises_anything_else(data):
    events = mutate(list(openai_chunks(OPENAI_REPLY, every(3))), data)
    drive(OpenAIChatStream(), events, finish=True)


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_a_refused_event_changes_nothing(data):
    stream = AnthropicStream()
    for e in mutate(list(anthropic_events(REPLY, every(3))), data):
        before = stream.machine.snapshot()
        try:
            stream.feed(e)
        except LoopFsmError:
            assert stream.machine.snapshot() == before


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_a_refused_chunk_changes_nothing_even_when_it_takes_several_feeds(data):
    stream = OpenAIChatStream()
    for e in mutate(list(openai_chunks(OPENAI_REPLY, every(3))), data):
        before = stream.machine.snapshot()
        try:
            stream.feed(e)
        except LoopFsmError:
            assert stream.machine.snapshot() == before
