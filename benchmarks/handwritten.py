"""Hand-written baselines: the shipped machines' rules as plain Python, as a careful engineer would write them.

They are what loopfsm's cost is measured against, so each one does the same
work as the machine it stands for: the same rules, the same argument checks,
the same snapshot validation.  ``bench.py`` shows that they agree with loopfsm
on scripted runs before it times anything.  They share the message model and
the breakers' value types, so only the state-machine machinery differs.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from loopfsm.machines.breaker_values import Allow, Reject, backoff_ms
from loopfsm.machines.engine_brain import (
    CallLLM,
    CallTools,
    Cancelled,
    Compact,
    Completed,
    Done,
    Emergency,
    MaxTurnsExceeded,
    Message,
    PendingToolCall,
    ThresholdExceeded,
)
from loopfsm.machines.tool_breaker import jitter_ms


def _is_int(v: Any) -> bool:
    return type(v) is int or (isinstance(v, int) and not isinstance(v, bool))


class GateError(Exception):
    pass


class Gate:
    """The turnstile: a locked gate keeps coins as credit until ``fare`` is paid."""

    __slots__ = ("state", "credit", "passages")
    FARE = 1
    STATES = ("locked", "unlocked")

    def __init__(self) -> None:
        self.state, self.credit, self.passages = "locked", 0, 0

    def coin(self, fare: int | None = None) -> None:
        if self.state == "locked":
            if self.credit + 1 >= (self.FARE if fare is None else fare):
                self.state, self.credit = "unlocked", 0
            else:
                self.credit += 1

    def push(self, fare: int | None = None) -> None:
        if self.state == "unlocked":
            self.state, self.passages = "locked", self.passages + 1

    SHAPE = {"data": {"credit": "integer", "passages": "integer"}, "states": {"locked": {}, "unlocked": {}}}
    CODECS = {"integer": 1}

    def snapshot(self, fingerprint: str) -> dict:
        return {
            "format": 2,
            "machine": "turnstile",
            "version": 1,
            "fingerprint": fingerprint,
            "shape": {
                "data": dict(self.SHAPE["data"]),
                "states": {"locked": {}, "unlocked": {}},
                "codecs": dict(self.CODECS),
            },
            "state": self.state,
            "state_data": {},
            "data": {"credit": self.credit, "passages": self.passages},
        }

    @classmethod
    def restore(cls, snap: Any, fingerprint: str) -> Gate:
        """Validate everything loopfsm validates, then build; refuse with GateError."""
        if not isinstance(snap, Mapping):
            raise GateError("not a mapping")
        if len(snap) != 8:
            raise GateError("unknown keys")
        try:
            fmt, machine, fp = snap["format"], snap["machine"], snap["fingerprint"]
            version, shape = snap["version"], snap["shape"]
            state, state_data, data = snap["state"], snap["state_data"], snap["data"]
        except KeyError as err:
            raise GateError(f"missing {err}") from None
        if type(fmt) is not int or fmt != 2 or machine != "turnstile" or not isinstance(fp, str):
            raise GateError("wrong format, machine or fingerprint")
        # The fingerprint is for information: a run saved under an edited policy has the same shape.
        if version != 1 or shape != {**cls.SHAPE, "codecs": cls.CODECS}:
            raise GateError("another shape")
        if not isinstance(state, str) or state not in cls.STATES:
            raise GateError("unknown state")
        if not isinstance(state_data, dict) or state_data:
            raise GateError("bad state data")
        if not isinstance(data, dict) or data.keys() != {"credit", "passages"}:
            raise GateError("bad data")
        credit, passages = data["credit"], data["passages"]
        if not _is_int(credit) or not _is_int(passages):
            raise GateError("bad data types")
        g = cls.__new__(cls)
        g.state, g.credit, g.passages = state, credit, passages
        return g


class Brain:
    """The engine brain's rules in plain Python, with the argument checks loopfsm's binders make."""

    def __init__(self):
        self.state, self.turn, self.reason, self.outcome = "Start", None, None, None
        self.history: list[Message] = []
        self.pending: list[Message] = []
        self.pending_tools: list[PendingToolCall] = []
        self.turns_taken = self.context_tokens = 0
        self.cancelled = False
        self.last_compaction_tokens = None

    def next_step(self, *, policy):
        p = policy
        if self.cancelled:
            return Done(Cancelled())
        if self.state == "Terminal":
            return Done(self.outcome)
        if self.state in ("Start", "AwaitingModel"):
            if self.turns_taken >= p.max_turns:
                return Done(MaxTurnsExceeded())
            w = p.context_window
            if w and self.context_tokens >= w * 95 // 100:
                return Compact(Emergency)
            if w and p.auto_compact and self.context_tokens > w * p.compact_threshold // 100:
                return Compact(ThresholdExceeded)
            return CallLLM(self.turns_taken)
        if self.state == "AwaitingTools":
            return CallTools(self.turn, tuple(self.pending_tools))
        return Compact(self.reason)

    def begin(self, step):
        if not isinstance(step, (CallLLM, CallTools, Compact, Done)):
            raise TypeError("step")
        if self.state == "Terminal":
            return
        if isinstance(step, CallLLM) and self.state == "Start":
            self.state, self.turn = "AwaitingModel", self.turns_taken
        elif isinstance(step, CallTools) and self.state == "AwaitingTools":
            pass
        elif isinstance(step, Compact) and self.state in ("Start", "AwaitingModel"):
            self.state, self.reason = "AwaitingCompaction", step.reason
            self.last_compaction_tokens = self.context_tokens
        elif isinstance(step, Done):
            self.state, self.outcome = "Terminal", step.outcome
        else:
            raise RuntimeError(self.state)

    def accept_input(self, text):
        if not isinstance(text, str):
            raise TypeError("text")
        self.state, self.pending, self.pending_tools = "Start", [Message.user(text)], []
        self.turns_taken, self.cancelled, self.last_compaction_tokens = 0, False, None

    def model_response(self, response, context_tokens, available_tools, tool_health=None, now=None):
        available_tools = list(available_tools)
        if (
            not isinstance(response, Message)
            or not _is_int(context_tokens)
            or not all(isinstance(t, str) for t in available_tools)
        ):
            raise TypeError("model_response arguments")
        if self.state == "Terminal":
            return
        if self.state != "AwaitingModel":
            raise RuntimeError(self.state)
        if response.role != "assistant":
            raise ValueError("role")
        self.pending.append(response)
        self.context_tokens = context_tokens
        self.turns_taken += 1
        if not response.tool_calls:
            self.state, self.outcome = "Terminal", Completed(response.text)
            return
        avail = set(available_tools)
        self.pending_tools = [
            PendingToolCall(c)
            if c.name in avail
            else PendingToolCall(c, Message.tool_result(c.id, f"tool '{c.name}' is not available", is_error=True))
            for c in response.tool_calls
        ]
        self.state = "AwaitingTools"

    def tool_results(self, results):
        results = list(results)
        if not all(isinstance(r, Message) for r in results):
            raise TypeError("results")
        if self.state != "AwaitingTools":
            raise RuntimeError(self.state)
        wanted = sorted(p.call.id for p in self.pending_tools)
        if wanted != sorted(r.tool_call_id for r in results) or any(r.role != "tool" for r in results):
            raise ValueError("results do not answer the pending calls")
        self.pending.extend(results)
        self.pending_tools = []
        self.state = "Start"


_CALLERS_FAULT = frozenset({"invalid_arguments", "not_found", "permission_denied", "cancelled"})


class ToolBreakerState:
    """One tool's breaker: Closed / Open / HalfOpen by the rules of ``machines/tool_breaker.yaml``.

    The operator states (ForcedOpen, Disabled) are left out: the benchmark never
    enters them.  Everything else (clamped clock, stale generations, callers'
    faults, consecutive and windowed rates, backoff and jitter, probe leases,
    HalfOpen's maximum age, stats) is here.
    """

    __slots__ = (
        "tool",
        "state",
        "generation",
        "last_now",
        "window",
        "consecutive_failures",
        "trips",
        "leases",
        "probe_success_count",
        "stats",
        "until",
        "reason",
        "since",
        "permits",
    )

    def __init__(self, tool: str):
        self.tool, self.state, self.generation, self.last_now = tool, "Closed", 0, 0
        self.window: list[str] = []
        self.consecutive_failures = self.trips = self.probe_success_count = 0
        self.leases: list[dict] = []
        self.permits: list[str] = []
        self.stats: dict[str, int] = {}
        self.until = self.reason = self.since = None

    def _count(self, what: str) -> None:
        self.stats[what] = self.stats.get(what, 0) + 1

    def _new_generation(self) -> None:
        self.generation += 1
        self.leases = []
        self.permits = []
        self.probe_success_count = 0

    def _trip(self, p, reason: str, retry_after: int | None = None) -> None:
        self.trips += 1
        duration = backoff_ms(p.cooldown_ms, p.cooldown_multiplier, self.trips, p.max_cooldown_ms, retry_after)
        duration += jitter_ms(self.tool, self.trips, duration, p.jitter_percent)
        self._new_generation()
        self._count("trips")
        self.state, self.until, self.reason, self.since = "Open", self.last_now + duration, reason, None

    def _grant_probe(self, p, call_id: str) -> Allow:
        expires = self.last_now + p.probe_ttl_ms
        self.leases.append({"call_id": call_id, "expires_at": expires})
        self._count("probes")
        return Allow(call_id, self.generation, probe=True, lease_expires_at=expires, tool=self.tool)

    def _reject_open(self) -> Reject:
        self._count("rejected")
        return Reject(self.until, f"open: {self.reason}")

    def _half_open_expired(self, now: int, p) -> str | None:
        if now >= self.since + p.half_open_max_ms:
            return "half_open_timeout"
        if any(now >= lease["expires_at"] for lease in self.leases):
            return "probe_lease_expired"
        return None

    def acquire(self, now: int, call_id: str, p) -> Allow | Reject:
        if not _is_int(now) or not isinstance(call_id, str):
            raise TypeError("acquire arguments")
        now = self.last_now = now if now > self.last_now else self.last_now
        state = self.state
        if state == "Closed":
            self._count("allowed")
            permits = self.permits
            permits.append(call_id)  # a permit is recorded at most once: remember it until then
            if len(permits) > p.max_outstanding:
                del permits[: len(permits) - p.max_outstanding]
                self._count("abandoned")
            return Allow(call_id, self.generation, tool=self.tool)
        if state == "Open":
            if now >= self.until:
                self._new_generation()
                self.state, self.since, self.until, self.reason = "HalfOpen", now, None, None
                return self._grant_probe(p, call_id)
            return self._reject_open()
        expired = self._half_open_expired(now, p)
        if expired:
            self._trip(p, expired)
            return self._reject_open()
        if len(self.leases) < p.max_probes:
            return self._grant_probe(p, call_id)
        self._count("rejected")
        return Reject(min(lease["expires_at"] for lease in self.leases), "probes_busy")

    def _release(self, call_id: str) -> None:
        if call_id in self.permits:
            self.permits.remove(call_id)

    def _rate(self, window: list[str], kind: str, percent: int, p) -> bool:
        return percent > 0 and len(window) >= p.minimum_calls and window.count(kind) * 100 >= percent * len(window)

    def record(
        self,
        now: int,
        call_id: str,
        outcome: str,
        generation: int,
        p,
        error_kind: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        if (
            not _is_int(now)
            or not isinstance(call_id, str)
            or outcome not in ("success", "failure", "slow", "ignored")
            or not _is_int(generation)
            or not (error_kind is None or isinstance(error_kind, str))
            or not (retry_after is None or _is_int(retry_after))
        ):
            raise TypeError("record arguments")
        now = now if now > self.last_now else self.last_now
        state = self.state
        if state == "Closed":
            self.last_now = now
            if generation != self.generation:
                self._release(call_id)
                self._count("stale")
            elif call_id not in self.permits:
                self._count("refused_permits")
                raise ValueError("no permit is outstanding for this call")
            elif (outcome == "failure" and error_kind in _CALLERS_FAULT) or outcome == "ignored":
                self._release(call_id)
                self._count("ignored")
            else:
                self._release(call_id)
                window = (self.window + [outcome])[-p.window_size :]
                trip = None
                if p.trip_after > 0 and outcome == "failure" and self.consecutive_failures + 1 >= p.trip_after:
                    trip = "consecutive_failures"
                elif self._rate(window, "failure", p.failure_rate_percent, p):
                    trip = "failure_rate"
                elif self._rate(window, "slow", p.slow_rate_percent, p):
                    trip = "slow_rate"
                self.window = window
                self.consecutive_failures = self.consecutive_failures + 1 if outcome == "failure" else 0
                self._count(outcome)
                if trip:
                    self._trip(p, trip, retry_after)
            return
        if state == "Open":
            self.last_now = now
            self._count("stale")
            return
        expired = self._half_open_expired(now, p)
        self.last_now = now
        if expired:
            self._count("late")
            self._trip(p, expired, retry_after)
            return
        if generation != self.generation or not any(lease["call_id"] == call_id for lease in self.leases):
            self._count("stale")
            return
        self.leases = [lease for lease in self.leases if lease["call_id"] != call_id]
        if (outcome == "failure" and error_kind in _CALLERS_FAULT) or outcome == "ignored":
            self._count("ignored")
        elif outcome in ("failure", "slow"):
            self._count("probe_failure")
            self._trip(p, "probe_failed", retry_after)
        elif self.probe_success_count + 1 >= p.recover_after:
            self._count("success")
            self._new_generation()
            self.state, self.since = "Closed", None
            self.window, self.consecutive_failures, self.trips = [], 0, 0
        else:
            self._count("success")
            self.probe_success_count += 1


class HandToolHealth:
    """One hand-written breaker per tool name, created on first use, behind one lock, like ``ToolHealth``."""

    def __init__(self, policy):
        self.policy = policy
        self.breakers: dict[str, ToolBreakerState] = {}
        self._lock = threading.RLock()

    def breaker(self, tool: str) -> ToolBreakerState:
        b = self.breakers.get(tool)
        if b is None:
            b = self.breakers[tool] = ToolBreakerState(tool)
        return b

    # The lock is taken as ToolHealth takes it (acquire/release rather than ``with``, whose
    # special-method lookups cost more than the rest of a call), so the ratio compares the rest.
    def acquire(self, tool: str, now: int, call_id: str) -> Allow | Reject:
        self._lock.acquire()
        try:
            return self.breaker(tool).acquire(now, call_id, self.policy)
        finally:
            self._lock.release()

    def record(self, tool: str, now: int, permit: Allow, outcome: str, **kw: Any) -> None:
        self._lock.acquire()
        try:
            self.breaker(tool).record(now, permit.call_id, outcome, permit.generation, self.policy, **kw)
        finally:
            self._lock.release()
