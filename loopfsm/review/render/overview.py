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
- no actions, no policy numbers: the review sheet and the detailed view keep
  those.

DOT and Mermaid both draw from the :class:`Overview` built here, so they
agree edge for edge.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field

from loopfsm.core.spec import WILDCARD, Branch, Ref, Spec

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
class Overview:
    edges: list[Edge]
    any_moves: list[Edge]  # from the "any live state" note, feeds declared from '*'
    any_stays: list[str]  # feeds declared from '*' that never move
    any_label: str  # "any live state", or "other live states" when some state overrides '*'


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


def overview(spec: Spec) -> Overview:
    edges: dict[tuple[str, str], Edge] = {}
    any_moves: dict[str, Edge] = {}
    any_stays: list[str] = []
    overridden = False
    for ev in spec.events.values():
        wild = ev.sources.get(WILDCARD)
        if wild is not None:
            overridden |= any(s in ev.sources and not spec.states[s].terminal for s in spec.states)
            moves = [b for b in wild if b.dest is not None]
            for b in moves:
                e = any_moves.setdefault(b.dest, Edge(ANY, b.dest))  # type: ignore[arg-type]
                e.feeds.setdefault(ev.name, []).append(branch_words(b))
                e.guarded &= b.guarded
            if len(moves) < len(wild):
                any_stays.append(ev.name)
        for state, branches in ev.sources.items():
            if state == WILDCARD or (wild is not None and branches == wild):
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
    return Overview(
        ordered, list(any_moves.values()), any_stays, "other live states" if overridden else "any live state"
    )
