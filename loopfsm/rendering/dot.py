"""Graphviz views: the state graph and each decision chain, as DOT text and SVG.

Terminal states are drawn with a double border and grey fill, guarded edges
dashed, and the feeds a state accepts without moving written in its box
("stays on tick"; dotted self-loops in the detailed view), so the kinds are
told apart at a glance in a design review.
"""

from __future__ import annotations

import hashlib
import textwrap
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

import graphviz

from loopfsm.rendering.errors import GraphvizMissing, RenderError
from loopfsm.core.spec import Decision, Rule, Spec
from loopfsm.rendering.labels import branch_label, chain_steps, decision_signature, ref_label
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
    ov = ov or overview(spec)
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
    longest: dict[str, int] = {}
    for s in reversed(_topological(order, dag)):
        longest[s] = 1 + max((longest[v] for v in dag[s]), default=0)
    return max(longest.values(), default=0)


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


def _node_title(spec: Spec, name: str, stays: list[str] | None = None, moving: frozenset[str] = frozenset()) -> str:
    """The state's name, its data fields below in a smaller face (long field lists made nodes wide),
    then the feeds it accepts without moving.

    Those feeds were a dotted self-loop; a loop sits on the node's side, where
    another arrow's head often is, so the words now live inside the box.  A feed
    that stays for some arguments and leaves on an arrow for others (``moving``)
    is said apart, "may stay on": under router_run's Idle, "stays on execute"
    beside four execute arrows leaving it read as a contradiction.
    """
    fields = list(spec.states[name].data)
    if not fields and not stays:
        return name
    rows = "".join(f'<BR/><FONT POINT-SIZE="10">{_html(line)}</FONT>' for line in braced(fields, 28))
    always = [f for f in stays or [] if f not in moving]
    sometimes = [f for f in stays or [] if f in moving]
    said = textwrap.wrap("stays on " + ", ".join(always), 28, break_long_words=False) if always else []
    said += textwrap.wrap("may stay on " + ", ".join(sometimes), 28, break_long_words=False) if sometimes else []
    rows += "".join(f'<BR/><FONT POINT-SIZE="10" COLOR="#555555"><I>{_html(t)}</I></FONT>' for t in said)
    return f"<{_html(name)}{rows}>"


def braced(fields: list[str], width: int) -> list[str]:
    """``{ a, b, c }`` wrapped at ``width``: the braces ride on the first and last field.

    Wrapping the braced text let a lone "}" fall onto a line of its own.
    """
    if not fields:
        return []
    lines = textwrap.wrap(", ".join(fields), width - 4, break_long_words=False)
    lines[0] = "{ " + lines[0]
    lines[-1] += " }"
    return lines


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


HIGHLIGHT = {"style": "rounded,filled,bold", "fillcolor": "#ffe08a", "penwidth": "2.5"}


