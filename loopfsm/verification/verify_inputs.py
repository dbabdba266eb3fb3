"""The feeds ``loopfsm verify`` tries in each configuration, derived from the table.

Every feed is tried with every combination of its arguments' values:

- an ``enum`` argument takes each of its values (and null when nullable), a boolean both;
- the clock (an integer argument named ``now``) takes the largest time fed so far
  plus 0, 1 and each duration of the policy (an integer policy number whose name
  ends in ``_ms``, ``_s`` or ``_seconds``), and each later instant the
  configuration holds (an integer data or state data value above the clock, or
  one inside their lists, mappings and dataclass values: a deadline, an expiry,
  a lease's) and the instant before it, so every run that crosses a
  duration or a deadline is among those tried;
- another integer argument takes 0, 1, and the value of the data field of the
  same name and its neighbours (a permit's ``generation`` is current, stale or
  from the future), within its declared bounds; one with a default (other than
  null) takes its default and each integer policy number too (it is compared
  with a threshold, most likely);
- another argument with a default (not an enum or boolean) is fed its default;
- a string argument takes the symbols ``a`` and ``b``, a number 0 and 1, a json ``{}``, a list
  argument ``[]``, its default (when not empty) and one item (every value of an ``enum`` list);
- an argument of a registry's type takes the examples its codec declares
  (``Registry.codec(..., examples=...)``);
- an argument whose YAML says ``verify:`` takes the values it names in the
  current configuration: ``from_data`` / ``from_state_data`` (a field's value,
  each item of a list, its ``key`` of each when given), the values of registered
  ``generator`` functions called with the configuration, and literal ``values``
  (see :class:`~loopfsm.core.spec.ArgValues`); this replaces the rules above;
- ``--values FEED.ARG=JSON_LIST`` (or ``ARG=...`` for every feed) replaces any of these.

An argument none of these rules covers (a codec-typed one without a default)
needs ``--values``; :class:`~loopfsm.verification.errors.ReviewError` says so.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from loopfsm.core.binding import bind, call_of
from loopfsm.core.fieldtypes import fits_type
from loopfsm.core.registry import BUILTIN_CODECS, Codec, Registry
from loopfsm.core.spec import MISSING, ArgValues, FieldDef, Spec
from loopfsm.core.verify_model import argument_fields, value_misfit

from loopfsm.verification.errors import ReviewError

CLOCK = "now"
#: The most values one generator may give one argument in one configuration: every combination of a feed's
#: argument values is tried in every configuration, so more is a mistake (a generator that never ends, most likely).
MAX_GENERATED = 1000
SYMBOLS = ("a", "b")
DURATION_SUFFIXES = ("_ms", "_s", "_seconds")


@dataclass(frozen=True)
class Step:
    """One feed with its arguments by name: what a counterexample and a trace file list."""

    feed: str
    args: tuple[tuple[str, Any], ...]

    def kwargs(self) -> dict[str, Any]:
        return dict(self.args)

    def shown(self) -> str:
        return f"{self.feed}({', '.join(f'{k}={v!r}' for k, v in self.args)})"

    def clock(self) -> int | None:
        for name, value in self.args:
            if name == CLOCK:
                return value if type(value) is int else None
        return None


def durations(spec: Spec, policy: Any) -> list[int]:
    """The policy's durations under ``policy``: integer numbers whose names say they are times."""
    out = []
    for p in spec.policy.values():
        value = getattr(policy, p.name)
        if p.type == "integer" and p.name.endswith(DURATION_SUFFIXES) and type(value) is int and value > 0:
            out.append(value)
    return sorted(set(out))


def _bounded(f: FieldDef, values: list[Any]) -> list[Any]:
    return [
        v
        for v in values
        if v is None or ((f.minimum is None or v >= f.minimum) and (f.maximum is None or v <= f.maximum))
    ]


def _takers(spec: Spec) -> list[tuple[str, dict[str, FieldDef]]]:
    """Every feed and decision with its arguments."""
    return [(ev.name, ev.args) for ev in spec.events.values()] + [(d.name, d.args) for d in spec.decisions.values()]


