"""Reading the README and the pages under docs/, for the tests that hold their examples to the code.

A test names the page it reads by its path from the repository's root (``page("docs/cli.md")``), so
tests/tools/test_docs.py can check that a block marked ``tested:`` is read by the test file it names.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def page(path: str) -> str:
    """The text of ``path`` (``"README.md"``, ``"docs/router.md"``), relative to the repository's root."""
    return (ROOT / path).read_text(encoding="utf-8")


def all_pages() -> list[str]:
    """README.md and every Markdown page under docs/, as paths from the root, README first."""
    return ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))]


def example(text: str, name: str) -> str:
    """The Python block right after ``<!-- example: name -->`` in ``text``."""
    return text.split(f"<!-- example: {name} -->")[1].split("```python\n")[1].split("```")[0]


def section(text: str, heading: str) -> str:
    """The body of the section whose heading line is ``heading`` (with its ``#``s), up to the next
    heading of the same or a higher level; a ``#`` line inside a fenced block is no heading."""
    level = len(heading.split(" ", 1)[0])
    lines = text.split("\n")
    start = lines.index(heading) + 1
    fenced = False
    for i in range(start, len(lines)):
        if lines[i].startswith("```"):
            fenced = not fenced
        hashes = len(lines[i]) - len(lines[i].lstrip("#"))
        if not fenced and 0 < hashes <= level and lines[i][hashes : hashes + 1] == " ":
            return "\n".join(lines[start:i]) + "\n"
    return "\n".join(lines[start:])
