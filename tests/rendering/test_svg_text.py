"""A card line's words are one ``<text>`` in the SVG, its styled runs ``<tspan>``s a browser places itself.

Graphviz placed each run at an ``x`` measured in DejaVu Sans (what fontconfig gives for "Helvetica" here),
and a browser, drawing Helvetica or Liberation Sans, left a gap before every italic target.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loopfsm.core import loader
from loopfsm.rendering import dot
from loopfsm.rendering.svgtext import flowed

ROOT = Path(__file__).resolve().parents[2]
TEXT = re.compile(r"^<text [^>]*>.*</text>$", re.M)


@pytest.fixture(scope="module")
def router_run_svg() -> str:
    return dot.to_svg(dot.state_graph(loader.load(ROOT / "machines" / "router_run.yaml")))


def _texts(svg: str) -> list[str]:
    return TEXT.findall(svg)


def test_each_card_line_with_a_target_is_one_text_with_its_target_a_tspan(router_run_svg):
    (line,) = [t for t in _texts(router_run_svg) if "encrypted, sealed history needed" in t]
    assert 'xml:space="preserve"' in line
    assert re.search(
        r">encrypted, sealed history needed → <tspan [^>]*font-style=\"italic\"[^>]*>AwaitingDecrypt</tspan>", line
    )
    # a blue way keeps its colour on the target; a black target after a blue run would have read as black
    (blue,) = [t for t in _texts(router_run_svg) if "results, completed, encrypted" in t]
    assert blue.count('fill="#1f5fa8"') == 2
    # the bold feed name of a card whose one way is on its line: the words after it are not bold
    (sealed,) = [t for t in _texts(router_run_svg) if ">sealed<" in t]
    assert re.search(r'font-weight="bold"[^>]*>sealed<tspan [^>]*font-weight="normal"[^>]*>: content rows', sealed)


def test_a_lines_number_and_the_legends_cells_keep_their_own_place(router_run_svg):
    texts = _texts(router_run_svg)
    assert any(re.search(r">1</text>$", t) for t in texts)  # the number of a way, its own cell
    assert any(t.endswith(">1, 2, 3</text>") for t in texts)  # the legend's mark, not run into its words
    assert any(">the order a state tries a feed" in t and "<tspan" not in t for t in texts)


def test_runs_are_joined_only_where_the_line_goes_on():
    svg = "\n".join(
        [
            '<text text-anchor="start" x="8" y="-10" font-family="F" font-size="11.00">1</text>',
            '<text text-anchor="start" x="17" y="-10" font-family="F" font-size="11.00">gate → </text>',
            '<text text-anchor="start" x="60" y="-10" font-family="F" font-style="italic" font-size="11.00">X</text>',
            '<text text-anchor="start" x="8" y="-20" font-family="F" font-size="11.00">next → </text>',
        ]
    )
    lines = flowed(svg).split("\n")
    assert lines[0].endswith(">1</text>")  # no space after the number: its own cell
    assert lines[1].startswith('<text text-anchor="start" x="17" y="-10" xml:space="preserve"')
    assert lines[1].endswith(
        '>gate → <tspan font-family="F" font-size="11.00" font-style="italic" '
        'font-weight="normal" fill="black">X</tspan></text>'
    )
    assert lines[2].startswith('<text text-anchor="start" x="8" y="-20"')  # another height: another line
    assert len(lines) == 3
