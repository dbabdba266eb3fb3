"""Graphviz views: the state graph and each decision chain, as DOT text and SVG.

In the overview each state is a card of its ways (:mod:`.cards`) and the arrows between them carry no
words; terminal states have a double border and grey fill.  The detailed view draws every branch as its
own labelled arrow, guards and actions included.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import textwrap
import time
from dataclasses import dataclass
from typing import Any, cast

import graphviz

from loopfsm.rendering import ends_cache
from loopfsm.rendering.arrow_ends import Ends, arrows, choose, with_ends
from loopfsm.rendering.svgtext import flowed
from loopfsm.rendering.errors import DOT_TIMEOUT, DrawingTooSlow, GraphvizMissing, RenderError
from loopfsm.core.spec import Decision, Rule, Spec
from loopfsm.rendering.labels import branch_label, chain_steps, decision_signature, ref_label
from loopfsm.rendering.cards import braced, by_feed, card, html, port
from loopfsm.rendering.overview import ANY, ANYWHERE, Edge, Overview, overview, stay_groups
from loopfsm.rendering.legend import GUARD_COLOR, NOTE_COLOR, Legend

SOURCE_MARK = "loopfsm-source-sha256"


WRAP = 30  # characters a line of an arrow's words


def _wrap(lines: list[str], width: int = WRAP) -> str:
    out: list[str] = []
    for line in lines:
        feed, sep, words = line.partition(": ")
        if width < WRAP and sep and len(line) > width:  # narrow: the feed on its own line, its words below it
            out += [feed + ":"] + textwrap.wrap(words, width + 6, initial_indent="  ", subsequent_indent="  ")
            continue
        out += textwrap.wrap(line, width, subsequent_indent="  ", break_long_words=False) or [""]
    return _left(out)


def _left(lines: list[str]) -> str:
    """Lines as one DOT label, each left-justified ("\\l" ends it: stacked feeds read as a list, not a centred
    poem), backslashes escaped so a description's own "\\l" or "\\n" stays text."""
    return "".join(line.replace("\\", "\\\\") + "\\l" for line in lines)


def edge_label(lines: list[str]) -> str:
    """Words for an arrow as the state diagram wraps them (for a picture drawn on top of it, as a diff page's)."""
    return graphviz.nohtml(_wrap(lines))  # type: ignore[no-any-return]


WRAP_AT = 4  # machines whose arrows chain this many states or more are drawn top to bottom (see state_graph)


def columns(spec: Spec, ov: Overview | None = None) -> int:
    """How many columns a left-to-right drawing of the overview takes, the way ``dot`` ranks it.

    Depth-first from the initial state in table order, an arrow back onto the
    path is turned round (as ``dot`` breaks cycles); the longest chain left is
    the number of columns. Worked out from the table, not from a drawing, so
    ``build --check`` still needs no Graphviz.
    """
    order, dag = _ranked(spec, ov or overview(spec))
    longest: dict[str, int] = {}
    for s in reversed(_topological(order, dag)):
        longest[s] = 1 + max((longest[v] for v in dag[s]), default=0)
    return max(longest.values(), default=0)


def turned(spec: Spec, ov: Overview | None = None) -> set[tuple[str, str]]:
    """The arrows (from, to) that ``dot`` turns round to rank the states, as :func:`columns` works it out: drawn
    left to right, they point back to the left."""
    ov = ov or overview(spec)
    _, dag = _ranked(spec, ov)
    return {(e.src, e.dst) for e in ov.edges if not e.loop and e.src in dag[e.dst]}


def _ranked(spec: Spec, ov: Overview) -> tuple[list[str], dict[str, set[str]]]:
    """The states, initial first, and the overview's arrows with those that close a cycle turned round."""
    order = [spec.initial, *(s for s in spec.states if s != spec.initial)]
    out: dict[str, list[str]] = {s: [] for s in order}
    for e in ov.edges:
        if not e.loop:
            out[e.src].append(e.dst)
    seen: dict[str, bool] = {}  # state -> still on the depth-first path
    dag: dict[str, set[str]] = {s: set() for s in order}

    def visit(root: str) -> None:
        # depth first with an explicit stack: a chain of thousands of states is deeper than
        # Python's recursion limit
        seen[root] = True
        stack = [(root, iter(out[root]))]
        while stack:
            u, targets = stack[-1]
            for v in targets:
                if seen.get(v):
                    dag[v].add(u)
                else:
                    dag[u].add(v)
                    if v not in seen:
                        seen[v] = True
                        stack.append((v, iter(out[v])))
                        break
            else:
                seen[u] = False
                stack.pop()

    for s in order:
        if s not in seen:
            visit(s)
    return order, dag


