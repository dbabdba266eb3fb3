"""Errors of rendering: diagrams, review sheets and exports."""

from __future__ import annotations

from loopfsm.core.errors import LoopFsmError

#: Seconds Graphviz's ``dot`` may take to draw one picture before :class:`DrawingTooSlow`.  The shipped machines
#: take well under one each; a 300-state table with 1,200 arrows kept it busy for minutes with nothing said.
DOT_TIMEOUT = 30.0


class RenderError(LoopFsmError):
    """Rendering failed, usually because the Graphviz ``dot`` program is missing."""


class GraphvizMissing(RenderError):
    """An SVG was asked for and the Graphviz ``dot`` program is not installed (every other format needs none)."""


class DrawingTooSlow(RenderError):
    """Graphviz's ``dot`` did not finish one picture within the time allowed (a table of hundreds of states)."""

    def __init__(self, seconds: float, picture: str | None = None) -> None:
        self.seconds = seconds
        self.picture = picture  # the file stem of the picture, when known: "big", "big.detailed", "big.admit"
        said = f" of {picture}" if picture else ""
        super().__init__(f"Graphviz's dot was stopped after {seconds:g} s without finishing the drawing{said}")
