"""Errors of the review tools: rendering, verifying and replaying."""

from __future__ import annotations

from loopfsm.core.errors import LoopFsmError


class RenderError(LoopFsmError):
    """Rendering failed, usually because the Graphviz ``dot`` program is missing."""


class GraphvizMissing(RenderError):
    """An SVG was asked for and the Graphviz ``dot`` program is not installed (every other format needs none)."""


class ReviewError(LoopFsmError):
    """A review command was given something it cannot work with (a bad trace file, underivable inputs)."""
