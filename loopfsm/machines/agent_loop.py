"""Guards, actions and results of the agent loop (``machines/agent_loop.yaml``), and its typed API.

The table (states, the seed's allowed pairs, guard order, the approval and
deadline rules) is in the YAML; this module implements the names it uses.
Time is fed in: every guard reads ``now`` through :func:`now_of`, clamped so
that it never runs backwards.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from loopfsm.core.errors import FeedArgumentError, shown
from loopfsm.core.fieldtypes import INT_MAX, INT_MIN
from loopfsm.core.registry import Registry, StateName
from loopfsm.core.declared import DeclaredMachine
from loopfsm.core.instance import PolicyArg
from .names import invisible
from .args import checked_new_run, listed

__all__ = ["AgentLoop", "REGISTRY", "arguments_hash", "RESUME_ANSWERS"]  # and AgentLoopPolicy, on first use

REGISTRY = Registry("agent_loop")

#: What ``resume`` may answer, and the feed a driver sends for it.
RESUME_ANSWERS = {
    "audit": None,  # terminal: nothing to do but read it
    "expire": "tick",
    "recover": "worker_lost",  # recovers the call
    "unrecoverable": "worker_lost",  # fails the run: the call may not be retried
    "give_up": "dispatch",  # fails the run under the current policy (or use fail)
    "retry": "dispatch",  # or replan
    "wait": None,
    "dispatch": "dispatch",
    "observe": "result_accepted",  # or fail / final_answer
    "plan": None,  # ask the model
}


def arguments_hash(arguments: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of a tool call's arguments.

    Canonical: keys sorted, no insignificant whitespace, UTF-8, no NaN or
    infinities (they have no JSON form), so equal arguments hash equally on
    every machine and an approval binds to exactly what the approver saw.

    Arguments with no JSON form raise :class:`FeedArgumentError` naming the
    place (keys cut short) and the type, never a string's value: a key that
    is not a string (JSON's keys are, and ``{1: ...}`` would otherwise hash
    like ``{"1": ...}``), a value that is not null, a boolean, a number, a
    string, a list or a dict (a date, bytes), NaN or an infinity, a string or
    key with half a surrogate pair (UTF-8 has no bytes for it), a cycle, or
    nesting too deep to write.
    """
    problem = _no_json_form(arguments)
    if problem is not None:
        raise FeedArgumentError(f"arguments have no canonical JSON form: {problem}")
    try:
        text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError as err:  # a cycle, or an integer too long to write
        why = "they contain themselves" if "Circular" in str(err) else str(err).split(";")[0]
        raise FeedArgumentError(f"arguments have no canonical JSON form: {why}") from None
    except RecursionError:
        raise FeedArgumentError("arguments have no canonical JSON form: nested too deeply to write") from None
    import hashlib  # noqa: PLC0415 - importing the module must not load OpenSSL

    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


_JSON_SCALARS = (str, int, float, type(None))  # bool is an int
_SURROGATE = re.compile(r"[\ud800-\udfff]")  # half a pair: a lone code point UTF-8 cannot encode


def _no_json_form(arguments: Any) -> str | None:
    """Where ``arguments`` leaves JSON (a non-string key, a value of another type, NaN), or None.

    Walked with a stack, not recursion, and each container once, so a cycle
    or deep nesting ends the walk (json.dumps then names the cycle).  Each
    entry keeps its parent's entry and its own key or index, so the place is
    spelled out only for the one value refused.
    """
    stack: list[tuple[Any, _Where | None]] = [(arguments, None)]
    seen: set[int] = set()
    while stack:
        value, where = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return f"{_spelled(where)} is {value!r}, which JSON cannot hold"
        if isinstance(value, str) and _SURROGATE.search(value):
            return f"{_spelled(where)} holds half a surrogate pair, which UTF-8 cannot hold"
        if isinstance(value, _JSON_SCALARS):
            continue
        if not isinstance(value, (dict, list, tuple)):
            return f"{_spelled(where)} is of type {type(value).__name__}, not a JSON value"
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    return f"{_spelled(where)} has a key of type {type(key).__name__}; JSON object keys are strings"
                if _SURROGATE.search(key):
                    return f"{_spelled(where)} has a key with half a surrogate pair, which UTF-8 cannot hold"
                stack.append((item, _Where(where, key)))
        else:
            stack.extend((item, _Where(where, i)) for i, item in enumerate(value))
    return None


@dataclass(frozen=True)
class _Where:
    """One step into the arguments: the container's own place, and the key or index taken in it."""

    parent: _Where | None
    step: str | int