def _topological(order: list[str], dag: dict[str, set[str]]) -> list[str]:
    """The states in an order where every arrow of ``dag`` points forward (iterative, for long chains)."""
    position = {s: i for i, s in enumerate(order)}
    done: list[str] = []
    mark: set[str] = set()
    for s in order:
        if s in mark:
            continue
        mark.add(s)
        stack = [(s, iter(sorted(dag[s], key=position.__getitem__)))]
        while stack:
            u, targets = stack[-1]
            for v in targets:
                if v not in mark:
                    mark.add(v)
                    stack.append((v, iter(sorted(dag[v], key=position.__getitem__))))
                    break
            else:
                done.append(u)
                stack.pop()
    return done[::-1]


def _node_title(spec: Spec, name: str) -> str:
    """The state's name with its data fields below in a smaller face (the detailed view and the foot's copy)."""
    fields = list(spec.states[name].data)
    if not fields:
        return name
    rows = "".join(f'<BR/><FONT POINT-SIZE="10">{html(line)}</FONT>' for line in braced(fields, 28))
    return f"<{html(name)}{rows}>"


HIGHLIGHT = {"style": "rounded,filled,bold", "fillcolor": "#ffe08a", "penwidth": "2.5"}


def state_graph(spec: Spec, *, detailed: bool = False, highlight: str | None = None) -> graphviz.Digraph:
    """The state diagram: the reviewer's overview, or with ``detailed`` every branch with guards and actions.

    In the overview each state is a card (:mod:`.cards`) listing its ways on each feed in the order the table
    tries them, and one arrow without words joins two states where some way leads from one to the other.
    ``highlight`` names a state to draw filled, for a live instance's picture.  A machine whose arrows chain
    WRAP_AT states or more (see :func:`columns`) is laid out top to bottom: left to right its columns of
    states grew past 2,000 px, and fitted to a 1,000 px page its 10 pt words shrank below legibility.
    """
    title = spec.name + (" (detailed)" if detailed else "") + (f": now in {highlight}" if highlight else "")
    ov = overview(spec)
    tall = not detailed and columns(spec, ov) >= WRAP_AT
    g = graphviz.Digraph(
        spec.name,
        graph_attr={
            "rankdir": "TB" if tall else "LR",
            "fontname": "Helvetica",
            "label": title,
            "labelloc": "t",
            "nodesep": "0.45" if tall else "0.4",
            "ranksep": "0.6",
            "mclimit": "4",
        },
        node_attr={"fontname": "Helvetica", "shape": "box", "style": "rounded"},
        edge_attr={"fontname": "Helvetica", "fontsize": "10"},
    )
    home = _home(spec, ov) if tall and not detailed else None
    arrows = [a for a in way_arrows(spec, ov, tall) if a.dst != home]
    g.node("__start__", "", shape="point", width="0.15")
    for s in spec.states.values():
        # Filled white: a card's middle is mostly space between its lines, and a click there (the review page
        # shows a state's branches on one) fell through to the page behind an unfilled box.
        attrs = {"style": "rounded,filled", "fillcolor": "white"}
        if s.terminal:
            attrs = {"peripheries": "2", "style": "rounded,filled", "fillcolor": "#e6e6e6"}
        if s.name == highlight:
            attrs = {**attrs, **HIGHLIGHT}
        label = _node_title(spec, s.name) if detailed else card(spec, s.name, ov.ways.get(s.name, []))
        # nohtml: graphviz would pass a description written as "<...>" on as an HTML label, unquoted
        # DOT reads "\\N", "\\n" in a tooltip; and dot refuses a string past 16 KiB ("syntax error in line 6"):
        # a 20,000-character description passed check and could not be drawn
        tip = graphviz.nohtml(_tip(s.description).replace("\\", "\\\\"))
        g.node(s.name, label, tooltip=tip, margin="0.1,0.06", fontsize="11", **attrs)
    g.edge("__start__", spec.initial)
    if tall and spec.terminal_states:
        # Top to bottom, the ends share the last row: where a run can end reads as the page's foot.
        with g.subgraph(name="ends") as ends:
            ends.attr(rank="sink")
            for t in spec.terminal_states:
                ends.node(t)
    if detailed:
        _detailed_edges(spec, g)
        return g

    for a in arrows:
        style = {"style": "dashed", "color": GUARD_COLOR} if a.blue else {}
        # A line's arrow leaves its right end (":e": aimed without a side, dot sent a card's last line's arrow
        # out of the card's foot); one dot turns round leaves from the line's left end, else it looped round.
        tail = f"{a.src}:{a.port}:" + ("w" if a.back else "e") if a.port else a.src
        if a.port is None and tall and spec.states[a.dst].terminal:
            # Into a final state on the page's last row: from the card's foot, below all its lines.  Aimed
            # without a side it could leave the card's edge level with a line whose arrow goes elsewhere.
            tail = f"{a.src}:s"
        # A line's arrow is named for its line ("way:Idle:w3"): the SVG's title keeps only the side, and the
        # review page shows the branch the arrow stands for.
        named = {"id": f"way:{a.src}:{a.port[:-1]}"} if a.port else {}
        g.edge(tail, a.dst, **style, **named)
    notes = False
    if ov.any_moves or ov.any_stays:
        notes = True
        note = [ov.any_label]
        if ov.any_stays:
            for heading, feeds in stay_groups(ov.any_stays, ov.any_moves):
                note += ["", heading] + textwrap.wrap(", ".join(feeds), 34)
        note += _said_home(ov.any_moves, home)
        g.node(ANY, "\n".join(note), shape="note", style="dashed", fontsize="10", color=NOTE_COLOR)
        for e in ov.any_moves:
            if e.dst != home:
                g.edge(ANY, e.dst, _wrap(e.lines()), **_note_style(e.by_guard))
    if ov.anywhere:
        notes = True
        note = [w for line in ov.anywhere_lines() for w in textwrap.wrap(line, 40, subsequent_indent="    ")]
        # Said, since nothing else shows it: two readers took "inject may lead to any live state" for a
        # rule with no targets, an arrow left out by mistake.
        note.append("(these arrows are not drawn)")
        g.node(ANYWHERE, _left(note), shape="note", style="dashed", fontsize="10", color=NOTE_COLOR)
    for sh in ov.shared:
        notes = True
        if len(sh.moves) == 1 and not sh.stays:
            # One arrow: the note says its words and the states they hold in, and the arrow goes bare. On
            # the arrow, router_run's "break_run: break" stood in one row with the words of the two arrows
            # beside it above the foot, and a reader took the three for one phrase.
            (e,) = sh.moves
            where = f"in {', '.join(sh.states)}"
            lines = _home_lines(e) if e.dst == home else e.lines()
            said = lines + textwrap.wrap(where, 36, initial_indent="  ", subsequent_indent="  ")
            g.node(
                sh.node,
                _left(said),
                shape="note",
                style="dashed",
                fontsize="10",
                color=NOTE_COLOR,
            )
            if e.dst != home:
                g.edge(sh.node, e.dst, **_note_style(e.by_guard))
            continue
        note = textwrap.wrap(sh.label, 34, subsequent_indent="  ")
        if sh.stays:
            for heading, feeds in stay_groups(sh.stays, sh.moves):
                note += ["", heading] + textwrap.wrap(", ".join(feeds), 34)
        note += _said_home(sh.moves, home)
        g.node(sh.node, "\n".join(note), shape="note", style="dashed", fontsize="10", color=NOTE_COLOR)
        for e in sh.moves:
            if e.dst != home:
                g.edge(sh.node, e.dst, _wrap(e.lines()), **_note_style(e.by_guard))
    kinds = legend(spec, ov)
    assert kinds.notes == notes and kinds.home == home
    g.attr(label=_title_with_legend(title, kinds), labeljust="l" if tall else "c")
    return g


