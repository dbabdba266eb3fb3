"""The compiled request check: a valid request never reaches jsonschema, and its yes is always jsonschema's yes.

Requests are checked on every turn, so the common, valid one is judged by
the schema compiled once to Python; anything it refuses is explained by
jsonschema, so no message a client reads changes.
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