def argument_names(spec: Spec) -> set[str]:
    """What ``--values`` may name for this machine: ``ARG`` and ``FEED.ARG`` of every feed and decision."""
    takers = _takers(spec)
    return {f"{name}.{a}" for name, args in takers for a in args} | {a for _, args in takers for a in args}


def _instants_after(inst: Any, clock: int) -> set[int]:
    """Each integer the configuration holds above ``clock``, and the one before it: in data and state data, and
    inside their lists, mappings and dataclass values (a lease's ``expires_at`` in a list of leases)."""
    stack: list[tuple[Any, int]] = [
        (inst.state_data, 0),
        *((getattr(inst.data, n), 0) for n in type(inst).compiled.data_encoders),
    ]
    out: set[int] = set()
    while stack:
        v, depth = stack.pop()
        if type(v) is int:
            if v > clock:
                out |= {v - 1, v}
        elif depth >= _NESTING:
            continue
        elif isinstance(v, (list, tuple)):
            stack.extend((x, depth + 1) for x in v)
        elif isinstance(v, dict):
            stack.extend((x, depth + 1) for x in v.values())
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            stack.extend((getattr(v, f.name), depth + 1) for f in dataclasses.fields(v))
    return out


#: How deep :func:`_instants_after` looks into nested values (a field's list of records of lists is three).
_NESTING = 4


class GeneratorContext:
    """What a registered generator is called with besides the machine: the policy and the clock."""

    __slots__ = ("policy", "clock", "feed", "arg")

    def __init__(self, policy: Any, clock: int, feed: str, arg: str):
        self.policy = policy
        self.clock = clock  # the largest time fed so far on the way to this configuration
        self.feed = feed
        self.arg = arg


def _picked(value: Any, key: str | None) -> list[Any]:
    """A field's value as candidate values: each item of a list, else the value; its ``key`` of each."""
    items = value if isinstance(value, (list, tuple)) else [value]
    if key is None:
        return [v for v in items if v is not None]
    out = []
    for v in items:
        got = v.get(key) if isinstance(v, dict) else getattr(v, key, None)
        if got is not None:
            out.append(got)
    return out