#: The most characters of a description a hover text carries (dot refuses a string of 16 KiB or more).
TIP_CHARS = 2000


def _tip(text: str) -> str:
    return text if len(text) <= TIP_CHARS else text[:TIP_CHARS].rstrip() + "\u2026"


@dataclass(frozen=True)
class WayArrow:
    """An arrow between two cards: from the line of a way (``port``), or from the box when ``port`` is None."""

    src: str
    port: str | None
    dst: str
    blue: bool  # a guard decides its way: dashed blue
    back: bool = False  # it leaves from the line's left end (see way_arrows)


def way_arrows(spec: Spec, ov: Overview, tall: bool) -> list[WayArrow]:
    """Each way that moves, as its arrow: from the right end of its line, or from its left end when the picture
    runs left to right and ``dot`` turns the arrow round (out of the right end it looped round the card).

    Drawn one per pair of states, an arrow had to be matched to its lines by where it went, and router_run's
    AwaitingApproval -> Idle was one solid arrow for a black way (1, aborted) and a blue one (5, completed if
    not run_encrypted).  Two kinds leave from the box's edge instead, one per colour: arrows into a final
    state (the line says which; from agent_loop's lines they crossed the page to its three ends) and those of a
    card whose ways all reach one state (stream_assembly's chain stepped sideways at every card).
    """
    back_arrows = turned(spec, ov)
    out: list[WayArrow] = []
    for state in spec.states:
        ways = [w for f in by_feed(ov.ways.get(state, [])) for w in f.ways]
        apart = len({w.dest for w in ways if w.dest is not None and not spec.states[w.dest].terminal}) > 1
        for k, w in enumerate(ways):
            if w.dest is None:
                continue
            if apart and not spec.states[w.dest].terminal:
                back = not tall and (state, w.dest) in back_arrows
                out.append(WayArrow(state, port(k, back), w.dest, w.by_guard, back))
            elif WayArrow(state, None, w.dest, w.by_guard) not in out:
                out.append(WayArrow(state, None, w.dest, w.by_guard))
    return out


