"""A cache of checked machine files, so an unchanged file is never parsed or schema-checked twice.

Loading a machine file means YAML parsing, the JSON Schema and the semantic
checks; together they cost far more than compiling the result.  Like Python's
``.pyc``, the outcome of a successful load (the document as JSON, plus the
warnings it produced) is kept under a key that changes whenever anything that
could change that outcome does: the file's bytes and path, loopfsm's own code
and schema, and the signature of the registry the file was checked against.

The cache is untrusted input.  Entries are JSON (never pickle, so reading one
cannot run code), written atomically, size-limited, and ignored whenever they
do not parse, do not carry the key they are filed under, or have the wrong
shape; the directory is used only when it belongs to the current user and
nobody else may write to it.  A failed read or write is a miss, never an error.

The same directory keeps the arrow ends a diagram's search chose (``ends-*.json``,
:mod:`loopfsm.rendering.ends_cache`), by :func:`read_entry` and :func:`write_entry` and the same rules.

Where: ``$LOOPFSM_CACHE_DIR`` if set (set it empty to turn the cache off),
otherwise the platform's user cache directory (``$XDG_CACHE_HOME/loopfsm`` or
``~/.cache/loopfsm`` on Linux, ``~/Library/Caches/loopfsm`` on macOS,
``%LOCALAPPDATA%\\loopfsm\\Cache`` on Windows).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from .errors import Problem
from .registry import Registry

try:  # the built-in BLAKE2: hashlib would load OpenSSL, a cost a cache hit should not pay
    from _blake2 import blake2b as _blake2b
except ImportError:  # pragma: no cover - interpreters without it
    from hashlib import blake2b as _blake2b

ENV_VAR = "LOOPFSM_CACHE_DIR"
ENTRY_FORMAT = 2
MAX_FILE_BYTES = 4 * 1024 * 1024  # larger machine files take the uncached path (and its budgets)
MAX_ENTRY_BYTES = 16 * 1024 * 1024  # a larger entry is not read at all

_CORE = Path(__file__).resolve().parent  # the checker's modules
_PKG = _CORE.parent  # the loopfsm package


def cache_dir() -> Path | None:
    """The directory entries live in, or None when the cache is turned off."""
    configured = os.environ.get(ENV_VAR)
    if configured is not None:
        return Path(configured) if configured.strip() else None
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA")
        return Path(base, "loopfsm", "Cache") if base else None
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "loopfsm"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg if xdg and os.path.isabs(xdg) else Path.home() / ".cache", "loopfsm")


@lru_cache(maxsize=1)
def code_signature() -> str:
    """What loopfsm's own checking is: its version, and the size and mtime of its modules and schema.

    An edited checker in a source checkout invalidates every entry, exactly as
    an upgrade does.
    """
    parts = [str(getattr(sys.modules.get("loopfsm"), "__version__", ""))]
    for folder in (_CORE, _PKG.parent / "spec", _PKG / "_bundled" / "spec"):
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name.endswith((".py", ".json")) and entry.is_file():
                st = entry.stat()
                parts.append(f"{entry.name}:{st.st_size}:{st.st_mtime_ns}")
    return _blake2b("\n".join(parts).encode(), digest_size=32).hexdigest()


def registry_signature(registry: Registry) -> str:
    """Everything about a registry that the checks read: names, parameter declarations, codecs, errors."""
    parts = [registry.name]
    for kind in sorted(registry.entries):
        for name in sorted(registry.entries[kind]):
            entry = registry.entries[kind][name]
            params = ",".join(f"{p.name}:{p.type!r}:{p.required}" for p in entry.params.values())
            parts.append(f"{kind} {name}({params})")
    for name in sorted(registry.codecs):
        codec = registry.codecs[name]
        parts.append(f"codec {name} {codec.py_type!r} {json.dumps(codec.schema, sort_keys=True, default=repr)}")
    parts.extend(f"error {name}" for name in sorted(registry.errors))
    parts.extend(f"migration {name}" for name in sorted(registry.migrations))
    return _blake2b("\n".join(parts).encode(), digest_size=32).hexdigest()


def entry_key(file: str, data: bytes) -> str:
    h = _blake2b(digest_size=32)
    for part in (b"loopfsm-spec-cache", code_signature().encode(), file.encode("utf-8", "surrogatepass"), data):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()


def _usable_dir(path: Path, create: bool) -> bool:
    """The directory exists (or was just made), is ours, and no one else may write to it."""
    try:
        if create:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        return False
    if hasattr(os, "geteuid"):
        if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return False
    return True


def _is_json(node: Any, depth: int = 0) -> bool:
    """Only documents that survive a JSON round trip unchanged are cached (no dates, sets or int keys)."""
    if depth > 200:
        return False
    if node is None or isinstance(node, (str, bool, int)):
        return True
    if isinstance(node, float):
        return node == node and node not in (float("inf"), float("-inf"))
    if isinstance(node, list):
        return all(_is_json(v, depth + 1) for v in node)
    if isinstance(node, dict):
        return all(isinstance(k, str) and _is_json(v, depth + 1) for k, v in node.items())
    return False


def _problem(raw: Any) -> Problem | None:
    if not (isinstance(raw, list) and len(raw) == 6):
        return None
    file, line, col, path, message, severity = raw
    if not all(isinstance(x, str) for x in (file, path, message, severity)):
        return None
    if type(line) is not int or type(col) is not int:
        return None
    return Problem(file, line, col, path, message, severity)


class Hit:
    """A usable entry: the checked document and the warnings its load produced."""

    __slots__ = ("doc", "registry", "warnings", "fingerprint")

    def __init__(self, doc: dict[str, Any], registry: str, warnings: list[Problem], fingerprint: str):
        self.doc, self.registry, self.warnings, self.fingerprint = doc, registry, warnings, fingerprint


def read_entry(name: str, fmt: int) -> dict[str, Any] | None:
    """The JSON object filed as ``name`` (a hex key, with any prefix of ours), if it is one of format ``fmt``
    filed under that name; None when there is none, the cache is off, or it cannot be trusted to be one.

    Every reader checks the entry's shape as well: it is untrusted input."""
    folder = cache_dir()
    if folder is None or not _usable_dir(folder, create=False):
        return None
    path = folder / f"{name}.json"
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES:
            return None
        with open(path, "rb") as fh:
            raw = json.loads(fh.read(MAX_ENTRY_BYTES + 1))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(raw, dict) or raw.get("format") != fmt or raw.get("key") != name:
        return None
    return raw


