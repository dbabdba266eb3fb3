"""``loopfsm run stream_assembly --events FILE``: replay a recorded stream, printing slots as they open and close.

The file holds one event per line: the JSON of an Anthropic Messages event or
an OpenAI chat-completion chunk (which one is told by the first event).  Lines
of a raw SSE capture work too: ``data: `` prefixes are dropped, ``event:``
lines, comments and blank lines skipped, and ``data: [DONE]`` ends an OpenAI
stream.  The file is read a line at a time, so a long recording is never held
in memory whole; a line longer than MAX_LINE is refused.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TextIO

from loopfsm.core.errors import LoopFsmError
from loopfsm.router.errors import StreamEventError
from .anthropic import AnthropicStream
from .openai_chat import OpenAIChatStream

MAX_LINE = 16 << 20  # characters in one event line
EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
_ANTHROPIC_TYPES = {
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "error",
}


_LABELS = {"Stopped": "stop", "Done": "done", "Failed": "failed"}


def _say(line: str, out: TextIO) -> None:
    """Print one line; a character ``out`` cannot encode is printed as its backslash escape.

    Half a surrogate pair (a ``\\ud83d`` escape alone in a JSON string) is a
    Python character no UTF-8 stream can write; the escape is how the
    recording spelled it, and inside the JSON this command prints it is read
    back as the same character.
    """
    encoding = getattr(out, "encoding", None) or "utf-8"
    print(line.encode(encoding, "backslashreplace").decode(encoding), file=out)


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _describe_close(slot: Any) -> str:
    body = slot.current_text()
    if slot.lane == "tool":
        if slot.problem is not None:
            return f"{slot.name} ({slot.block_id}): arguments {slot.problem} after {len(body)} chars"
        return f"{slot.name} ({slot.block_id}): {_short(json.dumps(slot.arguments, ensure_ascii=False))}"
    if slot.lane == "thinking":
        return f"{len(body)} chars{', signed' if slot.signature else ', unsigned'}"
    if slot.lane == "redacted_thinking":
        return f"{len(body)} chars of redacted data"
    return f"{len(body)} chars: {_short(json.dumps(body, ensure_ascii=False))}"


def _lines(f: TextIO, at: list[int]) -> Any:
    """(line number, event dict or None for the end of an OpenAI stream) for each event line.

    ``at[0]`` follows the line being read, so an error names it.
    """
    for number, raw in enumerate(iter(lambda: f.readline(MAX_LINE + 1), ""), 1):
        at[0] = number
        if len(raw) > MAX_LINE:
            raise StreamEventError(f"longer than {MAX_LINE} characters")
        line = raw.strip()
        if not line or line.startswith((":", "event:")):
            continue
        if line.startswith("data:"):
            line = line[5:].strip()
        if line == "[DONE]":
            yield number, None
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError as err:
            word = "" if err.msg.endswith(" at") else " at"  # "Unterminated string starting at" has its own
            raise StreamEventError(f"not JSON ({err.msg}{word} column {err.colno})") from None
        except (ValueError, RecursionError):  # a number past Python's digit limit, or nesting past the stack
            raise StreamEventError("JSON that cannot be read (too deeply nested or a number too long)") from None
        if not isinstance(event, dict):
            raise StreamEventError(f"an event must be a JSON object, got {type(event).__name__}")
        yield number, event


def replay(path: Path, out: TextIO | None = None) -> int:
    """Feed the recorded stream at ``path``, printing each slot's opening and closing and the result."""
    out = out or sys.stdout
    stream: AnthropicStream | OpenAIChatStream | None = None
    number = 0
    at = [0]
    try:
        with path.open(encoding="utf-8-sig") as f:  # a byte-order mark an editor saved is not an event
            for number, event in _lines(f, at):
                if stream is None:
                    if event is not None and event.get("type") in _ANTHROPIC_TYPES:
                        stream = AnthropicStream()
                    elif event is not None and ("choices" in event or event.get("object") == "chat.completion.chunk"):
                        stream = OpenAIChatStream()
                    else:
                        raise StreamEventError("neither an Anthropic event nor an OpenAI chunk")
                    print(
                        f"{'anthropic messages' if isinstance(stream, AnthropicStream) else 'openai chat'} stream",
                        file=out,
                    )
                m = stream.machine
                before = {i for idx in m.data.open_slots.values() for i in idx}
                count = len(m.data.slots)
                state = m.state
                if event is None:
                    if not isinstance(stream, OpenAIChatStream):
                        raise StreamEventError("[DONE] ends OpenAI streams, not Anthropic ones")
                    stream.finish()
                else:
                    stream.feed(event)
                now = {i for idx in m.data.open_slots.values() for i in idx}
                for i in range(count, len(m.data.slots)):
                    s = m.data.slots[i]
                    header = f" {s.name} ({s.block_id})" if s.lane == "tool" else ""
                    _say(f"{number:>5}  open   #{i} {s.lane}{header}", out)
                    if i not in now:  # opened and closed by one event: a block message_start carries
                        _say(f"{number:>5}  close  #{i} {s.lane} {_describe_close(s)}", out)
                for i in sorted(before - now):
                    s = m.data.slots[i]
                    _say(f"{number:>5}  close  #{i} {s.lane} {_describe_close(s)}", out)
                if m.state != state and m.state in _LABELS:
                    _say(f"{number:>5}  {_LABELS[m.state]:<6} {_state_note(m)}".rstrip(), out)
        if stream is None:
            raise StreamEventError("no events in the file")
        if isinstance(stream, OpenAIChatStream) and stream.machine.state == "Stopped":
            stream.finish()  # the recording ends where the HTTP body ended
            _say(f"{number:>5}  done   (end of file)", out)
        if stream.machine.state != "Done":
            state = stream.machine.state
            if state == "Failed":
                _say(f"{path}: the provider failed the stream", sys.stderr)
            else:
                _say(f"{path}: the stream ended in state {state}, before the message finished", sys.stderr)
            return EXIT_INVALID
        result = stream.result()
    except OSError as err:
        _say(f"{path}: cannot read: {err.strerror or err}", sys.stderr)
        return EXIT_USAGE
    except UnicodeDecodeError:
        _say(f"{path}: not UTF-8 text", sys.stderr)
        return EXIT_INVALID
    except LoopFsmError as err:
        where = f"{path}:{at[0]}: " if at[0] else f"{path}: "
        _say(f"{where}{err}", sys.stderr)
        return EXIT_INVALID
    _say(f"stop reason: {result.stop_reason}; usage: {json.dumps(result.usage, sort_keys=True)}", out)
    for p in result.problems:
        _say(f"problem: {p}", out)
    _say(f"message: {json.dumps(result.message.to_json(), ensure_ascii=False)}", out)
    return EXIT_OK if result.ok else EXIT_INVALID


def _state_note(m: Any) -> str:
    if m.state == "Failed":
        return str(m.state_data["kind"])
    if m.state == "Stopped":
        return str(m.data.stop_reason)
    return ""
