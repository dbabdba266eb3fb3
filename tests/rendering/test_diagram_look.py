"""What a reviewer grading the pictures checks, measured on the DOT and Mermaid text and on dot's layout.

Each test names the fault it guards against: arrows fanning into one state
that all say "past the deadline", a label far from its edge, two long edges
crossing, a self-loop over an arrowhead, a lone "}" in a node, text too small
once a wide picture is fitted to a 1,000 px page, guards printed as code and
times as raw milliseconds.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
from pathlib import Path
from dataclasses import dataclass

import pytest

from loopfsm.core import loader
from loopfsm.rendering import cards, dot, mermaid, render
from loopfsm.rendering.labels import duration
from loopfsm.rendering.legend import GUARD_COLOR
from loopfsm.rendering.cards import by_feed, port
from loopfsm.rendering.overview import ANY, overview

ROOT = Path(__file__).resolve().parents[2]
MACHINES = sorted((ROOT / "machines").glob("*.yaml"))
DIAGRAMS = ROOT / "diagrams"

# Legible at 1,000 px: fitted to a page 1,000 px wide, the smallest text in the picture is at least
# this many px high. A 10 pt label keeps 9 px only if the picture is at most 1,111 pt wide.
PAGE_PX = 1000
MIN_TEXT_PX = 9
LABEL_GAP_PT = 12  # the farthest a label's text may sit from its own edge


def spec(name: str):
    return loader.load(ROOT / "machines" / f"{name}.yaml")


def _layout(source: str) -> dict:
    out = subprocess.run(["dot", "-Tjson"], input=source, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _curve(pos: str) -> list[tuple[float, float]]:
    """Points along an edge's B-spline (``pos`` as dot writes it), 20 per cubic piece."""
    pts = [tuple(map(float, p.split(","))) for p in pos.split() if not p.startswith(("e,", "s,"))]
    out = []
    for i in range(0, len(pts) - 3, 3):
        p0, p1, p2, p3 = pts[i : i + 4]
        for k in range(21):
            t = k / 20
            out.append(
                tuple(
                    (1 - t) ** 3 * a + 3 * (1 - t) ** 2 * t * b + 3 * (1 - t) * t * t * c + t**3 * d
                    for a, b, c, d in zip(p0, p1, p2, p3, strict=True)
                )
            )
    return out  # type: ignore[return-value]


def _label_box(edge: dict) -> tuple[float, float, float, float]:
    """The box around an edge's label text: left, right, bottom, top (pt)."""
    texts = [op for op in edge["_ldraw_"] if op["op"] == "T"]
    left = {"l": 0.0, "c": 0.5, "r": 1.0}
    x0 = min(t["pt"][0] - left[t["align"]] * t["width"] for t in texts)
    x1 = max(t["pt"][0] + (1 - left[t["align"]]) * t["width"] for t in texts)
    y0, y1 = min(t["pt"][1] for t in texts) - 3, max(t["pt"][1] for t in texts) + 10
    return x0, x1, y0, y1


def _label_gap(edge: dict) -> float:
    """Distance in pt from the box around an edge's label text to the nearest point of that edge."""
    x0, x1, y0, y1 = _label_box(edge)
    return min((max(x0 - x, 0, x - x1) ** 2 + max(y0 - y, 0, y - y1) ** 2) ** 0.5 for x, y in _curve(edge["pos"]))


def _points_in_label(edge: dict) -> int:
    """How many of an edge's points lie inside the box around its own label's text."""
    x0, x1, y0, y1 = _label_box(edge)
    return sum(1 for x, y in _curve(edge["pos"]) if x0 < x < x1 and y0 < y < y1)


def _edges(layout: dict) -> dict[tuple[str, str], dict]:
    """The laid-out edges by (tail, head); a tail that is a card's line reads ``Idle:w3e`` (see cards.port)."""
    names = {o["_gvid"]: o["name"] for o in layout["objects"]}
    return {
        (names[e["tail"]] + (":" + e["tailport"].split(":")[0] if _lined(e) else ""), names[e["head"]]): e
        for e in layout.get("edges", [])
    }