def legend(spec: Spec, ov: Overview | None = None) -> Legend:
    """What the overview picture of ``spec`` draws, for its legend (in the SVG and the review sheet)."""
    ov = ov or overview(spec)
    tall = columns(spec, ov) >= WRAP_AT
    ways = [w for ws in ov.ways.values() for w in ws]
    noted = [*ov.any_moves, *(e for sh in ov.shared for e in sh.moves)]
    home = _home(spec, ov) if tall else None
    drawn = [a for a in way_arrows(spec, ov, tall) if a.dst != home]
    boxed = [a for a in drawn if a.port is None]
    return Legend(
        boxed_final=any(spec.states[a.dst].terminal for a in boxed),
        boxed_one=any(not spec.states[a.dst].terminal for a in boxed),
        lined=any(a.port is not None for a in drawn),
        asks=any(w.guard or w.asks for w in ways),
        ordered=any(w.place is not None for w in ways),
        guard_decides=any(w.by_guard for w in ways),
        dashed=any(w.by_guard and w.dest is not None and w.dest != home for w in ways),
        moves=any(w.dest is not None for w in ways),
        stays=any(w.dest is None for w in ways),
        fields=any(spec.states[s].data for s in spec.states),
        notes=bool(ov.any_moves or ov.any_stays or ov.anywhere or ov.shared),
        note_arrows=any(e.dst != home for e in noted),
        note_guard=any(e.by_guard for e in noted),
        terminal=bool(spec.terminal_states),
        home=home,
        held=tuple(spec.data),
    )


#: The arrows back to the initial state are not drawn (each way's line says ``→ Idle``) when this many states
#: return to it in a top-to-bottom picture.  Drawn, router_run's five climbed back up across the whole page;
#: drawn into a copy of Idle each (a dotted box where each arrow came down), they still crossed and hooked
#: round the cards, and readers who had not seen the code graded that picture B- and B, the one without
#: them B and B+ (decision 64).
RETURNING = 4


def _note_style(by_guard: bool) -> dict[str, str]:
    """A move drawn from a note: grey (it stands for several states), dashed when a guard decides it."""
    return {"style": "dashed" if by_guard else "solid", "color": NOTE_COLOR, "fontcolor": "#444444"}


def _home(spec: Spec, ov: Overview) -> str | None:
    """The initial state, when RETURNING states or more come back to it (its arrows are not drawn)."""
    back = {e.src for e in ov.edges if not e.loop and e.dst == spec.initial}
    return spec.initial if len(back) >= RETURNING else None


def _home_lines(e: Edge) -> list[str]:
    """A note's move into the initial state, said with where it goes (``break_run: break → Idle``): its arrow
    is not drawn."""
    return [line if line.startswith("  ") else f"{line} \u2192 {e.dst}" for line in e.lines()]


def _said_home(moves: list[Edge], home: str | None) -> list[str]:
    """The lines a note adds for its moves into ``home``, whose arrows are not drawn."""
    lines = [line for e in moves if e.dst == home for line in _home_lines(e)]
    return ["", *lines] if lines else []


#: A legend row longer than this wraps: agent_loop's "every state holds" names seventeen fields.
LEGEND_WIDTH = 96


