"""``loopfsm run stream_assembly --events``: recorded streams replayed, hostile files refused cleanly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopfsm.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["run", "stream_assembly", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_anthropic_recording_prints_slots_as_they_open_and_close(capsys):
    code, out, _ = run(capsys, "--events", str(ROOT / "examples" / "weather_anthropic.jsonl"))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "anthropic messages stream"
    assert lines[1:4] == [
        "    3  open   #0 thinking",
        "    8  close  #0 thinking 77 chars, signed",
        "    9  open   #1 text",
    ]
    assert "   19  stop   tool_use" in lines and "   20  done" in lines
    message = json.loads(lines[-1].removeprefix("message: "))
    assert message["tool_calls"][0]["arguments"] == {"city": "Paris", "unit": "celsius"}


def test_openai_sse_capture_with_parallel_calls(capsys):
    code, out, _ = run(capsys, "--events", str(ROOT / "examples" / "weather_openai.sse"))
    assert code == 0
    assert "    9  open   #1 tool get_weather (call_ABC8gk2mWZd0kQy7zrx9Bq4N)" in out
    assert 'stop reason: tool_calls; usage: {"completion_tokens": 46' in out


def write(tmp_path: Path, lines: list) -> str:
    path = tmp_path / "stream.jsonl"
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8")
    return str(path)


START = {"type": "message_start", "message": {"id": "m", "model": "x", "role": "assistant", "usage": {}}}


@pytest.mark.parametrize(
    "lines,code,message",
    [
        (
            [START, {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "secret"}}],
            1,
            ":2: stream_assembly: feed 'delta' is illegal in state 'Streaming': "
            "a fragment for block 0, which was never",
        ),
        ([START, "{not json"], 1, ":2: not JSON"),
        ([START, '{"type": "ping", "a": "b'], 1, ":2: not JSON (Unterminated string starting at column 23)"),
        ([START, '{"type" 1}'], 1, ":2: not JSON (Expecting ':' delimiter at column 9)"),
        ([START, "[1, 2]"], 1, "an event must be a JSON object"),
        ([START, "[" * 100_000], 1, ":2: JSON that cannot be read"),
        ([START, '{"type": "ping", "n": ' + "1" * 5000 + "}"], 1, ":2: JSON that cannot be read"),
        ([{"hello": 1}], 1, "neither an Anthropic event nor an OpenAI chunk"),
        ([], 1, "no events in the file"),
        (
            [START, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}],
            1,
            "ended in state Streaming",
        ),
        (
            [START, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}],
            1,
            "the provider failed the stream",
        ),
    ],
)
def test_bad_recordings_fail_with_a_located_message(tmp_path, capsys, lines, code, message):
    got, _, err = run(capsys, "--events", write(tmp_path, lines))
    assert got == code and message in err and "Traceback" not in err
    assert "secret" not in err


def test_cut_arguments_are_reported_and_fail(tmp_path, capsys):
    lines = [
        START,
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"a": "b'}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]
    code, out, _ = run(capsys, "--events", write(tmp_path, lines))
    assert code == 1
    assert "close  #0 tool f (t1): arguments incomplete after 8 chars" in out
    assert "problem: tool call t1 (f): arguments incomplete after 8 characters" in out


def test_blocks_a_message_start_carries_are_shown_opening_and_closing(tmp_path, capsys):
    start = {"type": "message_start", "message": {**START["message"], "content": [{"type": "text", "text": "pre"}]}}
    lines = [
        start,
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]
    code, out, _ = run(capsys, "--events", write(tmp_path, lines))
    assert code == 0
    assert out.splitlines()[1:3] == ["    1  open   #0 text", '    1  close  #0 text 3 chars: "pre"']


def test_a_recording_saved_with_a_byte_order_mark_replays(tmp_path, capsys):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + (ROOT / "examples" / "weather_anthropic.jsonl").read_bytes())
    code, out, err = run(capsys, "--events", str(path))
    assert code == 0 and out.startswith("anthropic messages stream") and "stop reason: tool_use" in out, err


def test_binary_missing_and_misused(tmp_path, capsys):
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"\xff\xfe\x00garbage\n")
    code, _, err = run(capsys, "--events", str(junk))
    assert code == 1 and "not UTF-8" in err
    code, _, err = run(capsys, "--events", str(tmp_path / "missing.jsonl"))
    assert code == 2 and "cannot read" in err
    assert main(["run", "engine_brain", "--events", str(junk)]) == 2
    assert "replays a provider stream into stream_assembly" in capsys.readouterr().err
    assert main(["run", "stream_assembly"]) == 2


def test_half_a_surrogate_pair_is_printed_as_its_escape_not_a_traceback(tmp_path, capsys):
    """A lone surrogate escape in text is kept (the SDK keeps it) and printed as the recording spelled it."""
    text = '{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a\\ud83d"}}'
    lines = [
        START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        text,
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]
    code, out, err = run(capsys, "--events", write(tmp_path, lines))
    assert code == 0 and err == ""
    assert '    4  close  #0 text 2 chars: "a\\ud83d"' in out.splitlines()
    message = json.loads(out.splitlines()[-1].removeprefix("message: "))
    assert message["text"] == "a\ud83d"


def test_arguments_with_half_a_surrogate_pair_are_a_named_problem(tmp_path, capsys):
    lines = [
        START,
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"a": "\\ud83d"}'},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]
    code, out, err = run(capsys, "--events", write(tmp_path, lines))
    assert code == 1 and "Traceback" not in err
    assert "problem: tool call t1 (f): arguments hold a string with half a surrogate pair" in out
