"""The compiled protocol check: a valid request or response never reaches jsonschema, and its yes is jsonschema's.

Requests are checked on every turn (by the router) and so are responses (by
the reference client), so the common, valid one is judged by the schema
compiled once to Python; anything it refuses is explained by jsonschema, so
no message a client reads changes.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopfsm.router import protocol as P

VALID: list[dict[str, Any]] = [
    {"type": "execute", "request_id": "r1", "data": {"prompt": "hello"}},
    {"type": "execute", "request_id": "r2", "data": {"prompt": "hi", "mode": "plaintext"}},
    {"type": "inject", "request_id": "r3", "data": {"message": "stop that"}},
    {"type": "break", "request_id": "r4"},
    {
        "type": "tool_results",
        "request_id": "r5",
        "data": {"results": [{"call_id": "c1", "content": "ok", "is_error": False}]},
    },
]

ENVELOPE = {
    "version": 1,
    "algorithm": "xchacha20poly1305",
    "key_id": "k-1",
    "nonce": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    "ciphertext": "c2VhbGVk",
}
VALID_RESPONSES: list[dict[str, Any]] = [
    {
        "status": "completed",
        "data": {"run_id": "r", "message": "done", "trace_id": "trace:r"},
        "allowed_continuations": [],
    },
    {
        "status": "awaiting_decrypt",
        "data": {"run_id": "r", "to_decrypt": {"message:a1": ENVELOPE, "tool_call:b2": ENVELOPE}},
        "allowed_continuations": ["decrypted", "inject", "break"],
    },
    {
        "status": "completed",
        "data": {"run_id": "r", "message": "done", "to_encrypt": {"message:c3": "{}"}},
        "allowed_continuations": ["sealed", "inject", "break"],
    },
    {
        "status": "awaiting_tool",
        "data": {
            "run_id": "r",
            "tool_requests": [
                {
                    "call_id": "c1",
                    "name": "shell",
                    "arguments": {"command": "ls"},
                    "requires_approval": "ask",
                    "args_hash": "sha256:00",
                    "ref": "tool_call:d4",
                }
            ],
        },
        "allowed_continuations": ["tool_results", "inject", "break"],
    },
    {
        "status": "awaiting_approval",
        "data": {
            "run_id": "r",
            "approvals": [
                {"approval_id": "a1", "kind": "plan", "summary": "s", "args_hash": "sha256:00", "expires_at": 1}
            ],
        },
        "allowed_continuations": ["approval_decisions", "inject", "break"],
    },
    {
        "status": "error",
        "data": {"code": "busy", "retryable": True, "retry_after_ms": 10, "error": "busy"},
        "allowed_continuations": ["execute"],
    },
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def _jsonschema_says(kind: str, obj: Any) -> bool:
    return not list(P._validator(kind).iter_errors(obj))


def test_a_valid_request_is_judged_without_jsonschema(monkeypatch: pytest.MonkeyPatch) -> None:
    for req in VALID:
        assert _jsonschema_says(req["type"], req), req  # the examples are valid to the schema itself
    monkeypatch.setattr(P, "_validator", lambda name: pytest.fail("jsonschema was asked about a valid request"))
    for req in VALID:
        assert P.parse_request(req) == P.Request(req["type"], req["request_id"], dict(req.get("data") or {}))


def test_an_invalid_request_is_still_explained_by_jsonschema() -> None:
    with pytest.raises(P.ProtocolError, match=r"execute request invalid at \$\.data\.prompt: fails 'type'"):
        P.parse_request({"type": "execute", "request_id": "r1", "data": {"prompt": 3}})


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(P.REQUEST_TYPES),
    base=st.sampled_from(VALID),
    key=st.sampled_from(["request_id", "data", "type", "extra", "prompt", "message", "results", "mode"]),
    value=json_values,
    inside=st.booleans(),
)
def test_the_compiled_yes_is_jsonschemas_yes(
    kind: str, base: dict[str, Any], key: str, value: Any, inside: bool
) -> None:
    obj: dict[str, Any] = {**base, "type": kind}
    if inside and isinstance(obj.get("data"), dict):
        obj["data"] = {**obj["data"], key: value}
    else:
        obj[key] = value
    if P._fast_valid(kind, obj):
        assert _jsonschema_says(kind, obj), obj


def _jsonschema_says_response(obj: Any) -> bool:
    return not list(P._validator("response").iter_errors(obj))


def test_a_valid_response_is_judged_without_jsonschema(monkeypatch: pytest.MonkeyPatch) -> None:
    for resp in VALID_RESPONSES:
        assert _jsonschema_says_response(resp), resp  # the examples are valid to the schema itself
    monkeypatch.setattr(P, "_validator", lambda name: pytest.fail("jsonschema was asked about a valid response"))
    for resp in VALID_RESPONSES:
        P.check_response(resp)


def test_an_invalid_response_is_still_explained_by_jsonschema() -> None:
    with pytest.raises(P.ProtocolError, match=r"response invalid at \$\.data\.to_decrypt\.message:a1\.version: fails"):
        P.check_response(
            {
                "status": "awaiting_decrypt",
                "data": {"to_decrypt": {"message:a1": {**ENVELOPE, "version": True}}},
                "allowed_continuations": [],
            }
        )


@settings(max_examples=300, deadline=None)
@given(
    base=st.sampled_from(VALID_RESPONSES),
    key=st.sampled_from(
        ["status", "data", "allowed_continuations", "extra", "run_id", "to_decrypt", "code", "retryable", "message"]
        + list(ENVELOPE)
    ),
    value=json_values,
    where=st.sampled_from(["top", "data", "envelope"]),
)
def test_the_compiled_yes_is_jsonschemas_yes_for_a_response(
    base: dict[str, Any], key: str, value: Any, where: str
) -> None:
    obj: dict[str, Any] = dict(base)
    if where == "envelope":  # inside a sealed payload the client is sent to open
        obj["data"] = {**obj["data"], "to_decrypt": {"message:a1": {**ENVELOPE, key: value}}}
    elif where == "data":
        obj["data"] = {**obj["data"], key: value}
    else:
        obj[key] = value
    if P._fast_valid("response", obj):
        assert _jsonschema_says_response(obj), obj