def state_graph(spec: Spec, *, detailed: bool = False, highlight: str | None = None) -> graphviz.Digraph:
    """The state diagram: the reviewer's overview, or with ``detailed`` every branch with guards and actions.

    ``highlight`` names a state to draw filled, for a live instance's picture.
    A machine whose arrows chain WRAP_AT states or more (see :func:`columns`)
    is laid out top to bottom: left to right its columns of states and labels
    grew past 2,000 px, and fitted to a 1,000 px page its 10 pt labels shrank
    below legibility.
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
            "nodesep": "0.35" if tall else "0.4",
            # Top to bottom, rows further apart leave room for labels beside the arrows they name.
            "ranksep": "0.9" if tall else "0.6",
            # More crossing-minimisation passes: router_run's junctions came out with four crossings, three with it.
            "mclimit": "4",
        },
        node_attr={"fontname": "Helvetica", "shape": "box", "style": "rounded"},
        edge_attr={"fontname": "Helvetica", "fontsize": "10"},
    )
    again = _again(spec, ov) if tall and not detailed else None

    def into(dst: str, src: str) -> str:
        return AGAIN if again is not None and dst == spec.initial and src != "__start__" else dst

    moves = [e for e in ov.edges if not e.loop]
    legs = _joined(moves, into)
    if again is not None:
        # Declared first: dot's first ordering of each row follows the order nodes are met, and with the
        # foot's copy met first router_run's arrows into it cross two fewer others (five to three).
        tip = f"{spec.initial} again: {RETURNS}"
        wide = f"{FOOT_PER_ARROW * _arrivals(ov, moves, legs, into):g}"
        g.node(AGAIN, _node_title(spec, spec.initial), tooltip=tip, style="rounded,dotted", penwidth="1.5", width=wide)
        with g.subgraph(name="again") as row:
            row.attr(rank="sink")
            row.node(AGAIN)
    g.node("__start__", "", shape="point", width="0.15")
    loops = {} if detailed else {e.src: list(e.feeds) for e in ov.edges if e.loop}
    moving = _moving(ov)
    for s in spec.states.values():
        attrs = {}
        if s.terminal:
            attrs = {"peripheries": "2", "style": "rounded,filled", "fillcolor": "#e6e6e6"}
        if s.name == highlight:
            attrs = {**attrs, **HIGHLIGHT}
        # nohtml: graphviz would pass a description written as "<...>" on as an HTML label, unquoted
        g.node(
            s.name,
            _node_title(spec, s.name, loops.get(s.name), moving.get(s.name, frozenset())),
            tooltip=graphviz.nohtml(s.description),
            **attrs,
        )
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

    beside_foot = False
    pairs = {(e.src, into(e.dst, e.src)) for e in moves}
    both = _both_ways(spec, moves, legs) if tall else {}
    ways_on: dict[str, int] = {}
    for e in moves:
        ways_on[e.src] = ways_on.get(e.src, 0) + 1
    for i, e in enumerate(moves):
        # Between two states with moves both ways one two-headed arrow carries both labels, each
        # naming where it goes ("to X:"). Underlining each onto its own edge (decorate) drew leader
        # lines across the picture; the two on one row put the arrow in an arc through its label.
        back = (into(e.dst, e.src), e.src) in pairs
        style = _move_style(e.by_guard)
        leg = legs.get(i)
        if i in both:
            other = both[i]
            if other > i:  # drawn once, from the first of the two, with both labels
                words = _wrap([f"to {e.dst}:"] + e.lines()) + _wrap([f"to {e.src}:"] + moves[other].lines())
                g.edge(e.src, e.dst, words, dir="both", **style)
        elif leg is None:
            # Top to bottom, a state's only way on is heavy, as a dot's arrow on is: the chain runs straight
            # down and the other arrows bend (router_run's AwaitingEncrypt drops onto the foot's Idle, and the
            # long arrow from AwaitingApproval comes in from the side, not alongside it).
            heavy = {"weight": "8"} if tall and ways_on[e.src] == 1 else {}
            words = _wrap(([f"to {e.dst}:"] if back else []) + e.lines(), _width(into(e.dst, e.src)))
            g.edge(e.src, into(e.dst, e.src), words, **style, **heavy)
        else:  # the leg says what is its own; the shared words follow once, on the joined arrow
            g.edge(e.src, leg.join.node, _wrap(leg.lines), arrowhead="none", **style)
    for j in dict.fromkeys(leg.join for leg in legs.values()):
        g.node(j.node, "", shape="point", width="0.08")
        # Heavy, so the trunk runs straight on from the point and the legs bend instead.
        g.edge(j.node, j.dst, _wrap(list(j.lines), _width(j.dst)), weight="8", **_move_style(j.by_guard))
    notes = False
    if ov.any_moves or ov.any_stays:
        notes = True
        note = [ov.any_label]
        if ov.any_stays:
            for heading, feeds in stay_groups(ov.any_stays, ov.any_moves):
                note += ["", heading] + textwrap.wrap(", ".join(feeds), 34)
        g.node(ANY, "\n".join(note), shape="note", style="dashed", fontsize="10", color=NOTE_COLOR)
        for e in ov.any_moves:
            g.edge(ANY, into(e.dst, ANY), _wrap(e.lines()), **_note_style(e.by_guard))
    if ov.anywhere:
        notes = True
        note = [w for line in ov.anywhere_lines() for w in textwrap.wrap(line, 34, subsequent_indent="  ")]
        # Said, since nothing else shows it: two readers took "inject may lead to any live state" for a
        # rule with no targets, an arrow left out by mistake.
        note.append("(those arrows are not drawn)")
        g.node(ANYWHERE, "\n".join(note), shape="note", style="dashed", fontsize="10", color=NOTE_COLOR)
    for sh in ov.shared:
        notes = True
        if len(sh.moves) == 1 and not sh.stays:
            # One arrow: the note says its words and the states they hold in, and the arrow goes bare. On
            # the arrow, router_run's "break_run: break" stood in one row with the words of the two arrows
            # beside it above the foot, and a reader took the three for one phrase.
            (e,) = sh.moves
            where = f"in {', '.join(sh.states)}"
            said = e.lines() + textwrap.wrap(where, 36, initial_indent="  ", subsequent_indent="  ")
            g.node(
                sh.node,
                _left(said),
                shape="note",
                style="dashed",
                fontsize="10",
                color=NOTE_COLOR,
            )
            g.edge(sh.node, into(e.dst, sh.node), **_note_style(e.by_guard))
            if into(e.dst, sh.node) == AGAIN and not beside_foot:
                # On the foot's row, left of it (dot puts a flat arrow's tail to the left of its head), its
                # arrow short and flat into the foot's side: one head fewer on the foot's top, where router_run's
                # other three arrows end, and no long grey arrow across the bottom of the page.  One note only:
                # a second one there arced over the first.
                beside_foot = True
                with g.subgraph(name="again") as row:
                    row.node(sh.node)
            continue
        note = textwrap.wrap(sh.label, 34, subsequent_indent="  ")
        if sh.stays:
            for heading, feeds in stay_groups(sh.stays, sh.moves):
                note += ["", heading] + textwrap.wrap(", ".join(feeds), 34)
        g.node(sh.node, "\n".join(note), shape="note", style="dashed", fontsize="10", color=NOTE_COLOR)
        for e in sh.moves:
            g.edge(sh.node, into(e.dst, sh.node), _wrap(e.lines()), **_note_style(e.by_guard))
    kinds = legend(spec, ov)
    assert kinds.notes == notes and kinds.joined == bool(legs) and kinds.again == (again is not None)
    assert kinds.both_ways == bool(both)
    g.attr(label=_title_with_legend(title, kinds), labeljust="l" if tall else "c")
    return g


def legend(spec: Spec, ov: Overview | None = None) -> Legend:
    """What the overview picture of ``spec`` draws, for its legend (in the SVG and the review sheet)."""
    ov = ov or overview(spec)
    tall = columns(spec, ov) >= WRAP_AT
    again = _again(spec, ov) if tall else None
    moves = [e for e in ov.edges if not e.loop]
    drawn = [*moves, *ov.any_moves, *(e for sh in ov.shared for e in sh.moves)]

    def into(dst: str, src: str) -> str:
        return AGAIN if again is not None and dst == spec.initial else dst

    moving = _moving(ov)
    return Legend(
        feed_decides=any(not e.by_guard for e in drawn),
        guard_decides=any(e.by_guard for e in drawn),
        notes=bool(ov.any_moves or ov.any_stays or ov.anywhere or ov.shared),
        joined=bool(_joined(moves, into)),
        stays=any(f not in moving.get(e.src, ()) for e in ov.edges if e.loop for f in e.feeds),
        may_stay=any(f in moving.get(e.src, ()) for e in ov.edges if e.loop for f in e.feeds),
        terminal=bool(spec.terminal_states),
        again=again is not None,
        both_ways=tall and bool(_both_ways(spec, moves, _joined(moves, into))),
    )


#: Characters a line of an arrow's words into the foot's copy of the initial state: the arrows there end side
#: by side, and router_run's "sealed: content rows written" and "completed, plaintext" on one line each stood
#: in one row and read as one phrase.  Narrower, each is a block beside its own arrow.
FOOT_WRAP = 20


def _width(head: str) -> int:
    """How wide an arrow's words may run, by where it ends."""
    return FOOT_WRAP if head == AGAIN else WRAP


