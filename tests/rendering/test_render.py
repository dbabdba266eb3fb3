"""Diagrams a reviewer can read: one edge per pair, housekeeping folded away, short lines, live highlight."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.docs_pages import page
from loopfsm.core import loader
from loopfsm.rendering import dot, mermaid, render, render_instance
from loopfsm.rendering.overview import ANY, overview, short

ROOT = Path(__file__).resolve().parents[2]
MACHINES = sorted((ROOT / "machines").glob("*.yaml"))


def spec(name: str):
    return loader.load(ROOT / "machines" / f"{name}.yaml")


def _edges(mmd: str) -> list[tuple[str, str]]:
    return re.findall(r"^    (\w+) --> (\w+):", mmd, re.M)


@pytest.mark.parametrize("path", MACHINES, ids=lambda p: p.stem)
def test_every_state_diagram_has_one_edge_per_pair_and_short_lines(path):
    s = loader.load(path)
    mmd = mermaid.state_diagram(s)
    edges = _edges(mmd)
    assert len(edges) == len(set(edges)), "a (from, to) pair is drawn twice"
    for text in render(s, ["mermaid"]).values():
        assert max(len(line) for line in text.splitlines()) <= 120
    labels = [line.split(":", 1)[1] for line in mmd.splitlines() if "-->" in line and ":" in line]
    for ev in s.events.values():
        for bs in ev.sources.values():
            for b in bs:
                if len(b.actions) > 1:
                    listed = ", ".join(a.name for a in b.actions)
                    assert not any(listed in label for label in labels), listed


def test_tool_breaker_folds_admin_feeds_into_the_any_state_note():
    s = spec("tool_breaker")
    mmd = mermaid.state_diagram(s)
    assert f"{ANY} --> ForcedOpen: force_open" in mmd
    assert f"{ANY} --> Disabled: disable" in mmd
    assert f"{ANY} --> Closed: reset" in mmd
    # Before: 52 edges, 31 of them repeating a pair.  Now the three admin moves
    # are drawn once each, not once per state.
    assert len(_edges(mmd)) == 12
    assert not re.search(r"^    (Open|HalfOpen|Closed) --> ForcedOpen", mmd, re.M)
    assert "clamp_clock" not in mmd and "policy." not in mmd


def test_brain_lists_stay_only_housekeeping_in_the_note():
    mmd = mermaid.state_diagram(spec("engine_brain"))
    note = mmd.split("note right of", 1)[1].split("end note", 1)[0]
    for feed in ("inject", "set_context_tokens", "cancel", "commit_pending", "discard_pending"):
        assert feed in note
    assert f"{ANY} --> Terminal: fail" in mmd
    assert f"{ANY} --> Start: accept_input (scratchpad seeded, counters reset)" in mmd
    assert "AwaitingModel --> AwaitingModel: begin (1) (the same call, re-polled)\n" in mmd


def test_turnstile_overview_is_exactly_the_seed_picture():
    """Seed 000's four rows; a coin into the locked gate tries the fare first (1) and otherwise stays (2)."""
    assert mermaid.state_diagram(spec("turnstile")) == (
        "stateDiagram-v2\n"
        "    [*] --> locked\n"
        "    locked --> unlocked: coin (1) (it clicks open)\n"
        "    locked --> locked: coin (2) (not paid up yet), push\n"
        "    unlocked --> locked: push (one person passes, it re-locks)\n"
        "    unlocked --> unlocked: coin\n"
    )


def test_edge_words_come_from_descriptions_then_guards():
    ov = overview(spec("tool_breaker"))
    closed_open = next(e for e in ov.edges if (e.src, e.dst) == ("Closed", "Open"))
    assert closed_open.guarded and closed_open.by_guard
    assert closed_open.lines() == [
        "record (3, 4, 5): enough failures in a row; failure rate at its limit; slow-call rate at its limit"
    ]
    open_half = next(e for e in ov.edges if (e.src, e.dst) == ("Open", "HalfOpen"))
    assert open_half.lines() == ["acquire (1): lazily, the open time has passed", "tick (1): the open time has passed"]
    text = (ROOT / "machines" / "tool_breaker.yaml").read_text()
    bare = loader.parse(text.replace("          description: enough failures in a row\n", ""), "tool_breaker.yaml")
    closed_open = next(e for e in overview(bare).edges if (e.src, e.dst) == ("Closed", "Open"))
    assert closed_open.lines()[0].startswith("record (3, 4, 5): consecutive_failures_reach; failure rate")


