"""A user's project as the command line sees it: its folders and the registries it declares.

A project says these once, in the ``[tool.loopfsm]`` table of its
``pyproject.toml``, found the way ruff finds its settings: the nearest
``pyproject.toml`` above the current folder that has the table.  Paths in it
are relative to that file's folder, which is also where declared registry
modules are imported from.  Without one, the current folder is the project
with the default layout (``machines/``, ``diagrams/``, no registries of its own).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopfsm.core.engines import engine_name
from loopfsm.core.pyproject import CONFIG, loopfsm_table, shown
from loopfsm.core.errors import ConfigError, LoopFsmError, Problem, SpecError, closest, did_you_mean
from loopfsm.core.loader import Lookup, load
from loopfsm.core.registries import Declared, Registries, name_problem, target_problem
from loopfsm.core.registry import Registry
from loopfsm.core.spec import Spec

KEYS = ("machines", "diagrams", "registries", "engine")


@dataclass(frozen=True)
class Project:
    root: Path
    config: Path | None = None  # the pyproject.toml it was read from
    machines: Path = Path("machines")
    diagrams: Path = Path("diagrams")
    declared: tuple[Declared, ...] = field(default=())

    def registries(self, extra: Iterable[Declared] = ()) -> Registries:
        """Installed registries, then this project's, then ``extra`` (the command line's) over both."""
        return Registries([*self.declared, *extra])


def _folder(path: Path, table: dict[str, Any], key: str, root: Path) -> Path:
    value = table.get(key, key)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{shown(path)}: [tool.loopfsm] {key} must be a folder name (a string), got {value!r}")
    folder = (root / value).resolve()  # links followed: a folder that leads elsewhere is elsewhere
    if not folder.is_relative_to(root):
        # build writes into diagrams/ and check reads machines/ with this project's registries:
        # a setting must not point either outside the project ('-o' names any folder explicitly).
        raise ConfigError(
            f"{shown(path)}: [tool.loopfsm] {key} must be a folder inside the project ({root}), "
            f"got {value!r}, which is {folder}"
        )
    return folder


def read_config(path: Path) -> Project | None:
    """The project ``path`` (a pyproject.toml) describes, or None when it has no ``[tool.loopfsm]``."""
    table = loopfsm_table(path)
    if table is None:
        return None
    root = path.parent.resolve()
    for key in table:
        if key not in KEYS:
            hint = did_you_mean(key, KEYS) or f" (allowed: {', '.join(KEYS)})"
            raise ConfigError(f"{shown(path)}: [tool.loopfsm] has no setting '{key}'{hint}")
    if "engine" in table:  # read by loopfsm.core.engines for every instance made under this project
        engine_name(table["engine"], f"{shown(path)} [tool.loopfsm]")
    regs = table.get("registries", {})
    if not isinstance(regs, dict):
        raise ConfigError(f'{shown(path)}: [tool.loopfsm] registries must be a table of name = "module:attribute"')
    declared = []
    for name, target in regs.items():
        problem = name_problem(name) or target_problem(target)
        if problem:
            raise ConfigError(f"{shown(path)}: [tool.loopfsm] registries.{name}: {problem}")
        declared.append(Declared(name, target, f"{path.name} [tool.loopfsm]", root))
    return Project(
        root, path, _folder(path, table, "machines", root), _folder(path, table, "diagrams", root), tuple(declared)
    )


def find_project(start: Path | None = None) -> Project:
    """The project around ``start`` (default: the current folder)."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / CONFIG
        if candidate.is_file():
            project = read_config(candidate)
            if project is not None:
                return project
    return Project(here, None, here / "machines", here / "diagrams")


def parse_registry_option(text: str, folder: Path) -> Declared:
    """``NAME=MODULE:ATTR`` from ``--registry``; the module is imported from ``folder`` first."""
    name, eq, target = text.partition("=")
    if not eq:
        raise ConfigError(f"--registry {text!r}: expected NAME=MODULE:ATTR (e.g. door=door:REGISTRY)")
    problem = name_problem(name) or target_problem(target)
    if problem:
        raise ConfigError(f"--registry {text!r}: {problem}")
    return Declared(name, target, "--registry", folder)


@dataclass(frozen=True)
class FileResult:
    """How one file given to :func:`load_machines` fared, so a report can list every file, failed or not.

    ``spec`` is the loaded machine, or None when the file could not be loaded;
    ``errors`` counts the error-severity problems reported for it.
    """

    file: str
    spec: Spec | None
    errors: int


