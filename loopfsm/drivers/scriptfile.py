"""Reading a ``loopfsm run --script`` file: the same budgets as machine files, because a script is input too."""

from __future__ import annotations

import stat
import sys
from pathlib import Path
from typing import Any

from .schemas import driver_hint


def read_script(path: Path) -> tuple[Any, int]:
    """``(document, 0)``, or ``(None, exit code)`` after telling the user why: 2 unreadable, 1 not a valid file.

    A directory is a usage error like a missing file, as for every other
    command; a device or a pipe is a file that is not a script (1), as for
    ``check``.
    """
    from loopfsm.core.source import SourceProblems, read_file

    try:
        mode = path.stat().st_mode
    except OSError as err:
        print(f"loopfsm run: cannot read {path}: {err.strerror or type(err).__name__}", file=sys.stderr)
        return None, 2
    if stat.S_ISDIR(mode):
        print(f"loopfsm run: cannot read {path}: is a directory; a script is a YAML file", file=sys.stderr)
        return None, 2
    try:
        return read_file(path, kind="script").doc, 0
    except SourceProblems as err:
        for p in err.problems:
            print(p, file=sys.stderr)
        return None, 1


def wrong_script_hint(doc: Any) -> str:
    """`` (this is a script for ...: COMMAND)`` when ``doc`` is another command's script, else ``""``.

    Besides the three ``run --script`` drivers, a mapping with ``replies`` is
    a scripted model for ``router serve --script``, which no driver takes, and
    one with ``machine`` and ``states`` is a machine file, which no driver
    takes either: ``loopfsm run`` drives a shipped machine from a script.
    """
    hint = driver_hint(doc)
    if hint:
        return hint
    if isinstance(doc, dict) and "replies" in doc:
        return " (this is a scripted model: loopfsm router serve --store URL --script FILE)"
    if isinstance(doc, dict) and "machine" in doc and "states" in doc:
        return " (this is a machine file: loopfsm check FILE; a run script drives a shipped machine)"
    return ""
