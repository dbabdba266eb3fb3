"""The engine brain's named guards, actions and results, and its typed Python API.

Everything about states, moves, guard order and numbers is in
``machines/engine_brain.yaml``; this module only implements the names that
file uses, and gives drivers typed methods.  ``loopfsm.load_machine(path)``
compiles an edited copy of the YAML with these methods, so a policy edit is a
YAML edit.
"""

from __future__ import annotations

from collections import Counter

from typing import TYPE_CHECKING, Any, Literal
from collections.abc import Iterable

from loopfsm.core.errors import FeedArgumentError, shown
from loopfsm.core.registry import DataField, Registry
from loopfsm.core.declared import DeclaredMachine
from loopfsm.core.instance import PolicyArg
from .engine_values import (
    ERROR_KINDS,
    LOOP_ERROR_SCHEMA,
    OUTCOME_SCHEMA,
    OUTCOMES,
    PENDING_TOOL_SCHEMA,
    STEP_SCHEMA,
    STEP_TYPES,
    CallLLM,
    CallTools,
    Cancelled,
    Compact,
    CompactionReason,
    Completed,
    ContextExceeded,
    Done,
    Emergency,
    Failed,
    LoopError,
    MaxTurnsExceeded,
    Outcome,
    PendingToolCall,
    RunCancelled,
    Step,
    ThresholdExceeded,
    TurnLimitExceeded,
    loop_error_problem,
    outcome_from_json,
    outcome_to_json,
    register_loop_error,
    step_from_json,
    step_to_json,
)
from .args import listed
from .breaker_values import Reject
from .messages import MESSAGE_SCHEMA, Message, ToolCall
from .tool_breaker import ToolHealth

__all__ = [
    "LoopMachine",
    "MachinePolicy",  # noqa: F822 (it comes from __getattr__: built from the YAML on first use)
    "REGISTRY",
    "CallLLM",
    "CallTools",
    "Compact",
    "Done",
    "Step",
    "Completed",
    "Cancelled",
    "MaxTurnsExceeded",
    "Failed",
    "Outcome",
    "Emergency",
    "ThresholdExceeded",
    "CompactionReason",
    "LoopError",
    "RunCancelled",
    "TurnLimitExceeded",
    "ContextExceeded",
    "register_loop_error",
    "Message",
    "ToolCall",
    "PendingToolCall",
    "ToolHealth",
]

REGISTRY = Registry("engine_brain")


def _refuse(_: Any) -> Any:
    raise TypeError("tool health is a feed argument only; it is never stored in a snapshot")


#: What ``loopfsm verify`` feeds a message argument: a final answer, and a reply asking for tool ``t``.
MESSAGE_EXAMPLES = (Message.assistant("done"), Message.assistant("", [ToolCall("c1", "t")]))

REGISTRY.codec("message", Message, Message.to_json, Message.from_json, MESSAGE_SCHEMA, examples=MESSAGE_EXAMPLES)
REGISTRY.codec("pending_tool", PendingToolCall, PendingToolCall.to_json, PendingToolCall.from_json, PENDING_TOOL_SCHEMA)
REGISTRY.codec("outcome", tuple(OUTCOMES.values()), outcome_to_json, outcome_from_json, OUTCOME_SCHEMA)
REGISTRY.codec(
    "loop_error", LoopError, LoopError.to_json, LoopError.from_json, LOOP_ERROR_SCHEMA, examples=[LoopError("boom")]
)
REGISTRY.codec(
    "compaction_reason",
    CompactionReason,
    lambda r: r.value,
    CompactionReason,
    {"enum": [r.value for r in CompactionReason]},
)
REGISTRY.codec("step", STEP_TYPES, step_to_json, step_from_json, STEP_SCHEMA)  # JSON for trace files
REGISTRY.codec("tool_health", ToolHealth, _refuse, _refuse)
REGISTRY.error(RunCancelled)
REGISTRY.error(TurnLimitExceeded)


# -- guards ---------------------------------------------------------------------------------

StepKind = Literal["CallLLM", "CallTools", "Compact", "Done"]


