"""Renderers driven by the spec: every view of a machine comes from its table, nothing else."""

from __future__ import annotations

from ..spec import Spec
from . import dot, matrix, mermaid

FORMATS = ("svg", "dot", "mermaid", "md")


def parse_formats(text: str | list[str] | tuple[str, ...]) -> list[str]:
    """``"svg,md"`` (or a list) as a checked list of formats; ValueError names the bad ones."""
    fmts = [f.strip() for f in (text.split(",") if isinstance(text, str) else text) if f.strip()]
    bad = [f for f in fmts if f not in FORMATS]
    if bad or not fmts:
        raise ValueError(f"unknown format(s) {', '.join(bad) or '(none)'}; choose from {', '.join(FORMATS)}")
    return fmts


def render(spec: Spec, formats: tuple[str, ...] | list[str] = FORMATS) -> dict[str, str]:
    """File name -> content for each requested format, for the machine and each decision chain."""
    formats = parse_formats(formats)
    out: dict[str, str] = {}
    graphs = [(spec.name, dot.state_graph(spec))]
    graphs += [(f"{spec.name}.{d.name}", dot.decision_graph(spec, d)) for d in spec.decisions.values()]
    for stem, g in graphs:
        if "dot" in formats:
            out[f"{stem}.dot"] = g.source
        if "svg" in formats:
            out[f"{stem}.svg"] = dot.to_svg(g)
    if "mermaid" in formats:
        out[f"{spec.name}.mmd"] = mermaid.state_diagram(spec)
        for d in spec.decisions.values():
            out[f"{spec.name}.{d.name}.mmd"] = mermaid.decision_flowchart(spec, d)
    if "md" in formats:
        out[f"{spec.name}.md"] = matrix.review_sheet(spec)
    return out
