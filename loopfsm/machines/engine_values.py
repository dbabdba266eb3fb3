"""The values the engine brain speaks in: steps it asks for, outcomes it ends with, errors they map to.

They are plain frozen dataclasses so a driver can pattern-match on them
(``match step: case CallLLM(turn=t): ...``) and a test can compare them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from loopfsm.core.errors import RegistryError, shown
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
    how a run ended.  They survive snapshots exactly: ``kind``, ``message`` and
    the class itself, which is one of the classes here or one a driver declared
    with :func:`register_loop_error`; the brain refuses any other (a restore
    could not rebuild it), when it is fed, not when it is saved.
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
        d = {"kind": self.kind, "message": self.message}
        if type(self) is not ERROR_KINDS.get(self.kind, LoopError):
            d["class"] = type(self).__name__
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> LoopError:
        kind, message = d["kind"], d["message"]
        cls = ERROR_CLASSES[d["class"]] if "class" in d else ERROR_KINDS.get(kind, LoopError)
        err = cls.__new__(cls)  # not cls(...): a driver's class may take other constructor arguments
        Exception.__init__(err, message)
        err.message = message
        err.kind = kind
        return err


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


ERROR_KINDS: dict[str, type[LoopError]] = {
    c.kind: c for c in (LoopError, RunCancelled, TurnLimitExceeded, ContextExceeded, ModelError, ToolError)
}

#: Every LoopError class a snapshot may name, by class name: these, and the drivers' own.
ERROR_CLASSES: dict[str, type[LoopError]] = {c.__name__: c for c in ERROR_KINDS.values()}


def register_loop_error(cls: type[LoopError]) -> type[LoopError]:
    """Declare a driver's LoopError subclass, so a brain that failed with it resumes as it (a decorator)."""
    if not (isinstance(cls, type) and issubclass(cls, LoopError)):
        raise RegistryError(f"register_loop_error takes a LoopError subclass, got {shown(cls)}")
    known = ERROR_CLASSES.get(cls.__name__)
    if known is not None and known is not cls:
        raise RegistryError(f"another LoopError class is already registered as '{cls.__name__}'")
    ERROR_CLASSES[cls.__name__] = cls
    return cls


def loop_error_problem(err: Any) -> str | None:
    """Why ``err`` cannot be kept in a snapshot and restored as itself, or None."""
    if not isinstance(err, LoopError):
        return f"expected a LoopError, got {type(err).__name__}"
    if ERROR_CLASSES.get(type(err).__name__) is not type(err):
        return (
            f"{type(err).__name__} is not a registered LoopError class, so a restored brain could not "
            "rebuild it: declare it with register_loop_error"
        )
    if type(err.kind) is not str or type(err.message) is not str:
        return "a LoopError's kind and message must be strings"
    return None


LOOP_ERROR_SCHEMA = {
    "type": "object",
    "required": ["kind", "message"],
    "additionalProperties": False,
    "properties": {"kind": {"type": "string"}, "message": {"type": "string"}, "class": {"type": "string"}},
}


# -- outcomes -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Completed:
    """The run ended with the model's final answer."""

    final_text: str


@dataclass(frozen=True)
class Cancelled:
    """The run ended because the driver cancelled it."""


@dataclass(frozen=True)
class MaxTurnsExceeded:
    """The run ended at the policy's turn limit."""


@dataclass(frozen=True)
class Failed:
    """The run ended with an error, kept so a restore rebuilds it."""

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
    outcome: Outcome = OUTCOMES[kind]()
    return outcome


OUTCOME_SCHEMA = {
    "type": "object",
    "required": ["kind"],
    "oneOf": [
        {
            "properties": {"kind": {"const": "Completed"}, "final_text": {"type": "string"}},
            "required": ["final_text"],
            "additionalProperties": False,
        },
        {
            "properties": {"kind": {"const": "Failed"}, "error": LOOP_ERROR_SCHEMA},
            "required": ["error"],
            "additionalProperties": False,
        },
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

    @property
    def permit(self) -> Any:
        """The breaker permit to record this call's result with (None when no ToolHealth was consulted)."""
        if self.generation is None:
            return None
        from .breaker_values import Allow

        return Allow(self.call.id, self.generation, tool=self.call.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "call": self.call.to_json(),
            "answer": None if self.answer is None else self.answer.to_json(),
            "generation": self.generation,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PendingToolCall:
        return cls(
            ToolCall.from_json(d["call"]),
            None if d["answer"] is None else Message.from_json(d["answer"]),
            d.get("generation"),
        )


PENDING_TOOL_SCHEMA = {
    "type": "object",
    "required": ["call", "answer"],
    "additionalProperties": False,
    "properties": {
        "call": TOOL_CALL_SCHEMA,
        "answer": {"anyOf": [{"type": "null"}, MESSAGE_SCHEMA]},
        "generation": {"type": ["integer", "null"]},
    },
}


# -- steps: the brain's answers to "what next?" ------------------------------------------------


@dataclass(frozen=True)
class CallLLM:
    """Next step: ask the model for turn ``turn``."""

    turn: int


@dataclass(frozen=True)
class CallTools:
    """Next step: run the pending tool calls of turn ``turn``."""

    turn: int
    calls: tuple[PendingToolCall, ...]


@dataclass(frozen=True)
class Compact:
    """Next step: compact the context, for ``reason``."""

    reason: CompactionReason


@dataclass(frozen=True)
class Done:
    """Next step: nothing; the run ended with ``outcome``."""

    outcome: Outcome


Step = CallLLM | CallTools | Compact | Done
STEP_TYPES = (CallLLM, CallTools, Compact, Done)
STEP_KINDS = tuple(c.__name__ for c in STEP_TYPES)


def step_to_json(step: Step) -> dict[str, Any]:
    """A step as JSON, for a trace file (steps are feed arguments, never held in a snapshot)."""
    if isinstance(step, CallLLM):
        return {"kind": "CallLLM", "turn": step.turn}
    if isinstance(step, CallTools):
        return {"kind": "CallTools", "turn": step.turn, "calls": [c.to_json() for c in step.calls]}
    if isinstance(step, Compact):
        return {"kind": "Compact", "reason": step.reason.value}
    return {"kind": "Done", "outcome": outcome_to_json(step.outcome)}


def step_from_json(d: dict[str, Any]) -> Step:
    kind = d["kind"]
    if kind == "CallLLM":
        return CallLLM(d["turn"])
    if kind == "CallTools":
        return CallTools(d["turn"], tuple(PendingToolCall.from_json(c) for c in d["calls"]))
    if kind == "Compact":
        return Compact(CompactionReason(d["reason"]))
    if kind == "Done":
        return Done(outcome_from_json(d["outcome"]))
    raise ValueError(f"unknown step kind {kind!r}")


STEP_SCHEMA = {"type": "object", "required": ["kind"], "properties": {"kind": {"enum": list(STEP_KINDS)}}}
