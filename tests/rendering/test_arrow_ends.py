"""The ends of card arrows chosen from dot's layouts (rendering/arrow_ends.py), and the measures of a layout it
goes by (rendering/geometry.py)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from loopfsm.core import loader
from loopfsm.rendering import dot
from loopfsm.rendering.arrow_ends import LAYOUTS, Ends, choose, with_ends
from loopfsm.rendering.geometry import untidiness

ROOT = Path(__file__).resolve().parents[2]


def tidiest(source: str, lay, layouts: int = LAYOUTS) -> str:
    """``source`` drawn with the ends the search chooses."""
    return with_ends(source, choose(source, lay, layouts))


def _box(gvid: int, name: str, x: float, y: float, w_in: float = 1.0, h_in: float = 1.0) -> dict:
    return {"_gvid": gvid, "name": name, "pos": f"{x},{y}", "width": str(w_in), "height": str(h_in)}


def _line(*points: tuple[float, float]) -> str:
    """A B-spline through ``points`` (straight pieces), as dot writes ``pos``."""
    out = [points[0]]
    for p, q in zip(points, points[1:], strict=False):
        out += [
            (p[0] + (q[0] - p[0]) / 3, p[1] + (q[1] - p[1]) / 3),
            (p[0] + 2 * (q[0] - p[0]) / 3, p[1] + 2 * (q[1] - p[1]) / 3),
            q,
        ]
    return " ".join(f"{x},{y}" for x, y in out)


def _edge(tail: int, head: int, pos: str, tailport: str = "") -> dict:
    return {"tail": tail, "head": head, "pos": pos, "id": f"e{tail}{head}{pos[:5]}", "tailport": tailport}


def _layout(edges: list[dict]) -> dict:
    boxes = [_box(0, "a", 0, 400), _box(1, "b", 400, 400), _box(2, "c", 200, 200), _box(3, "d", 200, 0)]
    return {"objects": boxes, "edges": edges}


def test_two_arrows_that_cross_count_once_and_apart_they_do_not():
    crossed = _layout([_edge(0, 3, _line((36, 400), (236, 0))), _edge(1, 3, _line((364, 400), (164, 0)))])
    apart = _layout([_edge(0, 3, _line((36, 400), (150, 0))), _edge(1, 3, _line((364, 400), (250, 0)))])
    assert untidiness(crossed).crossings == 1
    assert untidiness(apart).crossings == 0
    assert untidiness(crossed).score > untidiness(apart).score


def test_an_arrow_through_a_box_and_one_that_turns_back_on_itself_are_counted():
    straight = _layout([_edge(0, 3, _line((0, 364), (0, 100), (164, 0)))])
    through = _layout([_edge(0, 3, _line((36, 400), (200, 200), (200, 36)))])  # across c, 72 pt wide
    assert untidiness(straight).through == 0
    assert untidiness(through).through > 60
    hook = _layout([_edge(0, 3, _line((36, 400), (120, 400), (120, 350), (0, 350), (150, 36)), "w0e:e")])
    assert untidiness(hook).hooks > 0 and untidiness(straight).hooks == 0
    assert untidiness(hook).back >= 120  # back across its own side, level with its box


def test_arrowheads_on_one_spot_are_crowded():
    crowded = _layout([_edge(0, 3, _line((0, 364), (200, 36))), _edge(1, 3, _line((400, 364), (204, 36)))])
    apart = _layout([_edge(0, 3, _line((0, 364), (170, 36))), _edge(1, 3, _line((400, 364), (230, 36)))])
    assert untidiness(crowded).crowded > 0.8 and untidiness(apart).crowded == 0


SOURCE = (
    "digraph x {\n"
    '\tA:w0e:e -> B [id="way:A:w0"]\n'
    '\tA:w1w:w -> C [color="#1f5fa8" id="way:A:w1" style=dashed]\n'
    '\t"Ä b":w2e:e -> C [id="way:Ä b:w2"]\n'
    "\tA -> C\n"
    "\tA:w3e:e -> B\n"
    "}\n"
)


def test_with_ends_rewrites_only_the_card_arrows_it_is_given():
    """A line's arrow is known by its ``id="way:..."``: an arrow from a box, or with no id, is left alone."""
    out = with_ends(SOURCE, {0: Ends("w", "nw"), 2: Ends("e", "n")})
    assert '\tA:w0w:w -> B:nw [id="way:A:w0"]\n' in out
    assert '\tA:w1w:w -> C [color="#1f5fa8" id="way:A:w1" style=dashed]\n' in out  # not given: as it was
    assert '\t"Ä b":w2e:e -> C:n [id="way:Ä b:w2"]\n' in out
    assert "\tA -> C\n\tA:w3e:e -> B\n" in out
    assert with_ends(out, {0: Ends("e")}).startswith("digraph x {\n\tA:w0e:e -> B [id")  # a head's side taken off
    assert '\tA:w0e:e -> B [weight=4 id="way:A:w0"]\n' in with_ends(SOURCE, {0: Ends("e", "", heavy=True)})


