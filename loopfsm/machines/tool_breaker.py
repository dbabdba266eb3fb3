"""Guards and actions of the per-tool circuit breaker, and ``ToolHealth``, one breaker per tool.

The states, trip rules, their order and every number are in
``machines/tool_breaker.yaml``; this module implements the names it uses.
Every guard reads time through :func:`_now`, the fed-in time clamped so that
it never runs backwards.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..compiler import CompiledMachine, compile_file
from ..errors import SnapshotError
from ..registry import Registry
from ..resources import machine_path
from .breaker_common import bump, now_of, register_common
from .breaker_values import Allow, Reject, backoff_ms

REGISTRY = Registry("tool_breaker")
register_common(REGISTRY)


def _window_after(m, ctx, window_size: int) -> list[str]:
    outcome = ctx.args["outcome"]
    window = m.data.window + ([outcome] if outcome in ("success", "failure", "slow") else [])
    return window[-window_size:]


def _rate_reached(window: list[str], kind: str, percent: int, minimum_calls: int) -> bool:
    if percent == 0 or len(window) < minimum_calls:
        return False
    return window.count(kind) * 100 >= percent * len(window)


def jitter_ms(tool: str, trips: int, duration: int, jitter_percent: int) -> int:
    """Up to ``jitter_percent`` of ``duration``, the same for the same tool and trip on every machine."""
    if jitter_percent == 0 or duration == 0:
        return 0
    digest = hashlib.blake2b(f"{tool}\x00{trips}".encode(), digest_size=8).digest()
    fraction = int.from_bytes(digest, "big") % 10_001  # 0..10000, i.e. 0.00% .. 100.00% of the jitter
    return duration * jitter_percent * fraction // (100 * 10_000)


# -- guards -------------------------------------------------------------------------------

@REGISTRY.guard
def open_elapsed(m, ctx) -> bool:
    return now_of(m, ctx) >= m.state_data["until"]


@REGISTRY.guard
def half_open_overdue(m, ctx, *, max_ms: int) -> bool:
    return now_of(m, ctx) >= m.state_data["since"] + max_ms


@REGISTRY.guard
def lease_expired(m, ctx) -> bool:
    now = now_of(m, ctx)
    return any(now >= lease["expires_at"] for lease in m.data.leases)


@REGISTRY.guard
def probe_slot_free(m, ctx, *, max_probes: int) -> bool:
    return len(m.data.leases) < max_probes


@REGISTRY.guard
def holds_lease(m, ctx) -> bool:
    return any(lease["call_id"] == ctx.args["call_id"] for lease in m.data.leases)


@REGISTRY.guard
def error_kind_in(m, ctx, *, kinds: list) -> bool:
    return ctx.args.get("error_kind") in kinds


@REGISTRY.guard
def consecutive_failures_reach(m, ctx, *, threshold: int) -> bool:
    """This failure makes ``threshold`` in a row (0 turns the rule off)."""
    return threshold > 0 and ctx.args["outcome"] == "failure" and m.data.consecutive_failures + 1 >= threshold


@REGISTRY.guard
def failure_rate_reaches(m, ctx, *, percent: int, window_size: int, minimum_calls: int) -> bool:
    """With this outcome in the window, failures are at least ``percent`` of it (0 turns the rule off)."""
    return percent > 0 and _rate_reached(_window_after(m, ctx, window_size), "failure", percent, minimum_calls)


@REGISTRY.guard
def slow_rate_reaches(m, ctx, *, percent: int, window_size: int, minimum_calls: int) -> bool:
    return percent > 0 and _rate_reached(_window_after(m, ctx, window_size), "slow", percent, minimum_calls)


# -- actions ------------------------------------------------------------------------------

def _new_generation(d) -> None:
    """Every transition starts a generation: older permits and probe leases stop counting."""
    d.generation += 1
    d.leases = []
    d.probe_success_count = 0


@REGISTRY.action
def allow(m, ctx) -> None:
    bump(m.data.stats, "allowed")
    ctx.reply = Allow(ctx.args["call_id"], m.data.generation)


@REGISTRY.action
def grant_probe(m, ctx, *, ttl_ms: int) -> None:
    expires = m.data.last_now + ttl_ms
    m.data.leases.append({"call_id": ctx.args["call_id"], "expires_at": expires})
    bump(m.data.stats, "probes")
    ctx.reply = Allow(ctx.args["call_id"], m.data.generation, probe=True, lease_expires_at=expires)


@REGISTRY.action
def reject(m, ctx, *, reason: str, retry_at: Literal["open_until", "first_lease_expiry", "never"]) -> None:
    """Reject, saying when asking again can succeed, as the YAML chooses.

    ``reason`` may name ``{trip_reason}``, the rule that opened the breaker
    (read from the Open state being entered or already held).
    """
    if retry_at == "open_until":
        when = ctx.enter_data.get("until", m.state_data.get("until"))
    elif retry_at == "first_lease_expiry":
        when = min(lease["expires_at"] for lease in m.data.leases)
    else:
        when = None
    trip_reason = ctx.enter_data.get("reason") or m.state_data.get("reason")
    bump(m.data.stats, "rejected")
    ctx.reply = Reject(when, reason.format(trip_reason=trip_reason))


@REGISTRY.action
def record_outcome(m, ctx, *, window_size: int) -> None:
    d = m.data
    d.window = _window_after(m, ctx, window_size)
    outcome = ctx.args["outcome"]
    d.consecutive_failures = d.consecutive_failures + 1 if outcome == "failure" else 0
    bump(d.stats, outcome)


@REGISTRY.action
def trip(m, ctx, *, reason: str, open_ms: int, multiplier: int, max_open_ms: int, jitter_percent: int) -> None:
    """Open for a duration that grows with consecutive trips, honours retry_after, and jitters reproducibly."""
    d = m.data
    d.trips += 1
    duration = backoff_ms(open_ms, multiplier, d.trips, max_open_ms, ctx.args.get("retry_after"))
    duration += jitter_ms(d.tool, d.trips, duration, jitter_percent)
    _new_generation(d)
    bump(d.stats, "trips")
    ctx.enter(until=d.last_now + duration, reason=reason)


@REGISTRY.action
def enter_half_open(m, ctx) -> None:
    _new_generation(m.data)
    ctx.enter(since=m.data.last_now)


@REGISTRY.action
def release_lease(m, ctx) -> None:
    m.data.leases = [lease for lease in m.data.leases if lease["call_id"] != ctx.args["call_id"]]


@REGISTRY.action
def close(m, ctx) -> None:
    d = m.data
    _new_generation(d)
    d.window = []
    d.consecutive_failures = 0
    d.trips = 0


@REGISTRY.action
def new_generation(m, ctx) -> None:
    _new_generation(m.data)


# -- typed API ------------------------------------------------------------------------------

class ToolBreakerAPI:
    """Typed methods for drivers; the generic ``feed`` stays available."""

    __slots__ = ()

    def acquire(self, now: int, call_id: str, policy: Any = None) -> Allow | Reject:
        return self.feed("acquire", now, call_id, policy=policy)

    def record(self, now: int, permit: Allow, outcome: str, *, error_kind: str | None = None,
               retry_after: int | None = None, policy: Any = None) -> None:
        self.feed("record", now, permit.call_id, outcome, permit.generation, error_kind, retry_after,
                  policy=policy)

    def tick(self, now: int, policy: Any = None) -> None:
        self.feed("tick", now, policy=policy)

    def force_open(self, now: int) -> None:
        """Hold the breaker open until :meth:`reset`."""
        self.feed("force_open", now)

    def disable(self, now: int) -> None:
        """Let every call through until :meth:`reset`."""
        self.feed("disable", now)

    def reset(self, now: int) -> None:
        """Close the breaker and forget its history."""
        self.feed("reset", now)


def load_tool_breaker(path: str | Path) -> CompiledMachine:
    return compile_file(path, REGISTRY, base=ToolBreakerAPI)


TOOL_BREAKER = load_tool_breaker(machine_path("tool_breaker"))
ToolBreaker = TOOL_BREAKER.Instance
ToolBreakerPolicy = TOOL_BREAKER.Policy


@dataclass
class ToolHealth:
    """One breaker per tool name, created on first use; snapshots and restores as one JSON value.

    It holds policies (a default and per-tool overrides) for convenience, but
    they are not part of the snapshot: like every machine's policy, they are
    configuration the driver supplies, not state.
    """

    policy: Any = None
    overrides: dict[str, Any] | None = None
    machine: CompiledMachine = TOOL_BREAKER

    def __post_init__(self) -> None:
        self.breakers: dict[str, Any] = {}
        self.policy = self.machine.policy(self.policy)
        self.overrides = {k: self.machine.policy(v) for k, v in (self.overrides or {}).items()}

    def policy_for(self, tool: str) -> Any:
        return self.overrides.get(tool, self.policy)

    def breaker(self, tool: str):
        b = self.breakers.get(tool)
        if b is None:
            b = self.breakers[tool] = self.machine.new()
            b.data.tool = tool
        return b

    def acquire(self, tool: str, now: int, call_id: str) -> Allow | Reject:
        return self.breaker(tool).acquire(now, call_id, self.policy_for(tool))

    def record(self, tool: str, now: int, permit: Allow, outcome: str, **kw: Any) -> None:
        self.breaker(tool).record(now, permit, outcome, policy=self.policy_for(tool), **kw)

    def tick(self, now: int) -> None:
        for tool, b in self.breakers.items():
            b.tick(now, self.policy_for(tool))

    def states(self) -> dict[str, str]:
        return {tool: b.state for tool, b in sorted(self.breakers.items())}

    def snapshot(self) -> dict[str, Any]:
        return {"format": 1, "kind": "tool_health",
                "breakers": {tool: b.snapshot() for tool, b in sorted(self.breakers.items())}}

    @classmethod
    def restore(cls, snap: dict[str, Any], policy: Any = None, overrides: dict[str, Any] | None = None,
                machine: CompiledMachine = TOOL_BREAKER) -> ToolHealth:
        if not isinstance(snap, dict) or snap.get("kind") != "tool_health" or snap.get("format") != 1:
            raise SnapshotError("refusing ToolHealth snapshot: not a format-1 tool_health value")
        health = cls(policy, overrides, machine)
        breakers = {tool: machine.restore(s) for tool, s in snap.get("breakers", {}).items()}
        for tool, b in breakers.items():
            if b.data.tool != tool:
                raise SnapshotError(f"refusing ToolHealth snapshot: breaker filed under {tool!r} "
                                    f"belongs to {b.data.tool!r}")
        health.breakers = breakers
        return health
