"""Reading a machine file safely while remembering where every value came from.

PyYAML's ``safe_load`` throws positions away and silently keeps the last of two
equal keys.  A user who typed a state twice, or whose guard parameter is wrong,
deserves ``file:line:col`` and the path inside the document, so we compose the
node tree with the safe loader, record marks and duplicate keys while walking
it, and only then construct plain Python data from the same nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Iterable

import yaml

from .errors import Problem

PathT = tuple[Any, ...]

# libyaml's safe loader when PyYAML was built with it (about ten times faster), the
# pure-Python one otherwise; both refuse language-specific tags and keep marks.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def format_path(path: Iterable[Any]) -> str:
    """Render ``("events", "coin", "from", "locked", 0)`` as ``events.coin.from.locked[0]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


@dataclass
class Source:
    """A parsed document plus the position of each value and mapping key in it."""

    file: str
    doc: Any
    values: dict[PathT, tuple[int, int]] = field(default_factory=dict)
    keys: dict[PathT, tuple[int, int]] = field(default_factory=dict)

    def locate(self, path: PathT, *, key: bool = False) -> tuple[int, int]:
        """Line and column (1-based) of ``path``, or of its nearest recorded ancestor."""
        path = tuple(path)
        while True:
            if key and path in self.keys:
                return self.keys[path]
            if path in self.values:
                return self.values[path]
            if not path:
                return (1, 1)
            path = path[:-1]

    def problem(self, path: PathT, message: str, *, key: bool = False, severity: str = "error") -> Problem:
        line, col = self.locate(path, key=key)
        return Problem(self.file, line, col, format_path(path), message, severity)


class SourceProblems(Exception):
    """Raised by :func:`read_source` when the text is not even a usable YAML document."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(map(str, problems)))


def _mark(node: yaml.Node) -> tuple[int, int]:
    return (node.start_mark.line + 1, node.start_mark.column + 1)


def _walk(node: yaml.Node, path: PathT, src: Source, problems: list[Problem]) -> None:
    src.values[path] = _mark(node)
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, tuple[int, int]] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else repr(key_node)
            line, col = _mark(key_node)
            if key in seen:
                first = seen[key]
                problems.append(
                    Problem(src.file, line, col, format_path(path + (key,)),
                            f"duplicate key '{key}' (first defined at line {first[0]}); "
                            "YAML would silently keep only the last one")
                )
                continue
            seen[key] = (line, col)
            src.keys[path + (key,)] = (line, col)
            _walk(value_node, path + (key,), src, problems)
            if isinstance(value_node, (yaml.MappingNode, yaml.SequenceNode)) and not value_node.flow_style:
                # A block collection starts on the line after its key; point at the key the user wrote.
                src.values[path + (key,)] = (line, col)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, path + (i,), src, problems)


def read_source(text: str, file: str = "<string>") -> Source:
    """Parse ``text`` with the safe loader; raise :class:`SourceProblems` on any YAML-level issue.

    Tags such as ``!!python/object`` are refused by the safe constructor; we turn
    that refusal into a located problem rather than letting it escape as a
    bare PyYAML traceback.
    """
    loader = _SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.MarkedYAMLError as err:
            raise SourceProblems([_yaml_problem(file, err)]) from None
        except yaml.YAMLError as err:  # pragma: no cover - PyYAML marks nearly everything
            raise SourceProblems([Problem(file, 1, 1, "", f"not valid YAML: {err}")]) from None
        if node is None:
            raise SourceProblems([Problem(file, 1, 1, "",
                                          "the file is empty; a machine needs at least 'machine' and 'states'")])
        src = Source(file, None)
        problems: list[Problem] = []
        _walk(node, (), src, problems)
        try:
            src.doc = loader.construct_document(node)
        except yaml.MarkedYAMLError as err:
            problems.append(_yaml_problem(file, err))
        if problems:
            raise SourceProblems(problems)
        return src
    finally:
        loader.dispose()


def _yaml_problem(file: str, err: yaml.MarkedYAMLError) -> Problem:
    mark = err.problem_mark or err.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    what = err.problem or str(err)
    if "could not determine a constructor" in what:
        what = (f"{what.strip()}: loopfsm reads machine files with the safe loader only, "
                "so language-specific tags are refused")
    return Problem(file, line, col, "", f"not valid YAML: {what}")


def read_file(path: str | Path) -> Source:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise SourceProblems([Problem(str(path), 1, 1, "", f"cannot read file: {err.strerror or err}")]) from None
    except UnicodeDecodeError as err:
        raise SourceProblems([Problem(str(path), 1, 1, "", f"file is not UTF-8 text: {err.reason}")]) from None
    return read_source(text, str(path))
