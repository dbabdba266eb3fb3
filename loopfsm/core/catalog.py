"""``load_machine``: one way to get any machine, by name or from a file.

A name is a machine that an installed package declares (each machine loopfsm
ships, or a third party's): its registry is the ``loopfsm.registries`` entry point of
that name and its typed class the one declared for that registry.  A path is a
machine file, compiled with the registry its ``registry:`` line names, and with
that registry's typed class when it has one, so an edited copy of a shipped
machine keeps its typed methods.
"""

from __future__ import annotations

from pathlib import Path

from .compiler import CompiledMachine, compile_file
from .engines import EngineName
from .errors import RegistryError
from .registries import known_registries, registry_named


def _is_path(ref: str | Path) -> bool:
    if isinstance(ref, Path):
        return True
    return "/" in ref or "\\" in ref or ref.endswith((".yaml", ".yml"))


def load_machine(ref: str | Path, *, engine: EngineName | None = None) -> CompiledMachine:
    """The compiled machine named ``ref`` (``"engine_brain"``) or in the file at ``ref``.

    By name, the shipped machine is compiled once per process and shared;
    from a path, the file is loaded, checked and compiled on every call.
    ``engine`` (``"transitions"`` or ``"interpreter"``) is the engine its
    ``new()`` and ``restore()`` use; None leaves the process's default.
    Raises :class:`~loopfsm.core.errors.SpecError` for a bad file and
    :class:`~loopfsm.core.errors.RegistryError` for an unknown name.
    """
    compiled = _load(ref)
    return compiled if engine is None else compiled.with_engine(engine)


def _load(ref: str | Path) -> CompiledMachine:
    if _is_path(ref):
        return compile_file(ref)
    registry = registry_named(str(ref))
    cls = registry.instance_class
    if cls is None:
        raise RegistryError(
            f"registry '{ref}' declares no machine class; load its machine file by path "
            f"(machines by name: {', '.join(known_registries())})"
        )
    return cls.compiled  # type: ignore[attr-defined,no-any-return]
