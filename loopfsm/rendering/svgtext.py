"""A card line's words as one run of SVG text, so a browser lays them out in the font it has.

Graphviz writes each run of a label (a change of style: ``words → `` then the italic target) as a
``<text>`` of its own at an ``x`` it measured in the font fontconfig gave it for "Helvetica": DejaVu Sans
where no Helvetica is installed (Debian's default).  A browser draws the SVG's ``Helvetica,sans-Serif`` in
Helvetica or Liberation Sans, about a seventh narrower, so each run after the first stood apart: router_run's
"encrypted, sealed history needed →" then a gap of a third of an inch before "AwaitingDecrypt", on every
card line with a target, seen in Chromium (the PNG Graphviz draws itself has no gap).  Joined as ``<tspan>``
runs of one ``<text>``, the browser places each run after the one before.

Only runs that continue a line are joined: the next ``<text>`` at the same height whose run before it ends
with a space (``→ ``, ``plaintext ``), or which goes on from a bold feed name (``: content rows written``),
as a card line's runs do.  A line's number, and the legend's mark and words, are cells of their own: the mark
ends with no space, the words start with none of that, and each keeps its ``x``.
"""

from __future__ import annotations

import re

# One run as Graphviz writes it, on a line of its own: <text text-anchor="start" x=".." y=".." attrs>words</text>
_RUN = re.compile(r'^<text text-anchor="start" x="([^"]+)" y="([^"]+)"([^>]*)>(.*)</text>$')
# What a run says of its look: a joined run says each (normal where it says none), not to inherit the one before
_LOOK = (
    ("font-family", None),
    ("font-size", None),
    ("font-style", "normal"),
    ("font-weight", "normal"),
    ("fill", "black"),
)


def _look(attrs: str) -> dict[str, str]:
    return dict(re.findall(r'([\w-]+)="([^"]*)"', attrs))


def flowed(svg: str) -> str:
    """``svg`` with each card line's runs joined into one ``<text>`` (see the module's docstring)."""
    out: list[str] = []
    line: list[tuple[str, str, str]] = []  # the runs of the line being joined: (y, attrs, words)
    x = ""

    def close() -> None:
        if not line:
            return
        y, attrs, words = line[0]
        if len(line) == 1:
            out.append(f'<text text-anchor="start" x="{x}" y="{y}"{attrs}>{words}</text>')
        else:
            spans = "".join(
                "<tspan"
                + "".join(f' {k}="{v}"' for k, plain in _LOOK if (v := _look(a).get(k, plain or "")))
                + f">{w}</tspan>"
                for _, a, w in line[1:]
            )
            out.append(f'<text text-anchor="start" x="{x}" y="{y}" xml:space="preserve"{attrs}>{words}{spans}</text>')
        line.clear()

    for raw in svg.split("\n"):
        run = _RUN.match(raw)
        if run is None:
            close()
            out.append(raw)
            continue
        rx, y, attrs, words = run.groups()
        if line and y == line[-1][0] and (line[-1][2].endswith(" ") or words.startswith(": ")):
            line.append((y, attrs, words))
            continue
        close()
        x = rx
        line.append((y, attrs, words))
    close()
    return "\n".join(out)