@dataclass
class Loaded:
    """Machine files loaded against a project's registries, and what to tell the user about them."""

    specs: list[Spec] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # errors, warnings and notes, file by file
    failed: bool = False
    files: list[FileResult] = field(default_factory=list)  # one per path, in the order given


def _unchecked_text(unchecked: dict[str, list[str]]) -> str:
    if not unchecked:
        return "nothing else depended on it"
    plural = {"error class": "error classes"}
    parts = [f"{plural.get(kind, kind + 's')} {', '.join(names)}" for kind, names in unchecked.items()]
    return "not checked: " + "; ".join(parts)


def _lookup(registries: Registries, why_missing: list[str], tolerate_broken: bool, misspelt: list[str]) -> Lookup:
    """The loader's registry lookup, noting in ``why_missing`` why a file went without its registry
    (and in ``misspelt`` a known registry whose name is close to the one asked for)."""

    def lookup(name: str | None) -> Registry | None:
        try:
            reg = registries.find(name)
        except LoopFsmError as err:  # a broken module, or one whose import compiled a bad machine file
            if not tolerate_broken:
                raise
            why_missing.append(f"{err}; checked without it")
            return None
        if reg is None:
            close = closest(name, registries.names())
            hint = f"did you mean '{close}'? or " if close else ""
            why_missing.append(
                f"registry '{name}' is not declared ({hint}add {name} = \"MODULE:ATTR\" to [tool.loopfsm] "
                f"registries in pyproject.toml, or pass --registry {name}=MODULE:ATTR)"
            )
            if close:
                misspelt.append(close)
        return reg

    return lookup


def load_machines(
    paths: Iterable[Path], registries: Registries, *, require_registry: bool = False, tolerate_broken: bool = False
) -> Loaded:
    """Load every file, fully where its registry is declared, by its names alone where it is not.

    A registry nobody declared leaves a note saying which names went
    unchecked (an error with ``require_registry``, for CI).  A declared
    registry that fails to import is an error, unless ``tolerate_broken``
    (render and build, which need only the names in the file).
    """
    out = Loaded()
    for path in paths:
        why_missing: list[str] = []
        misspelt: list[str] = []
        lookup = _lookup(registries, why_missing, tolerate_broken, misspelt)
        try:
            spec = load(path, lookup=lookup)
        except SpecError as err:
            out.problems += err.problems
            out.failed = True
            out.files.append(FileResult(str(path), None, sum(p.severity == "error" for p in err.problems)))
            continue
        notes = []
        if why_missing:
            # A name close to a known registry is most likely a typo: say so louder than a note.
            severity = "error" if require_registry else ("warning" if misspelt else "note")
            notes.append(
                spec.source.problem(
                    ("registry",), f"{why_missing[0]}; {_unchecked_text(spec.unchecked)}", severity=severity
                )
            )
            out.failed |= require_registry
        out.problems += spec.warnings + notes
        out.files.append(FileResult(spec.file, spec, sum(p.severity == "error" for p in spec.warnings + notes)))
        if not (require_registry and why_missing):
            out.specs.append(spec)
    return out


def project_machine(near: str | Path, relative: str) -> Any:
    """The machine file ``relative`` (to its project's root) compiled with the project's registries, found
    from ``near`` (a generated test module's ``__file__``): the nearest folder above ``near`` holding the file
    is the root (else the nearest above the current folder, for a module kept outside the project), so the
    module runs wherever the project is checked out.  A registry the project declares in
    ``[tool.loopfsm]`` resolves as ``loopfsm check`` resolves it; one an installed package declares, too.
    """
    from loopfsm.core.compiler import compile_spec  # noqa: PLC0415

    start = Path(near).resolve()
    here = Path.cwd().resolve()
    for folder in (start.parent, *start.parent.parents, here, *here.parents):
        path = folder / relative
        if path.is_file():
            break
    else:
        raise ConfigError(
            f"no {relative} in any folder above {start.parent} or the current folder: the machine this module tests"
        )
    registries = find_project(folder).registries()
    loaded = load_machines([path], registries, require_registry=True)
    if loaded.failed:
        raise SpecError([p for p in loaded.problems if p.severity == "error"])
    (spec,) = loaded.specs
    return compile_spec(spec, registries.get(spec.registry))
