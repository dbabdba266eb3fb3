"""Guards and actions of the model fallback breaker; the table is ``machines/fallback_breaker.yaml``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from loopfsm.core.errors import FeedArgumentError, FeedRefused, shown
from loopfsm.core.registry import Registry
from loopfsm.core.declared import DeclaredMachine
from loopfsm.core.engines import EngineName
from loopfsm.core.instance import PolicyArg
from .breaker_common import bump, now_of, register_common
from .breaker_values import FailFast, Route, backoff_ms

if TYPE_CHECKING:  # pragma: no cover
    from transitions import Machine

REGISTRY = Registry("fallback_breaker")

#: What ``record`` takes: the YAML's ``record.args.outcome.enum`` (a test keeps the two equal).
FallbackOutcome = Literal["success", "transient", "rate_limited", "auth", "quota", "context_length", "content_policy"]
register_common(REGISTRY)


def _new_generation(d: Any) -> None:
    """Every transition starts a generation: older routes and the probe lease stop counting."""
    d.generation += 1
    d.probe_expires_at = None
    d.probe_success_count = 0


# -- guards -------------------------------------------------------------------------------


@REGISTRY.guard
def fallback_failing(m: Any, ctx: Any, *, max_failures: int) -> bool:
    return bool(m.data.fallback_failures >= max_failures)


@REGISTRY.guard
def policy_equals(m: Any, ctx: Any, *, value: str, expected: str) -> bool:
    """A string policy (``when_fallback_fails``) has the value this branch is for."""
    return value == expected


@REGISTRY.guard
def probe_lease_within(m: Any, ctx: Any, *, ttl_ms: int) -> bool:
    """No probe lease is out, or it expires no later than ``ttl_ms`` after the latest time; an invariant's guard."""
    expires = m.data.probe_expires_at
    return expires is None or bool(expires <= m.data.last_now + ttl_ms)


@REGISTRY.guard
def probe_lease_live(m: Any, ctx: Any) -> bool:
    """No probe lease is out, or it has not expired by the latest time; an invariant's guard."""
    expires = m.data.probe_expires_at
    return expires is None or bool(m.data.last_now < expires)


@REGISTRY.guard
def cooldown_within(m: Any, ctx: Any, *, max_ms: int) -> bool:
    """The cooldown ends no later than ``max_ms`` after the latest time; an invariant's guard."""
    return bool(m.state_data["until"] <= m.data.last_now + max_ms)


@REGISTRY.guard
def probe_expired(m: Any, ctx: Any) -> bool:
    expires = m.data.probe_expires_at
    return expires is not None and now_of(m, ctx) >= expires


@REGISTRY.guard
def probe_free(m: Any, ctx: Any) -> bool:
    return m.data.probe_expires_at is None


@REGISTRY.guard
def model_is(m: Any, ctx: Any, *, model: Literal["primary", "fallback"]) -> bool:
    return bool(ctx.args["model"] == model)


@REGISTRY.guard
def primary_failures_reach(m: Any, ctx: Any, *, threshold: int) -> bool:
    """This counted failure makes ``threshold`` in a row."""
    return bool(m.data.primary_failures + 1 >= threshold)


# -- actions ------------------------------------------------------------------------------


@REGISTRY.action
def route_to(m: Any, ctx: Any, *, model: Literal["primary", "fallback"]) -> None:
    d = m.data
    d.routes += 1
    bump(d.stats, f"routed_{model}")
    ctx.reply = Route(model, d.generation, breaker=d.name, number=d.routes)


@REGISTRY.action
def grant_probe(m: Any, ctx: Any, *, ttl_ms: int) -> None:
    d = m.data
    d.routes += 1
    d.probe_expires_at = d.last_now + ttl_ms
    bump(d.stats, "probes")
    ctx.reply = Route(
        "primary", d.generation, probe=True, lease_expires_at=d.probe_expires_at, breaker=d.name, number=d.routes
    )


@REGISTRY.action
def hold_route(m: Any, ctx: Any, *, limit: int) -> None:
    """Remember the route just issued as outstanding, so it is recorded at most once; the oldest beyond ``limit`` is
    forgotten."""
    outstanding = m.data.outstanding
    outstanding.append(m.data.routes)
    if len(outstanding) > limit:
        del outstanding[: len(outstanding) - limit]
        bump(m.data.stats, "abandoned")


@REGISTRY.guard
def holds_route(m: Any, ctx: Any) -> bool:
    return ctx.args["number"] in m.data.outstanding


@REGISTRY.action
def release_route(m: Any, ctx: Any) -> None:
    outstanding = m.data.outstanding
    if ctx.args["number"] in outstanding:
        outstanding.remove(ctx.args["number"])


