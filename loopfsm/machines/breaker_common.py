"""Guards and actions both breakers share, registered into each breaker's own registry.

Both machines carry ``last_now``, ``generation``, ``probe_success_count`` and
``stats`` data fields and read time the same way: the fed-in ``now``, clamped
so that it never runs backwards.
"""

from __future__ import annotations

from typing import Any

from loopfsm.core.registry import Registry


def now_of(m: Any, ctx: Any) -> int:
    """The feed's time, never earlier than the latest time already seen."""
    now = ctx.args["now"]
    last: int = m.data.last_now
    return int(now) if now > last else last


def bump(stats: dict[str, int], what: str) -> None:
    stats[what] = stats.get(what, 0) + 1


def stale(m: Any, ctx: Any) -> bool:
    """The result's permit or route was issued before the last transition."""
    return bool(ctx.args["generation"] != m.data.generation)


def cooldown_over(m: Any, ctx: Any) -> bool:
    """The wait the breaker is in (Open, Fallback) has ended: ``now >= until``."""
    return bool(now_of(m, ctx) >= m.state_data["until"])


def probe_successes_reach(m: Any, ctx: Any, *, threshold: int) -> bool:
    """This success makes ``threshold`` successful probes."""
    return bool(m.data.probe_success_count + 1 >= threshold)


def clamp_clock(m: Any, ctx: Any) -> None:
    d = m.data
    now = ctx.args["now"]
    if now > d.last_now:
        d.last_now = int(now)


def count(m: Any, ctx: Any, *, what: str) -> None:
    bump(m.data.stats, what)


def count_probe_success(m: Any, ctx: Any) -> None:
    m.data.probe_success_count += 1


def _counters_from_json(value: object) -> dict[str, int]:
    if not isinstance(value, dict) or not all(type(k) is str and type(v) is int and v >= 0 for k, v in value.items()):
        raise ValueError("counters must map names to non-negative integers")
    return dict(value)


def _lease_from_json(value: object) -> dict[str, object]:
    if (
        not isinstance(value, dict)
        or set(value) != {"call_id", "expires_at"}
        or type(value["call_id"]) is not str
        or type(value["expires_at"]) is not int
    ):
        raise ValueError("a lease is {call_id: string, expires_at: integer}")
    return dict(value)


def register_common(registry: Registry) -> None:
    # The breakers' internals are typed, not free JSON: a snapshot cannot slip a
    # string into a counter or a number into a lease and break the next feed.
    registry.codec(
        "counters",
        dict,
        dict,
        _counters_from_json,
        {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
    )
    registry.codec(
        "lease",
        dict,
        dict,
        _lease_from_json,
        {
            "type": "object",
            "required": ["call_id", "expires_at"],
            "additionalProperties": False,
            "properties": {"call_id": {"type": "string"}, "expires_at": {"type": "integer"}},
        },
    )
    for guard in (stale, cooldown_over, probe_successes_reach):
        registry.guard(guard)
    for action in (clamp_clock, count, count_probe_success):
        registry.action(action)