def _lined(edge: dict) -> bool:
    """Whether an edge leaves a card's line (``w3e``), not its box (no port, or a side: ``s``)."""
    return edge.get("tailport", "").startswith("w")


def _state(tail: str) -> str:
    """The box of an edge's tail as :func:`_edges` names it."""
    return tail.split(":")[0]


@dataclass(frozen=True)
class Arrow:
    """An arrow of the DOT text between two boxes: ``port`` is the card line it leaves from (None: the box)."""

    src: str
    port: str | None
    dst: str
    dashed: bool


def _arrows(source: str) -> list[Arrow]:
    """The arrows of the DOT text, in its order: ``Idle:w3e:e -> AwaitingEncrypt`` leaves Idle's fourth way,
    ``Start:s -> Terminal`` Start's box (from its foot)."""
    found = re.findall(r"^\t(\w+)(?::(w\d+[ew]))?(?::[ews])? -> (\w+)( \[.*\])?$", source, re.M)
    return [Arrow(a, p or None, b, "style=dashed" in attrs) for a, p, b, attrs in found]


def _crosses(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> bool:
    def side(p, q, r):
        return (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])

    for p1, p2 in zip(a, a[1:], strict=False):
        for q1, q2 in zip(b, b[1:], strict=False):
            if side(p1, p2, q1) * side(p1, p2, q2) < 0 and side(q1, q2, p1) * side(q1, q2, p2) < 0:
                return True
    return False


# 1. agent_loop: "past the deadline" once, labels on their edges, no crossing along the bottom.


def test_agent_loop_draws_the_deadline_once_from_the_any_live_state_note():
    s = spec("agent_loop")
    ov = overview(s)
    assert [(e.src, e.dst, e.lines()) for e in ov.any_moves if e.dst == "expired"] == [
        (ANY, "expired", ["any feed (1): past the deadline"])
    ]
    assert ov.any_label == "any live state"
    source = dot.state_graph(s).source
    assert source.count("past the") == 1 and "any feed (1): past the\\l  deadline" in source
    into_expired = re.findall(r"^\t(\w+)(?::s)? -> expired ", source, re.M)
    # Before: seven arrows (every live state and two notes); now the note's and the one that says
    # something else (awaiting_approval: decided too late, approval lapsed).
    assert sorted(into_expired) == [ANY, "awaiting_approval"]
    mmd = mermaid.state_diagram(s)
    assert mmd.count("past the deadline") == 1 and f"    {ANY} --> expired: any feed (1) (past the deadline)\n" in mmd


def test_a_move_is_drawn_from_the_note_only_when_every_live_state_makes_it_first_on_every_feed():
    text = (ROOT / "machines" / "agent_loop.yaml").read_text()
    # hand_off from recovering without the deadline check: the move is no longer universal.
    shared = "    first:\n      - *deadline\n      - name: blank_owner\n"
    assert text.count(shared) == 1
    scoped = (
        "    first:\n      - {<<: *deadline, states: [planning, awaiting_tool, observing_result, awaiting_approval]}\n"
        "      - name: blank_owner\n"
    )
    broken = text.replace(shared, scoped)
    assert broken != text
    ov = overview(loader.parse(broken, "agent_loop.yaml"))
    assert not any("any feed" in line for e in ov.any_moves for line in e.lines())
    assert any("past the deadline" in line for e in ov.edges for line in e.lines())


def test_agent_loop_replan_does_not_cross_denied():
    edges = _edges(_layout(dot.state_graph(spec("agent_loop")).source))
    (replan,) = [e for (a, b), e in edges.items() if _state(a) == "recovering" and b == "planning"]
    denied = edges[("awaiting_approval", "failed")]  # into a final state: from the box
    assert not _crosses(_curve(replan["pos"]), _curve(denied["pos"]))


def test_agent_loop_main_path_reads_in_one_direction():
    """Top to bottom (the machine is wide, see the width test): each step of the main path lies lower."""
    layout = _layout(dot.state_graph(spec("agent_loop")).source)
    assert layout["rankdir"] == "TB"
    y = {o["name"]: float(o["pos"].split(",")[1]) for o in layout["objects"] if "pos" in o}
    path = ["planning", "awaiting_tool", "executing_tool", "observing_result", "completed"]
    assert all(y[a] > y[b] for a, b in zip(path, path[1:], strict=False)), {p: y[p] for p in path}


