"""Errors the shipped machines raise beyond the core's: a stale lock fence, a stream that breaks its protocol."""

from __future__ import annotations

from loopfsm.core.errors import IllegalFeed, LoopFsmError


class FencedOut(LoopFsmError):
    """A lock holder's fence is no longer current: another grant happened since, so its writes are refused."""


class StreamProtocolError(IllegalFeed):
    """A stream event breaks the provider's protocol (a delta for a closed block, a duplicate start...).

    Raised by stream assembly instead of the lenient repair the SDK accumulators
    make; the reason names the rule, and nothing was changed.
    """


class StreamFailed(LoopFsmError):
    """The provider reported an error mid-stream; ``kind`` is its error type."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        self.provider_message = message
        super().__init__(f"the provider ended the stream with {kind}: {message}")
