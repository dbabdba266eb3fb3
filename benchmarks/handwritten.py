"""Hand-written baselines: the same machines as plain Python, as a careful engineer would write them.

They are what loopfsm's cost is measured against; they share the message
model so only the machine machinery differs.
"""

from __future__ import annotations

from loopfsm.machines.engine_brain import (
    CallLLM, CallTools, Cancelled, Compact, Completed, Done, Emergency, MaxTurnsExceeded, Message,
    PendingToolCall, ThresholdExceeded,
)


class Gate:
    """The turnstile with fare 1."""

    __slots__ = ("state", "credit", "passages")

    def __init__(self, state: str = "locked"):
        self.state, self.credit, self.passages = state, 0, 0

    def coin(self) -> None:
        if self.state == "locked":
            self.state, self.credit = "unlocked", 0
        elif self.state != "unlocked":
            raise RuntimeError(self.state)

    def push(self) -> None:
        if self.state == "unlocked":
            self.state, self.passages = "locked", self.passages + 1
        elif self.state != "locked":
            raise RuntimeError(self.state)

    def snapshot(self) -> dict:
        return {"state": self.state, "credit": self.credit, "passages": self.passages}

    @classmethod
    def restore(cls, d: dict) -> Gate:
        g = cls(d["state"])
        g.credit, g.passages = d["credit"], d["passages"]
        return g


class Brain:
    """The engine brain's rules in plain Python (no tables, no checks beyond the seed's)."""

    def __init__(self):
        self.state, self.turn, self.reason, self.outcome = "Start", None, None, None
        self.history: list[Message] = []
        self.pending: list[Message] = []
        self.pending_tools: list[PendingToolCall] = []
        self.turns_taken = self.context_tokens = 0
        self.cancelled = False
        self.last_compaction_tokens = None

    def next_step(self, p):
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
        if self.state == "Terminal":
            return
        if isinstance(step, CallLLM) and self.state == "Start":
            self.state, self.turn = "AwaitingModel", self.turns_taken
        elif isinstance(step, Compact) and self.state in ("Start", "AwaitingModel"):
            self.state, self.reason = "AwaitingCompaction", step.reason
            self.last_compaction_tokens = self.context_tokens
        elif isinstance(step, Done):
            self.state, self.outcome = "Terminal", step.outcome

    def accept_input(self, text):
        self.state, self.pending, self.pending_tools = "Start", [Message.user(text)], []
        self.turns_taken, self.cancelled, self.last_compaction_tokens = 0, False, None

    def model_response(self, response, context_tokens, available_tools):
        if self.state == "Terminal":
            return
        if self.state != "AwaitingModel":
            raise RuntimeError(self.state)
        self.pending.append(response)
        self.context_tokens = context_tokens
        self.turns_taken += 1
        if not response.tool_calls:
            self.state, self.outcome = "Terminal", Completed(response.text)
            return
        avail = set(available_tools)
        self.pending_tools = [
            PendingToolCall(c) if c.name in avail else
            PendingToolCall(c, Message.tool_result(c.id, f"tool '{c.name}' is not available", is_error=True))
            for c in response.tool_calls]
        self.state = "AwaitingTools"

    def tool_results(self, results):
        if self.state != "AwaitingTools":
            raise RuntimeError(self.state)
        self.pending.extend(results)
        self.pending_tools = []
        self.state = "Start"

    def commit_pending(self):
        self.history.extend(self.pending)
        self.pending = []

    def snapshot(self) -> dict:
        return {"state": self.state, "turn": self.turn, "history": [m.to_json() for m in self.history],
                "pending": [m.to_json() for m in self.pending],
                "pending_tools": [p.to_json() for p in self.pending_tools], "turns_taken": self.turns_taken,
                "context_tokens": self.context_tokens, "cancelled": self.cancelled,
                "last_compaction_tokens": self.last_compaction_tokens}

    @classmethod
    def restore(cls, d: dict) -> Brain:
        b = cls()
        b.state, b.turn = d["state"], d["turn"]
        b.history = [Message.from_json(x) for x in d["history"]]
        b.pending = [Message.from_json(x) for x in d["pending"]]
        b.pending_tools = [PendingToolCall.from_json(x) for x in d["pending_tools"]]
        b.turns_taken, b.context_tokens = d["turns_taken"], d["context_tokens"]
        b.cancelled, b.last_compaction_tokens = d["cancelled"], d["last_compaction_tokens"]
        return b


class Breaker:
    """A consecutive-failures breaker with a half-open probe, injected time, as plain Python."""

    __slots__ = ("state", "failures", "opened_at", "successes", "generation")

    def __init__(self):
        self.state, self.failures, self.opened_at, self.successes, self.generation = "closed", 0, 0, 0, 0

    def acquire(self, now: int, fail_max: int = 5, reset_ms: int = 30_000) -> int | None:
        if self.state == "open":
            if now < self.opened_at + reset_ms:
                return None
            self.state, self.successes, self.generation = "half_open", 0, self.generation + 1
        return self.generation

    def record(self, now: int, generation: int, ok: bool, fail_max: int = 5, success_threshold: int = 2) -> None:
        if generation != self.generation:
            return
        if ok:
            self.failures = 0
            if self.state == "half_open":
                self.successes += 1
                if self.successes >= success_threshold:
                    self.state, self.generation = "closed", self.generation + 1
            return
        self.failures += 1
        if self.state == "half_open" or self.failures >= fail_max:
            self.state, self.opened_at, self.generation = "open", now, self.generation + 1
