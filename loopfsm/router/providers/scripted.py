"""A model that answers from a script: deterministic, offline, the default provider of demos and tests.

The script is a YAML (or already-parsed) list of replies, served in order.  A
reply is an assistant turn (text and/or tool calls, with token usage) or a
failure of a given class, so a script can also exercise the fallback breaker.

A scripted model runs in this process, so it discloses nothing: it is local
(``remote = False``).  A script file may say ``remote: true`` to stand in for
a remote model offline, so a router's disclosure approvals can be shown and
tested without a network.  The router's own tools are scripted like any
other: a ``submit_plan`` call raises a plan approval, a ``remember`` call
writes session memory, and ``input_tokens`` / ``output_tokens`` drive the
cost ceiling.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, cast

import yaml

from loopfsm.router.errors import NotAScriptedModel, ProviderError
from loopfsm.core.errors import ScriptError
from loopfsm.machines.messages import Message, ToolCall
from . import FAILURE_CLASSES, ModelReply, ModelRequest, StopReason

#: A script is small; anything larger is a mistake (or an attack), refused before parsing.
MAX_SCRIPT_BYTES = 1024 * 1024
_REPLY_KEYS = {"text", "tool_calls", "stop_reason", "input_tokens", "output_tokens", "error", "retry_after_ms"}
_STOPS = ("end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "pause_turn")


def _reply(i: int, raw: object) -> ModelReply | ProviderError:
    where = f"replies[{i}]"
    if not isinstance(raw, Mapping):
        raise ScriptError(f"{where}: a reply is a mapping")
    unknown = sorted(str(k)[:32] for k in raw if k not in _REPLY_KEYS)
    if unknown:
        raise ScriptError(f"{where}: unknown keys {unknown} (known: {sorted(_REPLY_KEYS)})")
    if "error" in raw:
        outcome = raw["error"]
        if outcome not in FAILURE_CLASSES:
            raise ScriptError(f"{where}.error: one of {', '.join(FAILURE_CLASSES)}")
        retry = raw.get("retry_after_ms")
        if retry is not None and (type(retry) is not int or retry < 0):
            raise ScriptError(f"{where}.retry_after_ms: a non-negative integer")
        return ProviderError("scripted", outcome, "scripted failure", retry)
    text = raw.get("text", "")
    if not isinstance(text, str):
        raise ScriptError(f"{where}.text: a string")
    calls = []
    for j, c in enumerate(raw.get("tool_calls") or ()):
        if not isinstance(c, Mapping) or not isinstance(c.get("id"), str) or not isinstance(c.get("name"), str):
            raise ScriptError(f"{where}.tool_calls[{j}]: needs string id and name")
        args = c.get("arguments", {})
        if not isinstance(args, Mapping):
            raise ScriptError(f"{where}.tool_calls[{j}].arguments: a mapping")
        calls.append(ToolCall(c["id"], c["name"], dict(args)))
    stop = raw.get("stop_reason", "tool_use" if calls else "end_turn")
    if stop not in _STOPS:
        raise ScriptError(f"{where}.stop_reason: one of {', '.join(_STOPS)}")
    usage = []
    for key in ("input_tokens", "output_tokens"):
        value = raw.get(key, 0)
        if type(value) is not int or value < 0:
            raise ScriptError(f"{where}.{key}: a non-negative integer")
        usage.append(value)
    return ModelReply(Message.assistant(text, calls), cast(StopReason, stop), usage[0], usage[1])


class ScriptedProvider:
    """Serves its replies in order; asks for one more than it has and it says so (:class:`ScriptError`)."""

    name = "scripted"

    def __init__(self, replies: Sequence[object], *, remote: bool = False):
        if isinstance(replies, (str, bytes)) or not isinstance(replies, Sequence):
            raise ScriptError("a script is a list of replies")
        if not isinstance(remote, bool):
            raise ScriptError("remote: true or false")
        #: Whether this model stands in for a remote one (a router then asks for disclosure consent).
        self.remote = remote
        self._replies = [_reply(i, r) for i, r in enumerate(replies)]
        self.calls: list[ModelRequest] = []

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ScriptedProvider:
        """Load ``replies:`` from a YAML file, safely and within a size budget."""
        try:
            with open(path, "rb") as fh:
                raw = fh.read(MAX_SCRIPT_BYTES + 1)
        except OSError as err:
            raise ScriptError(f"cannot read script {os.fspath(path)!s}: {err.strerror}") from None
        if len(raw) > MAX_SCRIPT_BYTES:
            raise ScriptError(f"script larger than {MAX_SCRIPT_BYTES} bytes")
        try:
            doc: Any = yaml.safe_load(raw)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" at {mark.line + 1}:{mark.column + 1}" if mark is not None else ""
            raise ScriptError(f"script is not valid YAML{where}") from None
        if not isinstance(doc, Mapping) or "replies" not in doc:
            raise NotAScriptedModel(doc)
        unknown = sorted(str(k)[:32] for k in doc if k not in ("replies", "remote"))
        if unknown:
            raise ScriptError(f"unknown keys {unknown} in a script file (known: remote, replies)")
        return cls(doc["replies"], remote=doc.get("remote", False))

    @property
    def remaining(self) -> int:
        return len(self._replies) - len(self.calls)

    def reply_at(self, index: int, request: ModelRequest) -> ModelReply:
        """Reply number ``index``, whatever was asked before: a stateless caller (the router, which may
        restart between turns) keeps the index with its run, so a retried turn gets the same reply."""
        if not 0 <= index < len(self._replies):
            raise ScriptError(f"the script has no reply {index + 1} (it has {len(self._replies)})")
        reply = self._replies[index]
        if isinstance(reply, ProviderError):
            raise ProviderError(reply.provider, reply.outcome, "scripted failure", reply.retry_after_ms)
        return reply

    def complete(self, request: ModelRequest) -> ModelReply:
        if not self.remaining:
            raise ScriptError(f"the script has no reply left (it had {len(self._replies)})")
        reply = self._replies[len(self.calls)]
        self.calls.append(request)
        if isinstance(reply, ProviderError):
            raise ProviderError(reply.provider, reply.outcome, "scripted failure", reply.retry_after_ms)
        return reply