def _spelled(where: _Where | None, most: int = 6) -> str:
    """``arguments['a'][0]``: the last ``most`` steps of a place (keys cut short), for an error message."""
    steps: list[str] = []
    while where is not None:
        steps.append(f"[{where.step}]" if isinstance(where.step, int) else f"[{shown(where.step, 20)}]")
        where = where.parent
    steps.reverse()
    return "arguments" + ("[...]" if len(steps) > most else "") + "".join(steps[-most:])


def now_of(m: Any, ctx: Any) -> int:
    """The fed-in time, never earlier than the latest time already seen."""
    return max(int(ctx.args["now"]), int(m.data.last_now))


# -- guards ----------------------------------------------------------------------------------------


@REGISTRY.guard
def before_deadline(m: Any, ctx: Any) -> bool:
    """The latest time fed in is before the run's deadline (always, without one); an invariant's guard."""
    deadline: int | None = m.data.deadline_at
    return deadline is None or m.data.last_now < deadline


@REGISTRY.guard
def deadline_passed(m: Any, ctx: Any) -> bool:
    """At or after the run's deadline (never, without one)."""
    deadline: int | None = m.data.deadline_at
    return deadline is not None and now_of(m, ctx) >= deadline


@REGISTRY.guard
def approval_expired(m: Any, ctx: Any) -> bool:
    return bool(now_of(m, ctx) >= m.state_data["expires_at"])


@REGISTRY.guard
def decision_matches(m: Any, ctx: Any) -> bool:
    """The decision comes from the approver asked, about the exact arguments they were shown.

    A blank approver never decides, even one a snapshot from before requests refused it carries.
    """
    a = ctx.args
    return bool(
        not _blank(a["approver"])
        and a["approver"] == m.state_data["approver"]
        and a["arguments_hash"] == m.data.arguments_hash
    )


def _blank(name: str) -> bool:
    """Nobody: empty, or no visible character at all (blanks, a zero-width space), see :mod:`.names`."""
    return invisible(name)


@REGISTRY.guard
def approver_blank(m: Any, ctx: Any) -> bool:
    """An approval request naming nobody (empty, or nothing visible): no decision could come from them."""
    return _blank(ctx.args["approver"])


@REGISTRY.guard
def owner_blank(m: Any, ctx: Any) -> bool:
    """A hand-off to nobody (empty, or nothing visible): the run would have no owner."""
    return _blank(ctx.args["owner"])


@REGISTRY.guard
def outcome_allowed(m: Any, ctx: Any) -> bool:
    return bool(ctx.args["outcome"] in m.state_data["allowed_outcomes"])


@REGISTRY.guard
def attempts_left(m: Any, ctx: Any, *, max_attempts: int) -> bool:
    return bool(m.data.attempts < max_attempts)


@REGISTRY.guard
def idempotent_call(m: Any, ctx: Any) -> bool:
    """The proposed call is harmless to run twice: the table retries only such calls."""
    return bool(m.data.idempotent)


@REGISTRY.guard
def transient(m: Any, ctx: Any) -> bool:
    return bool(ctx.args["transient"])


def _action_key(tool: str, arguments_hash: str) -> str:
    return f"{tool} {arguments_hash}"


@REGISTRY.guard
def constrained(m: Any, ctx: Any) -> bool:
    """The action named (tool and hash) was sent back by a reviewer's revise earlier in the run."""
    tool, h = ctx.args["tool"], ctx.args["arguments_hash"]
    return tool is not None and h is not None and _action_key(tool, h) in m.data.constraints


@REGISTRY.guard
def action_named(m: Any, ctx: Any) -> bool:
    """approval_required from planning names the action: both its tool and its arguments_hash."""
    return ctx.args["tool"] is not None and ctx.args["arguments_hash"] is not None


@REGISTRY.guard
def outcomes_empty(m: Any, ctx: Any) -> bool:
    """An approval request allowing no outcome: no decision could ever be accepted."""
    return not ctx.args["allowed_outcomes"]


@REGISTRY.guard
def expires_by_now(m: Any, ctx: Any) -> bool:
    """An approval request whose expiry is not after the (clamped) time it is asked at."""
    return bool(ctx.args["expires_at"] <= now_of(m, ctx))


_HEX = frozenset("0123456789abcdef")


@REGISTRY.guard
def hash_malformed(m: Any, ctx: Any) -> bool:
    """An arguments_hash given that is not what arguments_hash() makes: ``sha256:`` and 64 lowercase hex digits."""
    h = ctx.args["arguments_hash"]
    return h is not None and not (len(h) == 71 and h.startswith("sha256:") and _HEX.issuperset(h[7:]))


