"""The reviewer's picture of a machine: one edge per (from, to) pair, in words.

A table with guarded branches easily has five rows for one arrow; drawn one
line per row, with every guard parameter and action, the picture stops being
readable long before the machine stops being simple.  This module folds the
table into what a design review needs:

- one edge per (source, target) pair, labelled per feed with the branches'
  short descriptions (a guard's name when a branch has no description);
- feeds declared from ``"*"`` (resets, cancels, admin moves) leave the state
  edges alone: the ones that move are drawn once, from an "any live state"
  note, and the ones that stay are listed in that note;
- a feed written per state but with the same branches from several live
  states (router_run's ``inject`` from each pause) is folded the same way:
  drawn once from a note naming those states, or from the "any live state"
  note when it is all of them, and left off those states' own edges;
- no actions, no policy numbers: the review sheet and the detailed view keep
  those.

DOT and Mermaid both draw from the :class:`Overview` built here, so they
agree edge for edge.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field, replace

from loopfsm.core.spec import WILDCARD, Branch, Condition, Ref, Spec

ANY = "__any__"
SHORT = 44
SLACK = 12


@dataclass
class Edge:
    """One arrow: ``feeds`` maps each feed to the short words of its branches on this arrow."""

    src: str
    dst: str
    feeds: dict[str, list[str]] = field(default_factory=dict)
    guarded: bool = True  # every branch on it needs a guard: a conditional move

    @property
    def loop(self) -> bool:
        return self.src == self.dst

    def groups(self) -> list[tuple[list[str], str]]:
        """(feeds, words) in first-seen order; feeds that say the same thing share one line.

        Four feeds that each expire at the deadline read as one line
        ("tool_proposed, dispatch, ...: past the deadline"), not four.
        """
        out: dict[str, list[str]] = {}
        for feed, words in self.feeds.items():
            kept = list(dict.fromkeys(w for w in (_without(feed, w) for w in words) if w))
            out.setdefault("; ".join(kept), []).append(feed)
        return [(feeds, words) for words, feeds in out.items()]

    def lines(self) -> list[str]:
        return [f"{', '.join(feeds)}: {words}" if words else ", ".join(feeds) for feeds, words in self.groups()]


def _without(feed: str, words: str) -> str:
    """Words that open by repeating the feed's name ("execute, encrypted") lose the repeat."""
    for sep in (", ", " "):
        if words.startswith(feed + sep):
            return words[len(feed) + len(sep) :]
    return "" if words == feed else words


@dataclass
class Shared:
    """A note standing for several live states, and the feeds each of them takes the same way.

    ``node`` is the note's node name in DOT and Mermaid; ``moves`` start at it.
    """

    node: str
    states: list[str]
    moves: list[Edge] = field(default_factory=list)
    stays: list[str] = field(default_factory=list)  # feeds that never move from those states

    @property
    def label(self) -> str:
        return "from " + ", ".join(self.states)


@dataclass
class Overview:
    edges: list[Edge]
    any_moves: list[Edge]  # from the "any live state" note: feeds declared from '*' or alike from every state
    any_stays: list[str]  # those of them that never move
    any_label: str  # "any live state", or "other live states" when some state overrides '*'
    shared: list[Shared] = field(default_factory=list)  # feeds alike from some live states, not all


def _literal(v: object) -> str | None:
    if isinstance(v, (list, tuple)) and all(isinstance(x, (str, int)) for x in v):
        text = "/".join(str(x) for x in v)
    elif isinstance(v, (str, int)) and not isinstance(v, bool):
        text = str(v)
    else:
        return None
    return text if len(text) <= 24 else None


def guard_words(g: Ref) -> str:
    """A guard as a reviewer reads it: its name and its short literal parameters, no policy numbers."""
    if g.options:
        return "(" + " or ".join(" and ".join(guard_words(x) for x in opt) for opt in g.options) + ")"
    vals = [t for t in (_literal(v) for v in g.params.values()) if t is not None]
    text = g.name + (f" {', '.join(vals)}" if vals else "")
    return f"not {text}" if g.negate else text


def short(text: str, limit: int = SHORT) -> str:
    """The gist of a description: asides dropped, its first clause, cut at a word boundary."""
    text = " ".join(re.sub(r"\s*\([^()]*\)", "", text).split())
    for stop in (". ", "; ", ": "):
        text = text.split(stop, 1)[0]
    text = text.rstrip(".")
    if len(text) > limit:
        head = text.split(", ", 1)[0]
        text = head if len(head) >= 12 else text
    if len(text) <= limit + SLACK:  # a cut that saves a word or two loses the clause's point
        return text
    return textwrap.shorten(text, limit, placeholder="…")