def _named(edge: dict, name: str) -> dict:
    return {**edge, "id": name}


def test_the_search_keeps_the_tidiest_ends_in_the_layouts_it_may_make_and_stops_when_told():
    """Only the arrows a layout blames are tried: here A's first two cross, and A's third is left alone."""
    tidy = _layout(
        [
            _named(_edge(0, 3, _line((36, 400), (150, 0))), "way:A:w0"),
            _named(_edge(1, 3, _line((364, 400), (250, 0))), "way:A:w1"),
        ]
    )
    tangled = _layout(
        [
            _named(_edge(0, 3, _line((36, 400), (236, 0))), "way:A:w0"),
            _named(_edge(1, 3, _line((364, 400), (164, 0))), "way:A:w1"),
        ]
    )
    asked: list[str] = []

    def lay(text: str) -> dict:
        asked.append(text)
        return tidy if "A:w1e:e -> C:n " in text else tangled

    chosen = tidiest(SOURCE, lay)
    assert "A:w1e:e -> C:n " in chosen and chosen.count("\n") == SOURCE.count("\n")
    assert 1 < len(asked) <= 1 + 2 * 5  # the first, then each other end of the two arrows blamed, once
    assert not any('"Ä b":w2w' in t or '"Ä b":w2e:e -> C:n' in t for t in asked)  # the third never tried
    assert tidiest(SOURCE, lay) == chosen  # the same text, the same ends
    limited: list[str] = []
    tidiest(SOURCE, lambda t: limited.append(t) or tangled, layouts=4)
    assert len(limited) == 4
    assert tidiest(SOURCE, lambda t: None) == SOURCE  # no time for even one layout: as written
    assert (
        tidiest("digraph x {\n\tA -> B\n}\n", lambda t: pytest.fail("nothing to choose"))
        == "digraph x {\n\tA -> B\n}\n"
    )


def _laid(source: str) -> dict:
    return json.loads(subprocess.run(["dot", "-Tjson"], input=source.encode(), capture_output=True, check=True).stdout)


def _ends_off(text: str) -> str:
    return re.sub(r":(w\d+)[ew]:[ew] -> (\S+?)(?::n[ew]?)? \[(?:weight=\d+ )?", r":\1 -> \2 [", text)


def test_router_runs_drawn_arrows_are_tidier_than_as_written_and_none_hooks_round_a_card():
    """As written (every arrow from its line's right end), router_run's arrows into states to the left hooked
    round the cards they leave; readers graded that picture B- and B, the one with ends chosen B+ and B+."""
    source = dot.state_graph(loader.load(ROOT / "machines" / "router_run.yaml")).source
    drawn = dot._tidied(source, shutil.which("dot") or "dot", time.monotonic() + 30)
    written, chosen = untidiness(_laid(source)), untidiness(_laid(drawn))
    assert chosen.score < written.score * 0.6, (written, chosen)
    assert chosen.crossings <= 1 and chosen.hooks < 0.5 and chosen.back < written.back / 2, chosen
    # Idle's fourth way (to AwaitingEncrypt, the foot) hooked back across Idle's corner until it was made heavy
    assert chosen.blame["way:Idle:w3"] < 10 and "weight=" in drawn, chosen.blame
    assert _ends_off(drawn) == _ends_off(source)  # only the ends differ
    svg = dot.svg_from_source(source)
    assert svg.count('id="way:') == source.count('id="way:')
    assert dot.svg_stamp(svg) == dot.source_digest(source)  # stamped with the text as written