@pytest.mark.parametrize("path", MACHINES, ids=lambda p: p.stem)
def test_every_label_sits_on_its_own_edge(path):
    layout = _layout(dot.state_graph(loader.load(path)).source)
    far = {k: round(_label_gap(e), 1) for k, e in _edges(layout).items() if e.get("_ldraw_")}
    assert {k: g for k, g in far.items() if g > LABEL_GAP_PT} == {}


# 2. router_run: inject in one note, no leader lines, no self-loop arrows, no lone "}".


def test_router_run_says_inject_once_and_draws_no_leader_lines():
    source = dot.state_graph(spec("router_run")).source
    assert [line for line in source.splitlines() if " -> " in line and "inject" in line] == []
    assert source.count("inject, from Idle, AwaitingDecrypt,") == 1
    assert "decorate" not in source


def _card(source: str, state: str) -> list[str]:
    """The rows of ``state``'s card in the DOT text, as a reader sees them (tags dropped, each way one line)."""
    (label,) = re.findall(rf"^\t{state} \[label=<(.*?)> [a-z]", source, re.M)
    rows = re.findall(r"<TR>(.*?)</TR>", label)
    out = []
    for row in rows:
        text = re.sub(r"<BR[^>]*/>", " ", row)
        text = re.sub(r"<[^>]+>", "", text.replace("</TD><TD", "</TD> <TD"))
        text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        out.append(" ".join(text.split()))
    return out


def test_a_states_card_lists_its_ways_in_the_order_the_table_tries_them():
    """Drawn as arrows with words, router_run's Idle had four execute arrows and a "may stay on execute" whose
    order nothing showed; readers took them for a conflict.  The card lists them, numbered."""
    source = dot.state_graph(spec("router_run")).source
    assert _card(source, "Idle") == [
        "Idle",
        "execute",
        "1 encrypted, sealed history needed \u2192 AwaitingDecrypt",
        "2 disclosure/cost gate \u2192 AwaitingApproval",
        "3 model requested allow/ask tools \u2192 AwaitingTool",
        "4 completed, encrypted \u2192 AwaitingEncrypt if the feed says encrypted",
        "5 completed, plaintext stays if the feed says not encrypted",
    ]
    # seed 002's "decided or aborted" for both the abort and the plaintext completion: the abort says the
    # alternative it asks, the completion the other one and what it asks; what the machine holds that decides a
    # way is said under it
    assert _card(source, "AwaitingApproval")[3:] == [
        "approval_decisions",
        "1 aborted \u2192 Idle",
        "2 decided, then a later gate stays",
        "3 decided, next turn requests tools \u2192 AwaitingTool",
        "4 decided, completed, encrypted \u2192 AwaitingEncrypt if run_encrypted",
        "5 decided, completed \u2192 Idle if not run_encrypted",
    ]
    # turnstile's locked gate: a coin opens it or stays as credit; pushing only stays
    assert _card(dot.state_graph(spec("turnstile")).source, "locked")[1:] == [
        "coin",
        "1 it clicks open \u2192 unlocked if fare_paid",
        "2 not paid up yet stays if not fare_paid",
        "push: it refuses stays",
    ]