def test_short_keeps_the_gist():
    assert short("a probe (perhaps this one) reported too late") == "a probe reported too late"
    assert short("nothing was shaved, Failed(ContextExceeded), buffers untouched", 30) == "nothing was shaved"
    assert short("first clause. Second sentence") == "first clause"
    assert len(short("word " * 40)) <= 44


def test_detailed_view_keeps_every_branch_with_guards_and_actions():
    s = spec("tool_breaker")
    files = render(s, ["dot", "mermaid"], detailed=True)
    detailed = files["tool_breaker.detailed.mmd"]
    assert "clamp_clock" in detailed and "policy.half_open_max_ms" in detailed
    assert detailed.count("-->") > files["tool_breaker.mmd"].count("-->")
    assert "tool_breaker.detailed.dot" in files
    assert "tool_breaker.detailed.mmd" not in render(s, ["mermaid"])


def test_a_live_instance_in_the_initial_state_is_lit_once():
    """router_run drew Idle again at the end of each arrow back to it, each copy lit for a run in Idle; the
    arrows are not drawn now, and Idle is one box."""
    from loopfsm.machines import RouterRun

    src = render_instance(RouterRun(), "dot")
    lit = [ln.lstrip().split(" ", 1)[0] for ln in src.splitlines() if "#ffe08a" in ln]
    assert lit == ["Idle"]


def test_live_instance_highlights_its_state():
    from loopfsm.machines import ToolBreaker

    b = ToolBreaker()
    b.feed("force_open", now=1)
    src = render_instance(b, "dot")
    lines = [ln for ln in src.splitlines() if "#ffe08a" in ln]
    assert len(lines) == 1 and lines[0].lstrip().startswith("ForcedOpen ")
    assert "now in ForcedOpen" in src
    assert render_instance(b, "mermaid").rstrip().endswith("class ForcedOpen current")
    svg = render_instance(b)
    assert svg.lstrip().startswith("<?xml") or "<svg" in svg
    with pytest.raises(ValueError):
        render_instance(b, "png")


def test_decision_chart_is_a_ladder_with_every_rule_in_order():
    s = spec("engine_brain")
    g = dot.decision_graph(s, s.decisions["next_step"])
    names = re.findall(r"\d\. (\w+)", g.source)
    assert names == [r.name for r in s.decisions["next_step"].rules][: len(names)] and len(names) == 7
    assert g.source.count("rank=same") == 7


def test_live_diagram_example_runs():
    block = (
        page("docs/cli.md")
        .split("draws a live instance with its current state highlighted")[1]
        .split("```python\n")[1]
        .split("```")[0]
    )
    exec(compile(block, "docs-cli-live-diagram", "exec"), {})


def test_edge_words_do_not_repeat_the_feed_and_state_data_sits_under_the_name():
    s = spec("router_run")
    for e in overview(s).edges:
        for line in e.lines():
            feed, _, words = line.partition(": ")
            assert not words.startswith(feed + ","), line
    src = dot.state_graph(spec("tool_breaker")).source
    assert re.search(r'>Open</FONT></TD></TR><TR><TD COLSPAN="2"><FONT [^>]*>\{ until, reason \}</FONT>', src)


def test_review_sheet_lists_coverage_excuses_with_their_reasons():
    from loopfsm.rendering.matrix import review_sheet

    from loopfsm import parse
    from loopfsm.machines.run_lock import REGISTRY

    text = (ROOT / "machines" / "run_lock.yaml").read_text(encoding="utf-8")
    refused = "          actions: [fenced_out]\n          description: stale fence refused\n"
    assert refused in text
    excused = (
        refused + '          untested: "taken by test_stale_holder_is_fenced_out, which a coverage run leaves out"\n'
    )
    sheet = review_sheet(parse(text.replace(refused, excused, 1), "run_lock.yaml", REGISTRY))
    section = sheet.split("## Rows excused from transition coverage", 1)[1].split("##", 1)[0]
    assert "| branch `renew/Held[1]` | taken by test_stale_holder_is_fenced_out" in section
    assert "Rows excused" not in review_sheet(spec("run_lock"))  # the shipped table excuses none now