@REGISTRY.guard
def same_action(m: Any, ctx: Any) -> bool:
    """The approval is about the call already proposed (left out, or the same tool and hash)."""
    tool, h = ctx.args["tool"], ctx.args["arguments_hash"]
    return (tool is None or tool == m.data.tool) and (h is None or h == m.data.arguments_hash)


@REGISTRY.guard
def idempotency_differs(m: Any, ctx: Any) -> bool:
    """An approval request whose ``idempotent`` is given and is not the proposed call's.

    Taking it would let an approval turn a payment into a retryable call (or
    quietly ignore what the caller said), so the table refuses it instead.
    """
    given: bool | None = ctx.args["idempotent"]
    return given is not None and given != m.data.idempotent


#: What the driver says about a proposal, kept with it for traces.
_PROPOSAL_FACTS = ("model", "call_id", "tool_type", "arguments_schema_version")


@REGISTRY.guard
def proposal_facts_differ(m: Any, ctx: Any) -> bool:
    """An approval request that gives a proposal fact (model, call id, ...) other than the proposed call's.

    The request is about the call already proposed; its facts were given with
    it, so a different one would be dropped without a word.  Left out, or the
    same, is fine.
    """
    a, d = ctx.args, m.data
    return any(a[k] is not None and a[k] != getattr(d, k) for k in _PROPOSAL_FACTS)


@REGISTRY.guard
def checks_passed(m: Any, ctx: Any, *, required: list[str]) -> bool:
    """Every output check the table declares for completion was run and held."""
    passed = set(ctx.args["passed"])
    return all(check in passed for check in required)


# -- actions ---------------------------------------------------------------------------------------


@REGISTRY.action
def clamp_clock(m: Any, ctx: Any) -> None:
    m.data.last_now = now_of(m, ctx)


@REGISTRY.action
def expire(m: Any, ctx: Any, *, reason: str, side_effects_pending_in: list[StateName]) -> None:
    """Enter expired with ``reason``; side effects are pending when the run left one of the states the table names."""
    ctx.enter(reason=reason, pending_side_effects=ctx.source in side_effects_pending_in)


@REGISTRY.action
def fail_with(m: Any, ctx: Any, *, error_class: str | None) -> None:
    """Enter the target with ``error_class``, or the feed's own ``error_class`` when the table gives none.

    ``failed`` and ``recovering`` both carry the failure's class; the table names the action
    after the move (``fail_with`` into failed, ``recover`` into recovering).  Into failed it
    also records the compensation the feed reported (``compensation``, when it has one).
    """
    _enter_failure(ctx, error_class if error_class is not None else ctx.args["error_class"], None)


@REGISTRY.action
def recover(m: Any, ctx: Any, *, error_class: str | None) -> None:
    """Enter recovering with ``error_class``, or the feed's own when the table gives none."""
    ctx.enter(error_class=error_class if error_class is not None else ctx.args["error_class"])


@REGISTRY.action
def give_up(m: Any, ctx: Any, *, error_class: str) -> None:
    """Fail with ``error_class`` because no attempt is left, keeping the tool's own failure as ``last_error_class``:
    the feed's ``error_class`` (a retryable ``tool_failed`` on the last attempt), else the one recovering holds."""
    _enter_failure(ctx, error_class, ctx.args.get("error_class") or m.state_data["error_class"])


def _enter_failure(ctx: Any, error_class: str, last_error_class: str | None) -> None:
    ctx.enter(error_class=error_class, last_error_class=last_error_class, compensation=ctx.args.get("compensation"))


@REGISTRY.action
def propose(m: Any, ctx: Any) -> None:
    d = m.data
    # approval_required from planning may leave idempotent out (None): not idempotent, the safe reading
    a = ctx.args
    d.tool, d.arguments_hash = a["tool"], a["arguments_hash"]
    d.idempotent = a["idempotent"] is True
    d.attempts = 0
    d.model, d.call_id, d.tool_type = a["model"], a["call_id"], a["tool_type"]
    d.arguments_schema_version = a["arguments_schema_version"]
    d.risk_class = None  # set by request_approval when the policy asks


@REGISTRY.action
def clear_proposal(m: Any, ctx: Any) -> None:
    d = m.data
    d.tool = d.arguments_hash = None
    d.idempotent = False
    d.attempts = 0
    d.model = d.call_id = d.tool_type = d.arguments_schema_version = d.risk_class = None


