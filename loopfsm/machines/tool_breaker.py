"""Guards and actions of the per-tool circuit breaker, and ``ToolHealth``, one breaker per tool.

The states, trip rules, their order and every number are in
``machines/tool_breaker.yaml``; this module implements the names it uses.
Every guard reads time through :func:`_now`, the fed-in time clamped so that
it never runs backwards.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from loopfsm.core.errors import FeedArgumentError, FeedRefused, PolicyError, SnapshotError, shown, shown_fingerprint
from loopfsm.core.registry import Registry
from loopfsm.core.declared import DeclaredMachine
from loopfsm.core.engines import EngineName, engine_name
from loopfsm.core.instance import READ_FORMATS, SNAPSHOT_FORMAT, PolicyArg

if TYPE_CHECKING:  # pragma: no cover
    from loopfsm.core.compiler import CompiledMachine
from .names import name_problem
from .breaker_common import bump, now_of, register_common
from .breaker_values import Allow, Reject, backoff_ms

REGISTRY = Registry("tool_breaker")

#: What ``record`` takes: the YAML's ``record.args.outcome.enum`` (a test keeps the two equal).
ToolOutcome = Literal["success", "failure", "slow", "ignored"]
register_common(REGISTRY)


_RECORDED = frozenset(("success", "failure", "slow"))  # the outcomes the window holds ("ignored" is not one)


def _rate_guard(kind: str, doc: str) -> Any:
    """The guard "with this outcome added to the window, ``kind`` is at least ``percent`` of it".

    The window is counted in place (plus this outcome, minus the oldest beyond
    ``window_size``), not rebuilt to ask; 0 percent turns the rule off.
    """

    def guard(m: Any, ctx: Any, *, percent: int, window_size: int, minimum_calls: int) -> bool:
        if percent <= 0:
            return False
        window = m.data.window
        outcome = ctx.args["outcome"]
        calls = len(window)
        hits = window.count(kind)
        if outcome in _RECORDED:
            calls += 1
            hits += outcome == kind
        if calls > window_size:
            hits -= window[: calls - window_size].count(kind)
            calls = window_size
        return calls >= minimum_calls and hits * 100 >= percent * calls

    guard.__name__ = guard.__qualname__ = f"{kind}_rate_reaches"
    guard.__doc__ = doc
    return guard


def jitter_ms(tool: str, trips: int, duration: int, jitter_percent: int) -> int:
    """Up to ``jitter_percent`` of ``duration``, the same for the same tool and trip on every machine."""
    if jitter_percent == 0 or duration == 0:
        return 0
    import hashlib  # noqa: PLC0415 - only a jittered trip needs it

    digest = hashlib.blake2b(f"{tool}\x00{trips}".encode(), digest_size=8).digest()
    fraction = int.from_bytes(digest, "big") % 10_001  # 0..10000, i.e. 0.00% .. 100.00% of the jitter
    return duration * jitter_percent * fraction // (100 * 10_000)


# -- guards -------------------------------------------------------------------------------


@REGISTRY.guard
def half_open_overdue(m: Any, ctx: Any, *, max_ms: int) -> bool:
    return bool(now_of(m, ctx) >= m.state_data["since"] + max_ms)


@REGISTRY.guard
def lease_expired(m: Any, ctx: Any) -> bool:
    now = now_of(m, ctx)
    return any(now >= lease["expires_at"] for lease in m.data.leases)


@REGISTRY.guard
def probe_slot_free(m: Any, ctx: Any, *, max_probes: int) -> bool:
    return len(m.data.leases) < max_probes


@REGISTRY.guard
def holds_lease(m: Any, ctx: Any) -> bool:
    return any(lease["call_id"] == ctx.args["call_id"] for lease in m.data.leases)


def outcome_in(m: Any, ctx: Any, *, outcomes: list[str]) -> bool:
    """The outcome is one of ``outcomes``: the branches say ``when:``; this is for an ``any:`` alternative."""
    return ctx.args["outcome"] in outcomes


REGISTRY.guard(outcome_in, reads=("outcome",))  # decided by the outcome alone: narrowed per outcome


# -- invariants (named in the YAML's invariants: section; asked by `loopfsm verify`, never by a feed) --


@REGISTRY.guard
def half_open_younger_than(m: Any, ctx: Any, *, max_ms: int) -> bool:
    """HalfOpen began less than ``max_ms`` before the latest time fed in."""
    return bool(m.data.last_now - m.state_data["since"] < max_ms)


@REGISTRY.guard
def leases_live(m: Any, ctx: Any, *, ttl_ms: int) -> bool:
    """Every probe lease is unexpired, and expires no later than ``ttl_ms`` after the latest time fed in."""
    now = m.data.last_now
    return all(now < lease["expires_at"] <= now + ttl_ms for lease in m.data.leases)


@REGISTRY.guard
def lease_ids_unique(m: Any, ctx: Any) -> bool:
    """No two probe leases name the same call id, so a record settles exactly the lease it names."""
    ids = [lease["call_id"] for lease in m.data.leases]
    return len(ids) == len(set(ids))


def error_kind_in(m: Any, ctx: Any, *, kinds: list[str]) -> bool:
    return ctx.args.get("error_kind") in kinds


REGISTRY.guard(error_kind_in, reads=("error_kind",))


@REGISTRY.guard
def consecutive_failures_reach(m: Any, ctx: Any, *, threshold: int) -> bool:
    """This failure makes ``threshold`` in a row (0 turns the rule off)."""
    return threshold > 0 and ctx.args["outcome"] == "failure" and m.data.consecutive_failures + 1 >= threshold


failure_rate_reaches = REGISTRY.guard(
    _rate_guard(
        "failure", "With this outcome in the window, failures are at least ``percent`` of it (0 turns the rule off)."
    )
)
slow_rate_reaches = REGISTRY.guard(
    _rate_guard(
        "slow", "With this outcome in the window, slow calls are at least ``percent`` of it (0 turns the rule off)."
    )
)


# -- actions ------------------------------------------------------------------------------


def _new_generation(d: Any) -> None:
    """Every transition starts a generation: older permits and probe leases stop counting."""
    d.generation += 1
    d.permits = []
    d.leases = []
    d.probe_success_count = 0


@REGISTRY.action
def allow(m: Any, ctx: Any) -> None:
    d = m.data
    stats = d.stats
    stats["allowed"] = stats.get("allowed", 0) + 1
    ctx.reply = Allow(ctx.args["call_id"], d.generation, tool=d.tool)


@REGISTRY.action
def hold_permit(m: Any, ctx: Any, *, limit: int) -> None:
    """Remember the permit as outstanding, so it is recorded at most once; the oldest beyond ``limit`` is dropped."""
    permits = m.data.permits
    permits.append(ctx.args["call_id"])
    if len(permits) > limit:
        del permits[: len(permits) - limit]
        bump(m.data.stats, "abandoned")


@REGISTRY.guard
def holds_permit(m: Any, ctx: Any) -> bool:
    return ctx.args["call_id"] in m.data.permits


@REGISTRY.action
def release_permit(m: Any, ctx: Any) -> None:
    permits = m.data.permits
    if ctx.args["call_id"] in permits:
        permits.remove(ctx.args["call_id"])


@REGISTRY.action
def grant_probe(m: Any, ctx: Any, *, ttl_ms: int) -> None:
    expires = m.data.last_now + ttl_ms
    m.data.leases.append({"call_id": ctx.args["call_id"], "expires_at": expires})
    bump(m.data.stats, "probes")
    ctx.reply = Allow(ctx.args["call_id"], m.data.generation, probe=True, lease_expires_at=expires, tool=m.data.tool)


@REGISTRY.action
def reject(m: Any, ctx: Any, *, reason: str, retry_at: Literal["open_until", "first_lease_expiry", "never"]) -> None:
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
def record_outcome(m: Any, ctx: Any, *, window_size: int) -> None:
    d = m.data
    outcome = ctx.args["outcome"]
    window = d.window
    if outcome in _RECORDED:
        window.append(outcome)
    if len(window) > window_size:
        del window[: len(window) - window_size]
    d.consecutive_failures = d.consecutive_failures + 1 if outcome == "failure" else 0
    stats = d.stats
    stats[outcome] = stats.get(outcome, 0) + 1


@REGISTRY.action
def trip(
    m: Any, ctx: Any, *, reason: str, cooldown_ms: int, multiplier: int, max_cooldown_ms: int, jitter_percent: int
) -> None:
    """Open for a duration that grows with consecutive trips, honours retry_after, and jitters reproducibly."""
    d = m.data
    d.trips += 1
    duration = backoff_ms(cooldown_ms, multiplier, d.trips, max_cooldown_ms, ctx.args.get("retry_after"))
    duration += jitter_ms(d.tool, d.trips, duration, jitter_percent)
    _new_generation(d)
    bump(d.stats, "trips")
    ctx.enter(until=d.last_now + duration, reason=reason)


@REGISTRY.action
def enter_half_open(m: Any, ctx: Any) -> None:
    _new_generation(m.data)
    ctx.enter(since=m.data.last_now)


@REGISTRY.action
def release_lease(m: Any, ctx: Any) -> None:
    m.data.leases = [lease for lease in m.data.leases if lease["call_id"] != ctx.args["call_id"]]


@REGISTRY.action
def close(m: Any, ctx: Any) -> None:
    d = m.data
    _new_generation(d)
    d.window = []
    d.consecutive_failures = 0
    d.trips = 0


@REGISTRY.action
def new_generation(m: Any, ctx: Any) -> None:
    _new_generation(m.data)


# -- typed API ------------------------------------------------------------------------------


def _check_permit(breaker: Any, permit: Any) -> None:
    """A permit is recorded on the breaker that issued it; anything else is refused, and counted.

    The count (``stats["refused_permits"]``) is the one change a refused record makes:
    a driver mixing up its tools shows in the breaker's numbers, not only in its logs.
    """
    if type(permit) is not Allow:
        why = f"takes the Allow permit that acquire() answered, got {type(permit).__name__} {shown(permit)}"
    elif permit.tool != breaker.data.tool:
        why = (
            f"permit {shown(permit.call_id)} was issued by the breaker of tool {shown(permit.tool)}, "
            f"not this one ({shown(breaker.data.tool)})"
        )
    else:
        return
    bump(breaker.data.stats, "refused_permits")
    raise FeedArgumentError(f"tool_breaker: record {why}")


def _record(
    breaker: Any,
    now: int,
    permit: Allow,
    outcome: str,
    error_kind: str | None,
    retry_after: int | None,
    policy: PolicyArg,
) -> None:
    try:
        breaker.feed("record", now, permit.call_id, outcome, permit.generation, error_kind, retry_after, policy=policy)
    except FeedRefused:  # recorded twice, or never issued: the table refused it; the stats count it
        bump(breaker.data.stats, "refused_permits")
        raise


class ToolBreaker(DeclaredMachine, machine="tool_breaker", registry=REGISTRY, policy="ToolBreakerPolicy"):
    """One tool's circuit breaker; compiled from ``machines/tool_breaker.yaml`` on first use."""

    __slots__ = ()

    def acquire(self, now: int, call_id: str, *, policy: PolicyArg = None) -> Allow | Reject:
        return self.feed("acquire", now, call_id, policy=policy)  # type: ignore[no-any-return]

    def record(
        self,
        now: int,
        permit: Allow,
        outcome: ToolOutcome,
        *,
        error_kind: str | None = None,
        retry_after: int | None = None,
        policy: PolicyArg = None,
    ) -> None:
        _check_permit(self, permit)
        _record(self, now, permit, outcome, error_kind, retry_after, policy)

    def tick(self, now: int, *, policy: PolicyArg = None) -> None:
        self.feed("tick", now, policy=policy)

    def force_open(self, now: int, *, policy: PolicyArg = None) -> None:
        """Hold the breaker open until :meth:`reset`."""
        self.feed("force_open", now, policy=policy)

    def disable(self, now: int, *, policy: PolicyArg = None) -> None:
        """Let every call through until :meth:`reset`."""
        self.feed("disable", now, policy=policy)

    def reset(self, now: int, *, policy: PolicyArg = None) -> None:
        """Close the breaker and forget its history."""
        self.feed("reset", now, policy=policy)


