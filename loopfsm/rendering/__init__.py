"""Renderers driven by the spec: every view of a machine comes from its table, nothing else.

The renderers are imported by the functions that use them, so a command that
only names the formats (the command line's help) does not load Graphviz.
"""

from __future__ import annotations

from typing import Any

from loopfsm.core.spec import Spec
from loopfsm.rendering.errors import DOT_TIMEOUT as DOT_TIMEOUT  # the limit render() and the CLI default to
from loopfsm.rendering.errors import DrawingTooSlow

FORMATS = ("svg", "dot", "mermaid", "md")  # the review views: what render writes by default and build keeps fresh
EXPORTS = ("xstate", "scxml")  # the table for other tools, written when asked for


def parse_formats(text: str | list[str] | tuple[str, ...]) -> list[str]:
    """``"svg,md"`` (or a list) as a checked list of formats; ValueError names the bad ones."""
    fmts = [f.strip() for f in (text.split(",") if isinstance(text, str) else text) if f.strip()]
    known = FORMATS + EXPORTS
    bad = [f for f in fmts if f not in known]
    if bad or not fmts:
        raise ValueError(f"unknown format(s) {', '.join(bad) or '(none)'}; choose from {', '.join(known)}")
    return fmts


def render(
    spec: Spec,
    formats: tuple[str, ...] | list[str] = FORMATS,
    *,
    detailed: bool = False,
    dot_timeout: float | None = None,
) -> dict[str, str]:
    """File name -> content for each requested format, for the machine and each decision chain.

    ``xstate`` writes ``NAME.xstate.json`` and ``scxml`` ``NAME.scxml``: one file
    per machine, decisions left out (see :mod:`.export`).  ``detailed`` adds
    ``NAME.detailed.{dot,svg,mmd}``: every branch as its own line with guards
    and parameters, for checking the table row by row.  ``dot_timeout`` is how long Graphviz may take on one
    picture (:data:`DOT_TIMEOUT` when None) before :class:`DrawingTooSlow`.
    """
    from loopfsm.rendering import dot, matrix, mermaid, scxml, xstate  # noqa: PLC0415

    formats = parse_formats(formats)
    out: dict[str, str] = {}
    graphs = [(spec.name, dot.state_graph(spec))]
    if detailed:
        graphs.append((f"{spec.name}.detailed", dot.state_graph(spec, detailed=True)))
    graphs += [(f"{spec.name}.{d.name}", dot.decision_graph(spec, d)) for d in spec.decisions.values()]
    for stem, g in graphs:
        if "dot" in formats:
            out[f"{stem}.dot"] = g.source
        if "svg" in formats:
            try:
                out[f"{stem}.svg"] = dot.to_svg(g, dot_timeout)
            except DrawingTooSlow as err:  # said with the picture: the detailed one, or a decision chart
                raise DrawingTooSlow(err.seconds, stem) from None
    if "mermaid" in formats:
        out[f"{spec.name}.mmd"] = mermaid.state_diagram(spec)
        if detailed:
            out[f"{spec.name}.detailed.mmd"] = mermaid.state_diagram(spec, detailed=True)
        for d in spec.decisions.values():
            out[f"{spec.name}.{d.name}.mmd"] = mermaid.decision_flowchart(spec, d)
    if "md" in formats:
        out[f"{spec.name}.md"] = matrix.review_sheet(spec)
    if "xstate" in formats:
        out[f"{spec.name}.xstate.json"] = xstate.machine_json(spec)
    if "scxml" in formats:
        out[f"{spec.name}.scxml"] = scxml.document(spec)
    return out


def render_instance(instance: Any, fmt: str = "svg", *, detailed: bool = False) -> str:
    """A live instance's state diagram with its current state highlighted, as ``svg``, ``dot`` or ``mermaid``.

    The picture is drawn from the instance's compiled table, so it is the
    same diagram a reviewer saw, with "you are here" on it.
    """
    from loopfsm.rendering import dot, mermaid  # noqa: PLC0415

    spec = instance.compiled.spec
    state = instance.state
    if fmt == "mermaid":
        text = mermaid.state_diagram(spec, detailed=detailed)
        return text + f"    classDef current fill:#ffe08a,stroke:#b8860b,stroke-width:3px\n    class {state} current\n"
    if fmt not in ("svg", "dot"):
        raise ValueError(f"unknown format {fmt!r}; choose from svg, dot, mermaid")
    g = dot.state_graph(spec, detailed=detailed, highlight=state)
    # the plain picture's arrow ends: the state lit, nothing else moves from the picture a reviewer knows
    return g.source if fmt == "dot" else dot.to_svg(g, like=dot.state_graph(spec, detailed=detailed))