@REGISTRY.guard
def step_is(m: Any, ctx: Any, *, kind: StepKind, outcomes: list[str] | None = None) -> bool:
    """The step reported is of ``kind`` and is one this state can be acting on.

    A CallLLM must be for the current turn and a CallTools for the pending
    calls; a Done must carry one of ``outcomes`` (the YAML lists those
    next_step can give), so a stale or invented step is refused.
    """
    step = ctx.args["step"]
    if type(step).__name__ != kind:
        return False
    if isinstance(step, CallLLM):
        return bool(step.turn == m.data.turns_taken)
    if isinstance(step, CallTools):
        return bool(step.turn == m.state_data["turn"] and list(step.calls) == m.data.pending_tools)
    if isinstance(step, Done) and outcomes is not None:
        return type(step.outcome).__name__ in outcomes
    return True


@REGISTRY.guard
def has_tool_calls(m: Any, ctx: Any) -> bool:
    return bool(ctx.args["response"].tool_calls)


@REGISTRY.guard
def no_progress(m: Any, ctx: Any) -> bool:
    """The no-progress guard: a pass that did not shrink the conversation ends the run."""
    return bool(ctx.args["after"] >= ctx.args["before"])


@REGISTRY.guard
def flag(m: Any, q: Any, *, field: DataField) -> bool:
    return bool(getattr(m.data, field))


@REGISTRY.guard
def turns_at_least(m: Any, q: Any, *, limit: int) -> bool:
    return bool(m.data.turns_taken >= limit)


@REGISTRY.guard
def tokens_past_percent(m: Any, q: Any, *, window: int, percent: int, inclusive: bool) -> bool:
    """``tokens >= window*percent//100`` (inclusive) or ``>`` (strict); a window of 0 never fires.

    Integer arithmetic only: the line truncates like the seed's integer formula.
    """
    if window == 0:
        return False
    line = window * percent // 100
    tokens = m.data.context_tokens
    return bool(tokens >= line if inclusive else tokens > line)


@REGISTRY.guard
def policy_switch(m: Any, q: Any, *, enabled: bool) -> bool:
    """A policy boolean as a guard (``auto_compact``)."""
    return enabled


@REGISTRY.guard
def outcome_is(m: Any, ctx: Any, *, kind: Literal["Completed", "Cancelled", "MaxTurnsExceeded", "Failed"]) -> bool:
    """The run ended with an outcome of ``kind`` (for invariants: false outside Terminal)."""
    return type(m.state_data.get("outcome")).__name__ == kind


@REGISTRY.guard
def history_grew_by_pending(m: Any, ctx: Any) -> bool:
    """For an invariant's ``then:``: the history is the one before the feed with that scratchpad appended."""
    before = ctx.before.data
    return bool(m.data.history == [*before.history, *before.pending])


# -- actions ------------------------------------------------------------------------------


@REGISTRY.action
def enter_model_turn(m: Any, ctx: Any) -> None:
    ctx.enter(turn=m.data.turns_taken)


@REGISTRY.action
def enter_compaction(m: Any, ctx: Any) -> None:
    m.data.last_compaction_tokens = m.data.context_tokens
    ctx.enter(reason=ctx.args["step"].reason)


@REGISTRY.action
def enter_done(m: Any, ctx: Any) -> None:
    ctx.enter(outcome=ctx.args["step"].outcome)


@REGISTRY.action
def start_run(m: Any, ctx: Any) -> None:
    d = m.data
    d.pending = [Message.user(ctx.args["text"])]
    d.pending_tools = []
    d.turns_taken = 0
    d.cancelled = False
    d.last_compaction_tokens = None


@REGISTRY.action
def record_reply(m: Any, ctx: Any) -> None:
    response = ctx.args["response"]
    # Checked here, in the feed's first action, so a refused reply changes nothing.
    if response.role != "assistant":
        raise FeedArgumentError(
            f"engine_brain: model_response needs an assistant message, got role {shown(response.role)}"
        )
    if ctx.args.get("tool_health") is not None and ctx.args.get("now") is None:
        raise FeedArgumentError("engine_brain: model_response needs 'now' to consult tool_health")
    d = m.data
    d.pending.append(response)
    d.context_tokens = ctx.args["context_tokens"]
    d.turns_taken += 1


