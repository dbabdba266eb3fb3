"""The review site's pages as HTML text: the index, one page per machine, and each machine file with line anchors.

A machine's page is its diagram (the same layout as ``diagrams/``), its legend,
the review sheet's sections (rendered from the same Markdown ``loopfsm build``
writes) and, embedded as JSON, every branch of the table with its guards,
actions, description and YAML line, which the page's script shows when a state
or an arrow is clicked.  ``static`` pages leave the simulator out, for CI
artifacts and previews.  Every script and style is the package's own: no CDN.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import graphviz
from markdown_it import MarkdownIt

from loopfsm.core.spec import Branch, Spec
from loopfsm.rendering import dot
from loopfsm.rendering.errors import GraphvizMissing, RenderError
from loopfsm.rendering.labels import condition_label, guards_label, ref_label
from loopfsm.rendering.diff import MachineDiff
from loopfsm.rendering.matrix import review_sheet
from loopfsm.rendering.cards import by_feed
from loopfsm.rendering.overview import ANY, ANYWHERE, overview
from loopfsm.core.tracing import branch_name
from loopfsm.review_site.decision_changes import DecisionChange, decision_changes, grouped


@dataclass(frozen=True)
class SiteMachine:
    """A machine the site shows: its file, and the machine compiled with its registry."""

    path: Path
    compiled: Any

    @property
    def name(self) -> str:
        return str(self.compiled.name)

    @property
    def spec(self) -> Spec:
        spec: Spec = self.compiled.spec
        return spec


_MD = MarkdownIt("commonmark", {"html": False}).enable("table")
REMOVED = "#b91c1c"  # a removed arrow on a diff page's picture
DECIDED = "#c2410c"  # a state whose decision rules changed: the orange of a changed arrow, on the state's box

#: The review sheet's sections the page shows beside the diagram, in this order.
SECTIONS = ("Design review", "Policy", "Traced", "Invariants")


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _page(title: str, body: str, *, root: str, static: bool) -> str:
    mode = "static" if static else "live"
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{_esc(title)}</title><link rel="icon" href="data:,">'
        f'<link rel="stylesheet" href="{root}assets/review.css">'
        f'<script defer src="{root}assets/review.js"></script>'
        f'</head><body data-mode="{mode}">'
        f'<header><a href="{root}index.html" class="home">loopfsm review</a></header>'
        f"<main>{body}</main></body></html>\n"
    )


def index_page(machines: list[SiteMachine], *, static: bool) -> str:
    items = "".join(
        f'<li><a href="machines/{_esc(m.name)}.html">{_esc(m.name)}</a> '
        f'<span class="counts">{len(m.spec.states)} states, {len(m.spec.events)} feeds</span>'
        f"<p>{_esc(_first_sentence(m.spec.description))}</p></li>"
        for m in machines
    )
    body = f'<h1>Machines</h1><ul class="machines">{items}</ul>'
    return _page("loopfsm review", body, root="", static=static)


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    end = flat.find(". ")
    return flat if end < 0 else flat[: end + 1]


def _sheet_sections(spec: Spec) -> str:
    """The review sheet's sections the page shows, each from its ``## `` heading to the next."""
    parts: dict[str, str] = {}
    for chunk in review_sheet(spec).split("\n## ")[1:]:
        title, _, text = chunk.partition("\n")
        parts[title.strip()] = text
    out = []
    for title in SECTIONS:
        found = next((t for t in parts if t.startswith(title)), None)
        if found is not None:
            out.append(f'<section class="sheet"><h2>{_esc(found)}</h2>{_MD.render(parts[found])}</section>')
    return "".join(out)


def _branch_json(spec: Spec, feed: str, b: Branch) -> dict[str, Any]:
    line = spec.source.locate(b.path)[0]
    guards = [condition_label(spec, b)] if b.when else []
    if b.guards:
        guards.append(guards_label(spec, b.guards))
    return {
        "name": branch_name(feed, b.source, b.index, b.name),
        "feed": feed,
        "when": [g for g in guards if g],
        "to": b.dest,
        "refuse": b.refusal,
        "actions": [ref_label(spec, a) for a in spec.actions_of(feed, b)],
        "description": b.description,
        "line": line,
        "shared": b.shared,
    }