@REGISTRY.action
def fail_fast(m: Any, ctx: Any, *, reason: str) -> None:
    """Answer FailFast with the YAML's ``reason`` and the end of the cooldown as the time to retry."""
    bump(m.data.stats, "failed_fast")
    ctx.reply = FailFast(m.state_data["until"], reason)


@REGISTRY.action
def enter_recovering(m: Any, ctx: Any) -> None:
    _new_generation(m.data)
    ctx.enter(since=m.data.last_now)


@REGISTRY.action
def trip(m: Any, ctx: Any, *, reason: str, cooldown_ms: int, multiplier: int, max_cooldown_ms: int) -> None:
    """Switch to the fallback for a cooldown that grows with consecutive trips; ``reason`` is the YAML's."""
    d = m.data
    d.trips += 1
    cooldown = backoff_ms(cooldown_ms, multiplier, d.trips, max_cooldown_ms, ctx.args.get("retry_after"))
    _new_generation(d)
    bump(d.stats, "trips")
    ctx.enter(until=d.last_now + cooldown, reason=reason)


@REGISTRY.action
def recover(m: Any, ctx: Any) -> None:
    d = m.data
    _new_generation(d)
    d.trips = 0
    d.primary_failures = 0
    d.fallback_failures = 0


@REGISTRY.action
def release_probe(m: Any, ctx: Any) -> None:
    m.data.probe_expires_at = None


@REGISTRY.action
def primary_success(m: Any, ctx: Any) -> None:
    m.data.primary_failures = 0
    bump(m.data.stats, "primary_success")


@REGISTRY.action
def primary_failed(m: Any, ctx: Any) -> None:
    m.data.primary_failures += 1
    bump(m.data.stats, "primary_failed")


@REGISTRY.action
def fallback_success(m: Any, ctx: Any) -> None:
    m.data.fallback_failures = 0
    bump(m.data.stats, "fallback_success")


@REGISTRY.action
def fallback_failed(m: Any, ctx: Any) -> None:
    m.data.fallback_failures += 1
    bump(m.data.stats, "fallback_failed")


def _refused(breaker: Any, why: str) -> FeedArgumentError:
    """A record that is not for one of this breaker's routes changes nothing but this count."""
    bump(breaker.data.stats, "refused_permits")
    return FeedArgumentError(f"fallback_breaker: record {why}")


class FallbackBreaker(DeclaredMachine, machine="fallback_breaker", registry=REGISTRY, policy="FallbackBreakerPolicy"):
    """The model fallback breaker; compiled from ``machines/fallback_breaker.yaml`` on first use.

    ``name`` is carried by every Route it issues, so a route recorded on the wrong breaker is refused.
    Without one, the breaker names itself once, at creation, with a random token kept in its data (a
    snapshot restores it exactly, so decisions stay reproducible); pass a name of your own when two
    runs must produce identical snapshots.
    """

    __slots__ = ()

    def __init__(
        self,
        name: str | None = None,
        *,
        engine: EngineName | None = None,
        machine_class: type[Machine] | None = None,
        machine_options: Mapping[str, Any] | None = None,
    ) -> None:
        if name is None:
            from secrets import token_hex  # noqa: PLC0415 - hmac and OpenSSL load only when a breaker names itself

            name = "fallback-" + token_hex(6)
        if type(name) is not str:
            raise FeedArgumentError(f"fallback_breaker: a name is a string, got {type(name).__name__} {shown(name)}")
        super().__init__(engine=engine, machine_class=machine_class, machine_options=machine_options)
        self.data.name = name

    def route(self, now: int, *, policy: PolicyArg = None) -> Route | FailFast:
        return self.feed("route", now, policy=policy)  # type: ignore[no-any-return]

    def record(
        self,
        now: int,
        route: Route,
        outcome: FallbackOutcome,
        *,
        retry_after: int | None = None,
        policy: PolicyArg = None,
    ) -> None:
        if type(route) is not Route:
            raise _refused(self, f"takes the Route that route() answered, got {type(route).__name__} {shown(route)}")
        if route.breaker != self.data.name:
            raise _refused(
                self,
                f"route {route.number} was issued by the breaker named {shown(route.breaker)}, "
                f"not this one ({shown(self.data.name)})",
            )
        try:
            self.feed("record", now, route.model, outcome, route.generation, route.number, retry_after, policy=policy)
        except FeedRefused:  # recorded twice, never issued, or forgotten: the table refused it; the stats count it
            bump(self.data.stats, "refused_permits")
            raise

    def tick(self, now: int, *, policy: PolicyArg = None) -> None:
        self.feed("tick", now, policy=policy)


if TYPE_CHECKING:  # what type checkers see: the stub written from the YAML's policy block
    from .policies import FallbackBreakerPolicy as FallbackBreakerPolicy


def __getattr__(name: str) -> Any:
    if name == "FallbackBreakerPolicy":  # built from the YAML's policy block, so compiled on first use
        return FallbackBreaker.compiled.Policy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