@pytest.mark.parametrize("path", MACHINES, ids=lambda p: p.stem)
def test_every_way_is_on_its_states_card_numbered_as_the_table_tries_it(path):
    """Each state's ways are its branches on each feed it takes itself (refusals aside), in the table's order,
    each with its own state or a stay; numbered from 1 when there are two ways or more, from 2 after a
    move every state tries first (drawn from the note as "any feed (1)"; a lone way too), and not at all
    otherwise."""
    s = loader.load(path)
    ov = overview(s)
    universal = any(e.places.get("any feed") == [1] for e in ov.any_moves)
    first = 2 if universal else 1
    source = dot.state_graph(s).source
    for state, ways in ov.ways.items():
        by_feed: dict[str, list] = {}
        for w in ways:
            by_feed.setdefault(w.feed, []).append(w)
        for feed, group in by_feed.items():
            branches = s.expanded_sources(s.events[feed])[state]
            drawn = [b for b in branches if b.refusal is None][first - 1 :]
            # ``otherwise: stay`` after branches that are all guarded: a last way, "stays, otherwise"
            rest = s.events[feed].otherwise == "stay" and all(b.guarded for b in branches)
            own = group[:-1] if rest else group
            assert not rest or (group[-1].guard, group[-1].dest) == ("otherwise", None), (state, feed)
            assert [w.dest or state for w in own] == [b.dest or state for b in drawn], (state, feed)
            places = [w.place for w in group]
            if len(group) > 1 or first > 1:  # after "any feed (1)" a lone way is 2: the note's way comes first
                assert places == list(range(first, first + len(group))), (state, feed, places)
            else:
                assert places == [None] * len(group), (state, feed, places)
        rows = " / ".join(_card(source, state))
        for w in ways:
            assert w.feed in rows and w.words in rows, (state, w)
    numbered = any(w.place is not None for ws in ov.ways.values() for w in ws)
    assert dot.legend(s).ordered == numbered
    assert ("the order a state tries" in source) == numbered


@pytest.mark.parametrize("path", MACHINES, ids=lambda p: p.stem)
def test_state_diagrams_draw_no_self_loops_and_no_lone_brace(path):
    """A loop sat on the node's side over another arrow's head: staying feeds are written in the node."""
    s = loader.load(path)
    source = dot.state_graph(s).source
    assert re.findall(r"^\t(\w+) -> \1 ", source, re.M) == []
    for e in overview(s).edges:
        if e.loop:  # a stay is said on the card
            assert all(f in " ".join(_card(source, e.src)) for f in e.feeds), (e.src, e.feeds)
    titles = re.findall(r"<FONT[^>]*>(?:<I>)?([^<]*)(?:</I>)?</FONT>", source)
    assert titles and not [t for t in titles if t.strip() in ("}", "{", "{ }")] or not s.states


def test_a_wrapped_field_list_keeps_its_braces_on_its_fields():
    lines = cards.braced(["resume_step", "since", "calls", "assistant_ref", "pending_seal"], 28)
    assert lines[0].startswith("{ ") and lines[-1].endswith(" }") and "}" not in lines[:-1]
    assert all(line.strip() not in ("{", "}") for line in lines)
    assert cards.braced(["a"], 28) == ["{ a }"] and cards.braced([], 28) == []


# 3. Wide machines wrap so text stays legible at 1,000 px.


def _smallest_text_px_at_page_width(svg: str) -> float:
    width = float(re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) ', svg).group(1))  # type: ignore[union-attr]
    smallest = min(float(x) for x in re.findall(r'font-size="([\d.]+)"', svg))
    return smallest * PAGE_PX / width


@pytest.mark.parametrize("svg", sorted(DIAGRAMS.glob("*.svg")), ids=lambda p: p.stem)
def test_every_committed_picture_is_legible_at_1000_px(svg):
    px = _smallest_text_px_at_page_width(svg.read_text())
    assert px >= MIN_TEXT_PX, f"{svg.name}: smallest text {px:.1f} px when fitted to {PAGE_PX} px"


def test_wide_machines_are_laid_out_top_to_bottom():
    for path in MACHINES:
        s = loader.load(path)
        tall = dot.columns(s) >= dot.WRAP_AT
        assert ("rankdir=TB" in dot.state_graph(s).source) == tall, path.stem
    assert dot.columns(spec("agent_loop")) >= dot.WRAP_AT and dot.columns(spec("turnstile")) < dot.WRAP_AT


# 4. Decision charts: guards in words, durations in units, short rhombi, nothing cut mid-word.


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (86_400_000, "24 h"),
        (30_000, "30 s"),
        (90_000, "90 s"),
        (900_000, "15 min"),
        (1500, "1500 ms"),
        (0, "0 ms"),
        (90_061_000, "25 h 1 min 1 s"),
        (3_599_999, "59 min 59 s 999 ms"),
        (36_000_000_000, "10000 h"),
    ],
)
def test_durations_read_in_units(ms, text):
    assert duration(ms) == text