def table_json(spec: Spec) -> dict[str, Any]:
    """Every state's branches, feed by feed in YAML order, as the page's script reads them."""
    states: dict[str, list[dict[str, Any]]] = {name: [] for name in spec.states}
    for feed, ev in spec.events.items():
        for state, branches in spec.expanded_sources(ev).items():
            states[state] += [_branch_json(spec, feed, b) for b in branches]
    return {
        "machine": spec.name,
        "initial": spec.initial,
        "states": {
            name: {"description": s.description, "terminal": s.terminal, "line": spec.source.locate(s.path)[0]}
            for name, s in spec.states.items()
        },
        "branches": states,
        **_drawn(spec),
    }


def _drawn(spec: Spec) -> dict[str, Any]:
    """What the overview draws for the page's arrow details: each card's ways in order (a line's arrow is named
    ``way:<state>:w<k>`` for its way ``k``), and the feeds each note stands for, so that an arrow lists the
    branches it is drawn for and no other (a note's ways are not its states' lines)."""
    ov = overview(spec)
    ways = {
        state: [{"port": f"w{k}", "branch": w.branch, "to": w.dest, "place": w.place} for k, w in enumerate(ws)]
        for state in spec.states
        if (ws := [w for f in by_feed(ov.ways.get(state, [])) for w in f.ways])
    }
    notes: dict[str, list[str]] = {}
    for e in ov.any_moves:
        notes.setdefault(ANY, []).extend(f for f in e.feeds if f not in notes.get(ANY, []))
    if ov.anywhere:
        notes[ANYWHERE] = list(ov.anywhere)
    for sh in ov.shared:
        notes[sh.node] = list(dict.fromkeys(f for e in sh.moves for f in e.feeds))
    return {"ways": ways, "notes": notes}


def _diagram(spec: Spec, removed: Sequence[tuple[str, str, str]] = (), decided: Sequence[DecisionChange] = ()) -> str:
    """The state diagram as inline SVG (its legend is under its title), so its states and arrows can be clicked;
    ``removed`` arrows (from, to, words) are drawn on it too, red and dotted, and the states ``decided`` names
    outlined, for a diff page."""
    try:
        graph = dot.state_graph(spec)
        for src, dst, words in removed:
            label = dot.edge_label([f"removed: {words}"])
            graph.edge(src, dst, label, style="dotted", color=REMOVED, fontcolor=REMOVED, penwidth="2")
        _mark_decided(graph, spec, decided)
        svg = dot.to_svg(graph, like=dot.state_graph(spec))  # the plain picture's arrows: it does not rearrange
    except GraphvizMissing:
        return (
            '<p class="missing">The diagram needs Graphviz (its <code>dot</code> program), which is not installed '
            f"here; everything else on this page works without it. What the diagram would mark:</p>{_legend(spec)}"
        )
    except RenderError as err:
        return f'<p class="missing">The diagram could not be drawn: {_esc(str(err))}</p>'
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg


def _mark_decided(graph: graphviz.Digraph, spec: Spec, decided: Sequence[DecisionChange]) -> None:
    """Outline each state whose decision rules changed, with a few words beside it and the change as its tooltip.

    The node is stated again with a style only: DOT merges the attributes, so
    its box keeps its size and the layout its place.  The words are an
    ``xlabel``, which ``dot`` sets after placing every node and arrow, so they
    move nothing either.
    """
    by_state: dict[str, list[DecisionChange]] = {}
    for c in decided:
        by_state.setdefault(c.state, []).append(c)
    for state, changes in by_state.items():
        # DOT reads a backslash and n in a tooltip as a line break: each line's own backslashes are doubled
        lines = [f"decision {c.decision}: {'; '.join(c.changes)}" for c in changes]
        described = " ".join(spec.states[state].description.split())
        lines += ["", described] if described else []
        tip = "\\n".join(line.replace("\\", "\\\\") for line in _bounded(lines))
        words = "<BR/>".join(_esc(c.short()) for c in changes)
        attrs = {
            "color": DECIDED,
            "penwidth": "3",
            "xlabel": f'<<FONT COLOR="{DECIDED}" POINT-SIZE="10">{words}</FONT>>',
            "tooltip": graphviz.nohtml(tip),
            "class": "decided",
        }
        graph.node(state, **attrs)


