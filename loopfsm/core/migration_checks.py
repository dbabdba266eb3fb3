"""Checking a table's ``migrations:`` chain: well-founded, and covering every shape change it claims to read.

Apart from :mod:`loopfsm.core.checks` because it needs the shape rules of
:mod:`loopfsm.core.shape`, which restore uses too: one rule, so ``check`` can
only prove what a restore will do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from .errors import did_you_mean
from .fieldtypes import python_checker
from .registry import BUILTIN_CODECS, Registry
from .shape import Shape, plan, reads_shape, shape_of
from .spec import MISSING, FieldDef, MigrationDef, Spec

if TYPE_CHECKING:  # pragma: no cover
    from .source import PathT


class Report(Protocol):
    """Where the problems go: the checker's own ``error`` and ``skip``."""

    def error(self, path: PathT, message: str, *, key: bool = False) -> None: ...
    def skip(self, kind: str, name: str) -> None: ...


def check_migrations(spec: Spec, reg: Registry | None, report: Report) -> None:
    """A migration chain must be well-founded and cover every shape change since the oldest version it reads.

    Each entry records the shape it reads, so coverage is proven from the
    file alone: each recorded shape is carried through the chain exactly as
    a restore would carry a snapshot of it, and must land on this table.
    """
    errors = 0

    def error(path: PathT, message: str, *, key: bool = False) -> None:
        nonlocal errors
        errors += 1
        report.error(path, message, key=key)

    chain = spec.migrations
    if not chain:
        return
    if spec.version <= 1:
        error(("migrations",), "migrations need a 'version:' above the versions they read", key=True)
        return
    seen: list[int] = []
    for m in chain:
        if m.from_version >= spec.version:
            error(
                m.path + ("from",),
                f"migration from version {m.from_version} reads a version not older than this table's {spec.version}",
            )
            return
        if seen and m.from_version <= seen[-1]:
            error(m.path + ("from",), "migrations are listed oldest first, one per version")
            return
        seen.append(m.from_version)
    for i, m in enumerate(chain):
        target = reads_shape(spec, chain[i + 1]) if i + 1 < len(chain) else shape_of(spec)
        old = reads_shape(spec, m)
        for old_state, new_state in m.states.items():
            if old_state not in old.states:
                error(
                    m.path + ("states", old_state),
                    f"version {m.from_version} has no state '{old_state}'{did_you_mean(old_state, old.states)}",
                    key=True,
                )
            if new_state not in target.states:
                error(
                    m.path + ("states", old_state),
                    f"state '{new_state}' does not exist in the version this migration leads to"
                    f"{did_you_mean(new_state, target.states)}",
                )
        for key in m.fields:
            where, _, name = key.rpartition(".")
            fields = old.data if not where else old.states.get(where)
            if fields is None or name not in fields:
                error(
                    m.path + ("fields", key),
                    f"version {m.from_version} has no field '{key}'"
                    + ("" if where else " (a state's field is written State.field)"),
                    key=True,
                )
        _renames_collide(m, old, error)
        last = i + 1 == len(chain)
        for key, value in m.defaults.items():
            where, _, name = key.rpartition(".")
            fields_of = target.data if not where else target.states.get(where)
            if fields_of is None or name not in fields_of:
                error(
                    m.path + ("defaults", key),
                    f"'{key}' is not a field of the version this migration leads to",
                    key=True,
                )
            else:
                # The last entry's default is held to the table's field (bounds too); an earlier
                # one's to the type words the next entry records, which a restore holds it to later.
                f = (
                    (spec.data[name] if not where else spec.states[where].data[name])
                    if last
                    else _field_of_words(name, fields_of[name])
                )
                codec = BUILTIN_CODECS.get(f.type)
                if codec is not None and not python_checker(f, codec)(value):
                    error(
                        m.path + ("defaults", key),
                        f"default {value!r} is not a {f.type}{' list' if f.list else ''}",
                    )
        if m.transform is not None:
            if reg is None:
                report.skip("migration", m.transform)
            elif m.transform not in reg.migrations:
                known = reg.migrations
                error(
                    m.path + ("transform",),
                    f"unknown migration '{m.transform}'{did_you_mean(m.transform, known)} "
                    f"(registry '{reg.name}' has: {', '.join(sorted(known)) or 'none'})",
                )
    if errors:
        return  # carrying shapes through a chain already wrong would only repeat it
    # Codec versions a migration records are held to the registry's (and the built-in types'): a run whose
    # codec changed is refused by restore unless a transform converts it.
    versions = {} if reg is None else {n: c.version for n, c in {**BUILTIN_CODECS, **reg.codecs}.items()}
    for m in chain:
        verdict = plan(spec, reads_shape(spec, m), versions)
        if not verdict.ok:
            error(
                m.path,
                f"the migrations do not carry version {m.from_version} to this table: " + "; ".join(verdict.problems),
            )


def _renames_collide(m: MigrationDef, old: Shape, error: Callable[..., None]) -> None:
    """Two fields renamed to one name, or onto a field kept under its own, would keep one value and drop the other.

    A restore would then fill the dropped field with its default: a saved
    value lost without a word, so the table is refused where it says so.
    """
    scopes: dict[str | None, list[str]] = {None: list(old.data), **{s: list(f) for s, f in old.states.items()}}
    for where, names in scopes.items():
        prefix = "" if where is None else f"{where}."
        landed: dict[str, list[str]] = {}
        for name in names:
            landed.setdefault(m.fields.get(prefix + name, name), []).append(prefix + name)
        for target, keys in landed.items():
            for key in keys:
                if key in m.fields and len(keys) > 1:
                    other = next(k for k in keys if k != key)
                    error(
                        m.path + ("fields", key),
                        f"'{key}' is renamed {target}, which '{other}' also becomes: "
                        "one of the two saved values would be lost",
                        key=True,
                    )


def _field_of_words(name: str, words: str) -> FieldDef:
    """A field as a recorded shape's type words describe it (``string?``, ``integer[]``): type, list, nullable."""
    nullable = words.endswith("?")
    base = words.removesuffix("?")
    listed = base.endswith("[]")
    return FieldDef(name, base.removesuffix("[]"), listed, nullable, MISSING, "", ())
