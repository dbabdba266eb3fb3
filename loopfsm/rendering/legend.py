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

    ordered: bool  # numbered ways
    guard_decides: bool  # blue ways
    dashed: bool  # the dashed arrow of a blue way
    moves: bool  # "-> X"
    stays: bool
    fields: bool
    notes: bool
    terminal: bool
    home: str | None  # the initial state, when the arrows back to it are not drawn
    note_guard: bool = False  # a dashed grey arrow from a note
    boxed_final: bool = False  # an arrow into a final state leaves its card's edge, not a line
    boxed_one: bool = False  # a card whose ways all go to one state has one arrow from its edge
    asks: bool = False  # a small line under a way says what decides it
    lined: bool = True  # some arrow leaves a card's line (else every drawn arrow leaves a box's edge)
    note_arrows: bool = True  # a note has an arrow drawn (not when its moves all go back to the initial state)
    held: tuple[str, ...] = ()  # the machine's own data, which every state holds

    def rows(self) -> list[tuple[str, str, str]]:
        """(mark, its colour, what it means) for each kind drawn."""
        out = []
        if self.ordered:
            out.append(("1, 2, 3", "black", "the order a state tries a feed's ways; the first that holds is taken"))
        if self.guard_decides:
            out.append(
                (
                    "blue",
                    GUARD_COLOR,
                    'decided also by the machine\'s own data, policy or clock (a guard, named after "if");'
                    " a black way by the feed's own arguments alone"
                    + (". The small line under a way says what decides it" if self.asks else ""),
                )
            )
        if self.dashed:
            out.append(("- - \u25b6", GUARD_COLOR, "the arrow of a blue way"))
        if self.moves:
            edges = [
                w
                for w, on in (
                    ("into a final state", self.boxed_final),
                    ("when all its ways go to one state", self.boxed_one),
                )
                if on
            ]
            edge = f" (from the box's edge {' or '.join(edges)})" if edges else ""
            leaves = "its arrow leaves its line's left or right end" + edge
            if not self.lined:
                leaves = f"its arrow leaves the box's edge {' or '.join(edges)}" if edges else "its arrow is not drawn"
            out.append(("\u2192 X", "black", f"the way moves the run to state X; {leaves}"))
        if self.stays:
            out.append(("stays", "black", "the state takes the feed and does not move"))
        if self.fields or self.held:
            every = f"every state holds {', '.join(self.held)}" if self.held else ""
            said = "; ".join(w for w in ("the data the state holds" if self.fields else "", every) if w)
            out.append(("{ a, b }", "#555555", said))
        if self.notes:
            out.append(
                (
                    "grey",
                    NOTE_COLOR,
                    "a note (a box with a folded corner)"
                    + (" and its arrows" if self.note_arrows else "")
                    + ": a feed several states take alike"
                    + (", dashed where a guard decides it" if self.note_guard else ""),
                )
            )
        if self.terminal:
            out.append(("double border", "black", "a final state"))
        if self.home:
            back = f"back to the initial state {self.home}: its arrow is not drawn"
            out.append((f"\u2192 {self.home}", "black", back))
        return out

    def sheet_rows(self) -> list[tuple[str, str, str]]:
        """:meth:`rows` with the marks in words, for the review sheet (Markdown has no colours to show)."""
        words = {
            "blue": "a way in blue",
            "- - \u25b6": "a dashed blue arrow",
            "grey": "grey",
            "\u2192 X": "*\u2192 X* after a way",
            "stays": "*stays* after a way",
            "1, 2, 3": "the numbers before a feed's ways",
        }
        return [(words.get(mark, mark), color, meaning) for mark, color, meaning in self.rows()]
