"""What a laid-out picture looks like to a reader, measured on ``dot -Tjson``'s output: where each box stands,
the path of each arrow, and what makes an arrow hard to follow (crossing another, passing through a box,
turning back on itself).

:mod:`.arrow_ends` scores the layouts it tries with :func:`untidiness`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
import itertools
from itertools import combinations
from typing import Any

Point = tuple[float, float]


@dataclass(frozen=True)
class Box:
    """A laid-out node: its name and its edges, in points (``dot``'s y grows upwards)."""

    name: str
    left: float
    bottom: float
    right: float
    top: float

    def holds(self, p: Point, margin: float) -> bool:
        """Whether ``p`` lies inside the box, ``margin`` points in from its border."""
        return self.left + margin < p[0] < self.right - margin and self.bottom + margin < p[1] < self.top - margin


@dataclass(frozen=True)
class Path:
    """A laid-out arrow: its ``id`` attribute ("" when it has none), the boxes it joins, the side of its tail's box
    it leaves (``e``, ``w``, ... or "" when dot chose) and points along it, tail to head."""

    id: str
    tail: str
    head: str
    side: str
    points: list[Point]

    @property
    def length(self) -> float:
        return sum(math.dist(p, q) for p, q in itertools.pairwise(self.points))

    @property
    def turning(self) -> float:
        """How far the arrow turns along its way, in half turns: 0 straight, 0.5 a right angle, 1 a U-turn."""
        total = 0.0
        for p, q, r in zip(self.points, self.points[1:], self.points[2:], strict=False):
            before, after = math.atan2(q[1] - p[1], q[0] - p[0]), math.atan2(r[1] - q[1], r[0] - q[0])
            total += abs((after - before + math.pi) % (2 * math.pi) - math.pi)
        return total / math.pi

    def inner(self, tail: float, head: float) -> list[Point]:
        """The points more than ``tail`` points from where it leaves and ``head`` points from where it arrives."""
        return _from_start(_from_start(self.points, tail)[::-1], head)[::-1]

    def back(self, box: Box) -> float:
        """How far (points) the arrow runs back across its leaving side, level with ``box`` (its tail's) or just
        below it: out of a card's right end and back left under the card is a hook a reader must untangle."""
        sign = {"e": 1, "w": -1}.get(self.side[-1:], 0)
        total = 0.0
        for p, q in itertools.pairwise(self.points):
            if (q[0] - p[0]) * sign < 0 and box.bottom - BELOW_PT < min(p[1], q[1]) and max(p[1], q[1]) < box.top:
                total += abs(q[0] - p[0])
        return total


def _from_start(points: list[Point], cut: float) -> list[Point]:
    run = 0.0
    for i in range(1, len(points)):
        run += math.dist(points[i - 1], points[i])
        if run >= cut:
            return points[i:]
    return points[-1:]


def boxes(layout: dict[str, Any]) -> list[Box]:
    """The laid-out nodes of ``layout`` (``dot -Tjson``'s output)."""
    out = []
    for o in layout.get("objects", []):
        if "pos" in o and "width" in o:
            x, y = map(float, o["pos"].split(","))
            half_w, half_h = float(o["width"]) * 36, float(o["height"]) * 36
            out.append(Box(o["name"], x - half_w, y - half_h, x + half_w, y + half_h))
    return out


def paths(layout: dict[str, Any]) -> list[Path]:
    """The laid-out arrows of ``layout``, each as points along its spline (eight a cubic piece) and its head."""
    names = {o["_gvid"]: o.get("name", "") for o in layout.get("objects", [])}
    out = []
    for e in layout.get("edges", []):
        if "pos" in e:
            side = e.get("tailport", "").rpartition(":")[2] if ":" in e.get("tailport", "") else ""
            ends = names.get(e["tail"], ""), names.get(e["head"], "")
            out.append(Path(e.get("id", ""), *ends, side, _spline(e["pos"])))
    return out


def _spline(pos: str) -> list[Point]:
    """``pos`` as ``dot`` writes it (``e,x,y`` for the arrowhead's tip, then the B-spline's points)."""
    tip: Point | None = None
    controls: list[Point] = []
    for word in pos.split():
        if word.startswith("e,"):
            x, y = word[2:].split(",")
            tip = (float(x), float(y))
        elif not word.startswith("s,"):
            x, y = word.split(",")
            controls.append((float(x), float(y)))
    points = controls[:1]
    for i in range(0, len(controls) - 3, 3):
        p0, p1, p2, p3 = controls[i : i + 4]
        points += _cubic(p0, p1, p2, p3)
    return points + ([tip] if tip else [])


def _cubic(p0: Point, p1: Point, p2: Point, p3: Point, steps: int = 8) -> Iterator[Point]:
    for k in range(1, steps + 1):
        t = k / steps
        a, b, c, d = (1 - t) ** 3, 3 * t * (1 - t) ** 2, 3 * t * t * (1 - t), t**3
        yield (a * p0[0] + b * p1[0] + c * p2[0] + d * p3[0], a * p0[1] + b * p1[1] + c * p2[1] + d * p3[1])


def crossings(a: Sequence[Point], b: Sequence[Point]) -> int:
    """How many times the polylines ``a`` and ``b`` cross."""

    def side(p: Point, q: Point, r: Point) -> float:
        return (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])

    if not a or not b or not _overlap(_bounds(a), _bounds(b)):
        return 0  # apart: most pairs of a picture's arrows, and the pairs of a large picture grow as its square
    found = 0
    for p1, p2 in itertools.pairwise(a):
        box = _bounds((p1, p2))
        for q1, q2 in itertools.pairwise(b):
            if not _overlap(box, _bounds((q1, q2))):
                continue
            if side(p1, p2, q1) * side(p1, p2, q2) < 0 and side(q1, q2, p1) * side(q1, q2, p2) < 0:
                found += 1
    return found