def _legend(spec: Spec) -> str:
    rows = "".join(
        f'<tr><td style="color:{_esc(color)}">{_esc(mark)}</td><td>{_esc(meaning)}</td></tr>'
        for mark, color, meaning in dot.legend(spec).rows()
    )
    return f'<table class="legend" aria-label="legend">{rows}</table>'


def machine_page(m: SiteMachine, *, static: bool) -> str:
    spec = m.spec
    sim = (
        ""
        if static
        else '<section id="simulator" aria-label="simulator"><h2>Simulator</h2>'
        '<p class="hint">Feeds go to the real compiled machine, one run per browser session.</p>'
        '<div id="sim-status" role="status"></div><div id="sim-controls"></div>'
        '<div id="sim-feeds"></div><h3>Steps</h3><ol id="sim-steps"></ol></section>'
    )
    body = (
        f"<h1>{_esc(spec.name)}</h1>"
        f'<p class="description">{_esc(_first_sentence(spec.description))} '
        f'<a href="../source/{_esc(m.name)}.html">{_esc(m.path.name)}</a></p>'
        f'<figure class="diagram" aria-label="state diagram">{_diagram(spec)}</figure>'
        '<div class="columns"><div class="left">'
        '<section id="details" aria-live="polite"><h2>Details</h2>'
        "<p>Click a state or an arrow (or focus one and press Enter) to see its branches in order.</p></section>"
        f"{sim}</div>"
        f'<div class="right">{_sheet_sections(spec)}</div></div>'
        f'<script type="application/json" id="table">{_json_for_script(table_json(spec))}</script>'
    )
    return _page(f"{spec.name}: loopfsm review", body, root="../", static=static)


def source_page(m: SiteMachine) -> str:
    """The machine file, each line anchored (``#L12``), which branch details link to."""
    lines = m.path.read_text(encoding="utf-8").splitlines()
    rows = "".join(
        f'<tr id="L{i}"><td class="ln"><a href="#L{i}">{i}</a></td><td><code>{_esc(line)}</code></td></tr>'
        for i, line in enumerate(lines, 1)
    )
    body = f'<h1>{_esc(m.path.name)}</h1><table class="source">{rows}</table>'
    return _page(f"{m.path.name}: loopfsm review", body, root="../", static=True)