@REGISTRY.action
def complete(m: Any, ctx: Any) -> None:
    ctx.enter(outcome=Completed(ctx.args["response"].text))


@REGISTRY.action
def classify_tool_calls(m: Any, ctx: Any, *, unknown: str, rejected: str, retry_at: str, retry_never: str) -> None:
    """Known names become pending calls; unknown ones are pre-answered so the model can correct itself.

    With a ToolHealth, a known call also takes a permit from its tool's breaker;
    a rejected one is pre-answered with when to retry.  The answers' wording
    is the YAML's (``{name}``, ``{reason}``, ``{retry}`` and ``{retry_at}`` are
    filled in; ``retry_never`` is the retry for a breaker only a reset reopens).
    """
    available = set(ctx.args["available_tools"])
    health, now = ctx.args.get("tool_health"), ctx.args.get("now")
    pending = []
    for call in ctx.args["response"].tool_calls:
        if call.name not in available:
            answer = Message.tool_result(call.id, unknown.format(name=call.name), is_error=True)
            pending.append(PendingToolCall(call, answer))
        elif health is None:
            pending.append(PendingToolCall(call))
        else:
            permit = health.acquire(call.name, now, call.id)
            if isinstance(permit, Reject):
                retry = retry_never if permit.retry_at is None else retry_at.format(retry_at=permit.retry_at)
                text = rejected.format(name=call.name, reason=permit.reason, retry=retry)
                pending.append(PendingToolCall(call, Message.tool_result(call.id, text, is_error=True)))
            else:
                pending.append(PendingToolCall(call, None, permit.generation))
    m.data.pending_tools = pending
    ctx.enter(turn=m.state_data["turn"])


@REGISTRY.action
def consume_tool_results(m: Any, ctx: Any) -> None:
    results = ctx.args["results"]
    wanted = [p.call.id for p in m.data.pending_tools]
    got = [r.tool_call_id for r in results]
    if Counter(wanted) != Counter(got) or any(r.role != "tool" for r in results):
        missing = sorted(set(wanted) - set(got), key=str)
        extra = sorted(set(got) - set(wanted), key=str)
        not_tool = [r.role for r in results if r.role != "tool"]
        raise FeedArgumentError(
            "engine_brain: tool_results must answer each pending call exactly once with a tool message "
            f"(pending: {shown(wanted, 200)}; missing: {shown(missing, 200)}; unexpected: {shown(extra, 200)}"
            + (f"; not tool messages: {', '.join(not_tool)}" if not_tool else "")
            + ")"
        )
    m.data.pending.extend(results)
    m.data.pending_tools = []


@REGISTRY.action
def fail_with(m: Any, ctx: Any, *, kind: str, message: str) -> None:
    before, after = ctx.args["before"], ctx.args["after"]
    error = ERROR_KINDS.get(kind, LoopError)(f"{message} ({before} -> {after} tokens)")
    ctx.enter(outcome=Failed(error))


@REGISTRY.action
def replace_history(m: Any, ctx: Any) -> None:
    d = m.data
    d.history = list(ctx.args["compacted"])
    d.pending = []
    d.context_tokens = ctx.args["after"]


@REGISTRY.action
def adopt_estimate(m: Any, ctx: Any) -> None:
    m.data.context_tokens = ctx.args["after"]


@REGISTRY.action
def append_pending(m: Any, ctx: Any) -> None:
    m.data.pending.append(ctx.args["message"])


@REGISTRY.action
def extend_pending(m: Any, ctx: Any) -> None:
    m.data.pending.extend(ctx.args["messages"])


@REGISTRY.action
def set_estimate(m: Any, ctx: Any) -> None:
    m.data.context_tokens = ctx.args["tokens"]


@REGISTRY.action
def set_cancelled(m: Any, ctx: Any) -> None:
    m.data.cancelled = True


