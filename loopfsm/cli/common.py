"""What every ``loopfsm`` subcommand shares: exit codes, usage errors, the project and its machine files.

Kept apart from :mod:`loopfsm.cli.main` so the command modules
(:mod:`.verify_commands`) can use them without importing the command line back.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from loopfsm.core.errors import ConfigError, Problem
from loopfsm.core.registries import Registries
from loopfsm.core.pyproject import shown

from loopfsm.cli.project import Project, find_project, parse_registry_option

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


class _UsageError(Exception):
    """The command was used wrongly (a missing file, a bad option value): exit 2 with the message."""


class _OutputError(Exception):
    """A generated file could not be written (or must not be: a symlink); exit 1, nothing else touched."""


def project_of(args: argparse.Namespace) -> Project:
    try:
        return find_project()
    except ConfigError as err:
        raise _UsageError(str(err)) from None


def registries_of(args: argparse.Namespace, project: Project) -> Registries:
    try:
        return project.registries(parse_registry_option(r, project.root) for r in args.registry)
    except ConfigError as err:
        raise _UsageError(str(err)) from None


def machine_paths(given: Sequence[str], project: Project | None = None) -> list[Path]:
    if not given:
        folder = shown(project.machines) if project else Path("machines")
        found = sorted(folder.glob("*.yaml"))
        if not found:
            raise _UsageError(f"no paths given and no {folder}/*.yaml here")
        return found
    out: list[Path] = []
    for g in given:
        p = Path(g)
        try:
            if p.is_dir():
                found = sorted(p.glob("*.yaml"))
                if not found:
                    raise _UsageError(f"no *.yaml files in directory {g}")
                out += found
            elif p.exists():
                out.append(p)
            else:
                p.stat()  # exists() says False for a symlink loop too: let stat say what it is
                raise _UsageError(f"no such file or directory: {g}")
        except FileNotFoundError:
            raise _UsageError(f"no such file or directory: {g}") from None
        except OSError as err:
            raise _UsageError(f"cannot access {g}: {err.strerror or type(err).__name__}") from None
    return out


def count(n: int, noun: str) -> str:
    """``1 error``, ``3 errors``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def check_refuses(path: str, args: argparse.Namespace) -> str | None:
    """The line that says NEW does not pass ``loopfsm check``, or None: a verdict on a file that cannot ship
    would otherwise read as a verdict on what ships (``diff`` itself needs only the schema)."""
    from loopfsm.cli.project import load_machines  # noqa: PLC0415 - loads the machines' registries

    project = project_of(args)
    loaded = load_machines([Path(path)], registries_of(args, project), tolerate_broken=True)
    errors = [p for p in loaded.problems if p.severity == "error"]
    if not errors:
        return None
    first = errors[0]
    where = f"{first.line}:{first.column}: {first.path + ': ' if first.path else ''}"
    more = f" (and {count(len(errors) - 1, 'more error')})" if len(errors) > 1 else ""
    return f"the new version does not pass `loopfsm check`: {where}{first.message}{more}"


def report(problems: Iterable[Problem]) -> None:
    for p in problems:
        print(p, file=sys.stderr)


def output_dir(out: Path) -> Path:
    """Create the output directory, or explain (exit 2) why it cannot be one."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise _UsageError(f"cannot write into {out}: it exists and is not a directory") from None
    except OSError as err:
        raise _UsageError(f"cannot create output directory {out}: {err.strerror or type(err).__name__}") from None
    return out


def write_file(path: Path, text: str) -> None:
    """Write one generated file, never through a symlink (it could point anywhere), atomically."""
    if path.is_symlink():
        raise _OutputError(f"refusing to write {path}: it is a symlink; remove it if loopfsm should write there")
    if path.exists() and not path.is_file():
        raise _OutputError(f"refusing to write {path}: it exists and is not a regular file")
    tmp = path.with_name(f".{path.name}.loopfsm-tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as err:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise _OutputError(f"cannot write {path}: {err.strerror or type(err).__name__}") from None