def test_feeds_with_the_same_words_share_a_line():
    mmd = mermaid.state_diagram(spec("agent_loop"))
    line = next(x for x in mmd.splitlines() if x.startswith("    executing_tool --> recovering:"))
    assert line.count("retryable") == 1 and "tool_failed (2), worker_lost (2) (retryable)" in line


def test_moves_both_ways_between_two_states_are_two_bare_arrows_the_cards_name():
    from loopfsm.machines import ToolBreaker

    source = dot.state_graph(ToolBreaker.compiled.spec).source
    # each way's arrow leaves its line (a port of the card): "Open:w0e -> HalfOpen"
    edges = [re.sub(r":\w+(:[ew])? -> ", " -> ", line.strip()) for line in source.splitlines() if " -> " in line]
    assert any(e.startswith("Open -> HalfOpen") for e in edges) and any(e.startswith("HalfOpen -> Open") for e in edges)
    assert not [e for e in edges if e.startswith(("Open -> HalfOpen", "HalfOpen -> Open")) and "label=" in e]
    assert "\u2192 <I>HalfOpen</I>" in source and "\u2192 <I>Open</I>" in source
    # Underlining a label onto its edge (decorate) drew leader lines across the picture.
    assert "decorate" not in source


def test_a_description_just_over_the_limit_keeps_its_clause():
    from loopfsm.rendering.overview import SHORT

    text = "the estimate grew while the call was in flight"
    assert len(text) > SHORT and short(text) == text
    assert short("word " * 30).endswith("…")


def test_the_review_sheet_expands_each_feeds_sources_once(monkeypatch):
    """Once per feed, not once per cell: per cell made the sheet of a 5,000-state machine quadratic."""
    from loopfsm.core.spec import Spec

    brain = spec("engine_brain")
    calls: list[str] = []
    original = Spec.expanded_sources

    def counted(self, event):
        calls.append(event.name)
        return original(self, event)

    monkeypatch.setattr(Spec, "expanded_sources", counted)
    sheet = render(brain, ["md"])["engine_brain.md"]
    assert "## Was in x Feed" in sheet
    assert sorted(calls) == sorted(brain.events)


def test_router_run_draws_inject_and_break_once_from_notes_naming_the_paused_states():
    """Before: "inject" sat on 13 labels and break_run on 4; the pauses take both the same way."""
    s = spec("router_run")
    mmd = mermaid.state_diagram(s)
    pauses = ("AwaitingDecrypt", "AwaitingApproval", "AwaitingTool", "AwaitingEncrypt")
    for src, line in ((m.group(1), m.group(0)) for m in re.finditer(r"^    (\w+) --> \w+:.*$", mmd, re.M)):
        if src in pauses:
            assert "inject" not in line and "break_run" not in line, line
    notes = dict(re.findall(r'^    state "([^"]+)" as (\w+)$', mmd, re.M))
    brk = notes["from AwaitingDecrypt, AwaitingApproval, AwaitingTool, AwaitingEncrypt"]
    assert f"    {brk} --> Idle: break_run (break)\n" in mmd
    # inject may lead to any state from Idle and each pause: one note says so, no arrow carries it.
    # it names what it leaves out: "any live state" left readers asking whether AwaitingEncrypt was one
    assert notes["inject may move from Idle, AwaitingDecrypt, AwaitingApproval or AwaitingTool to any state"]
    assert "    Idle --> AwaitingTool: execute (3) (model requested allow/ask tools)\n" in mmd
    assert not [line for line in mmd.splitlines() if "-->" in line and "inject" in line]
    src = dot.state_graph(s).source
    labels = re.findall(r"^\t(\w+) -> \w+ \[label=\"([^\"]*)\"", src, re.M)
    assert [lbl for _, lbl in labels if "inject" in lbl] == []
    assert "inject, from Idle, AwaitingDecrypt," in src and "__anywhere__ ->" not in src
    assert "(these arrows are not drawn)" in src
    # alike from each state it is taken from, the note lists inject's ways, a stay as the state it stays in
    assert "5 completed \u2192 Idle\\l(these arrows are not drawn)" in src


