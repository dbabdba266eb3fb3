"""Which registry a machine file's ``registry:`` name means: one resolver for every source.

A name maps to an import target (``module:attribute``) declared in one of three
places, each overriding the one before:

1. installed: registries installed packages publish under the
   ``loopfsm.registries`` entry point group, loopfsm's own machines included
   (its ``pyproject.toml`` declares them like any other package would);
2. a project's ``pyproject.toml`` (``[tool.loopfsm] registries``);
3. the command line (``--registry NAME=MODULE:ATTR``).

Every target string comes from the user or an installed package, never from a
machine file: the file's ``registry:`` only picks among names declared here, so
no YAML can make loopfsm import a module its user did not name.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import LoopFsmError, RegistryError
from .registry import EMPTY, Registry

ENTRY_POINT_GROUP = "loopfsm.registries"

_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
# Patterns as text: ``re`` compiles (and caches) them on first use, not in every process that imports loopfsm.
_TARGET = rf"{_DOTTED}:{_DOTTED}"
_NAME = r"[a-z_][a-z0-9_]*"


def target_problem(target: object) -> str | None:
    """Why ``target`` is not a ``module:attribute`` import target, or None when it is."""
    if not isinstance(target, str) or not re.fullmatch(_TARGET, target):
        return f"expected 'module:attribute' (e.g. 'door:REGISTRY'), got {target!r}"
    return None


def name_problem(name: object) -> str | None:
    if not isinstance(name, str) or not re.fullmatch(_NAME, name):
        return f"registry name {name!r} is not a snake_case identifier"
    return None


@dataclass(frozen=True)
class Declared:
    """One registry name and where to import it from."""

    name: str
    target: str
    origin: str  # where the user (or a package) declared it, for messages
    folder: Path | None = None  # made importable for this import (a project's own folder)


def _make_importable(folder: Path | None) -> None:
    """Put a project's folder on ``sys.path`` for the rest of the process, as ``python -m`` would.

    It stays there: a registry module may import its siblings lazily, from
    inside a guard, long after loopfsm imported it.
    """
    if folder is not None and str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


def _load(d: Declared) -> Registry:
    """Import ``d.target``; every failure becomes a ``RegistryError`` naming where it was declared."""
    where = f"registry '{d.name}' ({d.target}, from {d.origin})"
    module_name, _, attr = d.target.partition(":")
    try:
        _make_importable(d.folder)
        value: object = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
    except AttributeError:
        raise RegistryError(f"{where}: module '{module_name}' has no attribute '{attr}'") from None
    except ModuleNotFoundError as err:
        hint = f" (looked in {d.folder} and the installed packages)" if d.folder else ""
        raise RegistryError(f"{where}: no module named '{err.name}'{hint}") from None
    except LoopFsmError:  # e.g. a module that compiles a machine file on import: report that file's problems
        raise
    except Exception as err:  # the user's module failed while importing: say so, no traceback
        raise RegistryError(f"{where}: importing '{module_name}' failed: {type(err).__name__}: {err}") from None
    if not isinstance(value, Registry):
        raise RegistryError(f"{where} is a {type(value).__name__}, not a loopfsm Registry")
    return value


def entry_points(group: str, name: str | None = None) -> Iterable[Any]:
    """Installed packages' entry points; importlib.metadata costs its import only when they are read."""
    from importlib.metadata import entry_points as read  # noqa: PLC0415

    return read(group=group) if name is None else read(group=group, name=name)


class _EntryPointSource:
    """Installed registries, read from the entry point group each time (installs change them)."""

    def declared(self) -> dict[str, Declared]:
        out: dict[str, Declared] = {}
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            out[ep.name] = Declared(ep.name, ep.value, f"entry point in {ENTRY_POINT_GROUP}")
        return out

    def load(self, name: str) -> Registry | None:
        for ep in entry_points(group=ENTRY_POINT_GROUP, name=name):
            try:
                reg = ep.load()
            except LoopFsmError:
                raise
            except Exception as err:
                raise RegistryError(
                    f"registry '{name}' (entry point in {ENTRY_POINT_GROUP}): "
                    f"loading failed: {type(err).__name__}: {err}"
                ) from None
            if not isinstance(reg, Registry):
                raise RegistryError(f"entry point '{name}' in {ENTRY_POINT_GROUP} is not a loopfsm Registry")
            return reg
        return None


class Registries:
    """Registry names a run may use: installed ones, then the user's declarations over them."""

    def __init__(self, declared: Iterable[Declared] = ()):
        self._installed = _EntryPointSource()
        self._declared: dict[str, Declared] = {}
        for d in declared:  # later declarations win: the command line after pyproject.toml
            self._declared[d.name] = d
        self._loaded: dict[str, Registry] = {}

    def declared(self, name: str) -> Declared | None:
        """The user's own declaration of ``name`` (pyproject.toml or command line), if any."""
        return self._declared.get(name)

    def names(self) -> list[str]:
        return sorted(set(self._installed.declared()) | set(self._declared))

    def find(self, name: str | None) -> Registry | None:
        """The registry ``name`` means, or None when nobody declared it; raises if a declared one fails."""
        if name is None:
            return EMPTY
        if name in self._loaded:
            return self._loaded[name]
        d = self._declared.get(name)
        reg = _load(d) if d is not None else self._installed.load(name)
        if reg is not None:
            self._loaded[name] = reg
        return reg

    def get(self, name: str | None) -> Registry:
        """The registry ``name`` means; an undeclared name is a ``RegistryError`` listing the known ones."""
        reg = self.find(name)
        if reg is None:
            names = self.names()
            hint = (
                ""
                if "turnstile" in names
                else "; loopfsm's own registries are not installed: in a "
                "checkout, run `pip install -e .` so its entry points are registered"
            )
            raise RegistryError(f"unknown registry '{name}' (known: {', '.join(names) or 'none'}){hint}")
        return reg


def registry_named(name: str | None) -> Registry:
    """The registry a machine file names, among those loopfsm ships or installed packages publish.

    The set of reachable registries is fixed by what is installed, never by
    what a YAML file says; the command line adds what a project declares.
    """
    return Registries().get(name)


def known_registries() -> list[str]:
    return Registries().names()
