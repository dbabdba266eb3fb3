"""Is this JSON text whole, cut short, or broken?  One linear pass, no recursion.

A stream that stops early (a ``max_tokens`` stop) leaves a tool call's
arguments as a prefix of JSON.  Parsing "as much as parses" would hand a
driver a call with silently missing arguments; instead the assembler parses
the whole text once and, only when that fails, asks this module whether the
text could still have become valid JSON (``INCOMPLETE``) or never could
(``INVALID``).  The walk is iterative, so hostile nesting cannot exhaust the
stack.
"""

from __future__ import annotations

import re
from typing import Literal

Verdict = Literal["complete", "incomplete", "invalid"]
COMPLETE: Verdict = "complete"
INCOMPLETE: Verdict = "incomplete"
INVALID: Verdict = "invalid"

_WS = re.compile(r"[ \t\n\r]*")
_CHAR = r'(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))'
_STRING = re.compile(rf'"{_CHAR}*"')
_STRING_TAIL = re.compile(rf'"{_CHAR}*(?:\\(?:u[0-9a-fA-F]{{0,3}})?)?\Z')
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMBER_TAIL = re.compile(r"-?\Z|-?(?:0|[1-9][0-9]*)(?:\.[0-9]*\Z|(?:\.[0-9]+)?(?:[eE][+-]?[0-9]*)?\Z)")
_LITERAL = re.compile(r"true|false|null")
_LITERAL_TAIL = re.compile(r"(?:t(?:r(?:ue?)?)?|f(?:a(?:l(?:se?)?)?)?|n(?:u(?:ll?)?)?)\Z")

# What the walk expects next.
_VALUE, _VALUE_OR_CLOSE, _KEY, _KEY_OR_CLOSE, _COLON, _COMMA_OR_CLOSE, _END = range(7)


def classify(text: str) -> Verdict:
    """``complete`` if ``text`` is one JSON value, ``incomplete`` if it is a proper prefix of one, else ``invalid``."""
    pos, end = 0, len(text)
    stack: list[str] = []
    expect = _VALUE
    while True:
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if pos == end:
            return COMPLETE if expect == _END else INCOMPLETE
        c = text[pos]
        if expect in (_VALUE, _VALUE_OR_CLOSE):
            if c == "]" and expect == _VALUE_OR_CLOSE:
                stack.pop()
                pos += 1
            elif c in "{[":
                stack.append(c)
                pos += 1
                expect = _KEY_OR_CLOSE if c == "{" else _VALUE_OR_CLOSE
                continue
            elif c == '"':
                m = _STRING.match(text, pos)
                if m is None:
                    return INCOMPLETE if _STRING_TAIL.match(text, pos) else INVALID
                pos = m.end()
            elif c == "-" or c.isdigit():
                if _NUMBER_TAIL.match(text, pos):
                    # The number runs to the end: more digits could still come.
                    return COMPLETE if not stack and _NUMBER.fullmatch(text, pos) else INCOMPLETE
                m = _NUMBER.match(text, pos)
                if m is None:
                    return INVALID
                pos = m.end()
            else:
                m = _LITERAL.match(text, pos)
                if m is None:
                    return INCOMPLETE if _LITERAL_TAIL.match(text, pos) else INVALID
                pos = m.end()
            expect = _COMMA_OR_CLOSE if stack else _END
        elif expect in (_KEY, _KEY_OR_CLOSE):
            if c == "}" and expect == _KEY_OR_CLOSE:
                stack.pop()
                pos += 1
                expect = _COMMA_OR_CLOSE if stack else _END
            elif c == '"':
                m = _STRING.match(text, pos)
                if m is None:
                    return INCOMPLETE if _STRING_TAIL.match(text, pos) else INVALID
                pos = m.end()
                expect = _COLON
            else:
                return INVALID
        elif expect == _COLON:
            if c != ":":
                return INVALID
            pos += 1
            expect = _VALUE
        elif expect == _COMMA_OR_CLOSE:
            top = stack[-1]
            if c == ",":
                pos += 1
                expect = _KEY if top == "{" else _VALUE
            elif c == ("}" if top == "{" else "]"):
                stack.pop()
                pos += 1
                expect = _COMMA_OR_CLOSE if stack else _END
            else:
                return INVALID
        else:  # _END: something after a whole value
            return INVALID
