"""The values the engine brain speaks in: steps it asks for, outcomes it ends with, errors they map to.

They are plain frozen dataclasses so a driver can pattern-match on them
(``match step: case CallLLM(turn=t): ...``) and a test can compare them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .messages import MESSAGE_SCHEMA, TOOL_CALL_SCHEMA, Message, ToolCall


class CompactionReason(StrEnum):
    Emergency = "Emergency"
    ThresholdExceeded = "ThresholdExceeded"


Emergency = CompactionReason.Emergency
ThresholdExceeded = CompactionReason.ThresholdExceeded


# -- errors a finished run maps to ------------------------------------------------------

class LoopError(Exception):
    """An agent run's failure, as the driver reports it to its caller.

    Unlike :class:`loopfsm.LoopFsmError` (a misuse of loopfsm), these describe
    how a run ended.  They survive snapshots by ``kind`` and ``message``.
    """

    kind = "LoopError"

    def __init__(self, message: str = "", *, kind: str | None = None):
        super().__init__(message)
        self.message = message
        if kind is not None:
            self.kind = kind

    def __eq__(self, other: Any) -> bool:
        return type(other) is type(self) and (other.kind, other.message) == (self.kind, self.message)

    def __hash__(self) -> int:
        return hash((type(self), self.kind, self.message))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}

    @staticmethod
    def from_json(d: dict[str, Any]) -> LoopError:
        cls = ERROR_KINDS.get(d["kind"])
        if cls is None:  # an error kind a driver defined: keep it, kind and all
            return LoopError(d["message"], kind=d["kind"])
        return cls(d["message"])


class RunCancelled(LoopError):
    kind = "RunCancelled"


class TurnLimitExceeded(LoopError):
    kind = "TurnLimitExceeded"


class ContextExceeded(LoopError):
    kind = "ContextExceeded"


class ModelError(LoopError):
    kind = "ModelError"


class ToolError(LoopError):
    kind = "ToolError"


ERROR_KINDS: dict[str, type[LoopError]] = {c.kind: c for c in
                                           (LoopError, RunCancelled, TurnLimitExceeded, ContextExceeded,
                                            ModelError, ToolError)}

LOOP_ERROR_SCHEMA = {"type": "object", "required": ["kind", "message"], "additionalProperties": False,
                     "properties": {"kind": {"type": "string"}, "message": {"type": "string"}}}


# -- outcomes -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Completed:
    final_text: str


@dataclass(frozen=True)
class Cancelled:
    pass


@dataclass(frozen=True)
class MaxTurnsExceeded:
    pass


@dataclass(frozen=True)
class Failed:
    error: LoopError


Outcome = Completed | Cancelled | MaxTurnsExceeded | Failed
OUTCOMES: dict[str, type] = {c.__name__: c for c in (Completed, Cancelled, MaxTurnsExceeded, Failed)}


def outcome_to_json(o: Outcome) -> dict[str, Any]:
    d: dict[str, Any] = {"kind": type(o).__name__}
    if isinstance(o, Completed):
        d["final_text"] = o.final_text
    elif isinstance(o, Failed):
        d["error"] = o.error.to_json()
    return d


def outcome_from_json(d: dict[str, Any]) -> Outcome:
    kind = d["kind"]
    if kind == "Completed":
        return Completed(d["final_text"])
    if kind == "Failed":
        return Failed(LoopError.from_json(d["error"]))
    return OUTCOMES[kind]()


OUTCOME_SCHEMA = {
    "type": "object",
    "required": ["kind"],
    "oneOf": [
        {"properties": {"kind": {"const": "Completed"}, "final_text": {"type": "string"}},
         "required": ["final_text"], "additionalProperties": False},
        {"properties": {"kind": {"const": "Failed"}, "error": LOOP_ERROR_SCHEMA},
         "required": ["error"], "additionalProperties": False},
        {"properties": {"kind": {"enum": ["Cancelled", "MaxTurnsExceeded"]}}, "additionalProperties": False},
    ],
}


# -- tool calls awaiting dispatch --------------------------------------------------------

@dataclass(frozen=True)
class PendingToolCall:
    """A call the model asked for; ``answer`` is set when the brain answered it itself (unknown tool)."""

    call: ToolCall
    answer: Message | None = None
    generation: int | None = None  # the breaker permit's generation, when a ToolHealth was consulted

    @property
    def pre_answered(self) -> bool:
        return self.answer is not None

    def to_json(self) -> dict[str, Any]:
        return {"call": self.call.to_json(), "answer": None if self.answer is None else self.answer.to_json(),
                "generation": self.generation}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PendingToolCall:
        return cls(ToolCall.from_json(d["call"]), None if d["answer"] is None else Message.from_json(d["answer"]),
                   d.get("generation"))


PENDING_TOOL_SCHEMA = {"type": "object", "required": ["call", "answer"], "additionalProperties": False,
                       "properties": {"call": TOOL_CALL_SCHEMA,
                                      "answer": {"anyOf": [{"type": "null"}, MESSAGE_SCHEMA]},
                                      "generation": {"type": ["integer", "null"]}}}


# -- steps: the brain's answers to "what next?" ------------------------------------------------

@dataclass(frozen=True)
class CallLLM:
    turn: int


@dataclass(frozen=True)
class CallTools:
    turn: int
    calls: tuple[PendingToolCall, ...]


@dataclass(frozen=True)
class Compact:
    reason: CompactionReason


@dataclass(frozen=True)
class Done:
    outcome: Outcome


Step = CallLLM | CallTools | Compact | Done
STEP_TYPES = (CallLLM, CallTools, Compact, Done)