def _bounds(points: Sequence[Point]) -> tuple[float, float, float, float]:
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    return min(xs), min(ys), max(xs), max(ys)


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] <= b[2] and b[0] <= a[2] and a[1] <= b[3] and b[1] <= a[3]


def _near(p: Point, line: Sequence[Point], within: float) -> bool:
    """Whether ``p`` is within ``within`` points of the polyline ``line``."""
    for a, b in itertools.pairwise(line):
        dx, dy = b[0] - a[0], b[1] - a[1]
        span = dx * dx + dy * dy
        t = 0.0 if span == 0 else max(0.0, min(1.0, ((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / span))
        if math.dist(p, (a[0] + t * dx, a[1] + t * dy)) < within:
            return True
    return False


@dataclass(frozen=True)
class Untidiness:
    """What makes a layout's arrows hard to follow; :attr:`score` weighs it into one number, lower is tidier."""

    crossings: int  # of one arrow with another, where they arrive left out
    back: float  # points arrows run back across the side they leave, beside or just below their box
    crowded: float  # of arrowheads: for each two closer than CROWDED_PT, how much closer (a share of it)
    through: float  # points of arrows drawn inside a box, their ends left out
    hooks: float  # half turns past nine tenths of one that arrows make: an arrow that comes back on itself
    turning: float  # half turns of every arrow, in all
    length: float  # points of every arrow, in all
    # each arrow's share of the score by its ``id``, turning and length aside: what it crosses, its share of
    # crowded heads, its points through boxes and back across its side, its hook
    blame: dict[str, float] = field(default_factory=dict, compare=False)

    @property
    def score(self) -> float:
        """A crossing weighs as much as two arrowheads on one spot, 50 points of an arrow inside a box, or a
        quarter of a U-turn."""
        return (
            10 * self.crossings
            + 0.5 * self.back
            + 10 * self.crowded
            + 0.2 * self.through
            + 40 * self.hooks
            + 2 * self.turning
            + 0.01 * self.length
        )


#: Two arrowheads closer than this read as one, or as a bunch a reader must pick apart (points).
CROWDED_PT = 30.0

#: Where an arrow arrives it meets others into the same box: not counted against it (points).
HEAD_PT = 6.0
#: Where it leaves, its box's border (points).
TAIL_PT = 0.5
#: An arrow whose tail is this close to another arrow starts on it (points).
TOUCH_PT = 5.0
#: How far below its box an arrow running back across its side still reads as hooked round it (points).
BELOW_PT = 20.0


def untidiness(layout: dict[str, Any]) -> Untidiness:
    """How hard ``layout``'s arrows are to follow; :attr:`Untidiness.blame` says which arrows make it so."""
    drawn = paths(layout)
    blame = [0.0] * len(drawn)
    inner = [p.inner(TAIL_PT, HEAD_PT) for p in drawn]
    crossed = 0
    for a, b in combinations(range(len(drawn)), 2):
        # An arrow leaving from on another one reads as crossing it, though the two lines may only touch.
        n = crossings(inner[a], inner[b])
        n += sum(1 for x, y in ((a, b), (b, a)) if drawn[x].points and _near(drawn[x].points[0], inner[y], TOUCH_PT))
        crossed += n
        blame[a] += 10 * n
        blame[b] += 10 * n
    laid = boxes(layout)
    named = {b.name: b for b in laid}
    back = through = crowded = hooks = 0.0
    for i, path in enumerate(drawn):
        went_back = path.back(named[path.tail]) if path.tail in named else 0.0
        inside = 0.0
        for p, q in itertools.pairwise(path.inner(HEAD_PT + 2, HEAD_PT + 2)):
            middle = ((p[0] + q[0]) / 2, (p[1] + q[1]) / 2)
            if any(b.holds(middle, -2) for b in laid):  # along a border too: it reads as part of the box
                inside += math.dist(p, q)
        hooked = max(0.0, path.turning - 0.9)
        back, through, hooks = back + went_back, through + inside, hooks + hooked
        blame[i] += 0.5 * went_back + 0.2 * inside + 40 * hooked
    for a, b in combinations(range(len(drawn)), 2):
        if drawn[a].points and drawn[b].points:
            near = max(0.0, 1 - math.dist(drawn[a].points[-1], drawn[b].points[-1]) / CROWDED_PT)
            crowded += near
            blame[a] += 10 * near
            blame[b] += 10 * near
    return Untidiness(
        crossed,
        back,
        crowded,
        through,
        hooks,
        sum(p.turning for p in drawn),
        sum(p.length for p in drawn),
        {p.id: blame[i] for i, p in enumerate(drawn) if p.id},
    )