def _moving(ov: Overview) -> dict[str, frozenset[str]]:
    """Each state's feeds that leave it on an arrow drawn from the state itself (notes' arrows aside)."""
    out: dict[str, set[str]] = {}
    for e in ov.edges:
        if not e.loop:
            out.setdefault(e.src, set()).update(e.feeds)
    return {state: frozenset(feeds) for state, feeds in out.items()}


AGAIN = "__again__"
RETURNS = "the runs that end come back here; the same state as the one at the top, drawn again"
#: The initial state is drawn a second time, at the foot, when this many moves from other states
#: return to it in a top-to-bottom picture: long arrows climbing back up crossed the whole drawing.
RETURNING = 4


#: Inches of the foot's copy per arrow that ends there.  Drawn as small as its name, the arrows into it
#: met at one corner: router_run's from AwaitingApproval and AwaitingEncrypt ran together for their last
#: 58 pt and read as one head.  As wide as the arrows need, each reaches it where it comes down.
FOOT_PER_ARROW = 0.75


def _arrivals(ov: Overview, moves: list[Edge], legs: dict[int, Leg], into: Callable[[str, str], str]) -> int:
    """How many arrows end at the foot's copy of the initial state: moves, dots' arrows on, and notes' arrows."""
    direct = sum(1 for i, e in enumerate(moves) if i not in legs and into(e.dst, e.src) == AGAIN)
    trunks = {leg.join for leg in legs.values() if leg.join.dst == AGAIN}
    noted = [e for e in [*ov.any_moves, *(e for sh in ov.shared for e in sh.moves)] if into(e.dst, "") == AGAIN]
    return direct + len(trunks) + len(noted)


