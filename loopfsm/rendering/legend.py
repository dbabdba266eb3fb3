"""What a state diagram's legend says: one row per kind of mark the picture draws, and none for the others.

The diagram draws it under its title (:mod:`loopfsm.rendering.dot`) and the review sheet lists it in words, so
the two say the same; a test holds every shipped picture to naming exactly the marks it draws.
"""

from __future__ import annotations

from dataclasses import dataclass

GUARD_COLOR = "#1f5fa8"
NOTE_COLOR = "#777777"


@dataclass(frozen=True)
class Legend:
    """Which kinds of mark a picture draws: its legend names those and no others."""

    feed_decides: bool
    guard_decides: bool
    notes: bool
    joined: bool
    stays: bool
    terminal: bool
    again: bool
    both_ways: bool = False
    may_stay: bool = False

    def rows(self) -> list[tuple[str, str, str]]:
        """(mark, its colour, what it means) for each kind drawn."""
        out = []
        if self.feed_decides:
            out.append(("\u2500\u2500\u25b6", "black", "taken on that feed (always, or for the arguments named)"))
        if self.guard_decides:
            out.append(
                (
                    "- - \u25b6",
                    GUARD_COLOR,
                    "decided by a guard (the machine's data, policy or clock): it holds, or one tried first does not",
                )
            )
        if self.notes:
            out.append(
                (
                    "grey",
                    NOTE_COLOR,
                    "an arrow from a note (a box with a folded corner): a feed several states take alike",
                )
            )
        if self.joined:
            out.append(("\u25cf", "black", "arrows that end alike meet; the words after the dot hold for each"))
        if self.both_ways:
            out.append(
                ("\u25c0\u2500\u25b6", "black", "moves both ways between two states; each label says where it goes")
            )
        if self.stays:
            out.append(("stays on", "#555555", "feeds a state accepts without moving"))
        if self.may_stay:
            out.append(("may stay on", "#555555", "feeds that stay for some arguments, leave on an arrow for others"))
        if self.terminal:
            out.append(("double border", "black", "a final state"))
        if self.again:
            out.append(("dotted box", "black", "the initial state drawn again, where runs end"))
        return out

    def sheet_rows(self) -> list[tuple[str, str, str]]:
        """:meth:`rows` with the marks in words, for the review sheet (Markdown has no dashes to show)."""
        words = {
            "\u2500\u2500\u25b6": "a solid black arrow",
            "- - \u25b6": "a dashed blue arrow",
            "grey": "a grey arrow",
            "\u25cf": "a dot",
            "\u25c0\u2500\u25b6": "a two-headed arrow",
            "stays on": "*stays on ...* in a state's box",
            "may stay on": "*may stay on ...* in a state's box",
        }
        return [(words.get(mark, mark), color, meaning) for mark, color, meaning in self.rows()]