def test_decision_charts_say_the_rule_in_words_and_the_time_in_units():
    s = spec("router_run")
    out = render(s, ["dot", "mermaid", "md"])
    chart = " ".join(re.sub(r"<BR[^>]*/>", " ", out["router_run.admit.dot"]).split())
    assert "86400000" not in chart and "24 h (policy.pause_ttl_ms)" in chart
    for r in s.decisions["admit"].rules[:-1]:
        assert r.description and r.description.split(": ")[0] in chart.replace("&#39;", "'"), r.name
    assert "| `pause_ttl_ms` | integer | 86400000 (24 h) |" in out["router_run.md"]


@pytest.mark.parametrize("path", MACHINES, ids=lambda p: p.stem)
def test_mermaid_rhombi_are_short_and_nothing_is_cut_mid_word(path):
    s = loader.load(path)
    for name, text in render(s, ["mermaid"]).items():
        if not text.startswith("flowchart"):
            continue
        for rhombus in re.findall(r'\{"([^"]*)"\}', text):
            assert all(len(line) <= mermaid.RHOMBUS for line in rhombus.split("<br/>")), (name, rhombus)
            assert "…" not in rhombus
        assert "..." not in text and not re.search(r"\w…", text), name
        assert "arg_in(" not in text and "arg_at_least(" not in text, name


# 5. A legend, one edge style per meaning, words not guard names, nothing said twice, no climb back to Idle.


@pytest.mark.parametrize("path", MACHINES, ids=lambda p: p.stem)
def test_every_picture_has_a_legend_naming_exactly_the_marks_it_draws(path):
    s = loader.load(path)
    source = dot.state_graph(s).source
    cards_text, legend_text = source.rsplit("label=<<TABLE", 1)  # the legend is the graph's label, last
    title = legend_text.split("</TABLE>>", 1)[0]
    ways = [w for ws in overview(s).ways.values() for w in ws]
    assert ("decided also by the machine's own data" in title) == (f'COLOR="{GUARD_COLOR}"' in cards_text)
    assert ("decided also by the machine's own data" in title) == any(w.by_guard for w in ways)
    # the small line under a way ("if run_encrypted", "if the feed says encrypted") is said when one is drawn
    assert ("The small line under a way says what decides it" in title) == any(w.guard or w.asks for w in ways)
    assert ("moves the run to state X" in title) == any(w.dest for w in ways)
    # an arrow from a box's edge, not a line, is said only where one is drawn
    title = " ".join(title.replace('<BR ALIGN="LEFT"/>', " ").split())
    boxed = re.findall(r"^\t(\w+)(?::s)? -> (\w+)(?: \[.*\])?$", source, re.M)
    drawn = [(a, b) for a, b in boxed if a in s.states and b in s.states]
    assert ("box's edge into a final state" in title) == any(b in s.terminal_states for _, b in drawn)
    # "its line's left or right end" only where some arrow leaves a line (turnstile's all leave the box)
    assert ("its arrow leaves its line's left or right end" in title) == bool(
        re.search(r"^\t\w+:w\d+[ew]", source, re.M)
    )
    assert ("when all its ways go to one state" in title) == any(b not in s.terminal_states for _, b in drawn)
    # a note's arrows are named only where a note has one (router_run's break note says "→ Idle" instead)
    noted = re.search(r"^\t(__any__|__shared\d+__) -> ", source, re.M)
    assert ("a note (a box with a folded corner) and its arrows" in title) == bool(noted)
    assert ("does not move" in title) == any(w.dest is None for w in ways)
    assert ("a final state" in title) == bool(s.terminal_states)
    home = dot.legend(s).home
    assert (f"back to the initial state {s.initial}: its arrow is not drawn" in title) == (home is not None)
    assert home is None or not re.search(rf"-> {home}\b", source.replace("__start__ -> ", "")), "an arrow home"
    # what every state holds, so a guard that reads it (router_run's run_encrypted, the run's `encrypted`) has
    # its data in the picture; a black way is said to be the feed's arguments' alone
    said = title.replace('<BR ALIGN="LEFT"/>', " ")
    assert ("every state holds " + ", ".join(s.data) in said) == bool(s.data)
    assert ("a black way by the feed's own arguments alone" in said) == any(w.by_guard for w in ways)
    sheet = (DIAGRAMS / f"{path.stem}.md").read_text()
    assert "## Reading the diagram" in sheet
    assert all(words in sheet for _, _, words in dot.legend(s).rows())