def test_no_time_left_draws_the_picture_as_written():
    source = dot.state_graph(loader.load(ROOT / "machines" / "router_run.yaml")).source
    assert dot._tidied(source + "\n", shutil.which("dot") or "dot", time.monotonic() - 1) == source + "\n"


def test_the_chosen_ends_are_kept_in_the_cache_and_a_tampered_entry_is_not_believed(monkeypatch, tmp_path):
    """Up to 120 layouts a picture: build, the review site and a live instance's picture draw the same text
    again, in other processes too.  Only the ends are kept, each one the search could choose."""
    from loopfsm.core import speccache
    from loopfsm.rendering import ends_cache

    monkeypatch.setenv(speccache.ENV_VAR, str(tmp_path))
    program = shutil.which("dot") or "dot"
    source = dot.state_graph(loader.load(ROOT / "machines" / "router_run.yaml")).source + "\n\n"
    dot._CHOSEN.clear()
    drawn = dot._tidied(source, program, time.monotonic() + 30)
    name = ends_cache.key(source, program)
    assert (tmp_path / f"{name}.json").is_file()
    dot._CHOSEN.clear()
    monkeypatch.setattr(dot, "choose", lambda *a, **k: pytest.fail("searched again"))
    assert dot._tidied(source, program, time.monotonic() + 30) == drawn  # from the file, no layout made
    entry = json.loads((tmp_path / f"{name}.json").read_text())
    for bad in (["x", "", False], ["e", "nw", False], ["e", "", "yes"], ["e"]):
        tampered = {**entry, "ends": [bad, *entry["ends"][1:]]}
        (tmp_path / f"{name}.json").write_text(json.dumps(tampered))
        assert ends_cache.lookup(name, source) is None, bad
    (tmp_path / f"{name}.json").write_text(json.dumps({**entry, "ends": entry["ends"][:-1]}))
    assert ends_cache.lookup(name, source) is None  # one arrow short
    monkeypatch.setattr(ends_cache, "graphviz_version", lambda program: "dot - graphviz version 99")
    assert ends_cache.key(source, program) != name  # another Graphviz lays the text out otherwise


def test_a_marked_picture_keeps_the_plain_pictures_arrows(monkeypatch):
    """A live instance's picture (its state lit) is drawn with the ends chosen for the plain picture: the
    arrows a reviewer knows stay where they were, and no search is made for each marked copy."""
    from loopfsm.machines import RouterRun
    from loopfsm.rendering import render_instance

    spec = loader.load(ROOT / "machines" / "router_run.yaml")
    plain = dot.to_svg(dot.state_graph(spec))
    searched: list[str] = []
    real = dot.choose
    monkeypatch.setattr(dot, "choose", lambda source, lay: searched.append(source) or real(source, lay))
    lit = render_instance(RouterRun())
    assert searched == []  # the plain picture's ends, remembered

    def arrows_drawn(svg: str) -> dict[str, str]:
        return dict(re.findall(r'<g id="(way:[^"]+)" class="edge">.*?<path [^>]*d="([^"]+)"', svg, re.S))

    assert arrows_drawn(lit) == arrows_drawn(plain) and len(arrows_drawn(plain)) >= 10


def test_a_picture_of_more_arrows_than_the_search_takes_is_drawn_as_written():
    from loopfsm.rendering import arrow_ends

    many = "digraph x {\n" + "".join(f'\tA:w{i}e:e -> B [id="way:A:w{i}"]\n' for i in range(arrow_ends.MOST_ARROWS + 1))
    assert tidiest(many + "}\n", lambda t: pytest.fail("laid out")) == many + "}\n"
    few = "digraph x {\n" + "".join(f'\tA:w{i}e:e -> B [id="way:A:w{i}"]\n' for i in range(arrow_ends.MOST_ARROWS))
    laid: list[str] = []
    tidiest(few + "}\n", lambda t: laid.append(t) or None)
    assert laid == [few + "}\n"]  # at the bound, still tried


def test_an_svgs_stamp_changes_with_the_code_that_chooses_its_arrows(monkeypatch):
    """The stamp was the DOT text's alone: after the search changed, `build` kept router_run's SVG as the
    earlier search had drawn it, and `build --check` called it up to date."""
    source = dot.state_graph(loader.load(ROOT / "machines" / "router_run.yaml")).source
    before = dot.source_digest(source)
    monkeypatch.setattr(dot.ends_cache, "code", lambda: "another search")
    assert dot.source_digest(source) != before


