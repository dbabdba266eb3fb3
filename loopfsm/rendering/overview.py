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
- a move every live state makes first on every feed it takes, with the same
  words (agent_loop's "past the deadline" to ``expired``), is drawn once from
  the "any live state" note as ``any feed: ...`` and left off every other
  arrow: seven arrows fanning into one state said one thing;
- a feed that from two states or more may lead to every live state
  (router_run's ``inject``, a new prompt that replaces whatever was paused) is
  not drawn as an arrow to each of them: one note says so and names the
  states it is taken from;
- no actions, no policy numbers: the review sheet and the detailed view keep
  those.

DOT and Mermaid both draw from the :class:`Overview` built here, so they
agree edge for edge.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field, replace
from collections.abc import Sequence

from loopfsm.core.spec import WILDCARD, Branch, Condition, EventDef, Ref, Spec
from loopfsm.core.tracing import branch_name
from loopfsm.core.when_checks import when_covers

from .labels import said

ANY = "__any__"
ANYWHERE = "__anywhere__"  # the note for feeds that may lead to any live state
SHORT = 44
SLACK = 12


@dataclass
class Edge:
    """One arrow: ``feeds`` maps each feed to the short words of its branches on this arrow."""

    src: str
    dst: str
    feeds: dict[str, list[str]] = field(default_factory=dict)
    guarded: bool = True  # every branch on it needs a guard or a when: a conditional move
    # A branch on it has a guard: the machine's own check (its data, policy, clock) decides it, not only
    # which arguments the feed brought (a ``when:``).  Drawn dashed.
    by_guard: bool = False
    # feed -> where its branches on this arrow stand among the state's ways on that feed, counted from 1 in the
    # order the table tries them.  Set only when the state has two ways on the feed or more (a stay is one):
    # readers of router_run saw Idle's four execute arrows, and "decided or aborted" beside
    # "decided, next turn requests tools", as a conflict with no order to settle it.
    places: dict[str, list[int]] = field(default_factory=dict)
    # feed -> place -> what the branch there asks (its when: and guards), said when one arrow carries two places of
    # a feed in the same words: seed 002's "decided or aborted" is both an abort (1) and a completed turn (5).
    cases: dict[str, dict[int, str]] = field(default_factory=dict)

    @property
    def loop(self) -> bool:
        return self.src == self.dst

    def title(self, feed: str) -> str:
        """The feed's name with its places when numbered: ``execute (2)``, ``approval_decisions (1, 5)``."""
        at = self.places.get(feed)
        if not at:
            return feed
        return f"{feed} ({', '.join(map(str, at))})"

    def which(self, feeds: list[str]) -> list[str]:
        """For places of one feed on this arrow said in the same words, what each asks: ``(1) if aborted``,
        ``(5) if completed``.  Two readers could not tell which of seed 002's "decided or aborted" was which."""
        out = []
        for feed in feeds:
            at = self.places.get(feed, [])
            if len(at) > 1 and len(set(self.feeds[feed])) == 1:
                cases = self.cases.get(feed, {})
                out += [f"({n}) if {cases[n]}" if cases.get(n) else f"({n}) otherwise" for n in at]
        return out

    def titles(self) -> str:
        return ", ".join(self.title(f) for f in self.feeds)

    def groups(self) -> list[tuple[list[str], str]]:
        """(feeds, words) in first-seen order; feeds that say the same thing share one line.

        Four feeds that each expire at the deadline read as one line
        ("tool_proposed, dispatch, ...: past the deadline"), not four.  Feeds are named with their places.
        """
        return [([self.title(f) for f in feeds], words) for words, feeds in self._by_words().items()]

    def said(self) -> list[tuple[str, str, list[str]]]:
        """(feeds with their places, words, what each same-worded place asks) per group of :meth:`groups`."""
        return [
            (", ".join(self.title(f) for f in feeds), words, self.which(feeds))
            for words, feeds in self._by_words().items()
        ]

    def lines(self) -> list[str]:
        """One line per group of :meth:`groups`, each followed by what its same-worded places ask."""
        out = []
        for titles, words, cases in self.said():
            out.append(f"{titles}: {words}" if words else titles)
            out += ["  " + case for case in cases]
        return out

    def _by_words(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for feed, words in self.feeds.items():
            kept = list(dict.fromkeys(w for w in (_without(feed, w) for w in words) if w))
            out.setdefault("; ".join(kept), []).append(feed)
        return out


def _without(feed: str, words: str) -> str:
    """Words that open by repeating the feed's name ("execute, encrypted") lose the repeat."""
    for sep in (", ", " "):
        if words.startswith(feed + sep):
            return words[len(feed) + len(sep) :]
    return "" if words == feed else words


@dataclass
class Shared:
    """A note standing for several live states, and the feeds each of them takes the same way.

    ``node`` is the note's node name in DOT and Mermaid; ``moves`` start at it."""

    node: str
    states: list[str]
    moves: list[Edge] = field(default_factory=list)
    stays: list[str] = field(default_factory=list)  # feeds that never move from those states

    @property
    def label(self) -> str:
        return "from " + ", ".join(self.states)


@dataclass(frozen=True)
class Way:
    """One way a state takes a feed, as its card in the picture lists it: the table's branches in the order it
    tries them, refusals left out (they change nothing; the review sheet lists them).

    ``place`` counts from 1 (2 after a move every state tries first, drawn from the "any live state" note) and
    is None when the state has one way on the feed.  ``words`` are the branch's short description, or what it
    asks (``aborted``, ``completed``) when two ways of the feed say the same words.  ``dest`` is None for a
    stay.  ``guard`` says what the machine holds that decides it, as the card's line under it says it
    (``if run_encrypted``, ``if not run_encrypted``, ``unless ok=false and g``, ``otherwise``), empty when
    the feed's arguments alone do or the words already say it.
    """

    feed: str
    place: int | None
    words: str
    dest: str | None
    guard: str
    by_guard: bool  # a guard decides it: its own, or one on a way tried first (see decided_by_guard)
    # What the feed's arguments must say for it, where a sibling way asks the same and less or more
    # (``if the feed says encrypted``): drawn black under a black way, beside the blue guard lines.
    asks: str = ""
    branch: str = field(default="", compare=False)  # its trace name, for the review page; "" for "otherwise"


@dataclass
class Overview:
    edges: list[Edge]
    any_moves: list[Edge]  # from the "any live state" note: feeds declared from '*' or alike from every state
    any_stays: list[str]  # those of them that never move
    any_label: str  # "any live state", or "other live states" when some state overrides '*'
    shared: list[Shared] = field(default_factory=list)  # feeds alike from some live states, not all
    anywhere: dict[str, list[str]] = field(default_factory=dict)  # feed -> states it may leave for any live state
    # feed -> each final state -> the states of ``anywhere`` it is reached from: "any live state" leaves them out
    finals: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    # state -> its ways, feed by feed in the table's order: the feeds drawn from the state itself (notes aside)
    ways: dict[str, list[Way]] = field(default_factory=dict)
    # feed of ``anywhere`` -> its ways, when every state it is taken from takes it alike (a stay as its state)
    anywhere_ways: dict[str, list[Way]] = field(default_factory=dict)

    def anywhere_lines(self, ways: bool = True) -> list[str]:
        """The note of feeds that may move to any state (its arrows are not drawn): per feed, its ways when
        they are alike from each state it is taken from, else a sentence.

        It names the states it leaves out rather than saying "live": three readers of router_run's picture
        asked whether "any live state" took in AwaitingEncrypt, which the sentence did not name.  A final
        state reached from some of the states but not all is left out and said apart ("from b also to x").
        """
        out = []
        for feed, states in self.anywhere.items():
            alike = self.anywhere_ways.get(feed) if ways else None
            if alike:  # its ways, alike from each state, say where it goes
                out.append(f"{feed}, from {_or(states)}:")
                out += [
                    f"{w.place or ''} {w.words} \u2192 {w.dest}{', ' + w.guard if w.guard else ''}".strip()
                    for w in alike
                ]
                continue
            reach = self.finals.get(feed, {})
            but = [f for f, by in reach.items() if len(by) < len(states)]
            line = f"{feed} may move from {_or(states)} to any state" + (f" but {', '.join(but)}" if but else "")
            some = [f"from {_or(by)} also to {f}" for f, by in reach.items() if by and len(by) < len(states)]
            out.append(line + (f" ({'; '.join(some)})" if some else ""))
        return out


def _or(names: list[str]) -> str:
    """``A``, ``A or B``, ``A, B or C``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _literal(v: object) -> str | None:
    if isinstance(v, (list, tuple)) and all(isinstance(x, (str, int)) for x in v):
        text = _BIDI.sub("", "/".join(str(x) for x in v))
    elif isinstance(v, (str, int)) and not isinstance(v, bool):
        text = _BIDI.sub("", str(v))
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


#: Characters that reorder the text drawn after them: "safe path \u202edoog \u2192" with ``to: evil`` drew as
#: "safe path -> good evil".  A picture drops them.
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f]")


def short(text: str, limit: int = SHORT) -> str:
    """The gist of a description: asides dropped, its first clause, cut at a word boundary.

    A description that is only an aside keeps it; a first word longer than ``limit`` is cut inside it.
    """
    text = _BIDI.sub("", text)
    text = " ".join(re.sub(r"\s*\([^()]*\)", "", text).split()) or " ".join(text.split())
    for stop in (". ", "; ", ": "):
        text = text.split(stop, 1)[0]
    text = text.rstrip(".")
    if len(text) > limit:
        head = _first_clause(text)
        text = head if len(head) >= 12 else text
    if len(text) <= limit + SLACK:  # a cut that saves a word or two loses the clause's point
        return text
    cut = textwrap.shorten(text, limit, placeholder="…")
    return cut if cut != "…" else text[: limit - 1] + "…"


def _first_clause(text: str) -> str:
    """``text`` up to its first ", " outside brackets: "outcome in [transient, rate_limited]" is one clause."""
    depth = 0
    for i, ch in enumerate(text):
        if ch in "[(":
            depth += 1
        elif ch in "])" and depth:
            depth -= 1
        elif depth == 0 and text.startswith(", ", i):
            return text[:i]
    return text


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
    # A feed that only stays keeps its self-loops (in DOT, "stays on" in the box): a feed
    # name on each state is shorter than a note and the arrow to it.
    moves = {key for key, states in groups.items() if any(b.dest is not None for b in sources[states[0]])}
    return [states for key, states in groups.items() if len(states) > 1 and key in moves]


def _stays_alike(sources: dict[str, tuple[Branch, ...]], live: list[str]) -> list[str]:
    """The live states that only stay on a feed, when that is most of them (else [], drawn as self-loops).

    A feed most live states accept without moving reads better in the note,
    with the few states that do not take it named, than as a loop on each.
    """
    staying = [st for st in live if st in sources and all(b.dest is None for b in sources[st])]
    alike = {_alike(sources[st]) for st in staying}
    if len(alike) != 1 or len(staying) < 3 or 2 * len(staying) <= len(live):
        return []
    if any(st in sources for st in live if st not in staying):
        return []  # some other state takes the feed and moves: its arrows tell, the note would half-tell
    return staying


def stay_groups(stays: list[str], moves: list[Edge]) -> list[tuple[str, list[str]]]:
    """A note's staying feeds under their heading: those that only stay, and those that also leave on one of the
    note's arrows (a note listed a feed as "accepted there without moving" beside its own arrow on it)."""
    leaving = {f for e in moves for f in e.feeds}
    only = [f for f in stays if f not in leaving]
    also = [f for f in stays if f in leaving]
    groups = [
        ("accepted there without moving:", only),
        ("may also stay there, when the arrow's way does not hold:", also),
    ]
    return [(heading, feeds) for heading, feeds in groups if feeds]


def decided_by_guard(branches: Sequence[Branch], i: int) -> bool:
    """Whether a guard decides if branch ``i`` is taken: its own, or that of an earlier branch for the same
    arguments, which takes the feed first when it holds.

    router_run's "completed, plaintext" branches come after the guarded "completed, encrypted" ones for the
    same outcome: drawn solid ("taken on that feed"), three readers took them for unconditional, beside a
    dashed arrow on the very same feed and outcome.  A guarded refusal before it does not count: a refusal
    is a feed the machine does not take (the review sheet lists them), not another way it goes.
    """
    return bool(branches[i].guards) or any(
        b.guards and b.refusal is None and _may_overlap(b, branches[i]) for b in branches[:i]
    )


def _ways(feed: EventDef, state: str, branches: Sequence[Branch], first: int, otherwise: str | None) -> list[Way]:
    """``state``'s ways on ``feed``: its branches but refusals, numbered from ``first`` when there are two, or
    when ``first`` is 2 (after "any feed (1)", which is tried before them)."""
    nullable = frozenset(name for name, f in feed.args.items() if f.nullable)
    drawn = [i for i, b in enumerate(branches) if b.refusal is None]
    numbered = len(drawn) > 1 or first > 1
    said = [_without(feed.name, branch_words(branches[i])) for i in drawn]
    cases = [_case(branches[i]) for i in drawn]
    out = []
    for (place, i), words, case in zip(enumerate(drawn, first), said, cases, strict=True):
        b = branches[i]
        if said.count(words) > 1 and case:
            words = _told_apart(words, case, [c for c, w in zip(cases, said, strict=True) if w == words])
        guard = _deciding(branches, i)
        dest = None if b.dest in (None, state) else b.dest
        shown = "" if guard.removeprefix("if ") == words else guard
        by_guard = decided_by_guard(branches, i)
        asks = "" if by_guard else _asked(branches, i, nullable)
        name = branch_name(feed.name, b.source, b.index, b.name)  # not compared: notes' ways alike by their words
        out.append(Way(feed.name, place if numbered else None, words, dest, shown, by_guard, asks, name))
    if otherwise == "stay" and drawn and all(b.guarded for b in branches):
        # When no branch holds the feed stays (``otherwise: stay``): a last way, or a card with one guarded way
        # said it as the only one.
        out = [replace(w, place=first + k) for k, w in enumerate(out)]
        out.append(Way(feed.name, first + len(out), "", None, "otherwise", any(b.guards for b in branches)))
    return out


def _asked(branches: Sequence[Branch], i: int, nullable: frozenset[str] = frozenset()) -> str:
    """What the feed's arguments must say for branch ``i``, where its ``when:`` is a sibling's and more, or less.

    router_run's Idle takes ``execute`` with ``outcome: completed, encrypted: true`` before ``outcome:
    completed``: the feed's own ``encrypted`` decides, where later states ask the run's data (``if
    run_encrypted``, blue).  Said only in colour, readers called the two "encrypted" inconsistent; the black
    line says whose it is.  Empty where no sibling without a guard asks a part of the same, or more.  A flag
    that may be null is not said "not" (null takes the later way too): "unless the feed says encrypted".
    """
    b = branches[i]
    mine = {c.arg: c.values for c in b.when}
    siblings = [(j, a) for j, a in enumerate(branches) if j != i and not a.guards]
    for _, a in siblings:
        theirs = {c.arg: c.values for c in a.when}
        if len(theirs) < len(mine) and all(mine.get(k) == v for k, v in theirs.items()):
            return "if the feed says " + " and ".join(said(c, nullable) for c in b.when if c.arg not in theirs)
    before = [a for j, a in siblings if j < i and _may_overlap(a, b)]
    for j, a in siblings:
        theirs = {c.arg: c.values for c in a.when}
        if len(before) == 1 and j < i and len(mine) < len(theirs) and all(theirs.get(k) == v for k, v in mine.items()):
            extra = [c for c in a.when if c.arg not in mine]
            flags = len(extra) == 1 and len(extra[0].values) == 1 and isinstance(extra[0].values[0], bool)
            if flags and extra[0].arg not in nullable:
                flag = extra[0]
                return f"if the feed says {'not ' if flag.values[0] else ''}{flag.arg}"
            return "unless the feed says " + " and ".join(said(c, nullable) for c in extra)
    return ""


def _told_apart(words: str, case: str, alike: list[str]) -> str:
    """A way whose description another way of the feed shares, said by what it asks.

    Seed 002 gives two of AwaitingApproval's ways the words "decided or aborted": the one asking ``aborted``
    is said "aborted", and the other keeps the alternative no sibling asks, "decided, completed".  Words
    without such an alternative give way to the case alone ("completed").
    """
    options = [o.strip() for o in words.split(" or ")]
    if case in options:
        return case
    left = [o for o in options if o not in alike]
    return f"{left[0]}, {case}" if len(options) > 1 and len(left) == 1 else case


def _deciding(branches: Sequence[Branch], i: int) -> str:
    """What the machine holds that decides branch ``i``, as the card says it: "if" its own guards; else, after
    guarded branches the same arguments may reach, "if not X" when one of them, with one guard, is tried
    first for every argument that reaches this one (router_run's "completed, plaintext" reads "if not
    run_encrypted"), "unless <its conditions> and X" when only for some, and "otherwise" after several (the
    order says the rest).  Empty when no guard decides it (see :func:`decided_by_guard`)."""
    b = branches[i]
    if b.guards:
        return "if " + " and ".join(guard_words(g) for g in b.guards)
    before = [a for a in branches[:i] if a.guards and a.refusal is None and _may_overlap(a, b)]
    if not before:
        return ""
    if len(before) > 1:
        return "otherwise"
    (a,) = before
    said = " and ".join(guard_words(g) for g in a.guards)
    if not when_covers(a, b):
        return "unless " + " and ".join([*a.conditions(), said])
    if len(a.guards) == 1:
        return "if " + (said.removeprefix("not ") if said.startswith("not ") else f"not {said}")
    return f"if not ({said})"


def _may_overlap(a: Branch, b: Branch) -> bool:
    """Whether some feed arguments meet both branches' ``when:`` (an argument named by one only meets it)."""
    mine = {c.arg: c.values for c in a.when}
    return all(any(v == w for v in mine[c.arg] for w in c.values) for c in b.when if c.arg in mine)


def _take(e: Edge, feed: str, words: str, branches: Sequence[Branch], i: int, place: int | None = None) -> None:
    """Branch ``i`` of ``feed`` drawn on ``e``: its words, its place when numbered, and whether a condition or a
    guard decides it."""
    e.feeds.setdefault(feed, []).append(words)
    if place is not None:
        e.places.setdefault(feed, []).append(place)
        e.cases.setdefault(feed, {})[place] = _case(branches[i])
    e.guarded &= branches[i].guarded
    e.by_guard |= decided_by_guard(branches, i)


def _case(b: Branch) -> str:
    """What branch ``b`` asks, as short as a picture needs: a flag by its name (``aborted``, ``not aborted``), a
    value by itself (``completed``, ``gate or tools``), then its guards; the review sheet has the conditions whole."""
    said = []
    for c in b.when:
        if len(c.values) == 1 and c.values[0] is True:
            said.append(c.arg)
        elif len(c.values) == 1 and c.values[0] is False:
            said.append(f"not {c.arg}")
        elif all(isinstance(v, str) and _WORD.fullmatch(v) for v in c.values):
            said.append(
                " or ".join(c.values) if len(c.values) == 1 or len(b.when) == 1 else f"({' or '.join(c.values)})"
            )
        else:  # a number, null, or words of several: the condition as the review sheet says it
            said.append(c.label())
    return " and ".join([*said, *(guard_words(g) for g in b.guards)])


_WORD = re.compile(r"[\w./-]+")


def _note(moves: dict[str, Edge], stays: list[str], feed: str, src: str, branches: tuple[Branch, ...]) -> None:
    for i, b in enumerate(branches):
        if b.dest is None or b.refusal is not None:
            continue
        _take(moves.setdefault(b.dest, Edge(src, b.dest)), feed, branch_words(b), branches, i)
    if any(b.dest is None and b.refusal is None for b in branches) and feed not in stays:
        stays.append(feed)


def _universal(spec: Spec, live: list[str]) -> set[tuple[str, str]]:
    """(destination, words) of the move every live state tries first on every feed it takes.

    Only a move out of the live states counts (to a terminal state): it is what
    "whatever happens, this ends the run" looks like in a table. Read from the
    entries as written, '*' once for the states it stands for, so a large
    table costs no more than its size.
    """
    if len(live) < 2:
        return set()
    alive = set(live)
    found: set[tuple[str, str]] | None = None
    taking: set[str] = set()
    for ev in spec.events.values():
        for state, branches in ev.sources.items():
            if state == WILDCARD:
                if alive <= set(ev.sources):
                    continue  # every live state names its own entry: '*' stands for none of them
                taking = alive
            elif state in alive:
                taking.add(state)
            else:
                continue
            b = branches[0]
            if b.dest is None or b.refusal is not None or b.dest in alive:
                return set()
            key = {(b.dest, branch_words(b))}
            found = key if found is None else found & key
            if not found:
                return set()
    # Every live state must take some feed, or "any live state" would claim a move it cannot make.
    return found if found and taking == alive else set()


def _strip(branches: tuple[Branch, ...], universal: set[tuple[str, str]]) -> tuple[Branch, ...]:
    b = branches[0] if branches else None
    if b is not None and b.dest is not None and (b.dest, branch_words(b)) in universal:
        return branches[1:]
    return branches


def _reaching(ev: EventDef, live: list[str]) -> list[str]:
    """The live states from which ``ev`` may end in every live state (staying counts as the state itself)."""
    if len(live) < 3:
        return []
    alive = set(live)

    def missing(branches: tuple[Branch, ...]) -> tuple[set[str], bool]:
        moves = {b.dest for b in branches if b.dest is not None and b.refusal is None}
        return alive - moves, any(b.dest is None and b.refusal is None for b in branches)

    wild = ev.sources.get(WILDCARD)
    wild_missing = missing(wild) if wild is not None else None
    out = []
    for state in live:
        gap, stays = missing(ev.sources[state]) if state in ev.sources else wild_missing or (alive, False)
        if not gap or (stays and gap == {state}):
            out.append(state)
    return out


def _overrides(ev: EventDef, state: str) -> bool:
    """Whether ``state``'s own entry for ``ev`` makes the '*' entry's note say something untrue of it.

    An entry that keeps every move and the stay of '*' (and adds its own) leaves
    the note true: the note need not say "other live states" for it.
    """
    wild = ev.sources.get(WILDCARD)
    own = ev.sources.get(state)
    if wild is None or own is None:
        return False
    has = {(b.dest, branch_words(b)) for b in own if b.dest is not None}
    moves = {(b.dest, branch_words(b)) for b in wild if b.dest is not None}
    stays = any(b.dest is None and b.refusal is None for b in wild)
    return not moves <= has or (stays and not any(b.dest is None and b.refusal is None for b in own))


def overview(spec: Spec) -> Overview:
    edges: dict[tuple[str, str], Edge] = {}
    any_moves: dict[str, Edge] = {}
    any_stays: list[str] = []
    shared: dict[tuple[str, ...], tuple[Shared, dict[str, Edge]]] = {}
    live = [s.name for s in spec.states.values() if not s.terminal]
    universal = _universal(spec, live)
    for dst, words in sorted(universal):
        any_moves[dst] = Edge(ANY, dst, {"any feed": [words]}, by_guard=True)
    anywhere: dict[str, list[str]] = {}
    finals: dict[str, dict[str, list[str]]] = {}  # for each of anywhere's feeds: final state -> states reaching it
    final_states = [s.name for s in spec.states.values() if s.terminal]
    events = []
    ways: dict[str, list[Way]] = {}
    anywhere_ways: dict[str, list[Way]] = {}
    for ev0 in spec.events.values():
        sources = {st: _strip(bs, universal) for st, bs in ev0.sources.items()}
        # Only a feed that does so from two states or more: one state's feed that may go anywhere
        # (Idle's execute) is that state's own fan of arrows, and the main path.
        reaching = _reaching(ev0, live)
        if len(reaching) > 1:
            anywhere[ev0.name] = reaching
            for st in reaching:
                sources.pop(st, None)
            expanded = spec.expanded_sources(ev0)
            finals[ev0.name] = {
                f: [st for st in reaching if any(b.dest == f and b.refusal is None for b in expanded.get(st, ()))]
                for f in final_states
            }
            # Where each way goes, a stay written as the state it stays in: alike from every state, the note
            # lists them (router_run's inject: "5 completed -> Idle" from Idle and from each pause).
            taken = [
                [replace(w, dest=w.dest or st) for w in _ways(ev0, st, expanded.get(st, ()), 1, ev0.otherwise)]
                for st in reaching
            ]
            if all(t == taken[0] for t in taken):
                anywhere_ways[ev0.name] = taken[0]
        # A feed whose '*' entry every live state leaves for any state is drawn by the note alone.
        if WILDCARD in sources and set(anywhere.get(ev0.name, ())) >= set(live):
            sources.pop(WILDCARD)
        events.append(replace(ev0, sources={st: bs for st, bs in sources.items() if bs}))
    overridden = any(_overrides(ev, st) for ev in events for st in live)
    for ev in events:
        wild = ev.sources.get(WILDCARD)
        folded: set[str] = set()
        if wild is not None:
            for i, b in enumerate(wild):
                if b.dest is not None:
                    _take(any_moves.setdefault(b.dest, Edge(ANY, b.dest)), ev.name, branch_words(b), wild, i)
            if any(b.dest is None for b in wild):
                any_stays.append(ev.name)
        else:
            stays = _stays_alike(ev.sources, live)
            if stays:
                folded.update(stays)
                rest = [st for st in live if st not in stays]
                any_stays.append(ev.name + (f" (not in {', '.join(rest)})" if rest else ""))
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
            # Refusals change nothing (the review sheet lists them): they are neither drawn nor counted.
            # The universal move, stripped above, is tried first: it is "any feed (1)" and the state's own
            # ways count on from 2.
            drawn = [i for i, b in enumerate(branches) if b.refusal is None]
            found = _ways(ev, state, branches, 2 if universal else 1, ev.otherwise)
            ways.setdefault(state, []).extend(found)
            for i, way in zip(drawn, found[: len(drawn)], strict=True):  # an "otherwise" stay is the card's own
                dst = branches[i].dest or state
                e = edges.setdefault((state, dst), Edge(state, dst))
                _take(e, ev.name, branch_words(branches[i]), branches, i, way.place)
    # Self-loops read as "what this state accepts"; their words would only
    # repeat the review sheet, so they keep the feed names alone.  A feed that
    # also leaves the state keeps its words: "may stay on execute (5)" beside
    # four execute arrows hid router_run's commonest path (a plaintext turn
    # that completes) from two readers, who asked when it stays.
    leaving = {(e.src, f) for e in edges.values() if not e.loop for f in e.feeds}
    for e in edges.values():
        if e.loop:
            e.feeds = {f: words if (e.src, f) in leaving else [] for f, words in e.feeds.items()}
    if any(e.places for e in edges.values()):
        for e in any_moves.values():
            if "any feed" in e.feeds:
                e.places["any feed"] = [1]
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
        anywhere,
        finals,
        ways,
        anywhere_ways,
    )