@REGISTRY.action
def accept_result(m: Any, ctx: Any) -> None:
    """Keep what the runtime took from the accepted result (counts and a name, never content)."""
    d, a = m.data, ctx.args
    d.accepted_facts, d.rejected_fields = a["accepted_facts"], a["rejected_fields"]
    d.next_obligation = a["next_obligation"]


@REGISTRY.action
def observe(m: Any, ctx: Any) -> None:
    """Enter observing_result with the result's status, size and validation as the driver reported them."""
    a = ctx.args
    ctx.enter(status=a["status"], result_size=a["result_size"], validation=a["validation"])


@REGISTRY.action
def request_approval(m: Any, ctx: Any) -> None:
    a = ctx.args
    ctx.enter(
        approver=a["approver"],
        expires_at=a["expires_at"],
        policy_reason=a["policy_reason"],
        allowed_outcomes=list(a["allowed_outcomes"]),
        requested_at=now_of(m, ctx),
    )
    m.data.risk_class = a["risk_class"]


@REGISTRY.action
def start_execution(m: Any, ctx: Any) -> None:
    m.data.attempts += 1
    # approval_decided (approve) has no expected latency to give: left null
    latency = ctx.args.get("expected_latency_ms")
    ctx.enter(attempt=m.data.attempts, started_at=now_of(m, ctx), expected_latency_ms=latency)


@REGISTRY.action
def constrain(m: Any, ctx: Any) -> None:
    """Remember the action sent back for revision, then forget the proposal."""
    d = m.data
    d.constraints.append(_action_key(d.tool, d.arguments_hash))
    clear_proposal(m, ctx)


@REGISTRY.action
def take_ownership(m: Any, ctx: Any) -> None:
    m.data.owner = ctx.args["owner"]


# -- results ---------------------------------------------------------------------------------------


@REGISTRY.result
def answer(m: Any, q: Any, *, value: str) -> str:
    return value


@REGISTRY.result
def deadline_remaining(m: Any, ctx: Any) -> int | None:
    """ms left before the deadline at the time fed in (negative once past); None without either.

    Saturated to the signed 64-bit range: a trace attribute is an OTLP int64, and the
    difference of two such times can be twice as wide.
    """
    if m.data.deadline_at is None or "now" not in ctx.args:
        return None
    return max(INT_MIN, min(INT_MAX, int(m.data.deadline_at - now_of(m, ctx))))


@REGISTRY.result
def error_type(m: Any, ctx: Any) -> str | None:
    """The failure's own class: a tool's (``last_error_class``) when retries ran out, else the state's error class."""
    value: str | None = m.state_data.get("last_error_class") or m.state_data.get("error_class")
    return value


Outcome = Literal["approve", "deny", "revise"]
ToolType = Literal["function", "extension", "datastore"]
Compensation = Literal["not_needed", "pending", "done", "failed"]
Validation = Literal["valid", "invalid", "unchecked"]