@pytest.mark.parametrize("path", MACHINES, ids=lambda p: p.stem)
def test_a_way_is_blue_and_its_arrow_dashed_exactly_when_a_guard_decides_it(path):
    """A `when:` on the feed's arguments is the caller's report, not the machine's check: black.  A branch tried
    after a guarded one that the same arguments can reach is decided by that guard too (router_run's "completed,
    plaintext", after "completed, encrypted" and its run_encrypted guard): readers took it for unconditional.
    An arrow is dashed when every way it stands for is blue, so line and rows match."""

    def reach_both(a, b):
        named = {c.arg: set(map(repr, c.values)) for c in a.when}
        return all(named[c.arg] & set(map(repr, c.values)) for c in b.when if c.arg in named)

    s = loader.load(path)
    ov = overview(s)
    universal = any(e.places.get("any feed") == [1] for e in ov.any_moves)
    for state, ways in ov.ways.items():
        for feed in dict.fromkeys(w.feed for w in ways):
            mine = [w for w in ways if w.feed == feed]
            every = s.expanded_sources(s.events[feed])[state]
            if s.events[feed].otherwise == "stay" and all(b.guarded for b in every):
                mine = mine[:-1]  # "stays, otherwise": no branch of the table
            branches = [b for b in every if b.refusal is None]
            branches = branches[1:] if universal else branches  # the deadline's move, drawn from the note
            full = [b for b in s.expanded_sources(s.events[feed])[state]][1 if universal else 0 :]
            for w, b in zip(mine, branches, strict=True):
                before = full[: full.index(b)]
                decided = bool(b.guards) or any(x.guards and x.refusal is None and reach_both(x, b) for x in before)
                assert w.by_guard == decided, (state, feed, w)
    source = dot.state_graph(s).source
    arrows = _arrows(source)
    for state, ways in ov.ways.items():
        for k, w in enumerate(x for f in by_feed(ways) for x in f.ways):
            if w.dest is None:
                continue
            head = w.dest
            if head == dot.legend(s).home:
                assert not [a for a in arrows if a.src == state and a.dst == head], (state, w)
                continue  # its arrow is not drawn: its line says "→ Idle"
            ported = [a for a in arrows if a.src == state and a.port in (port(k), port(k, True))]
            if ported:  # from the way's own line
                (a,) = ported
                assert (a.dst, a.dashed) == (head, w.by_guard), (state, k, w, a)
            else:  # into a final state, or from a card whose ways all reach one state: one per colour
                assert Arrow(state, None, head, w.by_guard) in arrows, (state, w)
    for a in arrows:
        if a.src in s.states and a.port is None:
            assert any(w.dest and w.by_guard == a.dashed for w in ov.ways[a.src]), a
    if path.stem == "router_run":
        # both endings of a completed run hang on the run_encrypted guard: dashed; Idle's own are the feed's.
        assert Arrow("AwaitingTool", port(2), "AwaitingEncrypt", True) in arrows
        assert Arrow("Idle", port(3), "AwaitingEncrypt", False) in arrows


@pytest.mark.parametrize("path", MACHINES, ids=lambda p: p.stem)
def test_shipped_arrows_say_words_not_guard_names(path):
    """Every branch a shipped picture draws as a move has a description when a guard decides it."""
    s = loader.load(path)
    bare = [
        (ev.name, state, b.dest)
        for ev in s.events.values()
        for state, branches in ev.sources.items()
        for b in branches
        if b.guards and b.dest is not None and b.refusal is None and not b.description
    ]
    assert bare == []


