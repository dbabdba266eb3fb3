"""The router protocol's messages: their JSON Schema (``spec/protocol.schema.json``) and small helpers.

A request is ``{type, request_id, data}``; every answer is the envelope
``{status, data, allowed_continuations}``.  Requests are checked against the
schema before anything else happens, so a malformed one is answered with an
``error`` envelope and changes nothing.  Content references are ``kind:id``;
sealed payloads are the envelopes of :mod:`loopfsm.router.crypto`.

What a sealed payload holds (the client seals, the router never sees a key):
``message:*`` and ``tool_call:*`` hold the canonical JSON of one conversation
message (:func:`message_text`), ``diff:*`` the JSON of the proposed change,
``plan:*`` the plan's text, ``memory:*`` the canonical JSON ``{key, value}``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache, cache
from pathlib import Path
from typing import Any

from loopfsm.router.errors import ProtocolError
from loopfsm.core.resources import _find

REQUEST_TYPES = ("execute", "tool_results", "approval_decisions", "decrypted", "sealed", "inject", "break")
STATUSES = ("completed", "awaiting_tool", "awaiting_approval", "awaiting_decrypt", "idle", "error")
#: A request body larger than this is refused before it is parsed.
MAX_REQUEST_BYTES = 8 * 1024 * 1024
#: A request body nested deeper than this is refused. How deep ``json.loads`` itself goes differs between
#: interpreters (CPython 3.11 stops near 1,000 levels, 3.13 near 10,000), so the router sets its own bound:
#: twice the 64 levels a streamed tool call's arguments may have, leaving room for the envelope around them.
MAX_REQUEST_DEPTH = 128


def nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether a parsed JSON value has more than ``limit`` levels (``[]`` has one); iterative, so any depth is safe."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def protocol_schema_path() -> Path:
    return _find("spec", "protocol.schema.json")


@lru_cache(maxsize=1)
def protocol_schema() -> dict[str, Any]:
    with open(protocol_schema_path(), encoding="utf-8") as fh:
        doc: dict[str, Any] = json.load(fh)
    return doc


@cache
def _validator(name: str) -> Any:
    import jsonschema

    schema = protocol_schema()
    sub = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{name}"}
    return jsonschema.Draft202012Validator(sub, format_checker=None)


@cache
def _fast_validator(name: str) -> Any:
    """The same sub-schema compiled to Python once (fastjsonschema): a quick yes for the common, valid message.

    The protocol schema keeps to keywords whose meaning draft 7 and 2020-12
    share (no ``$ref`` with siblings, no ``prefixItems``), so on a value
    decoded from JSON its yes is jsonschema's yes (a tuple built in Python
    passes it as an array, and jsonschema's draft 2020-12 refuses it: both
    the router and the client check what ``json.loads`` made, which has no
    tuples); a no, or anything it cannot judge, is handed to
    jsonschema, whose first error is what the client reads, so no message
    changes.  Annotations are dropped and ``const`` is spelled ``enum`` as
    for the machine schema (:func:`loopfsm.core.loader._fast_schema`).
    """
    import fastjsonschema  # noqa: PLC0415 - only a process that checks requests pays for it

    from loopfsm.core.loader import _fast_schema  # noqa: PLC0415

    schema = protocol_schema()
    sub = {"$defs": schema["$defs"], "$ref": f"#/$defs/{name}"}
    return fastjsonschema.compile(_fast_schema(sub), detailed_exceptions=False)


def _fast_valid(name: str, obj: Any) -> bool:
    try:
        _fast_validator(name)(obj)
    except Exception:  # noqa: BLE001 - invalid, or a value it cannot judge: jsonschema decides
        return False
    return True


def _where(err: Any) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)


@dataclass(frozen=True)
class Request:
    type: str
    request_id: str
    data: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": self.type, "request_id": self.request_id}
        if self.data or self.type != "break":
            d["data"] = self.data
        return d


def parse_request(obj: object) -> Request:
    """Check a decoded request against its schema; :class:`ProtocolError` names the first problem's place."""
    if not isinstance(obj, dict):
        raise ProtocolError("a request is a JSON object {type, request_id, data}")
    kind = obj.get("type")
    if kind not in REQUEST_TYPES:
        raise ProtocolError(f"request type must be one of {', '.join(REQUEST_TYPES)}")
    if _fast_valid(kind, obj):
        return Request(kind, obj["request_id"], dict(obj.get("data") or {}))
    errors = sorted(_validator(kind).iter_errors(obj), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        what = err.validator
        raise ProtocolError(
            f"{kind} request invalid at {_where(err)}: fails '{what}'"
            + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")
        )
    return Request(kind, obj["request_id"], dict(obj.get("data") or {}))


def check_response(obj: object) -> None:
    """Check a response envelope decoded from JSON against the schema (tests and the reference client use it).

    As for a request, the compiled schema answers the common, valid envelope and jsonschema explains a
    refusal.  The reference client checks every response: on the responses of a 20-turn encrypted session
    (``benchmarks/router_turn_cpu.py --encrypted``'s, whose pauses carry the sealed history) jsonschema took
    640 to 660 us a response, the compiled check 28 to 38 us.
    """
    if _fast_valid("response", obj):
        return
    errors = list(_validator("response").iter_errors(obj))
    if errors:
        raise ProtocolError(f"response invalid at {_where(errors[0])}: fails '{errors[0].validator}'")


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def args_hash(name: str, arguments: Any) -> str:
    """What a decision is bound to: the tool (or gate) and its exact arguments."""
    return "sha256:" + hashlib.sha256(canonical({"name": name, "arguments": arguments}).encode()).hexdigest()


def message_text(message: dict[str, Any]) -> str:
    """The text sealed for a ``message:*`` or ``tool_call:*`` reference: one message's canonical JSON."""
    return canonical(message)


def tool_result_message(call_id: str, content: str, is_error: bool) -> dict[str, Any]:
    """The message a tool result becomes, as the client seals it under the call's ``tool_call:*`` ref."""
    return {"role": "tool", "text": content, "tool_call_id": call_id, "is_error": is_error}


def prompt_ref(request_id: str) -> str:
    """Where a client seals the prompt of an execute or inject: derived from the request, known to both sides."""
    return f"message:u-{request_id}"


def envelope(status: str, data: dict[str, Any], allowed: list[str]) -> dict[str, Any]:
    return {"status": status, "data": data, "allowed_continuations": list(allowed)}


def error(
    code: str, message: str, allowed: list[str], *, retry_after_ms: int | None = None, retryable: bool | None = None
) -> dict[str, Any]:
    """An error envelope; ``retryable`` (default: busy and interrupted) says the same request may be re-sent."""
    again = code in ("busy", "interrupted") if retryable is None else retryable
    data: dict[str, Any] = {"code": code, "error": message, "retryable": again}
    if retry_after_ms is not None:
        data["retry_after_ms"] = retry_after_ms
    return envelope("error", data, allowed)


__all__ = [
    "Request",
    "parse_request",
    "check_response",
    "args_hash",
    "message_text",
    "tool_result_message",
    "prompt_ref",
    "envelope",
    "error",
    "protocol_schema",
    "REQUEST_TYPES",
    "STATUSES",
    "canonical",
]
