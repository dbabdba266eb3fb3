"""``loopfsm stub`` and ``loopfsm shape``: what code and the next version derive from a table.

``stub`` writes the type stub of a machine's policy class (built from the YAML at run time, so a type
checker sees nothing of it otherwise); ``shape`` prints the ``reads:`` block the next version's migration
needs, the shape the file's snapshots record, so nobody writes it by hand.
"""

from __future__ import annotations

import argparse
import keyword
import sys
from pathlib import Path
from typing import Any

from loopfsm.core.spec import Spec
from loopfsm.cli.common import (
    EXIT_INVALID,
    EXIT_OK,
    _UsageError,
    machine_paths,
    project_of,
    registries_of,
    report,
    write_file,
)
from loopfsm.cli.project import load_machines


def policy_class_name(machine: str) -> str:
    """``tool_breaker`` -> ``ToolBreakerPolicy``: the name a typed class gives its policy unless it names one."""
    return "".join(part.capitalize() for part in machine.split("_")) + "Policy"


def _loaded(args: argparse.Namespace, paths: list[Path]) -> list[Spec] | None:
    """The files' specs, errors reported (None when one fails: a stub or shape of a broken table is no use)."""
    project = project_of(args)
    loaded = load_machines(paths, registries_of(args, project), tolerate_broken=True)
    report(p for p in loaded.problems if p.severity == "error")
    return None if loaded.failed or not loaded.specs else loaded.specs


def cmd_stub(args: argparse.Namespace) -> int:
    from loopfsm.rendering.stubs import stub_module  # noqa: PLC0415

    specs = _loaded(args, machine_paths(args.paths, project_of(args)))
    if specs is None:
        return EXIT_INVALID
    if args.class_name is not None:
        if len(specs) != 1:
            raise _UsageError(f"--class names one class, but {len(specs)} machines were given")
        if not args.class_name.isidentifier() or keyword.iskeyword(args.class_name):
            raise _UsageError(f"--class {args.class_name[:60]!r} is not a Python name")
    classes = {args.class_name or policy_class_name(spec.name): spec for spec in specs}
    if len(classes) != len(specs):
        raise _UsageError("two of the files declare the same machine name, so their classes would have one name")
    text = stub_module(classes, "\n".join(spec.file for spec in specs))
    if args.output:
        write_file(Path(args.output), text)
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_shape(args: argparse.Namespace) -> int:
    """Print the ``reads:`` block a migration in the next version needs: the shape this file's snapshots record."""
    import yaml  # noqa: PLC0415

    from loopfsm.core.compiler import compile_spec  # noqa: PLC0415
    from loopfsm.core.shape import shape_of  # noqa: PLC0415

    specs = _loaded(args, [Path(args.path)])
    if specs is None:
        return EXIT_INVALID
    spec = specs[0]
    registry = registries_of(args, project_of(args)).find(spec.registry)
    shape = compile_spec(spec, registry).shape if registry is not None else shape_of(spec)
    reads: dict[str, Any] = {"data": shape.data, "states": shape.states}
    if shape.codecs:
        reads["codecs"] = shape.codecs
    print(f"# {spec.file}, version {spec.version}: the shape its snapshots record. The next version's migration")
    print(f"# reads it: paste this under its '- from: {spec.version}' entry.")
    if registry is None:
        print(f"# Codec versions are left out: registry '{spec.registry}' was not found (see `loopfsm check`).")
    sys.stdout.write(yaml.safe_dump({"reads": reads}, default_flow_style=None, sort_keys=False, width=100))
    return EXIT_OK


def add_commands(sub: Any, regs: argparse.ArgumentParser) -> None:
    """Add ``stub`` and ``shape`` to the ``loopfsm`` parser's subcommands."""
    s = sub.add_parser(
        "stub",
        parents=[regs],
        help="print a type stub (.pyi) of machines' policy classes, so mypy checks their keywords",
        description="A policy class is built from the YAML at run time; type checkers read this stub instead. "
        "Save it beside the module that serves the class and import the class from it under TYPE_CHECKING "
        "(docs/cli.md, 'Typed policy classes').",
    )
    s.add_argument("paths", nargs="*", help="files or directories (default: the project's machines/*.yaml)")
    s.add_argument(
        "--class",
        dest="class_name",
        metavar="NAME",
        help="the class's name (one machine only; default: the machine's name in CamelCase + 'Policy')",
    )
    s.add_argument("-o", "--output", help="write the stub to this file instead of printing it")
    s.set_defaults(func=cmd_stub)

    s = sub.add_parser(
        "shape",
        parents=[regs],
        help="print the reads: block a migration needs: the shape a machine file's snapshots record",
    )
    s.add_argument("path", help="the machine file (the version whose saved runs the next one must read)")
    s.set_defaults(func=cmd_shape)
