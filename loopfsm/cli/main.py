"""The ``loopfsm`` command: check, render, build, diff and scaffold machine files; run, serve and store.

Exit codes are part of the contract for CI scripts: 0 all good, 1 a machine is
invalid (or diagrams are stale), 2 the command itself was used wrongly.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from collections.abc import Iterable, Sequence
from typing import Any

from loopfsm.core import loader
from loopfsm.core.errors import ConfigError, LoopFsmError, Problem, SpecError
from loopfsm.rendering.errors import DrawingTooSlow, GraphvizMissing, RenderError
from loopfsm.cli import table_commands
from loopfsm.cli import verify_commands
from loopfsm.cli import review_commands
from loopfsm.cli import store_commands
from loopfsm.cli.common import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    _OutputError,
    _UsageError,
    check_refuses,
    count,
    machine_paths,
    output_dir,
    project_of,
    registries_of,
    report,
    write_file,
)
from loopfsm.core.pyproject import shown

from loopfsm.cli.project import FileResult, load_machines
from loopfsm.core.registries import Registries
from loopfsm.rendering import DOT_TIMEOUT, EXPORTS, FORMATS, parse_formats, render
from loopfsm.core.spec import Spec


def cmd_validate(args: argparse.Namespace) -> int:
    """Schema only: needs no registry, so it suits editors and pre-commit hooks."""
    from loopfsm.core.source import SourceProblems, read_file  # noqa: PLC0415 - YAML is imported by the commands that parse

    status = EXIT_OK
    for path in machine_paths(args.paths, project_of(args)):
        try:
            src = read_file(path)
            problems = loader.schema_problems(src)
        except SourceProblems as err:
            problems = err.problems
        if problems:
            report(problems)
            status = EXIT_INVALID
        else:
            print(f"{path}: valid")
    return status


def _load_all(
    paths: list[Path],
    registries: Registries,
    *,
    show_warnings: bool,
    require_registry: bool = False,
    tolerate_broken: bool = True,
) -> tuple[list[Spec], int]:
    """Errors always; warnings and notes (what went unchecked for want of a registry) when asked."""
    loaded = load_machines(paths, registries, require_registry=require_registry, tolerate_broken=tolerate_broken)
    report(p for p in loaded.problems if show_warnings or p.severity == "error")
    return loaded.specs, EXIT_INVALID if loaded.failed else EXIT_OK


def _gh_escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


GH_LEVEL = {"error": "error", "warning": "warning"}


def _emit(fmt: str, command: str, problems: list[Problem], files: list[dict[str, Any]]) -> None:
    """Problems and per-file results as text (stderr / stdout), JSON, or GitHub Actions annotations."""
    failed = any(p.severity == "error" for p in problems)
    if fmt == "json":
        print(
            json.dumps(
                {
                    "ok": not failed,
                    "files": files,
                    "problems": [
                        {
                            "file": p.file,
                            "line": p.line,
                            "column": p.column,
                            "path": p.path,
                            "severity": p.severity,
                            "message": p.message,
                        }
                        for p in problems
                    ],
                },
                indent=2,
            )
        )
        return
    if fmt == "github":
        for p in problems:
            level = GH_LEVEL.get(p.severity, "notice")
            title = f"loopfsm {command}" + (f" {p.path}" if p.path else "")
            print(
                f"::{level} file={_gh_escape(p.file, True)},line={p.line},col={p.column},"
                f"title={_gh_escape(title, True)}::{_gh_escape(p.message)}"
            )
    else:
        report(problems)
    for f in files:
        if f["ok"]:  # a failing file's errors are printed above; its summary is for JSON readers
            print(f["summary"])


def _file_entry(result: FileResult) -> dict[str, Any]:
    """One file of ``check``'s report: ``ok`` with its counts, or not ok with how many errors it has
    (a file that could not be loaded has no counts)."""
    spec = result.spec
    if spec is None:
        return {"file": result.file, "ok": False, "errors": result.errors, "summary": _failed(result)}
    counts = {"states": len(spec.states), "feeds": len(spec.events), "decisions": len(spec.decisions)}
    if result.errors:  # loaded, but refused (a registry --require-registry wanted and did not find)
        return {"file": result.file, "ok": False, **counts, "errors": result.errors, "summary": _failed(result)}
    summary = (
        f"{spec.file}: ok ({count(len(spec.states), 'state')}, {count(len(spec.events), 'feed')}, "
        f"{count(len(spec.decisions), 'decision')})"
    )
    return {"file": result.file, "ok": True, **counts, "summary": summary}


def _failed(result: FileResult) -> str:
    return f"{result.file}: {count(result.errors, 'error')}"


def cmd_check(args: argparse.Namespace) -> int:
    project = project_of(args)
    loaded = load_machines(
        machine_paths(args.paths, project),
        registries_of(args, project),
        require_registry=args.require_registry,
        tolerate_broken=False,
    )
    files = [_file_entry(result) for result in loaded.files]
    _emit(args.format, "check", list(loaded.problems), files)
    return EXIT_INVALID if loaded.failed else EXIT_OK


def _formats(text: str) -> list[str]:
    try:
        return parse_formats(text)
    except ValueError as err:
        raise _UsageError(str(err)) from None


def _unique_names(specs: list[Spec]) -> tuple[list[Spec], bool]:
    """Two files declaring one machine name would overwrite each other's diagrams: refuse the later ones."""
    first: dict[str, Any] = {}
    kept, clash = [], False
    for spec in specs:
        if spec.name in first:
            clash = True
            line, col = spec.source.locate(("machine",))
            print(
                f"{spec.file}:{line}:{col}: machine: machine '{spec.name}' is also declared by "
                f"{first[spec.name].file}; their diagrams would overwrite each other",
                file=sys.stderr,
            )
            continue
        first[spec.name] = spec
        kept.append(spec)
    return kept, clash