def _json_for_script(value: Any) -> str:
    """JSON that cannot end its ``<script>`` element early (``</`` and ``<!--`` are escaped)."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _moves(spec: Spec) -> dict[tuple[str, str], tuple[str, ...]]:
    """Each arrow of the overview picture between two states, with its words."""
    return {(e.src, e.dst): tuple(e.lines()) for e in overview(spec).edges if not e.loop}


def diff_json(old: Spec, new: Spec) -> dict[str, list[list[str]]]:
    """The arrows NEW adds, the ones whose words changed, and the ones it removed (state to state)."""
    a, b = _moves(old), _moves(new)
    return {
        "added": [[s, d] for (s, d) in b if (s, d) not in a],
        "changed": [[s, d] for (s, d), words in b.items() if (s, d) in a and a[(s, d)] != words],
        "removed": [[s, d] for (s, d) in a if (s, d) not in b],
    }


#: The most of a marked state's hover text drawn into the picture: Graphviz refuses a string over 16 KiB, and the
#: list under the picture has every change in full.
MAX_TOOLTIP_CHARS = 2_000


def _bounded(lines: list[str]) -> list[str]:
    """``lines`` cut to :data:`MAX_TOOLTIP_CHARS` in all, the cut said: a hover text never stops the drawing."""
    out: list[str] = []
    left = MAX_TOOLTIP_CHARS
    for i, line in enumerate(lines):
        if len(line) > left:
            rest = sum(len(x) for x in lines[i:]) - left
            out.append(line[:left] + f"... ({rest} more characters: Decision rules changed lists them all)")
            break
        out.append(line)
        left -= len(line)
    return out


def _decided_items(d: MachineDiff, decided: list[DecisionChange]) -> str:
    """One item per decision and change, naming the states it changed in ("every state" when it is all of them).

    A decision ``loopfsm diff`` reports changed that no state's answer follows
    (two rules of different states swapped, a rule after one that always
    answers) gets an item saying so, so "none" never stands beside a change.
    """
    items = []
    for decision, words, states in grouped(decided):
        where = "every state" if len(states) == len(d.new.states) else ", ".join(states)
        said = "".join(f"<li>{_esc(w)}</li>" for w in words)
        items.append(
            f'<li data-decision="{_esc(decision)}"><strong>{_esc(decision)}</strong> in {_esc(where)}'
            f"<ul>{said}</ul></li>"
        )
    marked = {c.decision for c in decided}
    unmarked: dict[str, list[str]] = {}
    for c in d.changes:
        name = c.text.split()[1].rstrip(":") if c.text.startswith("decision ") else None
        if c.behaviour and name is not None and name not in marked:
            unmarked.setdefault(name, []).append(c.text)
    for decision, texts in unmarked.items():
        said = "".join(f"<li>{_esc(t)}</li>" for t in texts)
        items.append(
            f'<li data-decision="{_esc(decision)}"><strong>{_esc(decision)}</strong> in no state: '
            f"each state tries the same rules, with the same answers, as before<ul>{said}</ul></li>"
        )
    return "".join(items) or "<li>none</li>"


def diff_page(d: MachineDiff, old_label: str, new_label: str, *, refused: str | None = None) -> str:
    """A policy change on the picture: NEW's diagram with added and changed arrows marked, the states whose
    decision rules changed outlined, and ``loopfsm diff``'s words (the changes, the policy numbers and decision
    rules changed, and what a deploy does to saved runs)."""
    marks = {"*": "behaviour", "!": "proof", "~": "wording"}
    changes = "".join(f'<li class="{marks[c.mark]}"><code>{c.mark}</code> {_esc(c.text)}</li>' for c in d.changes)
    changes = changes or "<li>none</li>"
    policy = [c.text for c in d.changes if c.text.startswith("policy ")]
    arrows = diff_json(d.old, d.new)
    old_moves = _moves(d.old)
    removed = "".join(
        f"<li>{_esc(s)} \u2192 {_esc(t)}: {_esc('; '.join(old_moves[(s, t)]))}</li>" for s, t in arrows["removed"]
    )
    # a removed arrow between states the new table still has is drawn on its picture
    ghosts = [(s, t, "; ".join(old_moves[(s, t)])) for s, t in arrows["removed"] if {s, t} <= set(d.new.states)]
    decided = decision_changes(d.old, d.new)
    body = (
        f"<h1>{_esc(d.new.name)}: {_esc(old_label)} \u2192 {_esc(new_label)}</h1>"
        f'<p class="verdict"><strong>{_esc(d.lines()[0].split(": ", 1)[1])}</strong></p>'
        + (f'<p class="refused-check"><strong>{_esc(refused)}</strong></p>' if refused else "")
        + f'<p class="saved-runs"><strong>Saved runs:</strong> {_esc(d.snapshot_note())}</p>'
        '<div class="columns"><div class="left">'
        f'<figure class="diagram" aria-label="the new state diagram">{_diagram(d.new, ghosts, decided)}</figure>'
        '<table class="legend diff-legend"><tr><td class="added">green</td><td>an arrow the new table adds</td></tr>'
        '<tr><td class="changed">orange</td><td>an arrow whose words changed</td></tr>'
        '<tr><td class="removed">red, dotted</td><td>an arrow the new table removed</td></tr>'
        '<tr><td class="decided">orange box</td><td>a state where a decision\u2019s rules changed: '
        "<code>decide</code> may answer differently there (beside it, which decision and how many rules; "
        "each change is listed under Decision rules changed)</td></tr></table>"
        f"<h2>Arrows removed</h2><ul>{removed or '<li>none</li>'}</ul>"
        '<section id="details" aria-live="polite"><h2>Details</h2>'
        "<p>Click a state or an arrow of the new table to see its branches in order.</p></section></div>"
        f'<div class="right"><h2>Policy numbers changed</h2><ul>'
        f"{''.join(f'<li>{_esc(p)}</li>' for p in policy) or '<li>none</li>'}</ul>"
        f'<h2>Decision rules changed</h2><ul class="decisions">{_decided_items(d, decided)}</ul>'
        "<h2>Every change, as <code>loopfsm diff</code> says it</h2>"
        f'<ul class="changes">{changes}</ul>'
        "</div></div>"
        f'<script type="application/json" id="table">{_json_for_script(table_json(d.new))}</script>'
        f'<script type="application/json" id="diff">{_json_for_script(arrows)}</script>'
    )
    return _page(f"{d.new.name}: what changed", body, root="", static=True)