def lookup(key: str) -> Hit | None:
    """The entry filed under ``key``, or None if there is none or it cannot be trusted to be one."""
    raw = read_entry(key, ENTRY_FORMAT)
    if raw is None:
        return None
    doc, registry, warnings = raw.get("doc"), raw.get("registry"), raw.get("warnings")
    fingerprint = raw.get("fingerprint")
    if not isinstance(doc, dict) or not isinstance(registry, str) or not isinstance(warnings, list):
        return None
    if not isinstance(fingerprint, str):
        return None
    problems = [_problem(w) for w in warnings]
    if any(p is None for p in problems):
        return None
    return Hit(doc, registry, problems, fingerprint)  # type: ignore[arg-type]


def store(key: str, doc: Any, registry: str, warnings: list[Problem], fingerprint: str) -> None:
    """File an entry, atomically; any failure just leaves the cache without it."""
    folder = cache_dir()
    if folder is None or not _is_json(doc):
        return
    entry = {
        "format": ENTRY_FORMAT,
        "key": key,
        "registry": registry,
        "fingerprint": fingerprint,
        "doc": doc,
        "warnings": [[p.file, p.line, p.column, p.path, p.message, p.severity] for p in warnings],
    }
    write_entry(key, entry)


def write_entry(name: str, entry: dict[str, Any]) -> None:
    """File the JSON object ``entry`` as ``name``, atomically; any failure just leaves the cache without it."""
    folder = cache_dir()
    if folder is None:
        return
    try:
        text = json.dumps(entry, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return
    if not _usable_dir(folder, create=True):
        return
    import tempfile  # noqa: PLC0415 - only a cache miss writes

    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, folder / f"{name}.json")
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def read_small_file(path: str | Path) -> bytes | None:
    """A regular file's bytes if it is small enough to cache, else None (the uncached path handles it)."""
    try:
        st = os.stat(path)  # before opening: opening a FIFO would block
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return None
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError:
        return None
    return data if len(data) <= MAX_FILE_BYTES else None