FOLDS = """\
machine: folds
description: d
states:
  a: {initial: true, description: d}
  b: {description: d}
  c: {description: d}
  done: {terminal: true, description: d}
events:
  stop:
    description: the same from every live state, written per state
    from:
      a: [{to: done, description: stopped}]
      b: [{to: done, description: stopped}]
      c: [{to: done, description: stopped}]
  hop:
    description: the same from b and c only
    from:
      a: [{to: b, description: on}]
      b: [{to: a, description: back}]
      c: [{to: a, description: back}]
  go:
    description: differs per state, so drawn per state
    from:
      a: [{to: c, description: ahead}]
      b: [{to: c, description: ahead, actions: [{name: log, params: {text: x}}]}]
  poke:
    description: only stays, alike from two states
    from:
      a: [{stay: true}]
      b: [{stay: true}]
"""


def test_a_feed_alike_from_some_states_is_drawn_once_and_one_that_differs_per_state():
    from tests.support.specs import make_registry

    s = loader.parse(FOLDS, "folds.yaml", make_registry())
    ov = overview(s)
    assert [(e.dst, e.lines()) for e in ov.any_moves] == [("done", ["stop: stopped"])]
    assert ov.any_label == "any live state"
    [note] = ov.shared
    assert note.states == ["b", "c"] and [(e.dst, e.lines()) for e in note.moves] == [("a", ["hop: back"])]
    pairs = {(e.src, e.dst): e.lines() for e in ov.edges}
    # go differs by an action between a and b, so each keeps its own arrow.
    assert pairs[("a", "c")] == ["go: ahead"] and pairs[("b", "c")] == ["go: ahead"]
    assert pairs[("a", "b")] == ["hop: on"]
    assert ("b", "a") not in pairs and ("c", "a") not in pairs and ("a", "done") not in pairs
    # A feed that only stays keeps its self-loops.
    assert pairs[("a", "a")] == ["poke"] and pairs[("b", "b")] == ["poke"]
    mmd = mermaid.state_diagram(s)
    assert f'    state "from b, c" as {note.node}\n    {note.node} --> a: hop (back)\n' in mmd
    assert f"    {ANY} --> done: stop (stopped)\n" in mmd


def test_a_feed_alike_from_every_state_keeps_clear_of_an_other_live_states_note():
    from tests.support.specs import make_registry

    text = FOLDS.replace(
        "  poke:\n",
        "  ping:\n    description: from '*', but c says otherwise\n    from:\n"
        "      '*': [{to: a, description: reset}]\n      c: [{stay: true}]\n  poke:\n",
    )
    ov = overview(loader.parse(text, "folds.yaml", make_registry()))
    assert ov.any_label == "other live states"
    assert [(e.dst, e.lines()) for e in ov.any_moves] == [("a", ["ping: reset"])]
    every = next(n for n in ov.shared if n.states == ["a", "b", "c"])
    assert [(e.dst, e.lines()) for e in every.moves] == [("done", ["stop: stopped"])]


def test_shipped_machines_fold_only_feeds_that_move():
    assert overview(spec("tool_breaker")).shared == []  # tick and acquire only stay: self-loops
    ov = overview(spec("agent_loop"))
    # hand_off only stays once "past the deadline" is drawn from the note: most live states take it.
    assert ov.shared == [] and "hand_off (not in executing_tool)" in ov.any_stays
    assert "hand_off" not in "".join(line for e in ov.edges for line in e.lines())