def test_state_arrows_carry_no_words_the_cards_say_them():
    """Words by a line read as belonging to whichever line passed nearest; the card names where each way goes."""
    for path in MACHINES:
        source = dot.state_graph(loader.load(path)).source
        states = set(loader.load(path).states)
        for a, b, attrs in re.findall(r"^\t(\w+) -> (\w+)(.*)$", source, re.M):
            if a in states and b in states:
                assert "label=" not in attrs, (path.stem, a, b)


def test_router_runs_picture_keeps_to_three_crossings():
    """Counted between arrows that share no state: three where the foot's copy of Idle is declared first, five
    where it followed the states (dot orders each row first as it meets the nodes).  Four since each way has
    its own arrow: AwaitingApproval's abort and plaintext completion, one arrow into Idle before, are two."""
    edges = _edges(_layout(dot.state_graph(spec("router_run")).source))
    crossing = [
        (a, b)
        for (a, ea), (b, eb) in itertools.combinations(edges.items(), 2)
        if not set(map(_state, a)) & set(map(_state, b)) and _crosses(_curve(ea["pos"]), _curve(eb["pos"]))
    ]
    assert len(crossing) <= 4, crossing


def _boxes(layout: dict) -> dict[str, tuple[float, float, float, float]]:
    """Each laid-out node's box, (left, bottom, right, top) in points."""
    out = {}
    for o in layout["objects"]:
        if "pos" in o and "width" in o:
            x, y = map(float, o["pos"].split(","))
            w, h = float(o["width"]) * 36, float(o["height"]) * 36
            out[o["name"]] = (x - w, y - h, x + w, y + h)
    return out


def test_router_run_draws_no_arrow_back_to_idle_and_each_way_says_it_goes_there():
    """Drawn, the arrows back to Idle climbed across the whole page; drawn into a copy of Idle each, they still
    crossed and hooked round the cards (graded B- and B; without them B and B+).  No arrow comes back to Idle:
    each way's line says "→ Idle", the break note says it of break_run, and the legend says the arrow is not
    drawn."""
    s = spec("router_run")
    source = dot.state_graph(s).source
    assert re.findall(r"^\t(\S+) -> Idle\b", source, re.M) == ["__start__"]
    homeward = [w for ws in overview(s).ways.values() for w in ws if w.dest == "Idle"]
    assert len(homeward) == 5
    for w in homeward:
        assert f"{w.words} \u2192 <I>Idle</I>" in source.replace('<BR ALIGN="LEFT"/>', " "), w
    assert '[label="break_run: break \u2192 Idle\\l' in source
    assert dot.legend(s).home == "Idle"
    assert "__again" not in source


# 6. Arrows into one box arrive apart: each head reads as its own.

NEAR_PT = 6  # two curves closer than this read as one line at 1,000 px
TOGETHER_PT = 10  # the most of its final stretch an arrow may run that close to another into the same box


def _tip(edge: dict) -> tuple[float, float]:
    """Where an edge's arrowhead points (``e,x,y`` in ``pos``), or its curve's last point when it has no head."""
    for p in edge["pos"].split():
        if p.startswith("e,"):
            x, y = p[2:].split(",")
            return float(x), float(y)
    return _curve(edge["pos"])[-1]


def _run_together(a: dict, b: dict) -> float:
    """How long (pt) the final stretch of ``a``, back from its head, stays within NEAR_PT of ``b``."""
    ours, theirs = [*_curve(a["pos"]), _tip(a)], [*_curve(b["pos"]), _tip(b)]
    length = 0.0
    for p, q in zip(reversed(ours[:-1]), reversed(ours[1:]), strict=True):
        if min(((p[0] - x) ** 2 + (p[1] - y) ** 2) ** 0.5 for x, y in theirs) > NEAR_PT:
            break
        length += ((p[0] - q[0]) ** 2 + (p[1] - q[1]) ** 2) ** 0.5
    return length