class AgentLoop(DeclaredMachine, machine="agent_loop", registry=REGISTRY, policy="AgentLoopPolicy"):
    """Seed 003's agent loop; compiled from ``machines/agent_loop.yaml`` on first use.

    Every feed takes ``now`` (ms): time is fed in, never read.
    """

    __slots__ = ()

    @classmethod
    def new_run(cls, run_id: str, owner: str, deadline_at: int | None = None) -> AgentLoop:
        """A fresh run in planning with its identity, owner and deadline (ms; None for none)."""
        checked_new_run(run_id, owner, deadline_at)
        inst = cls()
        inst.data.run_id, inst.data.owner, inst.data.deadline_at = run_id, owner, deadline_at
        return inst

    def tool_proposed(
        self,
        tool: str,
        arguments_hash: str,
        idempotent: bool,
        now: int,
        *,
        model: str | None = None,
        call_id: str | None = None,
        tool_type: ToolType | None = "function",
        arguments_schema_version: str | None = None,
        policy: PolicyArg = None,
    ) -> None:
        """The model asks for a tool call (its arguments stay with the driver; see :func:`arguments_hash`).

        ``model``, ``call_id``, ``tool_type`` and ``arguments_schema_version`` are kept with the
        proposal for traces (``gen_ai.request.model``, ``gen_ai.tool.call.id``, ...).
        """
        self.feed(
            "tool_proposed",
            tool,
            arguments_hash,
            idempotent,
            now,
            model,
            call_id,
            tool_type,
            arguments_schema_version,
            policy=policy,
        )

    def approval_required(
        self,
        approver: str,
        expires_at: int,
        policy_reason: str,
        now: int,
        *,
        allowed_outcomes: Iterable[Outcome] = ("approve", "deny"),
        tool: str | None = None,
        arguments_hash: str | None = None,
        idempotent: bool | None = None,
        risk_class: str | None = None,
        model: str | None = None,
        call_id: str | None = None,
        tool_type: ToolType | None = None,
        arguments_schema_version: str | None = None,
        policy: PolicyArg = None,
    ) -> None:
        """The runtime's policy asks ``approver`` to decide about the action before it runs.

        ``idempotent`` left out means not idempotent for an action named from
        planning, and the proposal's own value from awaiting_tool, where a
        different value is refused (:class:`FeedRefused`).
        """
        self.feed(
            "approval_required",
            approver,
            expires_at,
            policy_reason,
            now,
            listed(allowed_outcomes, "agent_loop", "approval_required", "allowed_outcomes"),
            tool,
            arguments_hash,
            idempotent,
            risk_class,
            model,
            call_id,
            tool_type,
            arguments_schema_version,
            policy=policy,
        )

    def approval_decided(
        self, outcome: Outcome, approver: str, arguments_hash: str, now: int, *, policy: PolicyArg = None
    ) -> None:
        """The approver's decision; refused loudly (:class:`FeedRefused`) unless it answers the request."""
        self.feed("approval_decided", outcome, approver, arguments_hash, now, policy=policy)

    def dispatch(
        self,
        now: int,
        *,
        expected_latency_ms: int | None = None,
        compensation: Compensation | None = None,
        policy: PolicyArg = None,
    ) -> None:
        """Run (or retry) the call; ``compensation`` is recorded if no attempt is left and the run fails."""
        self.feed("dispatch", now, expected_latency_ms, compensation, policy=policy)

    def tool_succeeded(
        self,
        now: int,
        *,
        status: str | None = None,
        result_size: int | None = None,
        validation: Validation | None = None,
        policy: PolicyArg = None,
    ) -> None:
        """The result is in: its status, size in bytes and validation are kept for traces, never its content."""
        self.feed("tool_succeeded", now, status, result_size, validation, policy=policy)

    def tool_failed(
        self,
        error_class: str,
        transient: bool,
        now: int,
        *,
        compensation: Compensation | None = None,
        policy: PolicyArg = None,
    ) -> None:
        """The call failed; ``compensation`` is recorded if the run fails on it (no retry)."""
        self.feed("tool_failed", error_class, transient, now, compensation, policy=policy)

    def worker_lost(self, now: int, *, compensation: Compensation | None = None, policy: PolicyArg = None) -> None:
        """The worker is gone; ``compensation`` is recorded if the run fails on it (no retry)."""
        self.feed("worker_lost", now, compensation, policy=policy)

    def result_accepted(
        self,
        now: int,
        *,
        accepted_facts: int | None = None,
        rejected_fields: int | None = None,
        next_obligation: str | None = None,
        policy: PolicyArg = None,
    ) -> None:
        """The runtime accepted the result; what it took, refused and owes next are kept (counts and a name)."""
        self.feed("result_accepted", now, accepted_facts, rejected_fields, next_obligation, policy=policy)

    def replan(self, now: int, *, policy: PolicyArg = None) -> None:
        self.feed("replan", now, policy=policy)

    def final_answer(self, passed: Iterable[str], now: int, *, policy: PolicyArg = None) -> None:
        """The model says it is done; completes only if every declared output check is in ``passed``."""
        self.feed("final_answer", listed(passed, "agent_loop", "final_answer", "passed"), now, policy=policy)

    def fail(
        self, error_class: str, now: int, *, compensation: Compensation | None = None, policy: PolicyArg = None
    ) -> None:
        self.feed("fail", error_class, now, compensation, policy=policy)

    def tick(self, now: int, *, policy: PolicyArg = None) -> None:
        self.feed("tick", now, policy=policy)

    def hand_off(self, owner: str, now: int, *, policy: PolicyArg = None) -> None:
        self.feed("hand_off", owner, now, policy=policy)

    def resume(self, now: int, *, policy: PolicyArg = None) -> str:
        """After a restore: the driver's next step (see :data:`RESUME_ANSWERS`)."""
        return str(self.decide("resume", policy=policy, now=now))


if TYPE_CHECKING:  # what type checkers see: the stub written from the YAML's policy block
    from .policies import AgentLoopPolicy as AgentLoopPolicy


def __getattr__(name: str) -> Any:
    if name == "AgentLoopPolicy":  # built from the YAML's policy block, so compiled on first use
        return AgentLoop.compiled.Policy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