def branch_words(b: Branch) -> str:
    if b.description:
        return short(b.description)
    if b.guarded:
        return short(" and ".join([*b.conditions(), *(guard_words(g) for g in b.guards)]))
    return ""


def _alike(branches: tuple[Branch, ...]) -> str:
    """What makes two states take a feed the same way: the branches without their place in the file.

    The drawn words are part of it, so folding never changes what an arrow says.
    """
    return repr([_placeless(b) for b in branches])


def _placeless(x: object) -> object:
    """``x`` with every ``path`` (where in the file it was written) blanked, nested refs included."""
    if isinstance(x, Branch):
        return (
            x.dest,
            x.refusal,
            branch_words(x),
            [_placeless(c) for c in x.when],
            [_placeless(g) for g in x.guards],
            [_placeless(a) for a in x.actions],
        )
    if isinstance(x, Ref):
        return (x.name, x.params, x.negate, [[_placeless(g) for g in opt] for opt in x.options])
    if isinstance(x, Condition):
        return replace(x, path=())
    return x


def _fold(sources: dict[str, tuple[Branch, ...]], live: list[str]) -> list[list[str]]:
    """The groups of two or more live states whose branches for one feed are alike and move, in table order."""
    groups: dict[str, list[str]] = {}
    for state in live:
        if state in sources:
            groups.setdefault(_alike(sources[state]), []).append(state)
    # A feed that only stays keeps its self-loops: a feed name over each state is
    # shorter than a note and the arrow to it.
    moves = {key for key, states in groups.items() if any(b.dest is not None for b in sources[states[0]])}
    return [states for key, states in groups.items() if len(states) > 1 and key in moves]


def _note(moves: dict[str, Edge], stays: list[str], feed: str, src: str, branches: tuple[Branch, ...]) -> None:
    moving = [b for b in branches if b.dest is not None and b.refusal is None]
    for b in moving:
        e = moves.setdefault(b.dest, Edge(src, b.dest))  # type: ignore[arg-type]
        e.feeds.setdefault(feed, []).append(branch_words(b))
        e.guarded &= b.guarded
    if any(b.dest is None and b.refusal is None for b in branches) and feed not in stays:
        stays.append(feed)


def overview(spec: Spec) -> Overview:
    edges: dict[tuple[str, str], Edge] = {}
    any_moves: dict[str, Edge] = {}
    any_stays: list[str] = []
    shared: dict[tuple[str, ...], tuple[Shared, dict[str, Edge]]] = {}
    live = [s.name for s in spec.states.values() if not s.terminal]
    overridden = any(WILDCARD in ev.sources and any(s in ev.sources for s in live) for ev in spec.events.values())
    for ev in spec.events.values():
        wild = ev.sources.get(WILDCARD)
        folded: set[str] = set()
        if wild is not None:
            moving = [b for b in wild if b.dest is not None]
            for b in moving:
                e = any_moves.setdefault(b.dest, Edge(ANY, b.dest))  # type: ignore[arg-type]
                e.feeds.setdefault(ev.name, []).append(branch_words(b))
                e.guarded &= b.guarded
            if len(moving) < len(wild):
                any_stays.append(ev.name)
        else:
            for states in _fold(ev.sources, live):
                folded.update(states)
                branches = ev.sources[states[0]]
                # Under an "other live states" note a feed from every state would read as from fewer.
                if len(states) == len(live) and not overridden:
                    _note(any_moves, any_stays, ev.name, ANY, branches)
                    continue
                key = tuple(states)
                if key not in shared:
                    shared[key] = (Shared(f"__shared{len(shared) + 1}__", states), {})
                note, moves = shared[key]
                _note(moves, note.stays, ev.name, note.node, branches)
        for state, branches in ev.sources.items():
            if state == WILDCARD or state in folded or (wild is not None and branches == wild):
                continue
            for b in branches:
                if b.refusal is not None:  # refusals change nothing: the review sheet lists them
                    continue
                dst = b.dest or state
                e = edges.setdefault((state, dst), Edge(state, dst))
                e.feeds.setdefault(ev.name, []).append(branch_words(b) if b.dest else "")
                e.guarded &= b.guarded
    # Self-loops read as "what this state accepts"; their words would only
    # repeat the review sheet, so they keep the feed names alone.
    for e in edges.values():
        if e.loop:
            e.feeds = {f: [] for f in e.feeds}
    order = {name: i for i, name in enumerate(spec.states)}
    ordered = sorted(edges.values(), key=lambda e: (order[e.src], e.loop, order[e.dst]))
    notes = []
    for note, moves in shared.values():
        note.moves = sorted(moves.values(), key=lambda e: order[e.dst])
        notes.append(note)
    return Overview(
        ordered,
        list(any_moves.values()),
        any_stays,
        "other live states" if overridden else "any live state",
        notes,
    )