@REGISTRY.action
def enter_failed(m: Any, ctx: Any) -> None:
    problem = loop_error_problem(ctx.args["error"])
    if problem:  # before anything changes: a brain holding it could not be resumed exactly
        raise FeedArgumentError(f"engine_brain: fail: {problem}")
    ctx.enter(outcome=Failed(ctx.args["error"]))


@REGISTRY.action
def commit(m: Any, ctx: Any) -> None:
    m.data.history.extend(m.data.pending)
    m.data.pending = []


@REGISTRY.action
def discard(m: Any, ctx: Any) -> None:
    m.data.pending = []


# -- results for traces ----------------------------------------------------------------------


def _only_pending(m: Any) -> PendingToolCall | None:
    pending = m.data.pending_tools
    return pending[0] if len(pending) == 1 else None


@REGISTRY.result
def only_tool_name(m: Any, q: Any) -> str | None:
    """The pending call's tool when the model asked for exactly one; None for none or a batch."""
    p = _only_pending(m)
    return p.call.name if p is not None else None


@REGISTRY.result
def only_tool_call_id(m: Any, q: Any) -> str | None:
    """The pending call's id when the model asked for exactly one; None for none or a batch."""
    p = _only_pending(m)
    return p.call.id if p is not None else None


@REGISTRY.result
def tool_calls(m: Any, q: Any) -> int | None:
    """How many tool calls are pending; None when none is."""
    return len(m.data.pending_tools) or None


@REGISTRY.result
def error_type(m: Any, q: Any) -> str | None:
    """The class of the error the run ended with (the YAML's outcome mapping); None while it runs or if it completed."""
    error = m.to_loop_error()
    return type(error).__name__ if error is not None else None


# -- results of next_step ---------------------------------------------------------------------


@REGISTRY.result
def done(m: Any, q: Any, *, outcome: Literal["Cancelled", "MaxTurnsExceeded"]) -> Done:
    return Done(OUTCOMES[outcome]())


@REGISTRY.result
def same_outcome(m: Any, q: Any) -> Done:
    return Done(m.state_data["outcome"])


@REGISTRY.result
def compact(m: Any, q: Any, *, reason: Literal["Emergency", "ThresholdExceeded"]) -> Compact:
    return Compact(CompactionReason(reason))


@REGISTRY.result
def call_llm(m: Any, q: Any) -> CallLLM:
    return CallLLM(m.data.turns_taken)


@REGISTRY.result
def call_tools(m: Any, q: Any) -> CallTools:
    return CallTools(m.state_data["turn"], tuple(m.data.pending_tools))


@REGISTRY.result
def compact_in_flight(m: Any, q: Any) -> Compact:
    return Compact(m.state_data["reason"])


# -- what verify feeds (named by the YAML's `verify:` blocks; never called by a run) ----------------


@REGISTRY.generator
def steps_to_report(m: Any, ctx: Any) -> list[Step]:
    """The step next_step answers now (what a driver acts on), and steps no driver may report:
    a model call for the next turn, and a Done the brain never answers (Completed)."""
    return [
        m.decide("next_step", policy=ctx.policy),
        CallLLM(m.data.turns_taken + 1),
        Done(Completed("")),
    ]


@REGISTRY.generator
def answers_to_pending(m: Any, ctx: Any) -> list[list[Message]]:
    """What tool_results may carry: one answer per pending call (pre-answered ones passed through),
    and none at all."""
    answered = [
        p.answer if p.answer is not None else Message.tool_result(p.call.id, "ok") for p in m.data.pending_tools
    ]
    return [answered, []]


@REGISTRY.generator
def around_the_line(m: Any, ctx: Any, *, window: int, percent: int) -> list[int]:
    """Token counts next to a percent line of the window (``window * percent // 100``), and 0."""
    line = window * percent // 100
    return [0, *(n for n in (line - 1, line, line + 1) if n >= 0)]


# -- the typed API ------------------------------------------------------------------------------