def _short(value: Any, *, quote: bool = True) -> str:
    """``value`` (its repr, or the text itself) cut to a line's worth."""
    text = repr(value) if quote else str(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _unique(values: list[Any]) -> list[Any]:
    """``values`` without repeats, in order (values may be unhashable: told apart by their repr)."""
    seen: set[str] = set()
    out = []
    for v in values:
        r = repr(v)
        if r not in seen:
            seen.add(r)
            out.append(v)
    return out


@dataclass
class Domains:
    """Argument values per feed; the clock and data-named integers depend on the configuration."""

    spec: Spec
    deltas: tuple[int, ...]
    given: dict[str, list[Any]]  # "feed.arg" or "arg" -> values
    codecs: Mapping[str, Codec] = field(default_factory=dict)  # the registry's field types, with their examples
    policy: Any = None
    registry: Registry | None = None  # where an argument's `verify: {generator: ...}` is looked up
    _bound: dict[tuple[str, str], list[Any]] = field(default_factory=dict)

    def _policy_numbers(self) -> list[int]:
        """The integer numbers of the policy verify runs under."""
        out = []
        for p in self.spec.policy.values():
            value = getattr(self.policy, p.name, None) if self.policy is not None else p.default
            if p.type == "integer" and type(value) is int:
                out.append(value)
        return out

    def _generators(self, feed: str, f: FieldDef) -> list[Any]:
        """The bound generator callables of an argument's ``verify:`` block (bound once per argument)."""
        key = (feed, f.name)
        if key not in self._bound:
            assert f.verify is not None
            if f.verify.generators and self.registry is None:
                raise ReviewError(f"{self.spec.name}: argument '{f.name}' of '{feed}' names a generator: no registry")
            self._bound[key] = [
                bind(call_of(self.registry, "generator", g), self.policy)  # type: ignore[arg-type]
                for g in f.verify.generators
            ]
        return self._bound[key]

    def _declared(self, feed: str, f: FieldDef, v: ArgValues, inst: Any, clock: int) -> list[Any]:
        """The values an argument's ``verify:`` block names in this configuration."""
        out: list[Any] = []
        for name in v.from_data:
            out += _picked(getattr(inst.data, name), v.key)
        if v.from_state_data is not None and v.from_state_data in inst.state_data:
            out += _picked(inst.state_data[v.from_state_data], v.key)
        ctx = GeneratorContext(self.policy, clock, feed, f.name)
        for ref, gen in zip(v.generators, self._generators(feed, f), strict=True):
            out += self._generated(f"{self.spec.name}: generator '{ref.name}' of {feed}({f.name})", f, gen, inst, ctx)
        codec = self.codecs.get(f.type)
        decode = codec is not None and f.type not in BUILTIN_CODECS
        for value in v.values:
            if value is not None and decode:
                assert codec is not None
                value = [codec.from_json(x) for x in value] if f.list else codec.from_json(value)
            out.append(value)
        return _unique(out)

    def _generated(self, who: str, f: FieldDef, gen: Any, inst: Any, ctx: GeneratorContext) -> list[Any]:
        """A generator's values for ``f``; :class:`ReviewError` naming it when it raises or gives none of ``f``."""
        try:
            got = gen(inst, ctx)
            if isinstance(got, (str, bytes, Mapping)) or not isinstance(got, Iterable):
                raise ReviewError(f"{who} returned {type(got).__name__} {_short(got)}, not a list of values")
            values = list(itertools.islice(got, MAX_GENERATED + 1))
        except ReviewError:
            raise
        except Exception as err:  # noqa: BLE001 - the user's function: said in one line, as a bad input
            raise ReviewError(f"{who} raised {type(err).__name__}: {_short(str(err), quote=False)}") from None
        if len(values) > MAX_GENERATED:
            raise ReviewError(f"{who} returned more than {MAX_GENERATED} values (one that never ends?)")
        codec = self.codecs.get(f.type) or BUILTIN_CODECS.get(f.type)
        for value in values:
            items = value if f.list and isinstance(value, list) else [value]
            fits = (value is None and f.nullable) or (
                (isinstance(value, list) or not f.list)
                and (codec is None or all(fits_type(codec.py_type, x) for x in items))
            )
            if not fits:
                kind = f"a list of {f.type}" if f.list else f"a {f.type}"
                raise ReviewError(
                    f"{who} returned {_short(value)} ({type(value).__name__}): {ctx.feed}({f.name}) is {kind}"
                )
        return values

    def _fixed(self, feed: str, f: FieldDef) -> list[Any] | None:
        """The values of an argument that do not depend on the configuration, or None when they do."""
        for key in (f"{feed}.{f.name}", f.name):
            if key in self.given:
                return self._decoded(f, self.given[key], key)
        if f.verify is not None:
            return None
        null = [None] if f.nullable else []
        codec = self.codecs.get(f.type)
        examples = list(codec.examples) if codec is not None else []
        if f.list:
            item = list(f.enum) if f.enum else examples[:1] if examples else [SYMBOLS[0]]
            default = [list(f.default)] if isinstance(f.default, (list, tuple)) and f.default else []
            return _unique([[], *default, item])
        if f.enum is not None:
            return [*f.enum, *null]
        if f.type == "boolean":
            return [False, True, *null]
        if f.type == "integer" and (f.default is MISSING or f.default is not None):
            return None
        if f.default is not MISSING:
            return [f.default]
        if f.type == "string":
            return [*SYMBOLS, *null]
        if f.type == "number":
            return [0, 1, *null]
        if f.type == "json":
            return [{}, *null]
        if examples:
            return [*examples, *null]
        raise ReviewError(
            f"{self.spec.name}: argument '{f.name}' of feed '{feed}' is of type {f.type}: its values cannot be "
            f"derived from the table; declare examples with its codec (Registry.codec(..., examples=...)) "
            f"or give them with --values {feed}.{f.name}='[...]' (a JSON list)"
        )

    def _decoded(self, f: FieldDef, values: list[Any], key: str) -> list[Any]:
        """Values given as JSON (``--values``, the ``verify:`` section) for an argument of a registry's type,
        decoded by its codec as a snapshot's are; :class:`ReviewError` names one the codec refuses."""
        codec = self.codecs.get(f.type)
        if codec is None or f.type in BUILTIN_CODECS:
            return values
        out: list[Any] = []
        for value in values:
            try:
                if value is None and f.nullable:
                    out.append(None)
                elif f.list:
                    if not isinstance(value, list):
                        raise TypeError(f"a {f.type} list is a JSON list")
                    out.append([codec.from_json(x) for x in value])
                else:
                    out.append(codec.from_json(value))
            except Exception as err:  # the codec's own words say what is wrong with it
                raise ReviewError(
                    f"{self.spec.name}: --values {key}: value {_short(value)} is not a {f.type}"
                    f"{' list' if f.list else ''}: {type(err).__name__}: {str(err)[:200]}"
                ) from None
        return out

    def check(self) -> None:
        """Raise :class:`~loopfsm.verification.errors.ReviewError` now for an argument no rule covers."""
        for name, args in _takers(self.spec):
            for f in args.values():
                self._fixed(name, f)
        if not self.given:
            return  # no value given to check (the table's names are worked out only for one)
        names = argument_names(self.spec)
        for key in self.given:
            if key not in names:
                raise ReviewError(f"{self.spec.name}: --values {key}: no feed argument of that name")
        arguments = argument_fields(self.spec)
        for key, values in self.given.items():  # a value no feed takes would only be refused: said here instead
            for value in values:
                kind = next((k for k in (value_misfit(f, value) for f in arguments[key]) if k is not None), None)
                if kind is not None:
                    raise ReviewError(
                        f"{self.spec.name}: --values {key}: value {value!r} is not {kind}: argument '{key}' takes it"
                    )

    def fixed(self, feeds: Iterable[str]) -> bool:
        """Whether every argument of ``feeds`` takes values that do not depend on the configuration (an
        ``enum``, a default, ``--values``...): their steps are then the same in every configuration."""
        return all(self._fixed(feed, f) is not None for feed in feeds for f in self.spec.events[feed].args.values())

    def steps(self, inst: Any, clock: int, feeds: tuple[str, ...], first_only: bool = False) -> list[Step]:
        """Every feed of ``feeds`` with every combination of its arguments' values, in table order (with
        ``first_only``, the first combination of each: a feed every value of which is refused alike)."""
        out: list[Step] = []
        for feed in feeds:
            out += self.combinations(feed, self.spec.events[feed].args, inst, clock, first_only)
        return out

    def combinations(
        self, feed: str, args: dict[str, FieldDef], inst: Any, clock: int, first_only: bool = False
    ) -> list[Step]:
        """``feed`` (or a decision) with every combination of the values of ``args`` (or only the first)."""
        out: list[Step] = []
        names, choices = [], []
        for f in args.values():
            values = self._fixed(feed, f)
            if values is None:
                if f.verify is not None:
                    values = self._declared(feed, f, f.verify, inst, clock)
                elif f.name == CLOCK:
                    values = sorted({clock + d for d in self.deltas} | _instants_after(inst, clock))
                else:
                    near: list[Any] = [0, 1]
                    if f.default is not MISSING:  # compared with a threshold, most likely: try each policy number
                        near += [f.default, *self._policy_numbers()]
                    if f.name in self.spec.data and type(getattr(inst.data, f.name, None)) is int:
                        current = getattr(inst.data, f.name)
                        near += [current - 1, current, current + 1]
                    values = _bounded(f, sorted(set(near)))
                    if f.nullable:
                        values.append(None)
            names.append(f.name)
            choices.append(values)
        for combo in itertools.product(*choices):
            out.append(Step(feed, tuple(zip(names, combo, strict=True))))
            if first_only:
                break
        return out


def domains_for(
    spec: Spec,
    policy: Any,
    given: dict[str, list[Any]],
    codecs: Mapping[str, Codec] | None = None,
    registry: Registry | None = None,
) -> Domains:
    deltas = tuple(sorted({0, 1, *durations(spec, policy)}))
    domains = Domains(spec, deltas, given, dict(codecs or {}), policy, registry)
    domains.check()
    return domains
