"""What the breakers answer: permits, rejections and routes, as plain frozen values."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Allow:
    """Go ahead.  Record the result with this ``generation``; a probe must report before ``lease_expires_at``.

    ``tool`` names the breaker that issued it: recorded on another tool's breaker it is refused.
    """

    call_id: str
    generation: int
    probe: bool = False
    lease_expires_at: int | None = None
    tool: str = ""


@dataclass(frozen=True)
class Reject:
    """Do not call.  ``retry_at`` (ms) is when asking again can succeed; None while forced open."""

    retry_at: int | None
    reason: str


@dataclass(frozen=True)
class Route:
    """Call ``model`` (``"primary"`` or ``"fallback"``); ``probe`` marks the one probe of the primary.

    ``breaker`` names the breaker that issued it and ``number`` is the route's own: it is recorded
    once, on that breaker; recorded again, elsewhere, or never issued, it is refused.
    """

    model: str
    generation: int
    probe: bool = False
    lease_expires_at: int | None = None
    breaker: str = ""
    number: int = 0


@dataclass(frozen=True)
class FailFast:
    """Both models are failing and the policy says not to try: surface ``reason`` to the caller."""

    retry_at: int
    reason: str


def backoff_ms(base_ms: int, multiplier: int, trips: int, cap_ms: int, retry_after: int | None) -> int:
    """``base * multiplier^(trips-1)`` capped at ``cap_ms``; a larger ``retry_after`` from the service wins.

    Multiplied step by step and stopped at the cap, so a huge trip count (a
    restored snapshot may carry one) costs a few steps, not ``multiplier ** trips``.
    """
    duration = base_ms
    for _ in range(max(trips - 1, 0)):
        if duration >= cap_ms or multiplier <= 1 or duration == 0:
            break
        duration *= multiplier
    duration = min(duration, cap_ms)
    return retry_after if retry_after is not None and retry_after > duration else duration