def test_only_a_top_to_bottom_picture_of_few_arrows_is_searched_and_a_search_cut_short_draws_as_written(monkeypatch):
    """Left to right, the ends chosen sent arrows round the whole picture; 600 arrows took 4 s a layout to
    score, past the time limit, and `dot` was blamed; under load a search cut short drew another picture under
    the same stamp (a hostile user's findings)."""
    program = shutil.which("dot") or "dot"
    lr = dot.state_graph(loader.load(ROOT / "machines" / "tool_breaker.yaml")).source
    assert "rankdir=LR" in lr and dot._tidied(lr, program, time.monotonic() + 30) == lr
    tb = dot.state_graph(loader.load(ROOT / "machines" / "router_run.yaml")).source + "\n\n\n"
    crowded = tb.replace("}\n", "".join(f"\tx{i} -> y{i}\n" for i in range(dot.MOST_EDGES)) + "}\n")
    assert dot._tidied(crowded, program, time.monotonic() + 30) == crowded
    dot._CHOSEN.clear()
    monkeypatch.setattr(dot, "_run_dot", lambda *a, **k: (_ for _ in ()).throw(dot.DrawingTooSlow(1.0)))
    assert dot._tidied(tb, program, time.monotonic() + 30) == tb  # no layout in time: as written, not cached
    assert tb not in dot._CHOSEN


BLUE_HOME = """\
machine: blue2
description: guarded ways only go home
states:
  Idle: {initial: true, description: start}
  A: {description: a}
  B: {description: b}
  C: {description: c}
  D: {description: d}
events:
  go:
    description: go
    args:
      k: {type: string, enum: [fwd, other], description: which}
    otherwise: stay
    from:
      Idle:
        - {to: A, description: start it}
      A:
        - {when: {k: fwd}, to: B, description: a to b}
        - {guard: timed_out, to: Idle, description: a times out}
      B:
        - {when: {k: fwd}, to: C, description: b to c}
        - {guard: timed_out, to: Idle, description: b times out}
      C:
        - {when: {k: fwd}, to: D, description: c to d}
        - {guard: timed_out, to: Idle, description: c times out}
      D:
        - {when: {k: fwd}, to: Idle, description: d done}
        - {guard: timed_out, to: Idle, description: d times out}
"""


def test_the_legend_shows_the_dashed_arrow_only_when_one_is_drawn():
    """Blue ways whose arrows all go back to an initial state not drawn left "- - ▶ the arrow of a blue way" in
    a legend with no dashed arrow (a hostile user's table)."""
    from loopfsm import Registry, parse

    reg = Registry("blue2")
    reg.guard(lambda m, ctx: False, name="timed_out")
    s = parse(BLUE_HOME, "blue2.yaml", reg)
    source = dot.state_graph(s).source
    legend = dot.legend(s)
    assert legend.home == "Idle" and legend.guard_decides
    assert "style=dashed" not in source and not legend.dashed


def test_a_very_long_description_is_cut_in_the_hover_text_and_the_picture_is_drawn():
    """A 20,000-character state description passed check, and dot refused the picture ("syntax error in line
    6": it takes no string of 16 KiB or more); the hover text keeps the first TIP_CHARS characters."""
    from loopfsm import parse

    text = (ROOT / "machines" / "turnstile.yaml").read_text()
    long = "word " * 4000
    spec = parse(
        text.replace("description: The arm is locked; pushing does nothing.", f"description: {long}"), "t.yaml"
    )
    source = dot.state_graph(spec).source
    assert long.strip()[: dot.TIP_CHARS - 10] in source and long.strip() not in source
    svg = dot.svg_from_source(source)
    assert "<svg" in svg and "\u2026" in svg


def test_the_docs_give_the_search_bounds_the_code_has():
    from loopfsm.rendering import arrow_ends

    text = " ".join((ROOT / "docs" / "cli.md").read_text().split())
    assert f"up to {arrow_ends.LAYOUTS} times" in text
    assert f"more than {arrow_ends.MOST_ARROWS} card arrows, or {dot.MOST_EDGES} arrows in all" in text
    assert f"first {dot.TIP_CHARS:,} characters" in " ".join((ROOT / "CHANGELOG.md").read_text().split())
