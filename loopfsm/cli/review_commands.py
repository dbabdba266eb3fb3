"""``loopfsm review``: the review site of :mod:`loopfsm.review_site`, served on the loopback interface or written
as static pages."""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from loopfsm.cli.common import EXIT_OK, _UsageError, check_refuses
from loopfsm.cli.verify_commands import compiled_machines

MAX_SNAPSHOT_BYTES = 16 * 1024 * 1024


def _start(path: str | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_SNAPSHOT_BYTES + 1)
    except OSError as err:
        raise _UsageError(f"--from {path}: cannot read it: {err.strerror or type(err).__name__}") from None
    if len(raw) > MAX_SNAPSHOT_BYTES:
        raise _UsageError(f"--from {path}: larger than 16 MiB")
    try:
        snap = json.loads(raw)
    except (ValueError, RecursionError):
        raise _UsageError(f"--from {path}: not a JSON snapshot") from None
    if not isinstance(snap, dict) or not isinstance(snap.get("machine"), str):
        raise _UsageError(f"--from {path}: not a snapshot (a JSON object naming its machine)")
    return snap


def _side(text: str, tmp: Path, name: str) -> tuple[str, str]:
    """A machine file for one side of ``--diff``: a path, or ``REV:PATH`` read with ``git show``; (file, label)."""
    if text.startswith("-"):  # never an option of git's (`--output=...` would write a file)
        raise _UsageError(f"--diff {text[:60]!r}: a machine file or REV:PATH, not an option")
    if Path(text).is_file() or ":" not in text:
        return text, text
    try:
        shown = subprocess.run(["git", "show", "--end-of-options", text], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise _UsageError(f"--diff {text}: git could not be run ({type(err).__name__})") from None
    if shown.returncode != 0 or len(shown.stdout) > MAX_SNAPSHOT_BYTES:
        raise _UsageError(f"--diff {text}: not a file, and git has no such REV:PATH")
    base = Path(text.split(":", 1)[1]).name
    path = tmp / name / (base if base not in ("", ".", "..") else "machine.yaml")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(shown.stdout)
    return str(path), text


def _diff_page(pair: list[str], args: argparse.Namespace) -> str:
    from loopfsm.core.errors import SpecError  # noqa: PLC0415
    from loopfsm.rendering.diff import diff_specs, load_for_diff  # noqa: PLC0415
    from loopfsm.review_site.pages import diff_page  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp:
        sides = [_side(text, Path(tmp), side) for text, side in zip(pair, ("old", "new"), strict=True)]
        try:
            old, new = (load_for_diff(path) for path, _ in sides)
        except SpecError as err:
            raise _UsageError(f"--diff: a side cannot be compared: {err}") from None
        except OSError as err:  # a folder, a file that cannot be read
            raise _UsageError(f"--diff: a side cannot be read ({err.strerror or type(err).__name__})") from None
        refused = check_refuses(sides[1][0], args)
        return diff_page(diff_specs(old, new), sides[0][1], sides[1][1], refused=refused)


def cmd_review(args: argparse.Namespace) -> int:
    """Serve the review site until interrupted, or write it under ``--static``; exit 2 on bad input."""
    try:
        from loopfsm.review_site.pages import SiteMachine  # noqa: PLC0415
    except ImportError as err:  # the `review` extra is not installed
        raise _UsageError(f"needs the review extra (pip install 'loopfsm[review]'): {err.name} is missing") from None
    if args.diff and args.paths:
        raise _UsageError("--diff OLD NEW takes no other paths")
    if not 0 <= args.port <= 65535:
        raise _UsageError(f"--port {args.port}: a port is 0 (a free one) to 65535")
    diff = _diff_page(args.diff, args) if args.diff else None
    machines = [] if diff is not None else [SiteMachine(Path(c.spec.file), c) for c in compiled_machines(args)]
    if not machines and diff is None:
        raise _UsageError("no machine files found")
    names = [m.name for m in machines]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise _UsageError(f"two machine files hold machine {twice[0]!r}: a site shows each machine once")
    start = _start(args.start)
    if start is not None:
        names = [m.name for m in machines]
        if start["machine"] not in names:
            raise _UsageError(f"--from: the snapshot is of machine {start['machine'][:60]!r}, not one of {names}")
        from loopfsm.review_site.simulator import Simulation  # noqa: PLC0415
        from loopfsm.core.errors import LoopFsmError  # noqa: PLC0415

        try:
            Simulation(next(m for m in machines if m.name == start["machine"]).compiled, start)
        except LoopFsmError as err:
            raise _UsageError(f"--from {args.start}: {err}") from None
    if args.static is not None:
        from loopfsm.review_site.app import write_static  # noqa: PLC0415

        try:
            written = write_static(machines, Path(args.static), diff)
        except OSError as err:  # a file where the folder should be, a folder that cannot be written
            raise _UsageError(
                f"--static {args.static}: cannot write there ({err.strerror or type(err).__name__})"
            ) from None
        print(f"wrote {len(written)} files under {args.static} (open index.html)")
        return EXIT_OK
    try:
        import uvicorn  # noqa: PLC0415

        from loopfsm.review_site.app import create_app  # noqa: PLC0415
    except ImportError as err:
        raise _UsageError(f"needs the review extra (pip install 'loopfsm[review]'): {err.name} is missing") from None
    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET)
    try:
        sock.bind((args.host, args.port))
    except OSError as err:
        raise _UsageError(f"cannot listen on {args.host}:{args.port}: {err.strerror or err}") from None
    sock.listen(128)  # connections wait in the backlog from the moment the address is printed
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if ":" in args.host else args.host
    what = f"{len(machines)} machines" if diff is None else "the diff"
    print(f"review site: http://{host}:{port}/  ({what}; ctrl-C stops it)", flush=True)
    config = uvicorn.Config(create_app(machines, start, diff, args.host), log_level="warning", lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
    return EXIT_OK


def add_commands(sub: Any, regs: argparse.ArgumentParser) -> None:
    """Add ``review`` to the ``loopfsm`` parser's subcommands."""
    s = sub.add_parser(
        "review",
        parents=[regs],
        help="serve the review site: each machine's diagram and sheet, and a simulator on the compiled machine",
        description="Serve a review site on 127.0.0.1 (a free port unless --port), one page per machine: its "
        "diagram, legend and review sheet, branches shown on a click, and a simulator that feeds the real "
        "compiled machine. --static writes the pages without the simulator. Uses no network but its own socket.",
    )
    s.add_argument("paths", nargs="*", help="files or directories (default: the project's machines/*.yaml)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    s.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one, printed)")
    s.add_argument("--static", metavar="DIR", help="write the pages (without the simulator) under DIR and exit")
    s.add_argument("--from", dest="start", metavar="SNAPSHOT", help="a snapshot file its machine's runs start from")
    s.add_argument(
        "--diff",
        nargs=2,
        metavar=("OLD", "NEW"),
        help="a page of what changed between two versions of a machine file (each a path or a git REV:PATH): "
        "the new diagram with added and changed arrows marked, and loopfsm diff's words",
    )
    s.set_defaults(func=cmd_review)