def test_mermaid_spells_a_less_than_sign_so_words_are_not_read_as_html():
    # Mermaid reads a label as HTML: "<open>" would vanish from the picture, "<b>" would bolden it.
    turnstile = (ROOT / "machines" / "turnstile.yaml").read_text()
    turnstile = turnstile.replace("description: it clicks open", "description: 'it clicks <open> & a<b'")
    mmd = mermaid.state_diagram(loader.parse(turnstile))
    assert "it clicks #lt;open> & a#lt;b" in mmd and "<" not in mmd
    loop = (ROOT / "machines" / "agent_loop.yaml").read_text()
    loop = loop.replace(
        "description: the run is no longer valid; feed tick", "description: the run is <gone>; feed tick"
    )
    chart = mermaid.decision_flowchart(loader.parse(loop), loader.parse(loop).decisions["resume"])
    assert "#lt;gone>" in chart and "<" not in chart.replace("<br/>", "")


def test_descriptions_that_look_like_markup_are_drawn_as_text():
    """graphviz passes a string written as "<...>" on as an HTML label: a state's description used as its
    tooltip broke the DOT text (a traceback from `loopfsm build`). It is quoted text now, and dot draws it."""
    text = (ROOT / "machines" / "turnstile.yaml").read_text()
    old = "The arm is locked; pushing does nothing."
    assert old in text
    s = loader.parse(text.replace(old, '"<b>&amp; {x} | y </TD>"'), "turnstile.yaml")
    assert s.states["locked"].description == "<b>&amp; {x} | y </TD>"
    source = dot.state_graph(s).source
    assert 'tooltip="<b>&amp; {x} | y </TD>"' in source
    assert dot.to_svg(dot.state_graph(s)).rstrip().endswith("</svg>")


def test_a_drawing_dot_refuses_is_a_render_error_not_a_traceback():
    from loopfsm import RenderError

    with pytest.raises(RenderError, match="Graphviz's dot refused the drawing: .*syntax error"):
        dot.svg_from_source("digraph { a -> }")


def test_a_drawing_dot_stops_reading_part_way_is_a_render_error_not_a_broken_pipe():
    """dot quits on a string over 16 KiB; with more than a pipe's buffer still to write, the write fails: that is
    the drawing's error, not the command's standard output closing (which main() answers with exit 141)."""
    from loopfsm.rendering.dot import svg_from_source
    from loopfsm.rendering.errors import RenderError

    with pytest.raises(RenderError, match="refused the drawing: .*longer than 16384"):
        svg_from_source('digraph { a [tooltip="' + "x" * 400_000 + '"] }')


MAY_LEAVE = """\
machine: may_leave
description: d
states:
  a: {initial: true, description: a}
  b: {description: b}
  c: {description: c}
  e: {description: e}
  d: {description: d, terminal: true}
events:
  next:
    description: walk
    from:
      a: [{to: b, description: ab}]
      b: [{to: c, description: bc}]
      c: [{to: e, description: ce}]
      e: [{to: a, description: ea}]
  go:
    description: maybe leave
    args: {k: {type: integer}}
    from:
      b: [{when: {k: 1}, to: d, description: leave}, {stay: true, description: keep}]
      c: [{when: {k: 1}, to: d, description: leave}, {stay: true, description: keep}]
      e: [{when: {k: 1}, to: d, description: leave}, {stay: true, description: keep}]
"""


def test_a_note_does_not_say_its_feed_only_stays_beside_its_own_arrow_on_it():
    """b, c and e leave for d on go when k is 1 and stay otherwise: the note said "accepted there without
    moving: go" beside its own arrow "go: leave"."""
    from tests.support.specs import make_registry

    s = loader.parse(MAY_LEAVE, "may_leave.yaml", make_registry())
    for text, arrow in ((dot.state_graph(s).source, "go: leave"), (mermaid.state_diagram(s), "go (leave)")):
        assert "accepted there without moving" not in text
        assert "may also stay there, when the arrow's way does not hold:" in text and arrow in text