if TYPE_CHECKING:  # what type checkers see: the stub written from the YAML's policy block
    from .policies import ToolBreakerPolicy as ToolBreakerPolicy


def __getattr__(name: str) -> Any:
    if name == "ToolBreakerPolicy":  # built from the YAML's policy block, so compiled on first use
        return ToolBreaker.compiled.Policy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _check_tool(tool: object) -> None:
    """Refuse a tool name that is not a string, or names no tool (see :mod:`.names`), before it is a key."""
    if type(tool) is not str:
        raise FeedArgumentError(f"tool_health: a tool name is a string, got {type(tool).__name__} {shown(tool)}")
    problem = name_problem(tool)
    if problem is not None:  # the name itself is never echoed: it may be 100k characters of anything
        raise FeedArgumentError(f"tool_health: a tool name {problem}")


@dataclass
class ToolHealth:
    """One breaker per tool name, created on first use; snapshots and restores as one JSON value.

    ToolHealth is a collection of machines, not a machine: it holds the policy
    it hands its breakers (a default and per-tool overrides), and each call may
    still override it with ``policy=``, as every feed may.  Policies are
    configuration the driver supplies, not state, so no snapshot holds them.
    """

    policy: Any = None
    overrides: dict[str, Any] | None = None
    machine: CompiledMachine | None = None
    engine: EngineName | None = None  # the engine of its breakers (None: the process's default)

    def __post_init__(self) -> None:
        # A router runs tools from a thread pool, so one ToolHealth is shared between
        # threads: each breaker is created once and fed by one thread at a time.
        # (A machine instance itself is single-owner; this lock is ToolHealth's.)
        self._lock = threading.RLock()
        self.breakers: dict[str, Any] = {}
        if self.machine is None:
            self.machine = ToolBreaker.compiled
        self.policy = self.machine.policy(self.policy)
        overrides = self.overrides if self.overrides is not None else {}
        if not isinstance(overrides, Mapping):
            raise PolicyError(
                f"tool_health: overrides map tool names to policies, got {type(overrides).__name__} {shown(overrides)}"
            )
        for tool in overrides:
            _check_tool(tool)
        self.overrides = {k: self.machine.policy(v) for k, v in overrides.items()}
        if self.engine is not None:  # refused now, not at the first acquire
            self.engine = engine_name(self.engine, "tool_health: engine=")

    def policy_for(self, tool: str) -> Any:
        assert self.overrides is not None
        return self.overrides.get(tool, self.policy)

    def breaker(self, tool: str) -> Any:
        _check_tool(tool)
        with self._lock:
            b = self.breakers.get(tool)
            if b is None:
                b = self.breakers[tool] = self._new(tool)
            return b

    def _new(self, tool: str) -> Any:
        assert self.machine is not None
        _check_tool(tool)  # a tool's first call only: a known tool's name was checked when it was new
        b = self.machine.new(engine=self.engine)
        b.data.tool = tool
        return b

    def acquire(self, tool: str, now: int, call_id: str, *, policy: PolicyArg = None) -> Allow | Reject:
        if type(tool) is not str:
            _check_tool(tool)
        # acquire()/release() rather than ``with``: the with statement's special-method
        # lookups cost more than the rest of this method; the lock is held the same way.
        lock = self._lock
        lock.acquire()
        try:
            b = self.breakers.get(tool)
            if b is None:  # filed only once its first feed was accepted: a refused one leaves no breaker
                b = self._new(tool)
                answer = b.acquire(now, call_id, policy=self.policy_for(tool) if policy is None else policy)
                self.breakers[tool] = b
                return answer  # type: ignore[no-any-return]
            if policy is None:
                overrides = self.overrides
                policy = overrides.get(tool, self.policy) if overrides else self.policy
            return b.feed("acquire", now, call_id, policy=policy)  # type: ignore[no-any-return]
        finally:
            lock.release()

    def record(
        self,
        tool: str,
        now: int,
        permit: Allow,
        outcome: ToolOutcome,
        *,
        error_kind: str | None = None,
        retry_after: int | None = None,
        policy: PolicyArg = None,
    ) -> None:
        if type(tool) is not str:
            _check_tool(tool)
        lock = self._lock
        lock.acquire()  # as in acquire()
        try:
            b = self.breakers.get(tool)
            known = b is not None
            if b is None:
                b = self._new(tool)
            if type(permit) is not Allow or permit.tool != b.data.tool:
                _check_permit(b, permit)  # raises, and counts the refusal
            if policy is None:
                overrides = self.overrides
                policy = overrides.get(tool, self.policy) if overrides else self.policy
            try:
                b.feed(
                    "record", now, permit.call_id, outcome, permit.generation, error_kind, retry_after, policy=policy
                )
            except FeedRefused:  # recorded twice, or never issued: the table refused it; the stats count it
                bump(b.data.stats, "refused_permits")
                raise
            if not known:  # filed only once its first feed was accepted
                self.breakers[tool] = b
        finally:
            lock.release()

    def tick(self, now: int, *, policy: PolicyArg = None) -> None:
        with self._lock:
            for tool, b in self.breakers.items():
                b.tick(now, policy=self.policy_for(tool) if policy is None else policy)

    @property
    def states(self) -> dict[str, str]:
        """Each tool's breaker state name, by tool."""
        with self._lock:
            return {tool: b.state for tool, b in sorted(self.breakers.items())}

    def snapshot(self) -> dict[str, Any]:
        """The envelope every snapshot has (format, machine, fingerprint), holding one breaker snapshot per tool."""
        assert self.machine is not None
        with self._lock:
            return {
                "format": SNAPSHOT_FORMAT,
                "machine": "tool_health",
                "fingerprint": self.machine.fingerprint,
                "breakers": {tool: b.snapshot() for tool, b in sorted(self.breakers.items())},
            }

    @classmethod
    def restore(
        cls,
        snap: dict[str, Any],
        policy: Any = None,
        overrides: dict[str, Any] | None = None,
        machine: CompiledMachine | None = None,
        engine: EngineName | None = None,
    ) -> ToolHealth:
        health = cls(policy, overrides, machine, engine)
        assert health.machine is not None
        m = health.machine
        if (
            not isinstance(snap, dict)
            or set(snap) != {"format", "machine", "fingerprint", "breakers"}
            or snap.get("machine") != "tool_health"
            or type(snap.get("format")) is not int
            or snap.get("format") not in READ_FORMATS
        ):
            raise SnapshotError(f"tool_health: refusing snapshot: not a format-{SNAPSHOT_FORMAT} tool_health value")
        if snap.get("format") == 1 and snap.get("fingerprint") != m.fingerprint:
            raise SnapshotError(
                f"tool_health: refusing snapshot: it was taken under another version of "
                f"the tool breaker spec (fingerprint {shown_fingerprint(snap.get('fingerprint'))}, this spec is "
                f"{shown_fingerprint(m.fingerprint)}), and a format-1 snapshot does not record its shape"
            )
        # Format 2: each breaker's snapshot carries its shape, and each is judged by it on restore.
        raw = snap.get("breakers", {})
        if not isinstance(raw, dict):
            raise SnapshotError("tool_health: refusing snapshot: breakers must be a JSON object")
        breakers = {tool: m.restore(s, engine=engine) for tool, s in raw.items()}
        for tool, b in breakers.items():
            if b.data.tool != tool:
                raise SnapshotError(
                    f"tool_health: refusing snapshot: breaker filed under {shown(tool)} belongs to {shown(b.data.tool)}"
                )
        health.breakers = breakers
        return health