def _both_ways(spec: Spec, moves: list[Edge], legs: dict[int, Leg]) -> dict[int, int]:
    """Moves between two states both ways, drawn as one two-headed arrow carrying both labels.

    router_run's AwaitingApproval and AwaitingTool hand a run back and forth.  Drawn as two arrows, the
    one from Idle into the lower state wrapped round the upper one and crossed three others; with the
    two on one row, the arrow arced through its own label.  One vertical two-headed arrow runs beside
    its label, not through it (tests/rendering/test_diagram_look.py counts its points inside the label).  Only
    two live, non-initial states, each in no other such pair, whose two moves are of one style (the
    arrow has one) and meet at no dot, entered from the same other states (siblings: agent_loop's
    recovering follows executing_tool, and stays below it).  Keys and values are indices into ``moves``,
    each pointing at the other.
    """
    at = {(e.src, e.dst): i for i, e in enumerate(moves) if i not in legs}
    found: dict[int, int] = {}
    for (a, b), i in at.items():
        j = at.get((b, a))
        if j is None or i == j or moves[i].by_guard != moves[j].by_guard:
            continue
        if any(spec.states[s].initial or spec.states[s].terminal for s in (a, b)):
            continue
        if _entered_from(moves, a, b) != _entered_from(moves, b, a):  # one follows the other: keep it below
            continue
        found[i] = j
    count: dict[str, int] = {}
    for i in found:
        count[moves[i].src] = count.get(moves[i].src, 0) + 1
    return {i: j for i, j in found.items() if count[moves[i].src] == 1 and count[moves[j].src] == 1}


def _entered_from(moves: list[Edge], state: str, other: str) -> set[str]:
    """The states other than ``other`` that move into ``state``."""
    return {e.src for e in moves if e.dst == state and e.src != other}


def _move_style(by_guard: bool) -> dict[str, str]:
    """A move between states: dashed blue when a guard decides it, solid black when the feed does."""
    return {"style": "dashed", "color": GUARD_COLOR} if by_guard else {"style": "solid", "color": "black"}


def _note_style(by_guard: bool) -> dict[str, str]:
    """A move drawn from a note: grey (it stands for several states), dashed when a guard decides it."""
    return {"style": "dashed" if by_guard else "solid", "color": NOTE_COLOR, "fontcolor": "#444444"}


def _again(spec: Spec, ov: Overview) -> str | None:
    """The initial state, when RETURNING moves or more come back to it from other states (drawn again)."""
    back = {e.src for e in ov.edges if not e.loop and e.dst == spec.initial}
    return spec.initial if len(back) >= RETURNING else None


@dataclass(frozen=True)
class Join:
    """A point where arrows into one state meet, and the one arrow on from it with the words they share."""

    node: str
    dst: str
    lines: tuple[str, ...]
    by_guard: bool


@dataclass(frozen=True)
class Leg:
    """An arrow drawn to a :class:`Join` instead of its state: its feeds, and its own words before the shared."""

    join: Join
    lines: list[str]