def test_a_one_arrow_note_keeps_a_backslash_in_its_words():
    """The note that says its one arrow's words escapes them as arrows' words are: "\\l" in a description must not
    turn into a line break (or a backslash vanish) when the words move into the note."""
    import json
    import subprocess

    from tests.support.specs import make_registry

    one_arrow = r"[{to: d, description: 'path C:\lib\new'}]"  # YAML single quotes: one backslash each
    text = MAY_LEAVE.replace("[{when: {k: 1}, to: d, description: leave}, {stay: true, description: keep}]", one_arrow)
    s = loader.parse(text, "one_arrow.yaml", make_registry())
    source = dot.state_graph(s).source
    layout = json.loads(
        subprocess.run(["dot", "-Tjson"], input=source, capture_output=True, text=True, check=True).stdout
    )
    (note,) = [o for o in layout["objects"] if o["name"].startswith("__shared")]
    assert [op["text"] for op in note["_ldraw_"] if op["op"] == "T"] == ["go: path C:\\lib\\new", "  in b, c, e"]


JUMPS = """\
machine: jumps
description: d
states:
  a: {initial: true, description: d}
  b: {description: d}
  c: {description: d}
  done: {terminal: true, description: d}
  failed: {terminal: true, description: d}
events:
  jump:
    description: from a or b to any live state, and from b to failed too
    from:
      a: [{to: a, when: {to: a}, description: x}, {to: b, when: {to: b}, description: x}, {to: c, description: x}]
      b: [{to: a, when: {to: a}, description: x}, {to: b, when: {to: b}, description: x},
          {to: failed, when: {to: failed}, description: x}, {to: c, description: x}]
    args:
      to: {type: string, default: c}
  end:
    description: d
    from:
      c: [{to: done, description: x}]
"""


def test_the_anywhere_note_names_the_final_states_it_does_not_reach():
    """ "any live state" left readers asking which states were live: the note says "any state", names the
    final states the feed does not reach from every state it lists, and says apart where one is reached."""
    from tests.support.specs import make_registry

    s = loader.parse(JUMPS, "jumps.yaml", make_registry())
    ov = overview(s)
    said = "jump may move from a or b to any state but done, failed (from b also to failed)"
    assert ov.anywhere_lines() == [said]
    assert said in re.sub(r"\\l\s*", " ", dot.state_graph(s).source)  # its ways differ by state: the sentence


# What a hostile reader of the cards found (each a machine of a user's own).

CASES = """\
machine: cases
description: d
states:
  idle: {initial: true, description: "ends in a backslash \\\\"}
  a: {description: a}
events:
  go:
    description: go
    args:
      ok: {type: boolean}
      r: {type: string, nullable: true}
      n: {type: integer}
    otherwise: raise
    from:
      idle:
        - {when: {ok: false}, guard: {name: g, negate: true}, to: a, description: decided}
        - {when: {r: z}, to: a, description: decided}
        - {when: {r: null}, to: a, description: decided}
        - {when: {n: [0, 1]}, to: a, description: decided}
        - {stay: true, description: "(internal only)"}
      a:
        - {guard: ready, to: idle, description: "\\u202esafe path"}
  hop:
    description: hop
    otherwise: stay
    from:
      idle: [{guard: ready, to: a, description: "%s"}]
"""


def _registry():
    from loopfsm.core.registry import Registry

    reg = Registry("cases")

    @reg.guard
    def g(m, ctx) -> bool:
        return True

    @reg.guard
    def ready(m, ctx) -> bool:
        return True

    return reg


def _cases(word: str = "go"):
    return loader.parse(CASES % word, "cases.yaml", _registry())


def test_a_guard_tried_first_for_some_arguments_only_is_said_with_them():
    """ "if g" under a way the arguments take whatever g is would be false: with ok true, way 2 is taken."""
    ways = [w for w in overview(_cases()).ways["idle"] if w.feed == "go"]
    assert [w.guard for w in ways] == ["if not g"] + ["unless ok=false and not g"] * 4
    # said by what each asks (the descriptions are alike): a value, null and numbers as the sheet says them
    assert [w.words for w in ways] == ["not ok and not g", "z", "r=null", "n in [0, 1]", "(internal only)"]


