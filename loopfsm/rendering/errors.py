"""Errors of rendering: diagrams, review sheets and exports."""

from __future__ import annotations

from loopfsm.core.errors import LoopFsmError


class RenderError(LoopFsmError):
    """Rendering failed, usually because the Graphviz ``dot`` program is missing."""


class GraphvizMissing(RenderError):
    """An SVG was asked for and the Graphviz ``dot`` program is not installed (every other format needs none)."""
