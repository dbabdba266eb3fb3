"""The checks of a ``when:`` condition: it names an argument of its feed or decision, and every value it lists
is one that argument can take, once.

Kept apart from :mod:`.checks` as :mod:`.policy_checks` is: one kind of entry, checked by itself.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeGuard

from .errors import did_you_mean
from .field_checks import SAID, bound_problems
from .fieldtypes import INT_MAX, INT_MIN, ValueKey, fits_type, python_checker, value_key, yaml_shown
from .registry import BUILTIN_CODECS
from .source import PathT
from .spec import Branch, Condition, FieldDef, Rule

# The argument types a ``when:`` compares by equality: a YAML scalar means the same value to each.
_WHEN_TYPES = frozenset({"integer", "number", "string", "boolean"})


def _bounds_words(f: FieldDef) -> str:
    parts = ([f"at least {f.minimum}"] if f.minimum is not None else []) + (
        [f"at most {f.maximum}"] if f.maximum is not None else []
    )
    return f", {' and '.join(parts)}" if parts else ""


def check_condition(
    owner: str, args: dict[str, FieldDef], c: Condition, error: Callable[..., None], work: Comparisons
) -> None:
    """A ``when:`` entry names an argument of its feed or decision (``owner``, with ``args``), and every
    value it lists is one that argument can take.

    A value the argument can never hold would make the branch dead without
    a word, so it is an error, as a misspelt guard name is.  What is worked out once per argument
    (its check, whether its enum is sound) is kept in ``work``: a 40,000-item enum named by 100
    conditions took five minutes.
    """
    f = args.get(c.arg)
    if f is None:
        takes = ", ".join(args) or "no arguments"
        error(
            c.path,
            f"{owner} has no argument '{c.arg}'{did_you_mean(c.arg, args)} (it takes: {takes})",
            key=True,
        )
        return
    if f.list or f.type not in _WHEN_TYPES:
        what = f"a list of {f.type}" if f.list else f.type
        error(
            c.path,
            f"'when' compares integer, number, string and boolean arguments; argument '{c.arg}' "
            f"of {owner} is {what}: use a guard",
            key=True,
        )
        return
    holds = work.checker(f)
    said: set[int] = set()
    unsaid: list[int] = []

    def say(i: int, where: PathT, message: str) -> None:
        """At most SAID problems of one list, and then how many more (a 1 MiB list held 199,000)."""
        said.add(i)
        if len(said) <= SAID:
            error(where, message)
        else:
            unsaid.append(i)

    for i, v in enumerate(c.values):
        if holds(v):
            continue
        if not work.sound(f):
            return  # the argument's own enum is wrong, and says so at its line: no value can be judged against it
        where = c.path + ((i,) if c.choice else ())
        if f.type == "integer" and isinstance(v, float) and v.is_integer() and holds(int(v)):
            # ``1.0`` is a number to YAML; the feed's integer 1 would equal it, but the table should say 1.
            say(i, where, f"argument '{c.arg}' of {owner} is an integer: write {int(v)}, not {v!r}")
            continue
        if f.enum is not None and fits_type(BUILTIN_CODECS[f.type].py_type, v):
            hint = did_you_mean(v, [str(x) for x in f.enum[:1000]]) if isinstance(v, str) else ""
            choices = ", ".join(x if isinstance(x, str) else json.dumps(x) for x in f.enum[:SAID])
            more = f" and {len(f.enum) - SAID:,} more" if len(f.enum) > SAID else ""
            say(
                i, where, f"argument '{c.arg}' of {owner} is never {yaml_shown(v)} (it is one of {choices}{more}){hint}"
            )
        else:
            say(
                i,
                where,
                f"argument '{c.arg}' of {owner} is never {yaml_shown(v)} (it is "
                f"{f.type}{' or null' if f.nullable else ''}{_bounds_words(f)})",
            )
    seen: set[ValueKey] = set()
    for i, v in enumerate(c.values):
        if value_key(v) in seen and i not in said:
            say(i, c.path + (i,), f"{yaml_shown(v)} is listed twice for argument '{c.arg}'")
        seen.add(value_key(v))
    if unsaid:
        error(
            c.path + ((unsaid[0],) if c.choice else ()),
            f"and {len(unsaid):,} more values of this list are refused as those above",
        )
    # (an enum's every value is worked out only when the list is as long: not once per condition of 40,000)
    every = _every_value(f) if f.enum is None or len(seen) >= len(f.enum) else None
    if every is not None and every <= seen:
        # Always true, the branch is unconditional in all but name: the ones after it never run,
        # yet the table reads as if they could, and `otherwise` is asked for without a reason.
        error(
            c.path,
            f"argument '{c.arg}' of {owner} can only be one of the values listed, so this condition "
            "always holds: remove it, or list only the values the branch is for",
        )


# A bounded integer argument with at most this many values has them listed, as an enum's are.
_FEW = 64


def _every_value(f: FieldDef) -> set[ValueKey] | None:
    """Every value an argument can take, when there are few enough to list (an enum, a boolean, an integer
    bounded both ways by at most ``_FEW`` values), else None."""
    values = _every_listed(f)
    return None if values is None else {value_key(v) for v in values}


def _every_listed(f: FieldDef) -> list[Any] | None:
    """:func:`_every_value`'s values in an order that does not change from run to run (the enum's, false after
    true, the integers upward, null last), for a message that names one."""
    if f.enum is not None:
        values: list[Any] = list(f.enum)
    elif f.type == "boolean":
        values = [True, False]
    elif f.type == "integer" and _finite(f.minimum) and _finite(f.maximum):
        # ``minimum: 0.0`` bounds an integer as ``0`` does: the integers from the first at or above it (and
        # within 64 bits, as a feed's integer is).
        low, high = max(math.ceil(f.minimum), INT_MIN), min(math.floor(f.maximum), INT_MAX)
        if not 0 <= high - low < _FEW:
            return None
        values = list(range(low, high + 1))
    else:
        return None
    return [*values, None] if f.nullable else values


def _finite(bound: object) -> TypeGuard[float]:
    return isinstance(bound, (int, float)) and not isinstance(bound, bool) and math.isfinite(bound)


def covers(earlier: Branch | Rule, later: Branch | Rule) -> bool:
    """Whether ``earlier``, tried first, takes every feed ``later`` could: it has no guard, and each of its
    ``when:`` conditions holds for every value ``later``'s own condition on that argument allows.

    ``{outcome: completed}`` before ``{outcome: completed, encrypted: true}`` is such a pair: the second is
    never tried.  A branch with neither (no ``when:``, no guard) is reported as always winning instead.  The
    same holds of a decision's rules, where the earlier one answers in the later one's states.
    """
    return not earlier.guards and bool(earlier.when) and when_covers(earlier, later)


def when_covers(earlier: Branch | Rule, later: Branch | Rule) -> bool:
    """Whether every feed that meets ``later``'s ``when:`` meets ``earlier``'s too (``earlier`` asks nothing
    ``later`` leaves open), guards aside: :func:`covers` without them, and the picture's "if not X" beside a
    guarded way tried first."""
    mine = {c.arg: {value_key(v) for v in c.values} for c in later.when}
    return all(c.arg in mine and mine[c.arg] <= {value_key(v) for v in c.values} for c in earlier.when)


# How much of the conditions a message quotes.
_QUOTED = 300

# Past this many combinations of values the union is not worked out (``covered_together`` says None).
_MOST_POINTS = 4096

#: The comparisons of a branch with an earlier one a file's check may make looking for branches never taken.
#: Each way is compared with every earlier one of its list, so a hostile file of thousands of branches (a
#: 1 MiB file holds 4,000 of twelve conditions each) took 20 s before this bound, and 41 s with the
#: combinations; past this the rest are not looked at (docs/security.md has the figures), and ``check``
#: warns so.
COMPARISONS = 1_000_000


@dataclass
class Comparisons:
    """What is left of a file's :data:`COMPARISONS`, and where they ran out (None while some are left); and
    what the checks of its ``when:`` conditions work out once per argument."""

    left: int = field(default_factory=lambda: COMPARISONS)
    ran_out_at: PathT | None = None
    left_out: dict[str, Any] | None = None  # the last combination of values found that no branch takes
    _checkers: dict[int, tuple[FieldDef, Callable[[Any], bool], bool | None]] = field(default_factory=dict)

    def checker(self, f: FieldDef) -> Callable[[Any], bool]:
        """Whether a value is one ``f`` can take (:func:`.fieldtypes.python_checker`), made once."""
        if id(f) not in self._checkers:
            try:
                holds = python_checker(f, BUILTIN_CODECS[f.type])
            except TypeError:  # an enum item that cannot be compared (a list): the enum says so at its line
                holds = _never
            self._checkers[id(f)] = (f, holds, None)  # f kept: its id is not reused while this lives
        return self._checkers[id(f)][1]

    def sound(self, f: FieldDef) -> bool:
        """Whether ``f``'s bounds leave it a value and its enum, if it has one, is of its type and within them
        (else it is refused at its own line, and no value is judged against it)."""
        _, holds, known = self._checkers.get(id(f)) or (f, self.checker(f), None)
        if known is None:
            py_type = BUILTIN_CODECS[f.type].py_type
            bounded = not any(bound_problems(f.minimum, f.maximum, f.type == "integer"))
            known = bounded and (f.enum is None or all(fits_type(py_type, x) and holds(x) for x in f.enum))
            self._checkers[id(f)] = (f, holds, known)
        return known

    def spend(self, n: int, at: PathT) -> bool:
        """Take ``n`` of them for the branch at ``at``; False, and nothing taken, when fewer are left."""
        if n > self.left:
            if self.ran_out_at is None:
                self.ran_out_at = at
            self.left = 0
            return False
        self.left -= n
        return True

    def report(self, warn: Callable[..., None]) -> None:
        """Warn, at the first branch or rule not looked at, that those from there on were not."""
        if self.ran_out_at is not None:
            warn(
                self.ran_out_at,
                f"this file has too many branches to look for ones never taken in under {COMPARISONS:,} "
                "comparisons: from this one on, they were not looked for",
            )


def _never(value: Any) -> bool:
    return False


class _Other:
    """Any value of an argument that no condition lists: one stand-in for them all."""

    def __repr__(self) -> str:
        return "<any other value>"


_OTHER = _Other()


def taken_before(
    earlier: Sequence[Branch | Rule], later: Branch | Rule, args: dict[str, FieldDef], work: Comparisons
) -> list[int]:
    """The places in ``earlier`` of the unguarded ones that take every feed ``later`` could, so it is never
    tried: one that :func:`covers` it, else several together; empty when some feed reaches ``later``, or
    when ``work`` has too few comparisons left to tell.

    A branch or rule with neither ``when:`` nor guard is left alone: after ``when:`` lists that take every
    value it is the table's own "otherwise" (a state whose branches are all guarded must say one), and the
    check that it always wins is said where it stands before others.
    """
    # Charged by the values compared, not the pairs: two branches of one 60,000-value list took 52 s.
    cost = len(earlier) + _values(later) + sum(_values(e) for e in earlier)
    if not later.guarded or not earlier or not _known(later, args, work) or not work.spend(cost, later.path):
        return []
    mine = {c.arg: {value_key(v) for v in c.values} for c in later.when}
    # The unguarded ones some feed of ``later`` could meet: a condition on an argument ``later`` names
    # shares a value with it.  Only they can take its feeds.
    meeting = [
        (i, e)
        for i, e in enumerate(earlier)
        if not e.guards
        and e.when
        and _known(e, args, work)
        and all(c.arg not in mine or mine[c.arg] & set(map(value_key, c.values)) for c in e.when)
    ]
    one = next((i for i, e in meeting if covers(e, later)), None)
    if one is not None:
        return [one]
    return covered_together(meeting, later, args, work) or []


def takes_every_feed(
    branches: Sequence[Branch], args: dict[str, FieldDef], work: Comparisons, at: PathT
) -> bool | None:
    """Whether some of ``branches`` with a ``when:`` and no guard take every feed between them (``{fast: true}``
    and ``{fast: false}`` on a boolean that cannot be null): then none holding never happens, and a state whose
    branches are all guarded needs no ``otherwise``.  When they do not, ``work.left_out`` says what is left;
    None when ``work`` ran out before it could tell (the state ``at`` is then not refused for it)."""
    work.left_out = None
    if not branches:
        return False
    if not work.spend(sum(_values(b) for b in branches), at):
        return None
    anything = replace(branches[-1], when=(), guards=(), path=at)
    if any(not b.guards and b.when and not _known(b, args, work) for b in branches):
        return None  # a condition refused at its line (a misspelt argument): what it meant to take is unknown
    meeting = [(i, b) for i, b in enumerate(branches) if not b.guards and b.when]
    if covered_together(meeting, anything, args, work) is not None:
        return True
    return None if work.left == 0 else False


def falls_short(branches: Sequence[Branch], args: dict[str, FieldDef], work: Comparisons, at: PathT) -> bool:
    """Whether a state's all-guarded ``branches`` may leave a feed untaken: :func:`takes_every_feed` says
    they do not take every feed (not when it could not tell)."""
    return takes_every_feed(branches, args, work, at) is False


def _known(b: Branch | Rule, args: dict[str, FieldDef], work: Comparisons) -> bool:
    """Whether each of ``b``'s conditions names an argument there is, of a type ``when:`` compares, and lists
    values it can take: one that does not is reported where it stands (:func:`check_condition`), and says
    nothing of which feeds the branch takes (``{verdict: aprove}`` takes none)."""
    for c in b.when:
        f = args.get(c.arg)
        if f is None or f.list or f.type not in _WHEN_TYPES:
            return False
        holds = work.checker(f)
        if not all(holds(v) for v in c.values):
            return False
    return True


def _values(b: Branch | Rule) -> int:
    return sum(len(c.values) for c in b.when)


def left_out_words(work: Comparisons) -> str:
    """`` (a feed with urgent=null takes none of them)``: what :func:`takes_every_feed` found no branch takes,
    when it is a value it can name (not "any other"); empty otherwise."""
    at = work.left_out
    if not at or any(v is _OTHER for v in at.values()):
        return ""
    said = ", ".join(f"{k}={'null' if v is None else _literal(v)}" for k, v in at.items())
    return f" (a feed with {said} takes none of them)"


def _literal(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def taken_words(places: list[str], by: Sequence[Branch | Rule], rules: bool = False) -> str:
    """Why a branch (or, ``rules``, a decision's rule) is never tried: who before it takes what it would.

    ``places`` name the ones :func:`taken_before` found, as the message names them ("branch 0"; a rule's
    name in quotes), and ``by`` are those branches or rules, whose conditions it quotes.
    """
    one = len(places) == 1
    who = places[0] if one else f"{', '.join(places[:-1])} and {places[-1]}"
    if rules:
        who = f"rule {who}" if one else f"rules {who}"
    has, answers, takes = ("has", "answers", "takes") if one else ("have", "answer", "together take")
    where = f", {answers} in its states and" if rules else " and"
    conditions = "; ".join(", ".join(e.conditions()) for e in by)
    if len(conditions) > _QUOTED:  # a 2,000-value list quoted in every message made a megabyte of them
        conditions = conditions[:_QUOTED] + "..."
    return f"{who} before it {has} no guard{where} {takes} every {'call' if rules else 'feed'} it does ({conditions})"


def covered_together(
    meeting: Sequence[tuple[int, Branch | Rule]], later: Branch | Rule, args: dict[str, FieldDef], work: Comparisons
) -> list[int] | None:
    """The places of the unguarded ones in ``meeting`` (place, branch) that together take every feed ``later``
    could, when no one of them does alone (:func:`covers` says that); None when they do not, or it is not
    worked out (too many combinations, or too few of ``work``'s comparisons left).

    ``{encrypted: true}``, ``{encrypted: false}``, then ``{outcome: completed}`` on a boolean ``encrypted``
    is such a case: the third is never tried.  The values worth trying are few: on each argument an earlier
    condition names, ``later``'s own values when it lists some, else every value the argument can take
    when they can be listed (an enum, a boolean, a small bounded integer, null when nullable), else the
    values the conditions name and one stand-in for all the others.  A combination none of them takes
    means ``later`` can run; the stand-in errs that way when the others are in fact none (a pattern).
    """
    tried = meeting
    names = list(dict.fromkeys(c.arg for _, e in tried for c in e.when))
    if len(tried) < 2 or not names:
        return None
    mine = {c.arg: c.values for c in later.when}
    domains: list[list[Any]] = []
    for name in names:
        f = args.get(name)
        if f is None or f.list or f.type not in _WHEN_TYPES:
            return None  # check_condition reports it
        if name in mine:
            domains.append(list(mine[name]))
            continue
        every = _every_listed(f)
        if every is not None:
            domains.append(every)
            continue
        named = {value_key(v): v for _, e in tried for c in e.when if c.arg == name for v in c.values}
        domains.append([*named.values(), _OTHER])
    points = math.prod(len(d) for d in domains)
    if points > _MOST_POINTS or not work.spend(points * len(tried), later.path):
        return None
    keys = {id(c): {value_key(v) for v in c.values} for _, e in tried for c in e.when}
    takers: set[int] = set()
    for point in itertools.product(*domains):
        at = dict(zip(names, point, strict=True))
        taker = next(
            (
                i
                for i, e in tried
                if all(at[c.arg] is not _OTHER and value_key(at[c.arg]) in keys[id(c)] for c in e.when)
            ),
            None,
        )
        if taker is None:
            work.left_out = at
            return None
        takers.add(taker)
    return sorted(takers) if len(takers) > 1 else None