def _dot_timeout(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--dot-timeout",
        type=_seconds,
        default=DOT_TIMEOUT,
        metavar="SECONDS",
        help=f"stop Graphviz's dot after this long on one picture (default {DOT_TIMEOUT:g})",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < 86_400:
        raise argparse.ArgumentTypeError(f"seconds must be more than 0 and less than a day: {text!r}")
    return value


def _too_slow(err: DrawingTooSlow, out: Path, others: str, stems: list[str]) -> DrawingTooSlow:
    """The timeout said with what to do: draw the pictures without a limit, leave SVG out, or allow longer.

    ``stems`` are every picture of the machine (``big``, ``big.detailed``, a decision chart): nothing was
    written, so the advice draws them all, not only the one that timed out (the overview went missing)."""
    slow = DrawingTooSlow(err.seconds, err.picture)
    drawn = [shlex.quote(str(out / stem)) for stem in stems]  # a folder may hold a space
    if len(drawn) == 1:
        command = f"dot -Tsvg {shlex.quote(f'{out / stems[0]}.dot')} -o {shlex.quote(f'{out / stems[0]}.svg')}"
    else:
        command = f'for f in {" ".join(drawn)}; do dot -Tsvg "$f.dot" -o "$f.svg"; done'
    slow.args = (
        f"{err}; nothing was written. Leave SVG out (--format {others}) and draw "
        f"{'it' if len(drawn) == 1 else 'the pictures'} yourself with `{command}`, or allow longer: "
        "--dot-timeout SECONDS",
    )
    return slow


def cmd_render(args: argparse.Namespace) -> int:
    fmts = _formats(args.format)
    project = project_of(args)
    specs, status = _load_all(machine_paths(args.paths, project), registries_of(args, project), show_warnings=False)
    specs, clash = _unique_names(specs)
    if not specs:  # nothing to draw: leave no empty output folder behind
        return EXIT_INVALID if clash else status
    rendered: dict[str, str] = {}
    where = Path(args.output) if args.output else shown(project.diagrams)
    for spec in specs:  # everything is drawn before anything is written: a missing Graphviz writes nothing
        others = ",".join(f for f in fmts if f != "svg") or "dot,mermaid,md"
        try:
            rendered.update(render(spec, fmts, detailed=args.detailed, dot_timeout=args.dot_timeout))
        except GraphvizMissing as err:
            raise GraphvizMissing(f"{err}, or leave SVG out: --format {others}") from None
        except DrawingTooSlow as err:  # the advice draws from the .dot file: it is in the formats it names
            with_dot = others if "dot" in others.split(",") else f"dot,{others}"
            stems = [
                n.removesuffix(".dot") for n in render(spec, ["dot"], detailed=args.detailed) if n.endswith(".dot")
            ]
            raise _too_slow(err, where, with_dot, stems) from None
    out = output_dir(where)
    for name, text in rendered.items():
        write_file(out / name, text)
        print(out / name)
    return EXIT_INVALID if clash else status


GENERATED = (".svg", ".dot", ".mmd", ".md")
# ``build`` lists what it wrote here, and deletes a file only if an earlier build
# listed it: a README or a logo that lives beside the diagrams is never touched.
MANIFEST = ".loopfsm-generated"


def _read_manifest(out: Path) -> set[str]:
    path = out / MANIFEST
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 1 << 20:
            return set()
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return set()
    # Only bare names of generated kinds: a manifest edited to say ../x or README.md deletes nothing.
    return {n for n in lines if n and n == Path(n).name and not n.startswith(".") and n.endswith(GENERATED)}


def _manifest_text(names: Iterable[str]) -> str:
    return "".join(f"{n}\n" for n in sorted(names))


def _current(path: Path, want: str) -> bool:
    try:
        return path.is_file() and not path.is_symlink() and path.read_text(encoding="utf-8") == want
    except (OSError, UnicodeDecodeError):
        return False


def _svg_current(path: Path, source: str) -> bool:
    """An SVG is current when it carries the digest of the DOT text it would be drawn from (no Graphviz needed)."""
    from loopfsm.rendering.dot import source_digest, svg_stamp  # noqa: PLC0415 - Graphviz is loaded by the commands that draw

    try:
        if not path.is_file() or path.is_symlink():
            return False
        return svg_stamp(path.read_text(encoding="utf-8")) == source_digest(source)
    except (OSError, UnicodeDecodeError):
        return False


def _draw(svgs: dict[str, str], out: Path, timeout: float) -> dict[str, str]:
    """Draw every SVG in ``svgs`` (name -> DOT text) before anything is written, so a missing Graphviz, or one
    that takes too long, leaves diagrams/ as it was."""
    from loopfsm.rendering.dot import svg_from_source  # noqa: PLC0415

    name = ""
    try:
        drawn = {}
        for name, source in svgs.items():
            drawn[name] = svg_from_source(source, timeout)
        return drawn
    except DrawingTooSlow as err:
        slow = DrawingTooSlow(err.seconds)  # build stamps every SVG it draws: one drawn by hand reads as stale
        slow.args = (f"{err} of {out / name}; nothing was written. Allow longer: --dot-timeout SECONDS",)
        raise slow from None
    except GraphvizMissing as err:
        shown_names = [str(out / n) for n in sorted(svgs)[:5]]
        names = ", ".join(shown_names) + (f" and {len(svgs) - 5} more" if len(svgs) > 5 else "")
        raise GraphvizMissing(
            f"{err}; it is needed to redraw {names}. Nothing was written. `loopfsm build --check` "
            "needs no Graphviz, and `loopfsm render --format dot,mermaid,md` writes the other formats"
        ) from None


def cmd_build(args: argparse.Namespace) -> int:
    project = project_of(args)
    machines = Path(args.machines) if args.machines else shown(project.machines)
    out = Path(args.output) if args.output else shown(project.diagrams)
    if not machines.is_dir():
        raise _UsageError(f"no machines directory at {machines}")
    paths = sorted(machines.glob("*.yaml"))
    if not paths:
        raise _UsageError(f"no *.yaml files in {machines}")
    specs, status = _load_all(paths, registries_of(args, project), show_warnings=not args.check)
    specs, clash = _unique_names(specs)
    if status != EXIT_OK or clash:
        return EXIT_INVALID
    texts: dict[str, str] = {}
    for spec in specs:
        texts.update(render(spec, [f for f in FORMATS if f != "svg"]))
    # Every DOT file has its SVG, drawn from the same text; it is drawn only when it is not current.
    svgs = {n[: -len(".dot")] + ".svg": t for n, t in texts.items() if n.endswith(".dot")}
    texts[MANIFEST] = _manifest_text([*texts, *svgs])
    count = len(texts) - 1 + len(svgs)
    listed = _read_manifest(out) if out.is_dir() else set()
    leftover = sorted(n for n in listed - set(texts) - set(svgs) if (out / n).is_file() and not (out / n).is_symlink())
    stale_texts = {n: t for n, t in sorted(texts.items()) if not _current(out / n, t)}
    stale_svgs = {n: t for n, t in sorted(svgs.items()) if not _svg_current(out / n, t)}
    if args.check:
        for n in sorted([*stale_texts, *stale_svgs]):
            print(f"stale: {out / n}", file=sys.stderr)
        for n in leftover:
            print(f"left over from an earlier build: {out / n}", file=sys.stderr)
        if stale_texts or stale_svgs or leftover:
            print(f"run `loopfsm build` and commit {out}/", file=sys.stderr)
            return EXIT_INVALID
        print(f"{out}: {count} files up to date")
        return EXIT_OK
    drawn = _draw(stale_svgs, out, args.dot_timeout)
    output_dir(out)
    for n, t in sorted({**stale_texts, **drawn}.items()):
        write_file(out / n, t)
        if n != MANIFEST:
            print(f"wrote {out / n}")
    for n in leftover:
        try:
            (out / n).unlink()
        except OSError as err:
            raise _OutputError(f"cannot remove {out / n}: {err.strerror or type(err).__name__}") from None
        print(f"removed {out / n}")
    print(f"{len(specs)} machine{'s' * (len(specs) != 1)}, {count} files in {out}")
    return EXIT_OK


def cmd_new(args: argparse.Namespace) -> int:
    """Scaffold a machine, its registry and its test; refuses rather than overwrite anything."""
    from loopfsm.cli import scaffold

    project = project_of(args)
    try:
        plan = scaffold.plan(project, args.name)
    except ConfigError as err:
        raise _UsageError(str(err)) from None
    try:
        lines = scaffold.write(plan)
    except ConfigError as err:
        raise _UsageError(str(err)) from None
    for line in lines:
        print(line)
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    print(json.dumps(loader.machine_schema(), indent=2))
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    """Exit 0 when only wording changed, 1 when behaviour did, 2 when a side is unreadable or invalid.

    ``--git`` takes the seven arguments git hands an external diff driver and
    always exits 0 for a readable pair (git stops at the first non-zero exit).
    """
    from loopfsm.rendering.diff import diff_specs, load_for_diff

    if args.git:
        if len(args.files) != 7:
            raise _UsageError("--git expects the 7 arguments git passes to a diff driver")
        shown, old, new = args.files[0], args.files[1], args.files[4]
    else:
        if len(args.files) != 2:
            raise _UsageError("give two machine files: OLD NEW")
        shown, (old, new) = args.files[1], args.files
    if args.git and (old == "/dev/null" or new == "/dev/null"):
        print(f"{shown}: machine file {'added' if old == '/dev/null' else 'removed'}")
        return EXIT_OK
    specs = []
    for path, side in ((old, "old"), (new, "new")):
        try:
            specs.append(load_for_diff(path))
        except SpecError as err:
            if args.git:  # git stops at a driver's non-zero exit: say it in the diff, under the repository's name
                print(f"{shown}: the {side} version cannot be compared:")
                for p in err.problems:
                    print(f"  {p.line}:{p.column}: {p.path + ': ' if p.path else ''}{p.message}")
                return EXIT_OK
            report(err.problems)
            return EXIT_USAGE
    d = diff_specs(specs[0], specs[1])
    print(f"{shown}:" if args.git else f"{old} -> {new}:")
    print("\n".join(d.lines()))
    refused = check_refuses(new, args)
    if refused:
        print(f"  {refused}")
    if args.git:
        return EXIT_OK
    return EXIT_INVALID if d.behaviour_changed else EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    if args.events is not None:
        if args.machine != "stream_assembly":
            raise _UsageError(f"--events replays a provider stream into stream_assembly, not {args.machine}")
        from loopfsm.router.streams.replay import replay

        return replay(Path(args.events))
    if args.script is None:
        raise _UsageError(f"run {args.machine} needs --script")
    from loopfsm.drivers.run import run_script

    return run_script(args.machine, Path(args.script))


def package_version() -> str:
    """The installed distribution's version (pyproject.toml is the one place it is written)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("loopfsm")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


class _Version(argparse.Action):
    """``--version``, looked up only when asked for (reading the installed metadata costs every command)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(f"loopfsm {package_version()}")  # on stdout, as argparse's own version action prints
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="loopfsm", description="State machines of agent runtimes as YAML tables.")
    p.add_argument("--version", action=_Version, help="show the installed version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    regs = argparse.ArgumentParser(add_help=False)
    regs.add_argument(
        "--registry",
        action="append",
        default=[],
        metavar="NAME=MODULE:ATTR",
        help="use MODULE:ATTR (imported from the project folder) for machines with 'registry: NAME'; "
        "repeatable, overrides [tool.loopfsm] registries in pyproject.toml",
    )

    s = sub.add_parser("validate", help="check machine files against the JSON Schema only")
    s.add_argument("paths", nargs="*", help="files or directories (default: machines/*.yaml)")
    s.set_defaults(func=cmd_validate)

    s = sub.add_parser(
        "check", parents=[regs], help="schema plus semantic checks (names, reachability, shadowing, ...)"
    )
    s.add_argument("paths", nargs="*", help="files or directories (default: the project's machines/*.yaml)")
    s.add_argument(
        "--require-registry",
        action="store_true",
        help="fail when a machine's registry is not declared (default: note what went unchecked)",
    )
    s.add_argument(
        "--format",
        choices=("text", "json", "github"),
        default="text",
        help="text (default), json (one object on stdout), github (Actions annotations)",
    )
    s.set_defaults(func=cmd_check)

    s = sub.add_parser(
        "render",
        parents=[regs],
        help="render machines to SVG, DOT, Mermaid and Markdown, or export them to XState and SCXML",
    )
    s.add_argument("paths", nargs="*", help="files or directories (default: the project's machines/*.yaml)")
    s.add_argument("-o", "--output", help="output directory (default: the project's diagrams folder)")
    s.add_argument(
        "--format",
        default=",".join(FORMATS),
        help=f"comma-separated subset of {','.join(FORMATS + EXPORTS)} (default: {','.join(FORMATS)})",
    )
    s.add_argument(
        "--detailed", action="store_true", help="also write NAME.detailed.*: every branch with its guards and actions"
    )
    _dot_timeout(s)
    s.set_defaults(func=cmd_render)

    s = sub.add_parser("build", parents=[regs], help="check every machine in machines/ and render it into diagrams/")
    s.add_argument("--check", action="store_true", help="write nothing; fail if diagrams/ is stale")
    s.add_argument("--machines", help="directory of machine files (default: [tool.loopfsm] machines, or machines)")
    s.add_argument("-o", "--output", help="diagram directory (default: [tool.loopfsm] diagrams, or diagrams)")
    _dot_timeout(s)
    s.set_defaults(func=cmd_build)

    s = sub.add_parser(
        "diff",
        parents=[regs],
        help="what changed between two versions of a machine file, in words",
        description="Semantic diff: '*' marks a behaviour change, '!' a change to what verify proves or feeds, "
        "'~' a reworded description. "
        "Exit 0: descriptions only; 1: behaviour changed; 2: bad input.",
    )
    s.add_argument("files", nargs="+", metavar="OLD NEW", help="the two versions of the file")
    s.add_argument("--git", action="store_true", help="called as a git diff driver (7 arguments), always exit 0")
    s.set_defaults(func=cmd_diff)

    s = sub.add_parser("new", help="scaffold a machine file, its registry module and a test that drives it")
    s.add_argument("name", help="snake_case name of the machine (also its registry and module name)")
    s.set_defaults(func=cmd_new)

    s = sub.add_parser("schema", help="print the JSON Schema of machine files")
    s.set_defaults(func=cmd_schema)

    store_commands.add_commands(sub)

    from loopfsm.cli.router_commands import add_commands

    add_commands(sub)

    verify_commands.add_commands(sub, regs)
    table_commands.add_commands(sub, regs)
    review_commands.add_commands(sub, regs)

    s = sub.add_parser("run", help="drive a machine through a scripted run and print its trace")
    s.add_argument("machine", help="machine to drive (engine_brain, agent_loop, router_run, stream_assembly)")
    s.add_argument("--script", help="YAML script of model replies and tool results")
    s.add_argument("--events", help="stream_assembly: recorded provider stream, one JSON event per line")
    s.set_defaults(func=cmd_run)
    _remember_parsers(p)
    return p


def _remember_parsers(parser: argparse.ArgumentParser) -> None:
    """Each command's parser records itself, so an option it does not take is refused with its usage.

    argparse reports an unrecognized argument with the top-level usage
    (``loopfsm [-h] [--version] COMMAND ...``), which does not say what the
    command takes; the deepest parser chosen sets the value last.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.set_defaults(_command_parser=sub)
                _remember_parsers(sub)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        command_parser: argparse.ArgumentParser = getattr(args, "_command_parser", parser)
        command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(args.func(args))
    except _UsageError as err:
        if getattr(args, "format", None) == "json":  # a tool reading stdout gets its one object even then
            _emit("json", args.command, [Problem("", 0, 0, "", str(err))], [])
        print(f"loopfsm {args.command}: {err}", file=sys.stderr)
        return EXIT_USAGE
    except (RenderError, _OutputError) as err:
        print(f"loopfsm {args.command}: {err}", file=sys.stderr)
        return EXIT_INVALID
    except LoopFsmError as err:
        print(f"loopfsm {args.command}: {err}", file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:  # ctrl-C at a prompt or mid-request: a line, not a traceback
        print(f"\nloopfsm {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_gone()


def _reader_gone() -> int:
    """The reader of stdout went away (``loopfsm schema | head``): stop quietly with the status a tool
    killed by SIGPIPE has, instead of a traceback, and let no flush at exit fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is not a file (a test's capture): nothing to flush
        pass
    return 141


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
