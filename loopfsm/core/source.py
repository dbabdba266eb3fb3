"""Reading a machine file safely while remembering where every value came from.

PyYAML's ``safe_load`` throws positions away and silently keeps the last of two
equal keys.  A user who typed a state twice, or whose guard parameter is wrong,
deserves ``file:line:col`` and the path inside the document, so we compose the
node tree with the safe loader, record marks and duplicate keys while walking
it, and only then construct plain Python data from the same nodes.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Iterable

import yaml

from .errors import Problem, SpecError

PathT = tuple[Any, ...]

# Machine files follow the YAML 1.2 core schema for booleans: only true/false (any case
# style) are booleans, so `enum: [on, off]` or a state named `no` stays a string.
_BOOL_TAG, _STR_TAG = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:str"
_INT_TAG = "tag:yaml.org,2002:int"
_CORE_BOOLEANS = frozenset({"true", "True", "TRUE", "false", "False", "FALSE"})
# And for numbers: YAML 1.1 reads a float only with a dot and a signed exponent, so ``1e3`` and ``2.5e3`` were
# strings, and ``maximum: 1e3`` was refused as "got string '1e3'".  The 1.2 core schema's floats are numbers.
_FLOAT_TAG = "tag:yaml.org,2002:float"
_CORE_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
# (with a dot or an exponent: YAML 1.1 reads ``08`` and ``09``, no octal, as strings, and they stay so)
_FLOAT_MARKS = frozenset(".eE")

# libyaml's safe loader when PyYAML was built with it (about ten times faster), the
# pure-Python one otherwise; both refuse language-specific tags and keep marks.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# A key longer than any name a machine uses is cut in a path: the file may be a key or a log, never echoed.
PATH_PART_SHOWN = 64


def format_path(path: Iterable[Any]) -> str:
    """Render ``("events", "coin", "from", "locked", 0)`` as ``events.coin.from.locked[0]``.

    A key longer than PATH_PART_SHOWN characters is cut to its start and its length.
    """
    out = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            text = str(part)
            if len(text) > PATH_PART_SHOWN:
                text = f"{text[:24]}...({len(text):,} characters)"
            out += ("." if out else "") + text
    return out


@dataclass
class Source:
    """A parsed document plus the position of each value and mapping key in it.

    A value reached through an alias (or a ``<<`` merge) is recorded once, where
    its anchor was written; ``aliases`` and ``merges`` say which written path a
    path through an alias stands for, so its problems are reported at the anchor.
    """

    file: str
    doc: Any
    values: dict[PathT, tuple[int, int]] = field(default_factory=dict)
    keys: dict[PathT, tuple[int, int]] = field(default_factory=dict)
    aliases: dict[PathT, PathT] = field(default_factory=dict)
    merges: dict[PathT, list[PathT]] = field(default_factory=dict)

    def canonical(self, path: PathT) -> PathT:
        """The path where the value at ``path`` was written (through aliases and merges)."""
        path = tuple(path)
        if not self.aliases and not self.merges:
            return path
        for _ in range(64 * 4):  # each step moves to an anchor written earlier: bounded
            for i in range(len(path), 0, -1):
                head = path[:i]
                if head in self.aliases:
                    path = self.aliases[head] + path[i:]
                    break
                parent = path[: i - 1]
                if head not in self.keys and parent in self.merges:
                    for base in self.merges[parent]:
                        if base + (path[i - 1],) in self.values:
                            path = base + path[i - 1 :]
                            break
                    else:
                        continue
                    break
            else:
                return path
        return path  # pragma: no cover - cycles are refused while composing

    def locate(self, path: PathT, *, key: bool = False) -> tuple[int, int]:
        """Line and column (1-based) of ``path``, or of its nearest recorded ancestor."""
        path = self.canonical(path)
        while True:
            if key and path in self.keys:
                return self.keys[path]
            if path in self.values:
                return self.values[path]
            if not path:
                return (1, 1)
            path = path[:-1]

    def problem(self, path: PathT, message: str, *, key: bool = False, severity: str = "error") -> Problem:
        path = self.canonical(path)
        line, col = self.locate(path, key=key)
        return Problem(self.file, line, col, format_path(path), message, severity)


# A file that is not even a usable YAML document is a bad machine file like any
# other: the same error class, so every error loopfsm raises lives in loopfsm.core.errors.
SourceProblems = SpecError


def _mark(node: yaml.Node) -> tuple[int, int]:
    return (node.start_mark.line + 1, node.start_mark.column + 1)


# Budgets on what a hostile file can amplify, checked while the file is parsed, so it
# is refused in bounded time and memory at the line where it crossed the limit:
# - its size (a multi-megabyte list, /dev/zero);
# - the values of the document the checker walks, each alias counted as the values
#   it repeats (a billion laughs). It is sized by the size limit, not by what real
#   machines hold: they spend 13 to 19 bytes on a value (the shipped ones) or about 7
#   (a generated 5,000-state chain: 300 KiB, 45,000 values), so a file within the
#   size limit at 5.3 bytes a value or more is within this one too. It is what keeps a
#   dense list of one-character values, or aliases, within 200 MB of memory (the
#   hostile-file tests measure it);
# - nesting depth (a recursive descent or a deep alias), and the length of an integer.
MAX_BYTES = 1 << 20
MAX_VALUES = 200_000
MAX_DEPTH = 64
# Python refuses to read an integer of more than 4,300 digits (a denial-of-service guard); a
# machine file is refused well before that, with a position, instead of a traceback.
MAX_INT_CHARS = 100
_TOO_DEEP = f"nesting deeper than {MAX_DEPTH} levels; no machine needs that"
_TYPICAL = "a 5,000-state machine holds about 50,000"

# Characters YAML does not allow in a stream (NUL and most C0/C1 controls, surrogates).
_NOT_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class _Refused(Exception):
    def __init__(self, mark: Any, message: str):
        self.mark = mark
        self.message = message


class _Frame:
    """A collection being composed: its node, where it sits, and what its children added up to."""

    __slots__ = ("node", "path", "start", "height", "key", "seen", "is_map", "block_key_mark")

    def __init__(self, node: yaml.Node, path: PathT, start: int, is_map: bool):
        self.node = node
        self.path = path
        self.start = start
        self.height = 0
        self.key: Any = _NO_KEY
        self.seen: dict[Any, tuple[int, int]] = {}
        self.is_map = is_map


_NO_KEY = object()


class _Composer:
    """Build PyYAML's node graph from the parser's events, iteratively and within budget.

    PyYAML's own composer recurses (a deep file ends in ``RecursionError``) and
    has no notion of size; walking the composed graph afterwards revisits every
    aliased node once per alias (a billion laughs).  Here every node is composed
    once, each alias adds the size of what it points to to a running total of
    the document's expanded size, and a recursive alias is refused; positions are
    recorded under the path where a node was written, and each alias remembers
    which path it stands for, so a problem inside an anchor is reported once, at
    the anchor.
    """

    def __init__(self, loader: Any, src: Source, problems: list[Problem]):
        self.loader = loader
        self.src = src
        self.problems = problems
        self.anchors: dict[str, yaml.Node] = {}
        self.info: dict[int, tuple[PathT, int, int]] = {}  # id(node) -> (path, expanded size, height)
        self.open: set[int] = set()
        self.expanded = 0  # values so far, written or repeated by an alias

    def compose(self) -> yaml.Node | None:
        get, check = self.loader.get_event, self.loader.check_event
        get()  # StreamStart
        if check(yaml.StreamEndEvent):
            return None
        get()  # DocumentStart
        stack: list[_Frame] = []
        root: yaml.Node | None = None
        while True:
            event = get()
            cls = type(event)
            if cls is yaml.DocumentEndEvent:
                break
            if cls is yaml.MappingEndEvent or cls is yaml.SequenceEndEvent:
                frame = stack.pop()
                frame.node.end_mark = event.end_mark
                self.open.discard(id(frame.node))
                size = self.expanded - frame.start + 1
                self.info[id(frame.node)] = (frame.path, size, frame.height + 1)
                if stack:
                    stack[-1].height = max(stack[-1].height, frame.height + 1)
                continue
            parent = stack[-1] if stack else None
            path = self._child_path(parent, event)
            if cls is yaml.AliasEvent:
                node = self._alias(event, path, len(stack), parent)
                if parent is not None:
                    self._add(parent, node, path, event)
                continue
            self.expanded += 1
            if self.expanded > MAX_VALUES:
                raise _Refused(event.start_mark, f"the file holds more than {MAX_VALUES:,} values; {_TYPICAL}")
            if len(stack) >= MAX_DEPTH:
                raise _Refused(event.start_mark, _TOO_DEEP)
            anchor = event.anchor
            if anchor is not None and anchor in self.anchors:
                raise _Refused(
                    event.start_mark,
                    f"duplicate anchor '{_short(anchor)}' (first defined at line "
                    f"{self.anchors[anchor].start_mark.line + 1})",
                )
            tag = event.tag
            if cls is yaml.ScalarEvent:
                if tag is None or tag == "!":
                    tag = self.loader.resolve(yaml.ScalarNode, event.value, event.implicit)
                    if tag == _BOOL_TAG and event.value not in _CORE_BOOLEANS:
                        tag = _STR_TAG  # YAML 1.2 core schema: on/off/yes/no/y/n are words, not booleans
                    elif (
                        tag == _STR_TAG
                        and event.implicit[0]
                        and len(event.value) <= MAX_INT_CHARS
                        and not _FLOAT_MARKS.isdisjoint(event.value)
                        and _CORE_FLOAT.fullmatch(event.value)
                    ):
                        tag = _FLOAT_TAG
                if tag == _INT_TAG and len(event.value) > MAX_INT_CHARS:
                    raise _Refused(
                        event.start_mark,
                        f"an integer written with {len(event.value):,} characters; no machine needs one "
                        f"longer than {MAX_INT_CHARS}",
                    )
                if event.style == '"' and (bad := _NOT_PRINTABLE.search(event.value)):
                    # An escape (``"\x01"``) writes what the file itself may not hold: every view of the
                    # table would carry it, and an XML export could not (SCXML, SVG are XML 1.0).
                    self.problems.append(
                        Problem(
                            self.src.file,
                            event.start_mark.line + 1,
                            event.start_mark.column + 1,
                            format_path(path),
                            f"an escape in this string writes character U+{ord(bad.group()):04X}, which a "
                            "YAML file may not hold; remove it (tabs and line breaks are fine)",
                        )
                    )
                node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
                self.info[id(node)] = (path, 1, 1)
                if parent is not None and len(stack) >= 1:
                    parent.height = max(parent.height, 1)
            else:
                is_map = cls is yaml.MappingStartEvent
                kind = yaml.MappingNode if is_map else yaml.SequenceNode
                if tag is None or tag == "!":
                    tag = self.loader.resolve(kind, None, event.implicit)
                node = kind(tag, [], event.start_mark, None, flow_style=event.flow_style)
            if anchor is not None:
                self.anchors[anchor] = node
            if not (cls is yaml.ScalarEvent and parent is not None and parent.is_map and parent.key is _NO_KEY):
                self.src.values.setdefault(path, _mark(node))
            if parent is not None:
                self._add(parent, node, path, event)
            else:
                root = node
            if cls is not yaml.ScalarEvent:
                self.open.add(id(node))
                stack.append(_Frame(node, path, self.expanded, cls is yaml.MappingStartEvent))
        return root

    def _child_path(self, parent: _Frame | None, event: Any) -> PathT:
        if parent is None:
            return ()
        if parent.is_map:
            return parent.path if parent.key is _NO_KEY else parent.path + (parent.key,)
        return parent.path + (len(parent.node.value),)

    def _alias(self, event: Any, path: PathT, depth: int, parent: _Frame | None) -> yaml.Node:
        node = self.anchors.get(event.anchor)
        if node is None:
            raise _Refused(event.start_mark, f"found undefined alias '{_short(event.anchor)}'")
        if id(node) in self.open:
            raise _Refused(
                event.start_mark,
                f"alias '{_short(event.anchor)}' refers to a collection that "
                "contains it; recursive structures are not allowed",
            )
        target, size, height = self.info[id(node)]
        self.expanded += size
        if self.expanded > MAX_VALUES:
            raise _Refused(event.start_mark, f"aliases expand the file to more than {MAX_VALUES:,} values; {_TYPICAL}")
        if depth + height > MAX_DEPTH:
            raise _Refused(
                event.start_mark,
                f"alias '{_short(event.anchor)}' nests values deeper than {MAX_DEPTH} levels; no machine needs that",
            )
        if parent is not None:
            parent.height = max(parent.height, height)
            if not (parent.is_map and parent.key is _NO_KEY):
                self.src.aliases[path] = target
                self.src.values.setdefault(path, (event.start_mark.line + 1, event.start_mark.column + 1))
        return node

    def _add(self, parent: _Frame, node: yaml.Node, path: PathT, event: Any) -> None:
        if not parent.is_map:
            parent.node.value.append(node)
            return
        if parent.key is _NO_KEY:
            parent.key = self._key(node)
            parent.node.value.append((node, None))
            return
        key, parent.key = parent.key, _NO_KEY
        key_node = parent.node.value[-1][0]
        parent.node.value[-1] = (key_node, node)
        line, col = _mark(key_node)
        if key_node.tag == "tag:yaml.org,2002:merge":
            self.src.merges.setdefault(parent.path, []).extend(self._merged(node))
            return
        if key in parent.seen:
            first = parent.seen[key]
            self.problems.append(
                Problem(
                    self.src.file,
                    line,
                    col,
                    format_path(path),
                    f"duplicate key '{_short(key)}' (first defined at line {first[0]}); "
                    "YAML would silently keep only the last one",
                )
            )
            del parent.node.value[-1]
            return
        parent.seen[key] = (line, col)
        self.src.keys[path] = (line, col)
        if (
            isinstance(node, (yaml.MappingNode, yaml.SequenceNode))
            and not node.flow_style
            and type(event) is not yaml.AliasEvent
        ):
            # A block collection starts on the line after its key; point at the key the user wrote.
            self.src.values[path] = (line, col)

    def _key(self, node: yaml.Node) -> Any:
        """The key as the constructed document will hold it (``no`` is ``False`` under YAML 1.1)."""
        if isinstance(node, yaml.ScalarNode):
            if node.tag == "tag:yaml.org,2002:str":
                return node.value
            try:
                key = self.loader.construct_object(node)
                hash(key)
                return key
            except Exception:
                return node.value
        return repr(node)

    def _merged(self, node: yaml.Node) -> list[PathT]:
        nodes = node.value if isinstance(node, yaml.SequenceNode) else [node]
        return [self.info[id(n)][0] for n in nodes if id(n) in self.info]


def _short(value: Any, limit: int = 24) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text):,} characters)"


def _too_large(file: str, raw: bytes) -> None:
    line = raw.count(b"\n", 0, MAX_BYTES) + 1
    col = len(raw[raw.rfind(b"\n", 0, MAX_BYTES) + 1 : MAX_BYTES].decode("utf-8", "replace")) + 1
    raise SourceProblems(
        [Problem(file, line, col, "", f"the file is larger than {MAX_BYTES // 1024:,} KiB; no machine needs that much")]
    )


def read_source(text: str, file: str = "<string>", *, kind: str = "machine file") -> Source:
    """Parse ``text`` with the safe loader; raise :class:`SourceProblems` on any YAML-level issue.

    Tags such as ``!!python/object`` are refused by the safe constructor; we turn
    that refusal into a located problem rather than letting it escape as a
    bare PyYAML traceback.  ``kind`` names the file in refusals (a ``script``
    is read with the same budgets).
    """
    if len(text) > MAX_BYTES // 4 and len(text.encode("utf-8", "replace")) > MAX_BYTES:
        _too_large(file, text.encode("utf-8", "replace"))
    bad = _NOT_PRINTABLE.search(text)
    if bad:
        at = bad.start()
        line = text.count("\n", 0, at) + 1
        col = at - (text.rfind("\n", 0, at) + 1) + 1
        raise SourceProblems(
            [Problem(file, line, col, "", f"character U+{ord(bad.group()):04X} is not allowed in a YAML file")]
        )
    loader = _SafeLoader(text)
    try:
        src = Source(file, None)
        problems: list[Problem] = []
        try:
            node = _Composer(loader, src, problems).compose()
            if node is not None and not loader.check_event(yaml.StreamEndEvent):
                event = loader.get_event()
                raise _Refused(event.start_mark, "expected a single document in the stream, found another one")
        except _Refused as err:
            raise SourceProblems(
                [Problem(file, err.mark.line + 1, err.mark.column + 1, "", f"not a usable {kind}: {err.message}")]
            ) from None
        except yaml.MarkedYAMLError as err:
            raise SourceProblems([_yaml_problem(file, err, kind)]) from None
        except yaml.YAMLError as err:  # pragma: no cover - PyYAML marks nearly everything
            raise SourceProblems([Problem(file, 1, 1, "", f"not valid YAML: {err}")]) from None
        if node is None:
            raise SourceProblems([Problem(file, 1, 1, "", _EMPTY.get(kind, "the file is empty"))])
        try:
            src.doc = loader.construct_document(node)
        except yaml.MarkedYAMLError as err:
            problems.append(_yaml_problem(file, err, kind))
        if problems:
            raise SourceProblems(problems)
        return src
    finally:
        loader.dispose()


_EMPTY = {
    "machine file": "the file is empty; a machine needs at least 'machine' and 'states'",
    "script": "the script is empty",
}


_OPENERS = {
    "while parsing a flow sequence": "the '[' opened",
    "while parsing a flow mapping": "the '{' opened",
    "while scanning a quoted scalar": "the quote opened",
}


def _opened_what(context: str) -> str:
    """Name what PyYAML was inside of when it gave up, in a reader's words."""
    known = _OPENERS.get(context)
    if known is not None:
        return known
    return f"{context.removeprefix('while ')} that began"