def test_otherwise_stay_is_a_way_of_its_own():
    (hop_ready, hop_else) = [w for w in overview(_cases()).ways["idle"] if w.feed == "hop"]
    assert (hop_ready.place, hop_ready.dest, hop_else.place, hop_else.dest, hop_else.guard) == (
        1,
        "a",
        2,
        None,
        "otherwise",
    )
    assert re.search(
        r'2</FONT></TD><TD PORT="\w+" ALIGN="LEFT" BALIGN="LEFT"><FONT COLOR="#1f5fa8"><I>stays</I>',
        dot.state_graph(_cases()).source,
    )


def test_a_first_word_longer_than_the_limit_is_cut_inside_it():
    word = "x" * 200
    (hop, _) = [w for w in overview(_cases(word)).ways["idle"] if w.feed == "hop"]
    assert hop.words.startswith("xxxxxxxxxx") and hop.words.endswith("…") and len(hop.words) <= 44
    assert short("(internal only)") == "(internal only)"  # only an aside: kept, not dropped


def test_a_right_to_left_override_cannot_move_words_round_in_a_picture():
    (w,) = overview(_cases()).ways["a"]
    assert w.words == "safe path" and "\u202e" not in dot.state_graph(_cases()).source


def test_a_description_ending_in_a_backslash_is_drawn():
    svg = dot.to_svg(dot.state_graph(_cases()))
    assert "ends in a backslash \\" in svg.replace("&#92;", "\\")


def test_state_names_beginning_with_an_underscore_are_refused():
    """They would be the picture's own nodes: a state "__start__" merged with the start dot and lost its card."""
    from loopfsm.core.errors import SpecError

    text = CASES.replace("  a: {description: a}", "  __any__: {description: a}")
    text = text.replace("to: a,", "to: __any__,").replace("      a:\n", "      __any__:\n")
    with pytest.raises(SpecError) as err:
        loader.parse(text % "go", "cases.yaml", _registry())
    assert (
        "cases.yaml:5:3: states.__any__: state '__any__' cannot be used: names beginning with '_' are reserved"
        in str(err.value)
    )


ANYWHERE_GUARDED = """\
machine: anywhere
description: d
states:
  idle: {initial: true, description: i}
  a: {description: a}
  b: {description: b}
events:
  step:
    description: on
    from:
      idle: [{to: a, description: on}]
      a: [{to: b, description: on}]
      b: [{to: idle, description: on}]
  jump:
    description: a new prompt, from any state
    from:
      idle: &jump
        - {guard: ready, to: a, description: a prompt}
        - {guard: g, to: b, description: b prompt}
        - {to: idle, description: plain prompt}
      a: *jump
      b: *jump
"""


def test_the_anywhere_note_lists_its_ways_with_the_guards_that_decide_them():
    """Listed without them, "2 b prompt -> b" read as taken whenever b's prompt came, whatever the guard said."""
    ov = overview(loader.parse(ANYWHERE_GUARDED, "anywhere.yaml", _registry()))
    assert ov.anywhere_lines() == [
        "jump, from idle, a or b:",
        "1 a prompt \u2192 a, if ready",
        "2 b prompt \u2192 b, if g",
        "3 plain prompt \u2192 idle, otherwise",
    ]


def test_a_clause_is_not_cut_inside_its_brackets():
    """ "outcome in [transient, rate_limited, ...]" was drawn "outcome in [transient": cut at its first comma."""
    text = "outcome in [transient, rate_limited] and not quota_left, then more words after it"
    assert short(text) == "outcome in [transient, rate_limited] and not quota_left"


ASKED = """\
machine: asked
description: d
states:
  idle: {initial: true, description: i}
  a: {description: a}
  b: {description: b, terminal: true}
events:
  go:
    description: go
    args:
      kind: {type: string, enum: [x, y]}
      sealed: {type: boolean}
      tier: {type: string, enum: [low, high]}
    otherwise: raise
    from:
      idle:
        - {when: {kind: x, sealed: true}, to: a, description: x sealed}
        - {when: {kind: x}, to: b, description: x open}
        - {when: {kind: y, tier: high}, to: a, description: y high}
        - {when: {kind: y}, to: b, description: y else}
      a:
        - {when: {kind: x}, to: b, description: only x}
        - {when: {kind: y}, to: idle, description: only y}
"""


