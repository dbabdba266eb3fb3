"""``loopfsm verify``, ``loopfsm paths`` and ``loopfsm replay``: the commands of :mod:`loopfsm.verification.verify`."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any

from loopfsm.core.errors import LoopFsmError
from loopfsm.cli.common import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    _UsageError,
    machine_paths,
    project_of,
    registries_of,
    report,
    write_file,
)
from loopfsm.cli.project import load_machines
from loopfsm.cli.verify_workers import workers_option


def compiled_machines(args: argparse.Namespace) -> list[Any]:
    """The machines ``verify`` and ``replay`` drive, compiled with their registries; a file that
    does not load, or whose registry is not declared, is bad input (exit 2)."""
    from loopfsm.core.compiler import compile_spec  # noqa: PLC0415

    project = project_of(args)
    registries = registries_of(args, project)
    loaded = load_machines(machine_paths(args.paths, project), registries, require_registry=True)
    report(p for p in loaded.problems if p.severity == "error")
    if loaded.failed:
        raise _UsageError("cannot drive a machine that does not load with its registry (problems above)")
    return [compile_spec(spec, registries.get(spec.registry)) for spec in loaded.specs]


def json_option(text: str, option: str) -> tuple[str, Any]:
    name, eq, raw = text.partition("=")
    if not eq or not name:
        raise _UsageError(f"{option} {text!r}: expected NAME=VALUE")
    try:
        return name, json.loads(raw)
    except RecursionError:
        raise _UsageError(f"{option} {name}: the value is nested too deeply") from None
    except ValueError:
        return name, raw  # a bare word is a string: --values call_id=x


def _named(machine: str, err: Exception) -> str:
    """``err``'s message led by the machine's name, once (a policy's errors name it already)."""
    text = str(err)
    return text if text.startswith(f"{machine}: ") else f"{machine}: {text}"


def _policy_given(items: list[str], option: str, base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with each ``NAME=VALUE`` of ``items`` set; a name given twice is refused (the second hid the first)."""
    given = dict(base)
    seen: set[str] = set()
    for item in items:
        name, value = json_option(item, option)
        if name in seen:
            raise _UsageError(f"{option} {name}: given twice")
        seen.add(name)
        given[name] = value
    return given


def _check_starts(compiled: Any, args: argparse.Namespace, starts: tuple[Any, ...]) -> None:
    """Restore each ``--from`` snapshot once, so a refused one is named by its file (with several, which one)."""
    from loopfsm.verification.errors import ReviewError  # noqa: PLC0415

    for path, snap in zip(args.start, starts, strict=True):
        try:
            compiled.restore(snap)
        except LoopFsmError as err:
            raise ReviewError(f"--from {path}: {_named(compiled.name, err)}") from None


def verify_options(args: argparse.Namespace) -> Any:
    """``verify``'s and ``paths``' shared options, checked (a :class:`loopfsm.verification.verify_report.Options`).

    Bounds the command line leaves out are the defaults here; :func:`with_model` puts each machine's
    ``verify:`` section in their place.
    """
    from loopfsm.verification.verify_report import DEFAULT_DEPTH, DEFAULT_MAX_STATES, DEFAULT_TIME_LIMIT, Options  # noqa: PLC0415

    if (args.depth is not None and args.depth < 0) or (args.max_states is not None and args.max_states < 1):
        raise _UsageError("--depth is 0 or more and --max-states 1 or more")
    time_limit = getattr(args, "time_limit", None)
    if time_limit is not None and not (math.isfinite(time_limit) and time_limit >= 0):
        raise _UsageError("--time-limit is 0 (none) or more seconds")
    policy = _policy_given(args.set, "--set", {})
    values: dict[str, list[Any]] = {}
    for text in args.values:
        name, value = json_option(text, "--values")
        if not isinstance(value, list):
            value = [value]  # one value: --values call_id=a
        if not value:
            raise _UsageError(f"--values {text!r}: give at least one value")
        values[name] = value
    starts = []
    for path in args.start:
        try:
            snap = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as err:
            raise _UsageError(f"--from {path}: not a readable JSON snapshot ({type(err).__name__})") from None
        starts.append(snap)
    traces = Path(getattr(args, "traces", "."))
    if not traces.is_dir():
        raise _UsageError(f"--traces {args.traces}: no such directory")
    return Options(
        DEFAULT_DEPTH if args.depth is None else args.depth,
        DEFAULT_MAX_STATES if args.max_states is None else args.max_states,
        policy,
        values,
        tuple(starts),
        traces,
        not args.quiet,
        frozenset(args.forget),
        DEFAULT_TIME_LIMIT if time_limit is None else (time_limit or None),
        {name: "accepted on the command line" for name in getattr(args, "accept_unexercised", [])},
    )


def with_model(compiled: Any, opts: Any, args: argparse.Namespace) -> Any:
    """``opts`` for ``compiled`` with its ``verify:`` section in place of every bound the command line left out:
    the depth, limit and starts unless given; its policy numbers and values under those given; its forgotten
    fields and accepted invariants beside those given."""
    from dataclasses import replace  # noqa: PLC0415

    from loopfsm.verification.errors import ReviewError  # noqa: PLC0415

    model = compiled.spec.verify_model
    if model is None:
        return opts
    starts = opts.starts
    if not args.start and model.starts:
        starts = tuple(_start_snapshot(compiled, start, ReviewError) for start in model.starts)
    return replace(
        opts,
        depth=model.depth if args.depth is None and model.depth is not None else opts.depth,
        max_states=model.max_states if args.max_states is None and model.max_states is not None else opts.max_states,
        policy={**model.policy, **opts.policy},
        values={**model.values, **opts.values},
        forget=opts.forget | frozenset(model.forget),
        starts=starts,
        unexercised={**model.unexercised, **opts.unexercised},
        source=f"{compiled.spec.file}'s verify: section" + (" and the command line" if _overrides(args) else ""),
    )


def _overrides(args: argparse.Namespace) -> bool:
    return bool(
        args.depth is not None or args.max_states is not None or args.start or args.set or args.values or args.forget
    )


def _start_snapshot(compiled: Any, start: Any, error: type[Exception]) -> dict[str, Any]:
    """The snapshot of a new instance with a ``verify: start:`` entry's fields set, as the machine restores it."""
    snap: dict[str, Any] = compiled.new(engine="interpreter").snapshot()
    if start.state is not None:
        snap["state"], snap["state_data"] = start.state, dict(start.state_data)
    else:
        snap["state_data"] = {**snap["state_data"], **start.state_data}
    snap["data"] = {**snap["data"], **start.data}
    line = compiled.spec.source.locate(start.path)[0]
    try:
        return compiled.restore(snap).snapshot()  # type: ignore[no-any-return]
    except LoopFsmError as err:
        raise error(f"{compiled.spec.file}:{line}: verify.start: {_named(compiled.name, err)}") from None


def cmd_verify(args: argparse.Namespace) -> int:
    """Exit 0 every invariant holds to the bound, 1 one is violated (or a goal unreached), 2 bad input."""
    from loopfsm.verification.errors import ReviewError  # noqa: PLC0415
    from loopfsm.verification.verify_report import verify_machine  # noqa: PLC0415

    from dataclasses import replace  # noqa: PLC0415

    from loopfsm.verification.verify_inputs import argument_names  # noqa: PLC0415

    opts = verify_options(args)
    machines = compiled_machines(args)
    if len(machines) == 1:  # one machine: a name it does not declare is reported by the machine itself
        named: list[tuple[Any, Any]] = [(machines[0], opts)]
    else:  # several: each gets the --set and --values it declares; a name none declares is a mistake
        policies = set().union(*(m.spec.policy for m in machines))
        arguments = set().union(*(argument_names(m.spec) for m in machines))
        for name in opts.policy:
            if name not in policies:
                raise _UsageError(f"--set {name}: none of the machines has a policy number of that name")
        for name in opts.values:
            if name not in arguments:
                raise _UsageError(f"--values {name}: none of the machines has an argument of that name")
        named = [
            (
                m,
                replace(
                    opts,
                    policy={k: v for k, v in opts.policy.items() if k in m.spec.policy},
                    values={k: v for k, v in opts.values.items() if k in argument_names(m.spec)},
                    forget=frozenset(opts.forget & set(m.spec.data)),
                ),
            )
            for m in machines
        ]
    from loopfsm.cli.verify_workers import run_all, usable_workers  # noqa: PLC0415

    def job(compiled: Any, mine: Any) -> Callable[[Any], int]:
        def verify_one(out: Any) -> int:
            try:
                _check_starts(compiled, args, mine.starts)
                return verify_machine(compiled, with_model(compiled, mine, args), out)
            except LoopFsmError as err:  # underivable inputs, a --set the policy refuses, a --from it refuses
                text = str(err) if isinstance(err, ReviewError) else _named(compiled.name, err)
                print(f"loopfsm verify: {text}", file=sys.stderr)
                return EXIT_USAGE

        return verify_one

    workers = usable_workers(args.workers, len(named))
    statuses = run_all(
        [job(compiled, mine) for compiled, mine in named],
        workers,
        lambda report: print(report, end="", flush=True),
        interrupted=1,
    )
    return max([EXIT_OK, *statuses])


def cmd_paths(args: argparse.Namespace) -> int:
    """Write (or print) the pytest module of shortest paths; exit 0, or 2 for bad input."""
    from loopfsm.verification.errors import ReviewError  # noqa: PLC0415
    from loopfsm.verification.paths import explore_policies, missed_rows, module_text, policy_variants  # noqa: PLC0415
    from loopfsm.verification.verify import Explorer  # noqa: PLC0415
    from loopfsm.verification.verify_report import progress_line  # noqa: PLC0415
    from loopfsm.verification.verify_inputs import domains_for  # noqa: PLC0415

    opts = verify_options(args)
    args.paths = [args.path]
    (compiled,) = compiled_machines(args) or [None]
    variants = []
    for text in args.variant:
        variants.append(_policy_given([item.strip() for item in text.split(",")], "--variant", opts.policy))
    starts = list(opts.starts) or [compiled.new().snapshot()]

    def explore(given: dict[str, Any]) -> tuple[Any, Any]:
        policy = compiled.policy(given)
        domains = domains_for(compiled.spec, policy, opts.values, compiled.registry.codecs, compiled.registry)
        progress = progress_line(sys.stderr, compiled.name) if opts.progress else None
        explorer = Explorer(compiled, policy, domains, progress=progress, forget=opts.forget)
        # paths aims at coverage, not at a proof: the machine's verify: bound is verify's, and a time limit
        # applies only when asked for (a module cut short would miss rows without saying why).
        return explorer, explorer.run(starts, opts.depth, opts.max_states, opts.time_limit if args.time_limit else None)

    try:
        _check_starts(compiled, args, opts.starts)
        explorations = explore_policies([opts.policy, *policy_variants(compiled.spec, opts.policy), *variants], explore)
    except ReviewError as err:
        raise _UsageError(str(err)) from None
    except LoopFsmError as err:
        raise _UsageError(_named(compiled.name, err)) from None
    out = Path(args.output) if args.output else None
    machine = _relative_to_root(Path(compiled.spec.file), project_of(args).root)
    text = module_text(explorations, machine, starts)
    if out is None:
        print(text, end="")
    else:
        write_file(out, text)
        counted = explorations[0].result.coverage.counted
        hit = len(counted) - len(missed_rows(explorations))
        under = f" under {len(explorations)} policies" if len(explorations) > 1 else ""
        print(f"wrote {out}: paths taking {hit} of {len(counted)} branches and decision rules{under}", file=sys.stderr)
    return EXIT_OK


def _relative_to_root(path: Path, root: Path) -> str:
    """The machine file as the generated module names it: relative to the project's root, or to the folder
    above it when it lies outside (the module looks for it in every folder above itself)."""
    resolved = path.resolve()
    base = root if resolved.is_relative_to(root) else resolved.parent.parent
    return resolved.relative_to(base).as_posix()


def cmd_replay(args: argparse.Namespace) -> int:
    """Exit 0 the machine does what the trace says, 1 it does not, 2 bad input."""
    from loopfsm.verification import tracefile  # noqa: PLC0415
    from loopfsm.verification.errors import ReviewError  # noqa: PLC0415

    args.paths = [args.path]
    (compiled,) = compiled_machines(args) or [None]
    from loopfsm.core.invariants import compile_invariants  # noqa: PLC0415

    from loopfsm.verification.verify import Judge  # noqa: PLC0415

    try:
        trace = tracefile.load(Path(args.trace))
        policy = compiled.policy(trace.policy)
        judge = Judge(compile_invariants(compiled.spec, compiled.registry, policy), policy)
        ok = tracefile.replay(compiled, trace, judge=judge)
    except ReviewError as err:
        raise _UsageError(str(err)) from None
    except LoopFsmError as err:
        raise _UsageError(f"{args.trace}: cannot be replayed: {err}") from None
    return EXIT_OK if ok else EXIT_INVALID


def add_commands(sub: Any, regs: argparse.ArgumentParser) -> None:
    """Add ``verify``, ``paths`` and ``replay`` to the ``loopfsm`` parser's subcommands."""
    explore = argparse.ArgumentParser(add_help=False)
    explore.add_argument(
        "--depth",
        type=int,
        default=None,
        help="explore every run of up to N feeds (default: the machine's verify: section, else 6)",
    )
    explore.add_argument(
        "--max-states",
        type=int,
        default=None,
        help="stop at once after N configurations, reporting what was explored (default: the machine's verify: "
        "section, else 200000)",
    )
    explore.add_argument(
        "--time-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop at once after this much CPU time per machine, reporting what was explored (default: 60; 0: none)",
    )

    explore.add_argument(
        "--from",
        dest="start",
        action="append",
        default=[],
        metavar="SNAPSHOT",
        help="start from this JSON snapshot (repeatable) instead of a new instance",
    )
    explore.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a policy number to explore under (repeatable)"
    )
    explore.add_argument(
        "--values",
        action="append",
        default=[],
        metavar="[FEED.]ARG=VALUES",
        help="the values to feed an argument, as a JSON list (or one value), instead of those derived from "
        "the table (repeatable)",
    )
    explore.add_argument(
        "--forget",
        action="append",
        default=[],
        metavar="FIELD",
        help="count configurations that differ only in this data field as one (sound when no guard or action "
        "reads it, such as a counter kept for reports; repeatable)",
    )
    explore.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")

    s = sub.add_parser(
        "verify",
        parents=[regs, explore],
        help="prove the machines' invariants over every run up to a bound; print shortest counterexamples",
        description="Explore the compiled machine breadth first and check its invariants. "
        "Without options each machine's verify: section gives the bound. Exit 0: every invariant holds and was "
        "exercised within the whole bound; 1: one is violated or never exercised, a goal is not reached, or the "
        "search stopped early; 2: bad input.",
    )
    s.add_argument("paths", nargs="*", help="files or directories (default: the project's machines/*.yaml)")
    s.add_argument(
        "--traces", default=".", metavar="DIR", help="folder to write counterexample trace files into (default: .)"
    )
    s.add_argument(
        "--workers",
        type=workers_option,
        default=1,
        metavar="N",
        help="verify up to N machines at once, each in a process of its own (at most one per CPU; default: 1)",
    )
    s.add_argument(
        "--accept-unexercised",
        action="append",
        default=[],
        metavar="INVARIANT",
        help="do not fail when this invariant's states are never reached within the bound (repeatable; a "
        "machine's verify: unexercised: says it with the reason)",
    )
    s.set_defaults(func=cmd_verify)

    s = sub.add_parser(
        "paths",
        parents=[regs, explore],
        help="write a pytest module of shortest feed paths that take every branch and decision rule reached",
    )
    s.add_argument("path", help="the machine file")
    s.add_argument("-o", "--output", help="the module to write (default: print it)")
    s.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=VALUE[,NAME=VALUE...]",
        help="also explore under the policy with these numbers changed, for rows the others miss (repeatable; "
        "every other value of each enum and boolean setting is tried first)",
    )
    s.set_defaults(func=cmd_paths)

    s = sub.add_parser(
        "replay",
        parents=[regs],
        help="feed a trace file to a machine; exit 1 where it differs from the trace",
    )
    s.add_argument("path", help="the machine file")
    s.add_argument("trace", help="the trace file (a counterexample of verify, or one written by hand)")
    s.set_defaults(func=cmd_replay)
