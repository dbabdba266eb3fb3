"""Graphviz views: the state graph and each decision chain, as DOT text and SVG.

Terminal states are drawn with a double border and grey fill, guarded edges
dashed, and branches that stay in their state as dotted self-loops, so the
kinds are told apart at a glance in a design review.
"""

from __future__ import annotations

import hashlib

import graphviz

from ..errors import LoopFsmError
from ..spec import Decision, Spec
from .labels import branch_label, chain_steps, decision_signature, ref_label, rule_question, state_title

SOURCE_MARK = "loopfsm-source-sha256"


class RenderError(LoopFsmError):
    """Rendering failed, usually because the Graphviz ``dot`` program is missing."""


def state_graph(spec: Spec) -> graphviz.Digraph:
    g = graphviz.Digraph(spec.name, graph_attr={"rankdir": "LR", "fontname": "Helvetica", "label": spec.name,
                                                 "labelloc": "t"},
                         node_attr={"fontname": "Helvetica", "shape": "box", "style": "rounded"},
                         edge_attr={"fontname": "Helvetica", "fontsize": "10"})
    g.node("__start__", "", shape="point", width="0.15")
    for s in spec.states.values():
        attrs = {}
        if s.terminal:
            attrs = {"peripheries": "2", "style": "rounded,filled", "fillcolor": "#e6e6e6"}
        g.node(s.name, state_title(spec, s.name), tooltip=s.description, **attrs)
    g.edge("__start__", spec.initial)
    # One edge per (source, target, kind), its branches stacked in the label: a
    # state with eight self-loops reads better as one loop with eight lines.
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for ev in spec.events.values():
        for state, branches in spec.expanded_sources(ev).items():
            for b in branches:
                kind = "guarded" if b.guarded else ("stay" if b.dest is None else "move")
                grouped.setdefault((state, b.dest or state, kind), []).append(branch_label(spec, ev.name, b))
    styles = {"guarded": ("dashed", "#1f5fa8"), "stay": ("dotted", "black"), "move": ("solid", "black")}
    for (src, dst, kind), labels in grouped.items():
        style, color = styles[kind]
        g.edge(src, dst, "\n".join(labels), style=style, color=color)
    return g


def decision_graph(spec: Spec, d: Decision) -> graphviz.Digraph:
    g = graphviz.Digraph(f"{spec.name}.{d.name}", graph_attr={"rankdir": "TB", "fontname": "Helvetica",
                                                             "label": f"{spec.name}: {d.name}", "labelloc": "t"},
                         node_attr={"fontname": "Helvetica"}, edge_attr={"fontname": "Helvetica", "fontsize": "10"})
    g.node("ask", decision_signature(d), shape="box", style="rounded")
    prev = "ask"
    prev_label = ""
    steps, unanswered = chain_steps(spec, d)
    for i, r, final in steps:
        if final:
            g.node(f"a{i}", ref_label(spec, r.result), shape="box", style="filled", fillcolor="#eef4fb")
            g.edge(prev, f"a{i}", prev_label)
            break
        q = f"q{i}"
        g.node(q, rule_question(spec, r, "\nand "), shape="diamond")
        g.edge(prev, q, prev_label)
        g.node(f"a{i}", ref_label(spec, r.result), shape="box", style="filled", fillcolor="#eef4fb",
               tooltip=r.description)
        g.edge(q, f"a{i}", "yes")
        prev, prev_label = q, "no"
    if unanswered:
        g.node("none", "no answer (raises)", shape="box", style="dashed")
        g.edge(prev, "none", prev_label)
    return g


def source_digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def to_svg(g: graphviz.Digraph) -> str:
    """SVG from ``dot``, stamped with the digest of its DOT source.

    ``build --check`` compares that stamp instead of the SVG bytes, so a
    different Graphviz version on a reviewer's machine does not make a fresh
    diagram look stale.
    """
    try:
        svg = g.pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound as err:
        raise RenderError("the Graphviz 'dot' program is not installed; install it (e.g. "
                          "'apt-get install -y graphviz') or render only dot,mermaid,md") from err
    stamp = f"<!-- {SOURCE_MARK}: {source_digest(g.source)} -->\n"
    head, sep, rest = svg.partition("<svg")
    return head + stamp + sep + rest


def svg_stamp(svg: str) -> str | None:
    marker = f"<!-- {SOURCE_MARK}: "
    start = svg.find(marker)
    if start < 0:
        return None
    return svg[start + len(marker): svg.find(" -->", start)]