def _wrapped(words: str) -> str:
    return '<BR ALIGN="LEFT"/>'.join(html(line) for line in textwrap.wrap(words, LEGEND_WIDTH)) + (
        '<BR ALIGN="LEFT"/>' if len(words) > LEGEND_WIDTH else ""
    )


def _title_with_legend(title: str, legend: Legend) -> str:
    """The picture's title with its legend below it, in the graph's own label: it takes no place in the layout."""
    rows = "".join(
        f'<TR><TD ALIGN="RIGHT"><FONT POINT-SIZE="10" COLOR="{color}">{html(mark)}</FONT></TD>'
        f'<TD ALIGN="LEFT"><FONT POINT-SIZE="10">{_wrapped(words)}</FONT></TD></TR>'
        for mark, color, words in legend.rows()
    )
    head = f'<TR><TD COLSPAN="2"><FONT POINT-SIZE="14">{html(title)}</FONT></TD></TR>'
    return f'<<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="1">{head}{rows}</TABLE>>'


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
        answer = dict(
            shape="box", style="filled", fillcolor="#eef4fb", tooltip=graphviz.nohtml(_tip(r.description or ""))
        )
        if final:
            g.node(f"a{i}", ref_label(spec, r.result), **answer)
            g.edge(prev, f"a{i}", prev_label)
            break
        q = f"q{i}"
        label = _question(spec, i, r)
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


def _question(spec: Spec, i: int, r: Rule) -> str:
    """A rule's box: its number and name, what it asks in words, then the exact test in a small grey face.

    The words are the rule's YAML description; the test (states, conditions,
    guards with durations in units) stays beneath them so a reviewer approving
    a policy change still sees the number it compares against.
    """
    left = '<BR ALIGN="LEFT"/>'
    head = f"{i + 1}. {r.name}"
    words = _wrap_each([r.description], 44) if r.description else []
    test = [] if not r.guarded and r.states is None else _wrap_each(_test(spec, r), 52)
    rows = html(head) + left + "".join(html(t) + left for t in words)
    if test and r.description:
        rows += '<FONT POINT-SIZE="9" COLOR="#555555">' + "".join(html(t) + left for t in test) + "</FONT>"
    elif test:
        rows += "".join(html(t) + left for t in test)
    return f"<{rows}>"


def _test(spec: Spec, r: Rule) -> list[str]:
    conds = ["state in " + ", ".join(r.states)] if r.states is not None else []
    return conds + [*r.conditions(), *(ref_label(spec, g) for g in r.guards)]


def _wrap_each(lines: list[str], width: int) -> list[str]:
    out: list[str] = []
    for line in lines:
        out += textwrap.wrap(line, width, subsequent_indent="    ", break_long_words=False) or [""]
    return out


#: Changed when what is drawn from the same DOT text changes (2: each card line's runs joined, see
#: :mod:`.svgtext`), so ``build`` redraws SVGs an older loopfsm drew.
SVG_FORMAT = 3


def source_digest(source: str) -> str:
    """The stamp of the SVG drawn from ``source``: its text, :data:`SVG_FORMAT`, and the code that chooses the
    arrows' ends, so a change to that search redraws the pictures (it left one drawn by the search before)."""
    return hashlib.sha256(f"svg {SVG_FORMAT}\n{ends_cache.code()}\n{source}".encode()).hexdigest()


def to_svg(g: graphviz.Digraph, timeout: float | None = None, *, like: graphviz.Digraph | None = None) -> str:
    """SVG from ``dot``, stamped with the digest of its DOT source (see :func:`svg_from_source`).

    ``like`` is the plain picture ``g`` marks (a live instance's state lit, a diff's changes outlined): its
    arrows keep the ends chosen for it, so the picture a reviewer knows does not rearrange itself, and no
    search is made for each marked copy (each took about 2.5 s of router_run's layouts)."""
    return svg_from_source(g.source, DOT_TIMEOUT if timeout is None else timeout, like=like.source if like else None)


