"""The README is a front page and docs/ holds the rest: no block escapes its test, no link leads nowhere."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from tests.support.docs_pages import ROOT, all_pages, page, section

README_MAX_LINES = 600
FENCE = re.compile(r"^```(\S*)$")
MARK = re.compile(r"^<!-- (tested|illustration): (.+?) -->$")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


@dataclass(frozen=True)
class Block:
    """A fenced block of a page: where it opens, its info string and the marks on the lines just above it."""

    page: str
    line: int
    lang: str
    marks: tuple[tuple[str, str], ...]


def blocks(path: str, text: str) -> list[Block]:
    found: list[Block] = []
    lines = text.splitlines()
    inside = False
    for i, line in enumerate(lines):
        fence = FENCE.match(line)
        if not fence:
            continue
        if inside:
            inside = False
            continue
        inside = True
        marks = []
        j = i - 1
        while j >= 0 and lines[j].startswith("<!--") and lines[j].endswith("-->"):
            mark = MARK.match(lines[j])
            if mark:
                marks.append((mark.group(1), mark.group(2)))
            j -= 1
        found.append(Block(path, i + 1, fence.group(1), tuple(marks)))
    assert not inside, f"{path}: a fence is never closed"
    return found


def test_every_block_is_tested_or_an_illustration_with_a_reason():
    unmarked = [
        f"{b.page}:{b.line} ```{b.lang}"
        for p in all_pages()
        for b in blocks(p, page(p))
        if not any(kind == "tested" or (kind == "illustration" and len(why) > 10) for kind, why in b.marks)
    ]
    assert unmarked == [], "blocks with no <!-- tested: ... --> or <!-- illustration: ... --> line above them"


def test_each_tested_mark_names_a_test_that_exists_in_a_file_that_reads_the_page():
    wrong = []
    for p in all_pages():
        for b in blocks(p, page(p)):
            for kind, what in b.marks:
                if kind != "tested":
                    continue
                for ref in what.split(", "):
                    file, _, name = ref.partition("::")
                    where = ROOT / file
                    if not (file.startswith("tests/") and where.is_file()):
                        wrong.append(f"{p}:{b.line}: no test file {file}")
                        continue
                    source = where.read_text(encoding="utf-8")
                    tests = {f.name for f in ast.parse(source).body if isinstance(f, ast.FunctionDef)}
                    if name not in tests:
                        wrong.append(f"{p}:{b.line}: {file} has no test {name}")
                    if f'"{p}"' not in source and "all_pages()" not in source:
                        wrong.append(f"{p}:{b.line}: {file} does not read {p}")
    assert wrong == []


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = heading.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    inside = False
    for line in text.splitlines():
        if FENCE.match(line):
            inside = not inside
        heading = re.match(r"^#{1,6} (.+)$", line)
        if heading and not inside:
            base = slug(heading.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(text: str) -> list[str]:
    """The link targets of a page outside fenced blocks and code spans."""
    prose = re.sub(r"^```.*?^```$", "", text, flags=re.M | re.S)
    prose = re.sub(r"`[^`\n]*`", "", prose)
    return LINK.findall(prose)


def broken_links(path: str, text: str) -> list[str]:
    broken = []
    for target in links(text):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        where = (ROOT / path).parent / file if file else ROOT / path
        if not where.exists():
            broken.append(f"{path}: {target}: no such file")
        elif anchor and anchor not in anchors(where.read_text(encoding="utf-8")):
            broken.append(f"{path}: {target}: no such heading")
    return broken


def test_every_relative_link_leads_to_a_file_and_heading_that_exist():
    broken = [b for p in all_pages() for b in broken_links(p, page(p))]
    assert broken == []


def test_the_link_check_finds_a_broken_file_and_a_broken_anchor():
    text = "[a](docs/cli.md#no-such-heading) [b](docs/nothing.md) [c](#quickstart) [d](docs/cli.md#diagrams-for-review)"
    assert broken_links("README.md", text) == [
        "README.md: docs/cli.md#no-such-heading: no such heading",
        "README.md: docs/nothing.md: no such file",
    ]


def test_the_readme_is_a_front_page_with_a_table_of_contents():
    readme = page("README.md")
    assert len(readme.splitlines()) <= README_MAX_LINES
    contents = section(readme, "## Contents")
    listed = {target.removeprefix("#") for target in links(contents) if target.startswith("#")}
    headings = {slug(h) for h in re.findall(r"^## (.+)$", readme, re.M)} - {"contents"}
    assert headings <= listed, headings - listed
    assert listed <= anchors(readme)


def test_the_readme_links_every_page_of_docs():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links(page("README.md")) if t.startswith("docs/")}
    pages = {(ROOT / p).resolve() for p in all_pages() if p.startswith("docs/")}
    assert pages - linked == set()


def test_slugs_follow_githubs_rules():
    assert slug("Reviewing a change: `loopfsm diff`") == "reviewing-a-change-loopfsm-diff"
    assert (
        slug("Per-tool circuit breaker (Closed / Open / HalfOpen)") == "per-tool-circuit-breaker-closed--open--halfopen"
    )
    assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}


def test_the_format_page_names_every_key_of_a_state_an_event_and_a_branch():
    """docs/format.md says it covers every element of a machine file; a key the schema accepts and the
    page never names (``tags:`` was one) is found only by reading the schema."""
    import json

    schema = json.loads((ROOT / "spec" / "machine.schema.json").read_text(encoding="utf-8"))
    text = page("docs/format.md")
    missing = [
        f"{where}.{key}"
        for where in ("state", "event", "branch")
        for key in schema["$defs"][where]["properties"]
        if key != "untested"  # transition coverage's excuse, in docs/cli.md
        and not re.search(rf"`[^`\n]*\b{re.escape(key)}\b[^`\n]*`", text)
    ]
    assert not missing, missing
