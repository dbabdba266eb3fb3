"""What a saved run's values look like, and whether an edited table can still read them.

A snapshot is readable by a table when its *shape* fits: the states it can be
in, the fields and types each state carries, the machine's data fields and
their types, and the versions of the codecs those types travel through.
Everything else in a table (wording, policy defaults and bounds, guards and
their parameters, branches, actions, decision rules) decides only what the
*next* feed does, so changing it must not strand a run: the restored run is
judged by the new table from its next feed on.

A snapshot records the shape it was taken under, so a table can judge a
snapshot of a version it never saw.  When the shapes differ, the table's
``migrations:`` say how the old one maps onto the new one; :func:`plan` is
the one place that decides, used alike by restore, ``check`` and ``diff``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .spec import MISSING, FieldDef, MigrationDef, Spec


def type_words(f: FieldDef) -> str:
    """A field's type as a shape records it: ``integer``, ``string?`` (nullable), ``message[]`` (a list)."""
    return f.type + ("[]" if f.list else "") + ("?" if f.nullable else "")


def has_default(f: FieldDef) -> bool:
    """Whether a run that never had this field can be given one (lists start empty, nullables None)."""
    return f.default is not MISSING or f.list or f.nullable


@dataclass(frozen=True)
class Shape:
    """The shape of a machine's saved runs: data and state fields by type, and codec versions.

    ``codecs`` maps each type name the fields use to its codec's version; it
    is empty where no registry was at hand (``diff`` reads files alone), and
    then codec versions are not compared.
    """

    machine: str
    version: int
    data: dict[str, str]
    states: dict[str, dict[str, str]]
    codecs: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The ``shape`` a snapshot carries (fresh containers each call: a caller may edit its snapshot)."""
        return {
            "data": dict(self.data),
            "states": {name: dict(fields) for name, fields in self.states.items()},
            "codecs": dict(self.codecs),
        }

    @staticmethod
    def from_json(machine: str, version: int, raw: Any) -> Shape | None:
        """The shape a snapshot recorded, or None when it is not one (a snapshot's content is untrusted)."""
        if not isinstance(raw, dict) or set(raw) != {"data", "states", "codecs"}:
            return None
        data, states, codecs = raw["data"], raw["states"], raw["codecs"]
        if not _fields_ok(data) or not isinstance(states, dict) or not isinstance(codecs, dict):
            return None
        if not all(isinstance(s, str) and _NAME.fullmatch(s) and _fields_ok(f) for s, f in states.items()):
            return None
        if not all(isinstance(k, str) and _NAME.fullmatch(k) and type(v) is int for k, v in codecs.items()):
            return None
        return Shape(machine, version, dict(data), {s: dict(f) for s, f in states.items()}, dict(codecs))


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
_TYPE = re.compile(r"[a-z_][a-z0-9_]{0,99}(\[\])?\??")


def _fields_ok(raw: Any) -> bool:
    """Names and type words only: a shape's words end up in refusals, so nothing else may ride in them."""
    return isinstance(raw, dict) and all(
        isinstance(k, str) and _NAME.fullmatch(k) and isinstance(v, str) and _TYPE.fullmatch(v) for k, v in raw.items()
    )


def values_unlike_shape(values: Mapping[str, Any], fields: Mapping[str, str], where: str) -> str | None:
    """Why a snapshot's ``values`` are not the ``fields`` its shape records (None when they are).

    A restore under another version fills fields the old shape lacked with
    their defaults; a field the snapshot's own shape records but its values
    lack would be filled the same way, a saved value lost without a word.
    Only recorded names are shown: the other keys are untrusted content.
    """
    lacking = [n for n in fields if n not in values]
    if lacking:
        more = " and more" if len(lacking) > 10 else ""
        return f"{where} lacks {', '.join(lacking[:10])}{more}, which its shape records"
    extra = sum(1 for n in values if n not in fields)
    if extra:
        return f"{where} holds {extra} field{'s' if extra > 1 else ''} its shape does not record"
    return None


def shape_of(spec: Spec, codec_versions: Mapping[str, int] | None = None) -> Shape:
    """The shape of ``spec``'s runs; ``codec_versions`` (type -> version) from its registry, when known."""
    used = {f.type for f in spec.data.values()} | {f.type for s in spec.states.values() for f in s.data.values()}
    codecs = {t: codec_versions[t] for t in sorted(used) if codec_versions is not None and t in codec_versions}
    return Shape(
        spec.name,
        spec.version,
        {n: type_words(f) for n, f in spec.data.items()},
        {s.name: {n: type_words(f) for n, f in s.data.items()} for s in spec.states.values()},
        codecs,
    )


def reads_shape(spec: Spec, m: MigrationDef) -> Shape:
    """The old shape a migration entry says it reads, codec versions included where it records them."""
    states = {s: dict(f) for s, f in m.reads_states.items()}
    return Shape(spec.name, m.from_version, dict(m.reads_data), states, dict(m.reads_codecs))


# -- comparing -------------------------------------------------------------------------


@dataclass(frozen=True)
class Misfit:
    """One element of an old shape the new table cannot read, and the state whose runs it strands (None: all)."""

    text: str
    state: str | None = None


def _widens(old: str, new: str) -> bool:
    """Whether a value of type ``old`` is always one of type ``new``: made nullable, or an integer made a number."""
    if new == old + "?":
        return True
    base = old.partition("[")[0].rstrip("?")
    rest = old[len(base) :]
    if base != "integer":
        return False
    return new in ("number" + rest, "number" + rest + ("" if rest.endswith("?") else "?"))


def _field_misfits(
    state: str | None,
    old: Mapping[str, str],
    new: Mapping[str, FieldDef],
    old_codecs: Mapping[str, int],
    new_codecs: Mapping[str, int],
) -> list[Misfit]:
    """Why values with fields ``old`` do not fit fields ``new`` (none when they do, added fields defaulting)."""
    where = "" if state is None else f" of state {state}"
    out: list[Misfit] = []
    for name, was in old.items():
        f = new.get(name)
        if f is None:
            out.append(Misfit(f"field {name}{where} no longer exists", state))
            continue
        now = type_words(f)
        if was != now and not _widens(was, now):
            out.append(Misfit(f"field {name}{where} changed from {was} to {now}", state))
            continue
        a, b = old_codecs.get(f.type), new_codecs.get(f.type)
        if a is not None and b is not None and a != b:
            out.append(Misfit(f"field {name}{where}: codec {f.type} changed from version {a} to {b}", state))
    for name, f in new.items():
        if name not in old and not has_default(f):
            out.append(Misfit(f"field {name}{where} was added without a default", state))
    return out


def fit_problems(old: Shape, new: Spec, new_codecs: Mapping[str, int]) -> list[Misfit]:
    """Why runs of shape ``old`` cannot be read by ``new`` as they are (empty: they can, new fields defaulting)."""
    out = _field_misfits(None, old.data, new.data, old.codecs, new_codecs)
    for name, fields in old.states.items():
        target = new.states.get(name)
        if target is None:
            out.append(Misfit(f"state '{name}' no longer exists", name))
        else:
            out += _field_misfits(name, fields, target.data, old.codecs, new_codecs)
    return out


# -- migrating ---------------------------------------------------------------------------


@dataclass
class MigratingRun:
    """A saved run on its way through a migration: what a registered ``transform`` receives and returns.

    ``state_data`` and ``data`` hold JSON values, as the snapshot does; the
    transform changes them in place or returns a new run.
    """

    state: str
    state_data: dict[str, Any]
    data: dict[str, Any]


@dataclass(frozen=True)
class Plan:
    """How runs of one shape are read by one table: through ``steps`` (none: as they are), or refused.

    ``problems`` names each element that cannot be read; ``refused_states``
    are the saved states whose runs they strand (a run in any other state
    still restores).
    """

    steps: tuple[MigrationDef, ...]
    problems: tuple[str, ...]
    refused_states: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def _split(key: str) -> tuple[str | None, str]:
    state, _, name = key.rpartition(".")
    return (state or None), name


def applicable(spec: Spec, version: int) -> tuple[MigrationDef, ...]:
    """The migrations a run saved under ``version`` goes through: those reading it or any later version."""
    if version >= spec.version:
        return ()
    return tuple(m for m in sorted(spec.migrations, key=lambda m: m.from_version) if m.from_version >= version)


def migrate_shape(old: Shape, steps: tuple[MigrationDef, ...], spec: Spec) -> Shape:
    """The shape runs of ``old`` have after ``steps``: renamed, merged, given defaults, retyped by transforms."""
    data, states = dict(old.data), {s: dict(f) for s, f in old.states.items()}
    codecs = dict(old.codecs)
    for i, m in enumerate(steps):
        target = reads_shape(spec, steps[i + 1]) if i + 1 < len(steps) else shape_of(spec)
        state_fields = {s: {_split(k)[1]: v for k, v in m.fields.items() if _split(k)[0] == s} for s in states}
        data = {m.fields.get(n, n): t for n, t in data.items()}
        merged: dict[str, dict[str, str]] = {}
        for s, fields in states.items():
            renamed = {state_fields[s].get(n, n): t for n, t in fields.items()}
            merged.setdefault(m.states.get(s, s), {}).update(renamed)
        states = merged
        for key in m.defaults:
            where, name = _split(key)
            if where is None:
                data.setdefault(name, target.data.get(name, "json"))
            elif where in states:
                states[where].setdefault(name, target.states.get(where, {}).get(name, "json"))
        if m.transform is not None:  # a transform converts values: the next shape's types are its promise
            data = {n: target.data.get(n, t) for n, t in data.items()}
            states = {s: {n: target.states.get(s, {}).get(n, t) for n, t in f.items()} for s, f in states.items()}
            codecs = {}
    return Shape(old.machine, spec.version, data, states, codecs)


def plan(spec: Spec, old: Shape, new_codecs: Mapping[str, int], state: str | None = None) -> Plan:
    """Decide how ``spec`` reads runs of shape ``old``: the one saved in ``state``, or (None) any of them."""
    saved = [state] if state is not None else list(old.states)
    if old.machine != spec.name:
        return Plan((), (f"it is of machine '{old.machine}', not '{spec.name}'",), tuple(saved))
    steps = applicable(spec, old.version)
    why: list[str] = []
    if old.version > spec.version:
        why.append(f"it was taken under version {old.version}, newer than this table's {spec.version}")
    elif spec.migrations and old.version < min(m.from_version for m in spec.migrations):
        oldest = min(m.from_version for m in spec.migrations)
        why.append(f"it was taken under version {old.version}, older than the oldest this table migrates ({oldest})")
    # Each saved state is carried on its own: states merged by a migration may record one field
    # under two types, and a run holds only its own state's values.
    texts: dict[str, None] = {}  # in order, once each: the data's misfits are every state's
    stranded: dict[str, bool] = {}  # saved state -> refused by a data misfit (True) or its own
    each: list[str | None] = [*saved] or [None]  # no saved state: the data alone
    for s in each:
        one = Shape(old.machine, old.version, old.data, {} if s is None else {s: old.states.get(s, {})}, old.codecs)
        shape = migrate_shape(one, steps, spec) if steps else one
        for x in fit_problems(shape, spec, new_codecs):
            texts.setdefault(x.text)
            if s is not None:
                stranded[s] = stranded.get(s, False) or x.state is None
    if not texts:
        return Plan(steps, (), ())
    everyone = any(stranded.values()) or not stranded
    refused = tuple(s for s in saved if everyone or s in stranded)
    return Plan(steps, (*why, *texts), refused)


def migrate_run(run: MigratingRun, steps: tuple[MigrationDef, ...], transforms: Callable[[str], Any]) -> MigratingRun:
    """``run`` carried through ``steps``: renames, merges, defaults, then each step's transform."""
    for m in steps:
        renamed_state = {_split(k)[1]: v for k, v in m.fields.items() if _split(k)[0] == run.state}
        data = {m.fields.get(n, n): v for n, v in run.data.items()}
        state_data = {renamed_state.get(n, n): v for n, v in run.state_data.items()}
        state = m.states.get(run.state, run.state)
        for key, value in m.defaults.items():
            where, name = _split(key)
            if where is None:
                data.setdefault(name, value)
            elif where == state:
                state_data.setdefault(name, value)
        run = MigratingRun(state, state_data, data)
        if m.transform is not None:
            # The transform may edit nested values in place: they must not be the caller's snapshot's.
            run = MigratingRun(run.state, copy.deepcopy(run.state_data), copy.deepcopy(run.data))
            result = transforms(m.transform)(run)
            if result is not None and not isinstance(result, MigratingRun):
                raise TypeError(f"transform returned {type(result).__name__}, not a MigratingRun or None")
            run = run if result is None else result
    return run