class LoopMachine(DeclaredMachine, machine="engine_brain", registry=REGISTRY, policy="MachinePolicy"):
    """The engine brain, with a typed method per feed; compiled from ``machines/engine_brain.yaml`` on first use."""

    __slots__ = ()

    def next_step(self, *, policy: PolicyArg = None) -> Step:
        """What next?  Pure: asking twice with nothing in between gives the same answer."""
        return self.decide("next_step", policy=policy)  # type: ignore[no-any-return]

    def begin(self, step: Step, *, policy: PolicyArg = None) -> None:
        """Report that the driver is acting on ``step``."""
        self.feed("begin", step, policy=policy)

    def accept_input(self, text: str, *, policy: PolicyArg = None) -> None:
        self.feed("accept_input", text, policy=policy)

    def model_response(
        self,
        response: Message,
        context_tokens: int,
        available_tools: Iterable[str],
        tool_health: ToolHealth | None = None,
        now: int | None = None,
        *,
        model: str | None = None,
        policy: PolicyArg = None,
    ) -> None:
        """The model's reply; ``model`` (the model asked, as the driver names it) is traced, never kept."""
        tools = listed(available_tools, "engine_brain", "model_response", "available_tools")
        self.feed("model_response", response, context_tokens, tools, tool_health, now, model, policy=policy)

    def tool_results(self, results: Iterable[Message], *, policy: PolicyArg = None) -> None:
        self.feed("tool_results", listed(results, "engine_brain", "tool_results", "results"), policy=policy)

    def compaction_result(
        self, compacted: Iterable[Message], before: int, after: int, *, policy: PolicyArg = None
    ) -> None:
        self.feed(
            "compaction_result",
            listed(compacted, "engine_brain", "compaction_result", "compacted"),
            before,
            after,
            policy=policy,
        )

    def compaction_noop(self, before: int, after: int, *, policy: PolicyArg = None) -> None:
        self.feed("compaction_noop", before, after, policy=policy)

    def inject(self, message: Message, *, policy: PolicyArg = None) -> None:
        self.feed("inject", message, policy=policy)

    def inject_many(self, messages: Iterable[Message], *, policy: PolicyArg = None) -> None:
        """``inject`` for each of ``messages``, in one feed: a stored conversation of n messages is one feed, not n."""
        self.feed("inject_many", listed(messages, "engine_brain", "inject_many", "messages"), policy=policy)

    def set_context_tokens(self, tokens: int, *, policy: PolicyArg = None) -> None:
        self.feed("set_context_tokens", tokens, policy=policy)

    def cancel(self, *, policy: PolicyArg = None) -> None:
        self.feed("cancel", policy=policy)

    def fail(self, error: LoopError, *, policy: PolicyArg = None) -> None:
        self.feed("fail", error, policy=policy)

    def commit_pending(self, *, policy: PolicyArg = None) -> None:
        self.feed("commit_pending", policy=policy)

    def discard_pending(self, *, policy: PolicyArg = None) -> None:
        self.feed("discard_pending", policy=policy)

    # -- readers --
    def history(self) -> list[Message]:
        """Committed messages only."""
        return list(self.data.history)

    def full_history(self) -> list[Message]:
        """History plus scratchpad: exactly what the next request would send."""
        return [*self.data.history, *self.data.pending]

    def state_and_data(self) -> tuple[str, dict[str, Any]]:
        """The state's name and the data it carries, e.g. ``("AwaitingModel", {"turn": 0})``."""
        return self._state, dict(self.state_data)

    def turns_taken(self) -> int:
        return int(self.data.turns_taken)

    def is_cancelled(self) -> bool:
        return bool(self.data.cancelled)

    def outcome(self) -> Outcome | None:
        return self.state_data.get("outcome") if self.is_terminal() else None

    def to_loop_error(self) -> LoopError | None:
        """The error this run ended with, by the YAML's outcome mapping; None if it completed (or runs on)."""
        outcome = self.outcome()
        if outcome is None:
            return None
        error: LoopError | None = self.compiled.outcome_error(type(outcome).__name__, outcome)
        return error


if TYPE_CHECKING:  # what type checkers see: the stub written from the YAML's policy block
    from .policies import MachinePolicy as MachinePolicy


def __getattr__(name: str) -> Any:
    if name == "MachinePolicy":  # built from the YAML's policy block, so compiled on first use
        return LoopMachine.compiled.Policy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
