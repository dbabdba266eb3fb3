"""Graphviz views: the state graph and each decision chain, as DOT text and SVG.

Terminal states are drawn with a double border and grey fill, guarded edges
dashed, and branches that stay in their state as dotted self-loops, so the
kinds are told apart at a glance in a design review.
"""

from __future__ import annotations

import hashlib
import textwrap

import graphviz

from loopfsm.review.errors import GraphvizMissing
from loopfsm.core.spec import Decision, Spec
from .labels import branch_label, chain_steps, decision_signature, ref_label
from .overview import ANY, overview

SOURCE_MARK = "loopfsm-source-sha256"


def _wrap(lines: list[str], width: int = 38) -> str:
    out: list[str] = []
    for line in lines:
        out += textwrap.wrap(line, width, subsequent_indent="  ", break_long_words=False) or [""]
    # "\l" ends a left-justified line: stacked feeds read as a list, not a centred poem.
    return "".join(line.replace("\\", "\\\\") + "\\l" for line in out)


def _node_title(spec: Spec, name: str) -> str:
    """The state's name, its data fields below in a smaller face: long field lists made nodes wide."""
    fields = list(spec.states[name].data)
    if not fields:
        return name
    lines = textwrap.wrap("{ " + ", ".join(fields) + " }", 28, break_long_words=False)
    rows = "".join(f'<BR/><FONT POINT-SIZE="10">{_html(line)}</FONT>' for line in lines)
    return f"<{_html(name)}{rows}>"


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


HIGHLIGHT = {"style": "rounded,filled,bold", "fillcolor": "#ffe08a", "penwidth": "2.5"}


def state_graph(spec: Spec, *, detailed: bool = False, highlight: str | None = None) -> graphviz.Digraph:
    """The state diagram: the reviewer's overview, or with ``detailed`` every branch with guards and actions.

    ``highlight`` names a state to draw filled, for a live instance's picture.
    """
    title = spec.name + (" (detailed)" if detailed else "") + (f": now in {highlight}" if highlight else "")
    g = graphviz.Digraph(
        spec.name,
        graph_attr={
            "rankdir": "LR",
            "fontname": "Helvetica",
            "label": title,
            "labelloc": "t",
            "nodesep": "0.4",
            "ranksep": "0.6",
        },
        node_attr={"fontname": "Helvetica", "shape": "box", "style": "rounded"},
        edge_attr={"fontname": "Helvetica", "fontsize": "10"},
    )
    g.node("__start__", "", shape="point", width="0.15")
    for s in spec.states.values():
        attrs = {}
        if s.terminal:
            attrs = {"peripheries": "2", "style": "rounded,filled", "fillcolor": "#e6e6e6"}
        if s.name == highlight:
            attrs = {**attrs, **HIGHLIGHT}
        g.node(s.name, _node_title(spec, s.name), tooltip=s.description, **attrs)
    g.edge("__start__", spec.initial)
    if detailed:
        _detailed_edges(spec, g)
        return g
    ov = overview(spec)
    pairs = {(e.src, e.dst) for e in ov.edges if not e.loop}
    for e in ov.edges:
        if e.loop:
            g.edge(e.src, e.dst, _wrap([", ".join(e.feeds)], 30), style="dotted", color="#555555")
        else:
            # Between two states with moves both ways the two labels sit side by side between
            # the two edges: each names where it goes and is underlined onto its own edge.
            back = (e.dst, e.src) in pairs
            two_way = {"decorate": "true"} if back else {}
            g.edge(
                e.src,
                e.dst,
                _wrap(([f"to {e.dst}:"] if back else []) + e.lines()),
                style="dashed" if e.guarded else "solid",
                color="#1f5fa8" if e.guarded else "black",
                **two_way,
            )
    if ov.any_moves or ov.any_stays:
        note = [ov.any_label]
        if ov.any_stays:
            note += ["", "accepted there without moving:"] + textwrap.wrap(", ".join(ov.any_stays), 34)
        g.node(ANY, "\n".join(note), shape="note", style="dashed", fontsize="10", color="#777777")
        for e in ov.any_moves:
            g.edge(ANY, e.dst, _wrap(e.lines()), style="dashed", color="#777777", fontcolor="#444444")
    for sh in ov.shared:
        note = textwrap.wrap(sh.label, 34, subsequent_indent="  ")
        if sh.stays:
            note += ["", "accepted there without moving:"] + textwrap.wrap(", ".join(sh.stays), 34)
        g.node(sh.node, "\n".join(note), shape="note", style="dashed", fontsize="10", color="#777777")
        for e in sh.moves:
            g.edge(sh.node, e.dst, _wrap(e.lines()), style="dashed", color="#777777", fontcolor="#444444")
    return g


