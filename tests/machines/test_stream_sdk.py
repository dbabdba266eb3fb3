"""Stream assembly agrees with each SDK's own accumulator wherever the stream is legal.

Replies are generated (many blocks, parallel tool calls interleaved, JSON cut
inside strings, escapes and multi-byte characters, empty blocks, every stop
reason), rendered as provider events, and assembled by both.  Where the SDK
hands back whatever part of cut-short arguments parses, stream assembly
reports the call as incomplete with exactly the text the SDK buffered.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopfsm.router.streams import assemble_anthropic, assemble_openai_chat
from loopfsm.router.streams.openai_responses import assemble_openai_responses
from loopfsm.router.streams.synthetic import Block, Reply, anthropic_events, openai_chunks, openai_responses_events

from tests.support.stream_oracles import anthropic_sdk, loads_or_none, openai_responses_sdk, openai_sdk

pytestmark = pytest.mark.slow  # hypothesis runs compared against both SDKs

ANTHROPIC_STOPS = ["end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"]
OPENAI_STOPS = ["stop", "length", "tool_calls", "content_filter", "function_call"]

# Text that exercises escapes and multi-byte characters when dumped as JSON.  No lone
# surrogates: they cannot travel in a UTF-8 stream (the SDKs refuse them too).
tricky_text = st.text(
    alphabet=st.sampled_from(list('ab "\\/\n\t\x01é€😀\u2028{}[]:,')) | st.characters(exclude_categories=("Cs",)),
    max_size=30,
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | tricky_text
    | st.floats(allow_nan=False, allow_infinity=False)
)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(tricky_text, inner, max_size=4), max_leaves=12
)


@st.composite
def argument_texts(draw, truncate: bool) -> str:
    args = draw(st.dictionaries(tricky_text, json_values, max_size=5))
    text = json.dumps(args, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 1])))
    if truncate and len(text) > 1 and draw(st.booleans()):
        text = text[: draw(st.integers(1, len(text) - 1))]
    return text


@st.composite
def cuts(draw):
    sizes = draw(st.lists(st.integers(0, 9), min_size=1, max_size=6).filter(any))

    def cut(text: str) -> list[str]:
        out, pos, i = [], 0, 0
        while pos < len(text):
            n = sizes[i % len(sizes)]
            out.append(text[pos : pos + n])
            pos += n
            i += 1
        return out

    return cut


@st.composite
def anthropic_replies(draw) -> Reply:
    stop = draw(st.sampled_from(ANTHROPIC_STOPS))
    blocks = []
    for i in range(draw(st.integers(0, 6))):
        lane = draw(st.sampled_from(["text", "tool", "thinking", "redacted_thinking"]))
        if lane == "tool":
            blocks.append(
                Block(
                    "tool",
                    draw(argument_texts(stop == "max_tokens")),
                    f"toolu_{i}",
                    draw(st.sampled_from(["get_weather", "shell", "a"])),
                )
            )
        elif lane == "thinking":
            blocks.append(Block("thinking", draw(tricky_text), signature=draw(st.none() | st.text(max_size=8))))
        else:
            blocks.append(Block(lane, draw(tricky_text)))
    usage = {"input_tokens": draw(st.integers(0, 10**6)), "output_tokens": draw(st.integers(0, 10**6))}
    return Reply(tuple(blocks), stop, usage, stop_sequence="###" if stop == "stop_sequence" else None)


@settings(max_examples=60, deadline=None)
@given(anthropic_replies(), cuts(), st.booleans())
def test_anthropic_agrees_with_the_sdk(reply, cut, pings):
    events = list(anthropic_events(reply, cut, pings=pings))
    sdk, bufs = anthropic_sdk(events)
    ours = assemble_anthropic(events)

    assert ours.message_id == sdk.id and ours.model == sdk.model
    assert ours.stop_reason == sdk.stop_reason and ours.stop_sequence == sdk.stop_sequence
    assert ours.usage["input_tokens"] == sdk.usage.input_tokens
    assert ours.usage["output_tokens"] == sdk.usage.output_tokens
    assert ours.message.text == "".join(b.text for b in sdk.content if b.type == "text")
    thinking = [(t.text, t.signature or None, t.redacted) for t in ours.message.thinking]
    assert thinking == [
        (b.thinking, b.signature or None, None) if b.type == "thinking" else ("", None, b.data)
        for b in sdk.content
        if b.type in ("thinking", "redacted_thinking")
    ]
    calls = iter(ours.message.tool_calls)
    problems = {p.index: p for p in ours.problems}
    for index, b in enumerate(sdk.content):
        if b.type != "tool_use":
            continue
        raw = bufs.get(index, b"").decode()
        whole = loads_or_none(raw)
        if whole is not None:  # legal and whole: the same call
            call = next(calls)
            assert (call.id, call.name, call.arguments) == (b.id, b.name, b.input)
        else:  # the SDK keeps whatever part parses; we report the call, with all its text
            p = problems.pop(index)
            assert (p.call_id, p.name, p.raw) == (b.id, b.name, raw)
            assert p.kind == "incomplete" and reply.stop_reason == "max_tokens"
    assert next(calls, None) is None and not problems


@st.composite
def openai_replies(draw) -> tuple[Reply, list[int]]:
    stop = draw(st.sampled_from(OPENAI_STOPS))
    blocks = []
    if draw(st.booleans()):
        blocks.append(Block("text", draw(tricky_text)))
    for i in range(draw(st.integers(0, 5))):
        blocks.append(
            Block(
                "tool",
                draw(argument_texts(stop == "length")),
                f"call_{i}",
                draw(st.sampled_from(["get_weather", "shell", "a"])),
            )
        )
    if draw(st.booleans()):
        blocks.insert(draw(st.integers(0, len(blocks))), Block("refusal", draw(tricky_text)))
    if draw(st.booleans()):  # an OpenAI-compatible server's reasoning_content
        blocks.insert(draw(st.integers(0, len(blocks))), Block("thinking", draw(tricky_text)))
    order = draw(st.lists(st.integers(0, max(len(blocks) - 1, 0)), max_size=40))
    usage = {"prompt_tokens": draw(st.integers(0, 10**6)), "completion_tokens": draw(st.integers(0, 10**6))}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return Reply(tuple(blocks), stop, usage), order


@settings(max_examples=60, deadline=None)
@given(openai_replies(), cuts(), st.booleans())
def test_openai_chat_agrees_with_the_sdk(reply_order, cut, include_usage):
    reply, order = reply_order
    chunks = list(openai_chunks(reply, cut, order=order, include_usage=include_usage))
    sdk = openai_sdk(chunks)
    ours = assemble_openai_chat(chunks)

    msg = sdk.choices[0].message
    assert ours.stop_reason == sdk.choices[0].finish_reason
    assert ours.message.text == (msg.content or "")
    assert ours.refusal == (msg.refusal or "")
    reasoning = getattr(msg, "reasoning_content", None)  # an extra field the SDK's model keeps
    assert [(t.text, t.signature) for t in ours.message.thinking] == ([(reasoning, None)] if reasoning else [])
    if include_usage:
        assert ours.usage == sdk.usage.model_dump(exclude_none=True)
    else:
        assert ours.usage == {} and sdk.usage is None
    calls = iter(ours.message.tool_calls)
    problems = iter(ours.problems)
    for tc in msg.tool_calls or []:
        whole = loads_or_none(tc.function.arguments)
        if whole is not None:
            call = next(calls)
            assert (call.id, call.name, call.arguments) == (tc.id, tc.function.name, whole)
        else:
            p = next(problems)
            assert (p.call_id, p.name, p.raw) == (tc.id, tc.function.name, tc.function.arguments)
            assert p.kind == "incomplete" and reply.stop_reason == "length"
    assert next(calls, None) is None and next(problems, None) is None


@st.composite
def anthropic_prefilled(draw) -> tuple[list[dict], Reply]:
    """A stream whose message_start already carries whole blocks; the streamed blocks are numbered on."""
    carried = []
    for i in range(draw(st.integers(1, 3))):
        lane = draw(st.sampled_from(["text", "tool", "thinking", "redacted_thinking"]))
        if lane == "text":
            carried.append({"type": "text", "text": draw(tricky_text)})
        elif lane == "tool":
            args = draw(st.dictionaries(tricky_text, json_values, max_size=3))
            carried.append({"type": "tool_use", "id": f"toolu_pre{i}", "name": "a", "input": args})
        elif lane == "thinking":
            carried.append({"type": "thinking", "thinking": draw(tricky_text), "signature": draw(st.text(max_size=8))})
        else:
            carried.append({"type": "redacted_thinking", "data": draw(tricky_text)})
    return carried, draw(anthropic_replies())


@settings(max_examples=40, deadline=None)
@given(anthropic_prefilled(), cuts())
def test_content_carried_in_message_start_is_kept_as_the_sdk_keeps_it(prefilled, cut):
    carried, reply = prefilled
    events = list(anthropic_events(reply, cut))
    events[0] = {**events[0], "message": {**events[0]["message"], "content": carried}}
    n = len(carried)
    for e in events:
        if "index" in e:
            e["index"] += n
    sdk, _ = anthropic_sdk(events)
    ours = assemble_anthropic(events)

    assert ours.message.text == "".join(b.text for b in sdk.content if b.type == "text")
    thinking = [(t.text, t.signature or None, t.redacted) for t in ours.message.thinking]
    assert thinking == [
        (b.thinking, b.signature or None, None) if b.type == "thinking" else ("", None, b.data)
        for b in sdk.content
        if b.type in ("thinking", "redacted_thinking")
    ]
    sdk_calls = [(b.id, b.name, b.input) for b in sdk.content if b.type == "tool_use"]
    ours_calls = [(c.id, c.name, c.arguments) for c in ours.message.tool_calls]
    cut_short = {p.call_id for p in ours.problems}
    assert ours_calls == [c for c in sdk_calls if c[0] not in cut_short]
    assert all(p.kind == "incomplete" and not p.call_id.startswith("toolu_pre") for p in ours.problems)


@st.composite
def responses_replies(draw) -> Reply:
    stop = draw(st.sampled_from(["stop", "length", "content_filter"]))
    blocks = []
    for i in range(draw(st.integers(0, 6))):
        lane = draw(st.sampled_from(["text", "tool", "thinking", "refusal"]))
        if lane == "tool":
            name = draw(st.sampled_from(["get_weather", "shell", "a"]))
            blocks.append(Block("tool", draw(argument_texts(stop == "length")), f"call_{i}", name))
        else:
            blocks.append(Block(lane, draw(tricky_text)))
    usage = {"input_tokens": draw(st.integers(0, 10**6)), "output_tokens": draw(st.integers(0, 10**6))}
    usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    return Reply(tuple(blocks), stop, usage, message_id="resp_1")


@settings(max_examples=60, deadline=None)
@given(responses_replies(), cuts())
def test_openai_responses_agree_with_the_sdk(reply, cut):
    events = list(openai_responses_events(reply, cut))
    output, usage = openai_responses_sdk(events)
    ours = assemble_openai_responses(events)

    texts = [c.text for o in output if o.type == "message" for c in o.content if c.type == "output_text"]
    refusals = [c.refusal for o in output if o.type == "message" for c in o.content if c.type == "refusal"]
    summaries = [s.text for o in output if o.type == "reasoning" for s in o.summary if s.text]
    assert ours.message.text == "".join(texts)
    assert ours.refusal == "".join(refusals)
    assert [(t.text, t.signature) for t in ours.message.thinking] == [(s, None) for s in summaries]
    calls = [o for o in output if o.type == "function_call"]
    if usage is not None:  # completed
        assert ours.stop_reason == ("tool_calls" if calls else "stop")
        assert ours.usage == usage.model_dump(exclude_none=True)
    else:
        assert ours.stop_reason == reply.stop_reason  # length or content_filter
    ok, problems = iter(ours.message.tool_calls), iter(ours.problems)
    for call in calls:
        whole = loads_or_none(call.arguments)
        if whole is not None:
            got = next(ok)
            assert (got.id, got.name, got.arguments) == (call.call_id, call.name, whole)
        else:
            p = next(problems)
            assert (p.call_id, p.name, p.raw) == (call.call_id, call.name, call.arguments)
            assert p.kind == "incomplete" and reply.stop_reason == "length"
    assert next(ok, None) is None and next(problems, None) is None