def test_a_black_way_says_what_the_feed_must_say_where_a_sibling_asks_the_same_and_more():
    """router_run's Idle: "completed, encrypted" asks the feed's `encrypted` where later states ask the run's data
    (blue, `if run_encrypted`); the black line says whose it is.  Ways apart by their values get no line."""
    ways = overview(loader.parse(ASKED, "asked.yaml", None)).ways
    assert [w.asks for w in ways["idle"]] == [
        "if the feed says sealed",
        "if the feed says not sealed",
        "if the feed says tier=high",
        "unless the feed says tier=high",
    ]
    assert [w.asks for w in ways["a"]] == ["", ""]
    assert not any(w.by_guard for ws in ways.values() for w in ws)  # black: the feed's arguments alone
    card = dot.state_graph(loader.parse(ASKED, "asked.yaml", None)).source
    assert 'x sealed \u2192 <I>a</I><BR ALIGN="LEFT"/><FONT POINT-SIZE="10">if the feed says sealed</FONT>' in card


def test_no_feed_says_line_after_two_earlier_ways_the_arguments_may_reach():
    """ "unless the feed says sealed" under kind=x, tried after "x sealed" and "x high", named one of the two.
    (Written with "x high" after "x open", the case was a branch never taken, which `check` now refuses.)"""
    text = ASKED.replace(
        "        - {when: {kind: y, tier: high}, to: a, description: y high}\n",
        "",
    ).replace(
        "        - {when: {kind: x}, to: b, description: x open}\n",
        "        - {when: {kind: x, tier: high}, to: a, description: x high}\n"
        "        - {when: {kind: x}, to: b, description: x open}\n",
    )
    ways = overview(loader.parse(text, "asked.yaml", None)).ways["idle"]
    assert [w.words for w in ways] == ["x sealed", "x high", "x open", "y else"]
    assert [w.asks for w in ways] == ["if the feed says sealed", "if the feed says tier=high", "", ""]


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), 0, -5])
def test_a_time_limit_no_drawing_can_keep_is_a_render_error(seconds):
    """render(dot_timeout=nan) raised a bare ValueError, inf an OverflowError, 0 and -5 "stopped after -5 s"."""
    from loopfsm.rendering.errors import RenderError

    with pytest.raises(RenderError, match="time limit must be more than 0"):
        dot.svg_from_source("digraph { a }", seconds)


def test_a_flag_that_may_be_null_is_not_said_not():
    """`sealed: null` takes the way after "x sealed" too: "if the feed says not sealed" said it could not."""
    text = ASKED.replace("      sealed: {type: boolean}\n", "      sealed: {type: boolean, nullable: true}\n")
    ways = overview(loader.parse(text, "asked.yaml", None)).ways["idle"]
    assert [w.asks for w in ways[:2]] == ["if the feed says sealed", "unless the feed says sealed"]


def test_a_false_flag_that_may_be_null_is_said_by_its_value():
    """`sealed: false` before a catch-all: null takes the catch-all, so neither line may say "not sealed"."""
    text = ASKED.replace("      sealed: {type: boolean}\n", "      sealed: {type: boolean, nullable: true}\n").replace(
        "{kind: x, sealed: true}", "{kind: x, sealed: false}"
    )
    ways = overview(loader.parse(text, "asked.yaml", None)).ways["idle"]
    assert [w.asks for w in ways[:2]] == ["if the feed says sealed=false", "unless the feed says sealed=false"]


def test_a_way_after_a_refusal_its_arguments_decide_says_what_the_feed_must_not_say():
    """A refusal is not drawn: the way after `{sealed: true} refuse` read as taken on every feed."""
    text = ASKED.replace(
        "        - {when: {kind: x, sealed: true}, to: a, description: x sealed}\n",
        "        - {when: {kind: x, sealed: true}, refuse: sealed runs cannot}\n",
    )
    ways = overview(loader.parse(text, "asked.yaml", None)).ways["idle"]
    assert (ways[0].words, ways[0].asks) == ("x open", "if the feed says not sealed")