def _yaml_problem(file: str, err: yaml.MarkedYAMLError, kind: str = "machine file") -> Problem:
    mark = err.problem_mark or err.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    what = err.problem or str(err)
    if "maximum nesting depth" in what:
        # libyaml's scanner (PyYAML 6.0.4 and later) has its own depth limit and can hit it while
        # looking ahead, before the composer sees the level that crosses ours: one refusal, one wording.
        return Problem(file, line, col, "", f"not a usable {kind}: {_TOO_DEEP}")
    if "could not determine a constructor" in what:
        what = f"{what.strip()}: loopfsm reads YAML with the safe loader only, so language-specific tags are refused"
    if len(what) > 200:
        what = what[:200] + "..."
    opened = err.context_mark
    if (
        err.problem_mark is not None
        and opened is not None
        and err.context
        and (opened.line, opened.column) != (err.problem_mark.line, err.problem_mark.column)
    ):
        # Reading stops where the parser gave up, often lines below the cause: an unclosed bracket or
        # quote is fixed where it opened, so that place is named too (PyYAML's context mark has it).
        what = f"{what} ({_opened_what(err.context)} at {opened.line + 1}:{opened.column + 1})"
    return Problem(file, line, col, "", f"not valid YAML: {what}")


def read_file(path: str | Path, *, kind: str = "machine file") -> Source:
    """Read a machine file: a regular file of at most ``MAX_BYTES``, UTF-8 text.

    Devices, pipes and directories are refused before a byte is read, and at most
    one byte more than the limit is ever read, so ``/dev/zero`` cannot fill memory.
    """
    path = Path(path)
    name = str(path)
    try:
        # O_NONBLOCK: opening a named pipe must not wait for a writer.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise SourceProblems([Problem(name, 1, 1, "", f"not a regular file; a {kind} is plain text")])
            raw = fh.read(MAX_BYTES + 1)
    except OSError as err:
        raise SourceProblems(
            [Problem(name, 1, 1, "", f"cannot read file: {err.strerror or type(err).__name__}")]
        ) from None
    if len(raw) > MAX_BYTES:
        _too_large(name, raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        col = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        raise SourceProblems([Problem(name, line, col, "", f"file is not UTF-8 text: {err.reason}")]) from None
    return read_source(text, name, kind=kind)
