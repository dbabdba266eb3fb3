"""The ``[tool.loopfsm]`` table of a ``pyproject.toml``: read the same way by the library and the command line.

The library reads it for the process's default engine
(:mod:`loopfsm.core.engines`), the command line for the project's folders and
registries (:mod:`loopfsm.cli.project`); a broken file is refused by both
with the same words, so an instance never quietly runs on another engine
than the one the command line would refuse to read.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from .errors import ConfigError

CONFIG = "pyproject.toml"
MAX_CONFIG_BYTES = 1024 * 1024  # a pyproject.toml is a few KiB; anything near this is not one


def shown(path: Path) -> Path:
    """``path`` as the user would type it from the current folder (relative when that is short)."""
    try:
        rel = Path(os.path.relpath(path))
    except ValueError:  # another drive
        return path
    return rel if rel.parts[:3] != ("..", "..", "..") else path


def loopfsm_table(path: Path) -> dict[str, Any] | None:
    """The ``[tool.loopfsm]`` table of ``path``, None when it has none; :class:`ConfigError` when unreadable."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            raise ConfigError(f"{shown(path)}: larger than {MAX_CONFIG_BYTES // 1024} KiB; not read")
        doc = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{shown(path)}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{shown(path)}: not valid TOML: {err}") from None
    except OSError as err:
        raise ConfigError(f"{shown(path)}: cannot read it: {err.strerror}") from None
    tool = doc.get("tool")
    table = tool.get("loopfsm") if isinstance(tool, dict) else None
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ConfigError(f"{shown(path)}: [tool.loopfsm] must be a table")
    return table
