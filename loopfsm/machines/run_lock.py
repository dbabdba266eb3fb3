"""Guards and actions of the run's processing lock (``machines/run_lock.yaml``).

The lock is a lease plus a fencing token; the rules (who may take it over,
when a holder is refused) are in the YAML.  The store applies the same rules
in SQL against the saved row; this machine is the model those statements are
tested against.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from loopfsm.machines.errors import FencedOut
from loopfsm.core.registry import Registry
from loopfsm.core.declared import DeclaredMachine
from loopfsm.core.instance import PolicyArg

REGISTRY = Registry("run_lock")


def _now(m: Any, ctx: Any) -> int:
    return max(int(ctx.args["now"]), int(m.data.last_now))


@REGISTRY.guard
def lease_expired(m: Any, ctx: Any) -> bool:
    """The lease ran out: now >= lease_expires_at (the boundary instant counts as expired)."""
    return _now(m, ctx) >= int(m.state_data["lease_expires_at"])


@REGISTRY.guard
def fence_current(m: Any, ctx: Any) -> bool:
    return bool(ctx.args["fence"] == m.data.fence)


@REGISTRY.guard
def held_by(m: Any, ctx: Any) -> bool:
    return bool(m.state_data["holder"] == ctx.args["holder"])


@REGISTRY.action
def clamp_clock(m: Any, ctx: Any) -> None:
    m.data.last_now = _now(m, ctx)


@REGISTRY.action
def grant(m: Any, ctx: Any) -> None:
    """A new grant: the fence grows, so every earlier holder is refused from now on."""
    m.data.fence += 1
    now = m.data.last_now
    ctx.enter(
        holder=ctx.args["holder"], started_at=now, lease_expires_at=now + ctx.args["lease_ms"], cancel_requested=None
    )


@REGISTRY.action
def extend(m: Any, ctx: Any) -> None:
    """A stay branch keeps the state, so the lease is replaced in place; a pending cancel stays visible."""
    m.state_data = dict(m.state_data, lease_expires_at=m.data.last_now + ctx.args["lease_ms"])


@REGISTRY.action
def mark_cancel(m: Any, ctx: Any) -> None:
    m.state_data = dict(m.state_data, cancel_requested=ctx.args["kind"])


@REGISTRY.action
def fenced_out(m: Any, ctx: Any) -> None:
    """Refuse a stale holder before anything changes."""
    raise FencedOut(
        f"run_lock: fence {ctx.args['fence']} is not current (current fence {m.data.fence}, lock {m.state})"
    )


@REGISTRY.action
def emit(m: Any, ctx: Any, *, events: list[str]) -> None:
    """Record trace events: the feed returns their stable names."""
    ctx.reply = list(ctx.reply or []) + list(events)


class RunLock(DeclaredMachine, machine="run_lock", registry=REGISTRY, policy="RunLockPolicy"):
    """Compiled from ``machines/run_lock.yaml`` on first use, never on import; a typed method per feed."""

    __slots__ = ()

    def acquire(self, now: int, holder: str, lease_ms: int, *, policy: PolicyArg = None) -> Any:
        """An admitted request takes the lock (a takeover if the lease expired)."""
        return self.feed("acquire", now, holder, lease_ms, policy=policy)

    def preempt(self, now: int, holder: str, lease_ms: int, *, policy: PolicyArg = None) -> Any:
        """break or inject takes the lock from a running turn at once."""
        return self.feed("preempt", now, holder, lease_ms, policy=policy)

    def request_cancel(self, kind: Literal["break", "inject"], *, policy: PolicyArg = None) -> Any:
        """break or inject asks the running turn to stop at its next renew."""
        return self.feed("request_cancel", kind, policy=policy)

    def renew(self, now: int, fence: int, lease_ms: int, *, policy: PolicyArg = None) -> Any:
        """The holder extends its lease; refused (FencedOut) when its fence is no longer current."""
        return self.feed("renew", now, fence, lease_ms, policy=policy)

    def release(self, now: int, fence: int, *, policy: PolicyArg = None) -> Any:
        """The holder gives the lock back after its checkpoint; refused (FencedOut) when its fence is no longer
        current."""
        return self.feed("release", now, fence, policy=policy)

    def expire(self, now: int, *, policy: PolicyArg = None) -> Any:
        """A sweeper frees a lock whose lease ran out."""
        return self.feed("expire", now, policy=policy)

    def recover(self, holder: str, *, policy: PolicyArg = None) -> Any:
        """Startup of router `holder`: frees the locks its previous incarnation held."""
        return self.feed("recover", holder, policy=policy)

    def reset(self, *, policy: PolicyArg = None) -> Any:
        """The seed's startup rule, clearing every lock; for a single router process only."""
        return self.feed("reset", policy=policy)


if TYPE_CHECKING:  # what type checkers see: the stub written from the YAML's policy block
    from .policies import RunLockPolicy as RunLockPolicy


def __getattr__(name: str) -> Any:
    # The compiled machine and its policy class are built from the YAML on first use.
    if name == "RUN_LOCK":
        return RunLock.compiled
    if name == "RunLockPolicy":
        return RunLock.compiled.Policy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