def _joined(moves: list[Edge], into: Any) -> dict[int, Leg]:
    """Arrows from several states into one that say the same words, or end with the same words: drawn once.

    agent_loop's ``final_answer: output checks hold`` from planning and from
    observing_result was written twice; the two lines now meet at a point and
    one labelled arrow goes on.  router_run's three dashed arrows into
    AwaitingEncrypt ended alike (``decided, completed, encrypted``, ``results,
    completed, encrypted``, ``completed, encrypted``) and their arrowheads sat on
    one another: they meet at a point and ``completed, encrypted`` is drawn once.
    Only arrows of one style meet (a point has one), and only single-line ones by
    their ending.  Keys are indices into ``moves``.
    """
    legs: dict[int, Leg] = {}
    joins: list[Join] = []

    def join(dst: str, lines: tuple[str, ...], members: list[int], own: dict[int, list[str]]) -> None:
        j = Join(f"__join{len(joins) + 1}__", dst, lines, any(moves[i].by_guard for i in members))
        joins.append(j)
        for i in members:
            legs[i] = Leg(j, own[i])

    same: dict[tuple[str, tuple[str, ...]], list[int]] = {}
    for i, e in enumerate(moves):
        same.setdefault((into(e.dst, e.src), tuple(e.lines())), []).append(i)
    for (dst, lines), members in same.items():
        if len(members) > 1 and lines:
            join(dst, lines, members, {i: [", ".join(moves[i].feeds)] for i in members})
    ending: dict[tuple[str, bool], list[int]] = {}
    for i, e in enumerate(moves):
        if i not in legs and len(e.groups()) == 1 and e.groups()[0][1]:
            ending.setdefault((into(e.dst, e.src), e.by_guard), []).append(i)
    for (dst, _), members in ending.items():
        clauses = {i: moves[i].groups()[0][1].split(", ") for i in members}
        for k in range(max(len(c) for c in clauses.values()), 0, -1):
            alike: dict[tuple[str, ...], list[int]] = {}
            for i in members:
                if i not in legs and len(clauses[i]) >= k:
                    alike.setdefault(tuple(clauses[i][-k:]), []).append(i)
            for tail, group in alike.items():
                if len(group) > 1:
                    own = {}
                    for i in group:
                        feeds, rest = ", ".join(moves[i].feeds), ", ".join(clauses[i][:-k])
                        own[i] = [f"{feeds}: {rest}" if rest else feeds]
                    join(dst, (", ".join(tail),), group, own)
    return legs


def _title_with_legend(title: str, legend: Legend) -> str:
    """The picture's title with its legend below it, in the graph's own label: it takes no place in the layout."""
    rows = "".join(
        f'<TR><TD ALIGN="RIGHT"><FONT POINT-SIZE="10" COLOR="{color}">{_html(mark)}</FONT></TD>'
        f'<TD ALIGN="LEFT"><FONT POINT-SIZE="10">{_html(words)}</FONT></TD></TR>'
        for mark, color, words in legend.rows()
    )
    head = f'<TR><TD COLSPAN="2"><FONT POINT-SIZE="14">{_html(title)}</FONT></TD></TR>'
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
        answer = dict(shape="box", style="filled", fillcolor="#eef4fb", tooltip=graphviz.nohtml(r.description or ""))
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
    rows = _html(head) + left + "".join(_html(t) + left for t in words)
    if test and r.description:
        rows += '<FONT POINT-SIZE="9" COLOR="#555555">' + "".join(_html(t) + left for t in test) + "</FONT>"
    elif test:
        rows += "".join(_html(t) + left for t in test)
    return f"<{rows}>"


def _test(spec: Spec, r: Rule) -> list[str]:
    conds = ["state in " + ", ".join(r.states)] if r.states is not None else []
    return conds + [*r.conditions(), *(ref_label(spec, g) for g in r.guards)]


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
    except graphviz.CalledProcessError as err:  # DOT text dot refuses: a bug of ours, said in one line
        said = (err.stderr or b"").decode("utf-8", "replace") if isinstance(err.stderr, bytes) else str(err.stderr)
        raise RenderError(f"Graphviz's dot refused the drawing: {said.strip()[:300]}") from None
    except BrokenPipeError:  # dot stopped reading part way (a string over its 16 KiB limit): not our stdout closing
        raise RenderError(
            "Graphviz's dot stopped reading the drawing part way through (a label or tooltip too long?)"
        ) from None
    stamp = f"<!-- {SOURCE_MARK}: {source_digest(source)} -->\n"
    head, sep, rest = svg.partition("<svg")
    return str(head + stamp + sep + rest)


def svg_stamp(svg: str) -> str | None:
    marker = f"<!-- {SOURCE_MARK}: "
    start = svg.find(marker)
    if start < 0:
        return None
    return svg[start + len(marker) : svg.find(" -->", start)]