def svg_from_source(source: str, timeout: float = DOT_TIMEOUT, *, like: str | None = None) -> str:
    """SVG from the DOT text ``source``, stamped with the digest of that text.

    ``build --check`` compares that stamp with the digest of the DOT text it
    would draw, instead of the SVG bytes: a different Graphviz version on a
    reviewer's machine does not make a fresh diagram look stale, and the check
    needs no Graphviz at all.

    The card arrows' ends are chosen first (:mod:`.arrow_ends`), from layouts that take at most a third of
    ``timeout`` between them; the text drawn differs from ``source`` only in those ends.

    ``dot`` runs as a plain subprocess (the graphviz package's ``pipe`` has no
    time limit): after ``timeout`` seconds it is stopped and :class:`DrawingTooSlow` says so.
    """
    if not 0 < timeout < 86_400:  # nan, inf and <= 0 too: subprocess would raise ValueError or OverflowError
        raise RenderError(f"a drawing's time limit must be more than 0 and less than a day (seconds), not {timeout!r}")
    program = shutil.which("dot")
    if program is None:
        raise GraphvizMissing(
            "the Graphviz 'dot' program is not installed, so no SVG can be drawn; "
            "install it (e.g. 'apt-get install -y graphviz')"
        )
    until = time.monotonic() + timeout
    drawn = _tidied(source, program, until - timeout * 2 / 3, like)
    svg = flowed(_run_dot(program, "svg", drawn, until, timeout).decode("utf-8"))
    stamp = f"<!-- {SOURCE_MARK}: {source_digest(source)} -->\n"
    head, sep, rest = svg.partition("<svg")
    return str(head + stamp + sep + rest)


def _run_dot(program: str, fmt: str, source: str, until: float, timeout: float) -> bytes:
    """``dot -T<fmt>`` of ``source``, stopped at the monotonic time ``until``: :class:`DrawingTooSlow` says the
    picture took more than ``timeout``."""
    left = until - time.monotonic()
    try:
        if left <= 0:
            raise subprocess.TimeoutExpired(program, timeout)
        done = subprocess.run([program, f"-T{fmt}"], input=source.encode(), capture_output=True, timeout=left)
    except subprocess.TimeoutExpired:
        raise DrawingTooSlow(timeout) from None
    if done.returncode != 0:  # DOT text dot refuses (a bug of ours, or a string over its 16 KiB limit): one line
        said = done.stderr.decode("utf-8", "replace")
        raise RenderError(f"Graphviz's dot refused the drawing: {said.strip()[:300]}")
    return done.stdout


#: A picture with more arrows than this (card arrows or not) is drawn as written: see :func:`_tidied`.
MOST_EDGES = 150

#: The arrow ends chosen in this process, by the DOT text they were chosen for: the review site and a build
#: draw the same picture more than once.
_CHOSEN: dict[str, dict[int, Ends]] = {}


def _tidied(source: str, program: str, until: float, like: str | None = None) -> str:
    """``source`` with its card arrows' ends chosen (:func:`.arrow_ends.choose`) by the monotonic time
    ``until``, or found in the cache (:mod:`.ends_cache`); as it is when the first layout alone takes past it.
    With ``like`` (the plain picture ``source`` marks, its arrows the same), the ends chosen for that."""
    if not arrows(source) or "rankdir=TB" not in source or source.count(" -> ") > MOST_EDGES:
        # Left to right, the ends chosen sent arrows round the whole picture, above their own card, which the
        # measure does not see; and scoring a layout grows as the square of its arrows (600 took 4 s each).
        return source
    plain = like if like is not None and arrows(like) == arrows(source) else source
    return with_ends(source, _ends(plain, program, until))


def _ends(source: str, program: str, until: float) -> dict[int, Ends]:
    """The ends chosen for ``source``'s card arrows: from this process's memory or the cache directory, or
    searched for by ``until``."""
    if source in _CHOSEN:
        return _CHOSEN[source]
    name = ends_cache.key(source, program)
    chosen = ends_cache.lookup(name, source)
    complete = True
    if chosen is None:

        def lay(text: str) -> dict[str, Any] | None:
            nonlocal complete
            try:
                return cast(dict[str, Any], json.loads(_run_dot(program, "json", text, until, 0.0)))
            except DrawingTooSlow:
                complete = False
                return None  # no time left to try more ends: the best found so far is drawn

        chosen = choose(source, lay)
        if not complete:
            # Cut short by the clock, the best found so far would depend on the machine's load: a busy machine
            # drew another picture under the same stamp.  The ends as written are the same everywhere.
            return {i: Ends(tail) for i, tail in enumerate(arrows(source))}
        ends_cache.store(name, chosen)
    if len(_CHOSEN) >= 64:
        _CHOSEN.pop(next(iter(_CHOSEN)))
    _CHOSEN[source] = chosen
    return chosen


def svg_stamp(svg: str) -> str | None:
    marker = f"<!-- {SOURCE_MARK}: "
    start = svg.find(marker)
    if start < 0:
        return None
    return svg[start + len(marker) : svg.find(" -->", start)]
