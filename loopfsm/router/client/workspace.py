"""The client's tools, run on the user's machine and confined to one workspace directory.

A path argument is resolved against the workspace root, symlinks included,
and refused if it lands outside; ``shell`` runs with the root as its working
directory, a timeout and bounded output.  Every failure is a tool *result*
(``is_error`` true) for the model to read, never an exception.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from loopfsm.core.errors import ConfigError

MAX_FILE_BYTES = 1024 * 1024
MAX_OUTPUT_BYTES = 64 * 1024
SHELL_TIMEOUT_S = 30


class Workspace:
    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise ConfigError(f"workspace {self.root} is not a directory")

    def path(self, rel: object) -> Path:
        if not isinstance(rel, str) or not rel or "\x00" in rel:
            raise ValueError("path must be a non-empty string")
        p = (self.root / rel).resolve()
        if p != self.root and self.root not in p.parents:
            raise ValueError(f"path {rel[:80]!r} is outside the workspace")
        return p

    def run(self, name: str, args: dict[str, Any]) -> tuple[str, bool]:
        """Run one tool; ``(content, is_error)``."""
        try:
            if name == "read_file":
                p = self.path(args.get("path"))
                with open(p, "rb") as fh:
                    data = fh.read(MAX_FILE_BYTES + 1)
                if len(data) > MAX_FILE_BYTES:
                    return f"file larger than {MAX_FILE_BYTES} bytes", True
                return data.decode("utf-8", "replace"), False
            if name == "write_file":
                p = self.path(args.get("path"))
                content = args.get("content")
                if not isinstance(content, str):
                    return "content must be a string", True
                p.parent.mkdir(parents=True, exist_ok=True)
                tmp = p.with_name(f".{p.name}.loopfsm-tmp")
                tmp.write_text(content, encoding="utf-8")
                os.replace(tmp, p)
                return f"wrote {len(content.encode())} bytes to {args['path']}", False
            if name == "edit_file":
                p = self.path(args.get("path"))
                old, new = args.get("old_text"), args.get("new_text")
                if not isinstance(old, str) or not isinstance(new, str) or not old:
                    return "old_text (non-empty) and new_text must be strings", True
                text = p.read_text(encoding="utf-8")
                if text.count(old) != 1:
                    return f"old_text occurs {text.count(old)} times; it must occur exactly once", True
                p.write_text(text.replace(old, new, 1), encoding="utf-8")
                return f"edited {args['path']}", False
            if name == "shell":
                cmd = args.get("command")
                if not isinstance(cmd, str) or not cmd:
                    return "command must be a non-empty string", True
                proc = subprocess.run(
                    cmd,
                    shell=True,
                    cwd=self.root,
                    capture_output=True,
                    timeout=SHELL_TIMEOUT_S,
                    stdin=subprocess.DEVNULL,
                )
                out = (proc.stdout + proc.stderr)[:MAX_OUTPUT_BYTES].decode("utf-8", "replace")
                return (out if proc.returncode == 0 else f"exit {proc.returncode}\n{out}"), proc.returncode != 0
            return f"unknown tool {name[:40]!r}", True
        except subprocess.TimeoutExpired:
            return f"timed out after {SHELL_TIMEOUT_S} s", True
        except (OSError, ValueError) as err:
            return f"{type(err).__name__}: {str(err)[:200]}", True