def _detailed_edges(spec: Spec, g: graphviz.Digraph) -> None:
    # One edge per (source, target, kind), its branches stacked in the label,
    # with guards and parameters in full: the view for checking a table row by row.
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


def decision_graph(spec: Spec, d: Decision) -> graphviz.Digraph:
    """The chain as a ladder: questions down the left in order, each answer beside its question.

    Diamonds grow with their text until one guard with three policy numbers
    makes the chart wider than a screen; boxes stacked on a spine stay
    readable at any length.
    """
    g = graphviz.Digraph(
        f"{spec.name}.{d.name}",
        graph_attr={
            "rankdir": "TB",
            "fontname": "Helvetica",
            "label": f"{spec.name}: {d.name}",
            "labelloc": "t",
            "nodesep": "0.5",
            "ranksep": "0.35",
        },
        node_attr={"fontname": "Helvetica", "fontsize": "11"},
        edge_attr={"fontname": "Helvetica", "fontsize": "10"},
    )
    g.node("ask", decision_signature(d), shape="box", style="rounded")
    prev = "ask"
    prev_label = ""
    steps, unanswered = chain_steps(spec, d)
    for i, r, final in steps:
        answer = dict(shape="box", style="filled", fillcolor="#eef4fb", tooltip=r.description)
        if final:
            g.node(f"a{i}", ref_label(spec, r.result), **answer)
            g.edge(prev, f"a{i}", prev_label)
            break
        q = f"q{i}"
        lines = [f"{i + 1}. {r.name}"]
        if r.states is not None:
            lines.append("state in " + ", ".join(r.states))
        lines += [*r.conditions(), *(ref_label(spec, gd) for gd in r.guards)]
        label = "".join(t.replace("\\", "\\\\") + "\\l" for t in _wrap_each(lines, 60))
        with g.subgraph() as row:
            row.attr(rank="same")
            row.node(q, label, shape="box", style="rounded,dashed", color="#1f5fa8")
            row.node(f"a{i}", ref_label(spec, r.result), **answer)
        g.edge(prev, q, prev_label, weight="10")
        g.edge(q, f"a{i}", "yes")
        prev, prev_label = q, "no"
    if unanswered:
        g.node("none", "no answer (raises)", shape="box", style="dashed")
        g.edge(prev, "none", prev_label)
    return g


def _wrap_each(lines: list[str], width: int) -> list[str]:
    out: list[str] = []
    for line in lines:
        out += textwrap.wrap(line, width, subsequent_indent="    ", break_long_words=False) or [""]
    return out


def source_digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def to_svg(g: graphviz.Digraph) -> str:
    """SVG from ``dot``, stamped with the digest of its DOT source (see :func:`svg_from_source`)."""
    return svg_from_source(g.source)


def svg_from_source(source: str) -> str:
    """SVG from the DOT text ``source``, stamped with the digest of that text.

    ``build --check`` compares that stamp with the digest of the DOT text it
    would draw, instead of the SVG bytes: a different Graphviz version on a
    reviewer's machine does not make a fresh diagram look stale, and the check
    needs no Graphviz at all.
    """
    try:
        svg = graphviz.Source(source).pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound as err:
        raise GraphvizMissing(
            "the Graphviz 'dot' program is not installed, so no SVG can be drawn; "
            "install it (e.g. 'apt-get install -y graphviz')"
        ) from err
    stamp = f"<!-- {SOURCE_MARK}: {source_digest(source)} -->\n"
    head, sep, rest = svg.partition("<svg")
    return str(head + stamp + sep + rest)


def svg_stamp(svg: str) -> str | None:
    marker = f"<!-- {SOURCE_MARK}: "
    start = svg.find(marker)
    if start < 0:
        return None
    return svg[start + len(marker) : svg.find(" -->", start)]