@pytest.mark.parametrize("path", MACHINES, ids=lambda p: p.stem)
def test_no_two_arrows_into_one_box_run_together_into_one_head(path):
    """router_run's arrows from AwaitingApproval and AwaitingEncrypt into the foot's Idle ran within 6 pt of each
    other for their last 58 pt and read as one head.  A dot is left out: the arrows into it meet there by design."""
    edges = _edges(_layout(dot.state_graph(loader.load(path)).source))
    together = {
        (a, b): round(max(_run_together(ea, eb), _run_together(eb, ea)), 1)
        for (a, ea), (b, eb) in itertools.combinations(edges.items(), 2)
        if a[1] == b[1] and not a[1].startswith("__join")
    }
    assert {k: v for k, v in together.items() if v > TOGETHER_PT} == {}


@pytest.mark.parametrize("path", MACHINES, ids=lambda p: p.stem)
def test_a_ways_arrow_leaves_the_end_of_its_line_not_the_cards_foot(path):
    """Aimed at a line with no side, dot sent the arrow of a card's last line (router_run's AwaitingTool 4,
    AwaitingApproval 5) out of the card's foot, where the legend said "the arrow that leaves its line".  Every
    arrow from a line starts at the card's right edge (its left edge when turned round), level with the card's
    lines, not at its top or foot."""
    layout = _layout(dot.state_graph(loader.load(path)).source)
    boxes = _boxes(layout)
    for e in layout.get("edges", []):
        port_side = e.get("tailport", "")
        if not port_side.startswith("w"):
            continue
        tail = next(o["name"] for o in layout["objects"] if o["_gvid"] == e["tail"])
        left, bottom, right, top = boxes[tail]
        x0, y0 = _curve(e["pos"])[0]
        edge = left if port_side.endswith(":w") else right
        assert abs(x0 - edge) < 12, (path.stem, tail, port_side, x0, edge)
        assert bottom + 4 < y0 < top - 4, (path.stem, tail, port_side, y0, bottom, top)


@pytest.mark.parametrize("path", MACHINES, ids=lambda p: p.stem)
def test_a_cards_arrow_into_a_final_state_leaves_its_foot_below_its_lines(path):
    """Top to bottom, an arrow from a card's box into a final state left wherever dot aimed it: agent_loop's
    planning -> completed left the card's left edge level with "final_answer", a line whose ways go elsewhere
    too.  It leaves the card's foot, below every line."""
    s = loader.load(path)
    source = dot.state_graph(s).source
    if "rankdir=TB" not in source:
        pytest.skip("left to right: the final states are not on a row below the cards")
    layout = _layout(source)
    boxes = _boxes(layout)
    names = {o["_gvid"]: o["name"] for o in layout["objects"]}
    checked = 0
    for e in layout.get("edges", []):
        tail, head = names[e["tail"]], names[e["head"]]
        if tail not in s.states or head not in s.terminal_states or e.get("tailport", "").startswith("w"):
            continue
        x0, y0 = _curve(e["pos"])[0]
        assert abs(y0 - boxes[tail][1]) < 4, (path.stem, tail, head, y0, boxes[tail])
        checked += 1
    assert checked or not s.terminal_states or path.stem == "router_run"


def test_an_arrow_leaves_its_ways_line_on_the_side_it_goes():
    """Left to right, tool_breaker's HalfOpen (drawn right of Open) sends its ways back to Open and Closed: out of
    the right end of their lines they looped round the card.  Each leaves the left end of its line, at the
    height of that line, and the arrows of one card leave at as many heights as they have lines."""
    s = spec("tool_breaker")
    source = dot.state_graph(s).source
    layout = _layout(source)
    boxes = {o["name"]: o for o in layout["objects"] if "pos" in o}
    starts: dict[str, float] = {}
    for (tail, head), e in _edges(layout).items():
        if _state(tail) != "HalfOpen":
            continue
        x0, y0 = _curve(e["pos"])[0]
        cx, cy = map(float, boxes["HalfOpen"]["pos"].split(","))
        half = float(boxes["HalfOpen"]["width"]) * 72 / 2
        assert abs(x0 - (cx - half)) < 12, (tail, head, x0, cx - half)  # at the card's left edge
        starts[tail] = y0
    assert len(starts) == len(set(round(y) for y in starts.values())) == 8  # eight lines, eight heights
