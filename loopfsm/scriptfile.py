"""Reading a ``loopfsm run --script`` file: the same budgets as machine files, because a script is input too."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def read_script(path: Path) -> tuple[Any, int]:
    """``(document, 0)``, or ``(None, exit code)`` after telling the user why: 2 unreadable, 1 not a valid file."""
    from .source import SourceProblems, read_file

    try:
        path.stat()
    except OSError as err:
        print(f"loopfsm run: cannot read {path}: {err.strerror or type(err).__name__}", file=sys.stderr)
        return None, 2
    try:
        return read_file(path, kind="script").doc, 0
    except SourceProblems as err:
        for p in err.problems:
            print(p, file=sys.stderr)
        return None, 1
