"""The error hierarchy: one root, a few branches a caller can tell apart.

A driver catches ``IllegalFeed`` to find its own contract bugs, ``SnapshotError``
to refuse a bad checkpoint, and ``SpecError`` when a machine file is wrong; all
of them are ``LoopFsmError`` so one ``except`` is enough where detail does not
matter.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


class LoopFsmError(Exception):
    """Root of every error loopfsm raises on purpose."""


def shown(value: object, limit: int = 40) -> str:
    """``repr(value)`` cut to a short prefix: errors name a value, they never echo a secret or a document."""
    try:
        text = repr(value)
    except Exception:  # a value whose repr fails must not turn a refusal into a crash
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


# A fingerprint is "sha256:" and 32 hex digits (41 characters quoted): shown whole, with room to spare.
FINGERPRINT_SHOWN = 64


def shown_fingerprint(value: object) -> str:
    """A snapshot's fingerprint or the spec's, printed the same way: whole when it has a fingerprint's
    length, cut like any other value when a stored one is longer (it could be anything)."""
    return shown(value, FINGERPRINT_SHOWN)


def closest(word: object, choices: Iterable[object]) -> str | None:
    """The choice ``word`` most likely meant (a case slip first, then the nearest spelling), or None."""
    if not isinstance(word, str):
        return None
    names = [c for c in choices if isinstance(c, str)]
    folded = [c for c in names if c.lower() == word.lower() and c != word]
    if folded:
        return folded[0]
    from difflib import get_close_matches  # noqa: PLC0415 - only a typo pays for it

    found = get_close_matches(word, names, n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(word: object, choices: Iterable[object]) -> str:
    """``; did you mean 'x'?`` for a near miss, else the empty string (to append to a message)."""
    found = closest(word, choices)
    return f"; did you mean '{found}'?" if found is not None else ""


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with a machine file, located precisely enough to jump to.

    ``path`` is the dotted path inside the document (``events.coin.from.locked[0].to``),
    so a reader can find the spot even when line numbers drift after an edit.
    """

    file: str
    line: int
    column: int
    path: str
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        path = f" {self.path}:" if self.path else ""
        tag = "" if self.severity == "error" else f" [{self.severity}]"
        return f"{where}:{path}{tag} {self.message}"


class SpecError(LoopFsmError):
    """A machine file is invalid; carries every problem found, not only the first."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems: list[Problem] = sorted(set(problems))
        super().__init__("\n".join(str(p) for p in self.problems))


class RegistryError(LoopFsmError):
    """A guard, action, result or codec is registered wrongly or looked up by an unknown name."""


class IllegalFeed(LoopFsmError):
    """A feed arrived in a state where the table does not allow it.

    The driver sent something the machine was not waiting for; naming the
    states where it *is* legal usually points straight at the driver bug.
    """

    def __init__(self, machine: str, state: str, feed: str, legal_states: Sequence[str], reason: str = ""):
        self.machine = machine
        self.state = state
        self.feed = feed
        self.legal_states = tuple(legal_states)
        legal = ", ".join(self.legal_states) or "no state"
        why = f": {reason}" if reason else ""
        super().__init__(f"{machine}: feed '{feed}' is illegal in state '{state}'{why} (legal in: {legal})")


class NoBranchMatched(IllegalFeed):
    """The feed is legal in this state, but none of its guarded branches held and the table says raise."""

    def __init__(self, machine: str, state: str, feed: str, legal_states: Sequence[str]):
        super().__init__(machine, state, feed, legal_states, reason="no branch's guard held")


class FeedArgumentError(LoopFsmError):
    """A feed was called with arguments that do not match its declaration in the table."""


class UnknownFeed(FeedArgumentError):
    """A feed or decision was asked for by a name the table does not declare.

    Feeds and decisions are both calls a driver makes by name, so a typo in
    either is the same mistake and raises the same class.
    """


class PolicyError(LoopFsmError):
    """A policy value is of the wrong type or outside the bounds the table declares."""


class DecisionError(LoopFsmError):
    """A decision chain had no rule for the current state and the table says raise."""


class SnapshotError(LoopFsmError):
    """A snapshot is corrupt, from another machine or spec, or of an unknown format; nothing was restored."""


class IncompatibleSnapshot(SnapshotError):
    """A well-formed snapshot whose shape this table cannot read (and no migration covers); nothing was restored.

    ``problems`` names each element: ``state 'AwaitingToolz' no longer exists``,
    ``field credit changed from integer to string``.
    """

    def __init__(self, message: str, problems: tuple[str, ...]):
        super().__init__(message)
        self.problems = problems


class ActionError(LoopFsmError):
    """A registered action broke the table's contract (for example left a state's data unset)."""


class CallbackError(LoopFsmError):
    """A ``transitions`` callback of the user's own (``on_enter_<state>``, ``after_state_change``, ...) raised.

    The table's move it followed is complete (state, state data and the trace
    record are as if the callback had not raised); the callback's exception is
    the ``__cause__``.  ``moved`` says whether the feed took a branch before
    the callback raised (a ``before_state_change`` callback runs before any).
    """

    def __init__(self, message: str, moved: bool = False, feed_data: object = None):
        super().__init__(message)
        self.moved = moved
        self.feed_data = feed_data  # the feed's context, for the trace record of a move that happened


class ConfigError(LoopFsmError):
    """A project's ``[tool.loopfsm]`` settings or a ``--registry`` option is malformed."""


class ScriptError(LoopFsmError):
    """A run script (or a scripted model's script) is malformed or ran out of scripted replies."""


class FeedRefused(IllegalFeed):
    """The table refuses this feed here on purpose and says why (a decision from the wrong approver, ...).

    Nothing changed; ``reason`` is the table's own words, never arguments' content.
    """

    def __init__(self, machine: str, state: str, feed: str, legal_states: Sequence[str], reason: str):
        super().__init__(machine, state, feed, legal_states, reason=reason)
        self.reason = reason
