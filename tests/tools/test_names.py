"""Every module and project file the package, docs/ and this release's CHANGELOG name still exists.

Modules moved into layers and tests into folders; a docstring or page that still says
``loopfsm.store.records`` or ``tests/test_docs.py`` sends a maintainer to nothing.  A dotted
name is checked when it starts with a layer (``loopfsm.core``...) or a module that was moved
out of the flat package; a path when it starts with a folder of this repository.
``docs/decisions.md`` and the CHANGELOG's sections of earlier issues are history and keep the
names of their time; its sections of this release (issues 24 and 26, and the fixes) are checked.
"""

from __future__ import annotations

import importlib
import re

import pytest

from tests.support.docs_pages import ROOT

LAYERS = {"core", "machines", "router", "drivers", "verification", "rendering", "cli", "pytest_plugin"}
# The flat modules the layering moved (CHANGELOG, "The package in layers"); ``loopfsm.registries``
# is also the entry point group, which keeps that name.
MOVED = set(
    "errors source spec speccache fieldtypes loader checks compiler backend binding fastparams runtime "
    "registry tracing transitions_machine resources catalog otel cli render diff coverage "
    "pytest_plugin scaffold project script scriptfile agent_script router_script crypto store client "
    "providers streams review".split()
)
DOTTED = re.compile(r"(?<![\w.])loopfsm((?:\.[A-Za-z_]\w*)+)")
PATH = re.compile(r"(?<![\w./-])((?:loopfsm|tests|docs|spec|machines|benchmarks|examples)/[\w./-]*\w)")
# Files of a user's own project that pages show (`loopfsm new job` writes them), not of this one.
USERS_FILES = {
    "tests/test_job.py",
    "tests/test_x.py",
    "tests/test_NAME.py",
    "machines/job.yaml",
    "machines/NAME.yaml",
    "machines/machine.schema.json",
    "machines/door.yaml",
    "machines/x.yaml",
    "docs/diagrams",
}


def texts() -> list[tuple[str, str]]:
    files = [
        *sorted((ROOT / "loopfsm").rglob("*.py")),
        *sorted(p for p in (ROOT / "docs").rglob("*.md") if p.name != "decisions.md"),
        ROOT / "README.md",
        ROOT / "tests" / "README.md",
        *sorted((ROOT / "machines").glob("*.yaml")),
    ]
    out = [(p.relative_to(ROOT).as_posix(), p.read_text(encoding="utf-8")) for p in files]
    out.append(("CHANGELOG.md", this_release()))
    return out


def this_release() -> str:
    """The CHANGELOG with only this release's sections (its issues' and the fixes made while using it)
    left in; the rest is blanked line for line, so a reported line number is the file's own."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    parts = re.split(r"(?m)^(?=#{2,3} )", text)
    keep = re.compile(r"### (Fixes|.*\(issue 2[46]\))")
    return "".join(p if keep.match(p) else "\n" * p.count("\n") for p in parts)


def resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for i in range(len(parts), 1, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def metric_names() -> frozenset[str]:
    """The router's OpenTelemetry metric names: dotted like modules, and not modules."""
    from loopfsm.router.service.metrics import OTEL_NAMES

    return frozenset(OTEL_NAMES)


def stale_names(name: str, text: str) -> list[str]:
    found = []
    metrics = metric_names()
    for m in DOTTED.finditer(text):
        dotted, first = m.group(0), m.group(1).split(".")[1]
        if dotted == "loopfsm.registries" or (first not in LAYERS and first not in MOVED) or dotted in metrics:
            continue
        if re.match(r"`?\s+to\s+`", text[m.end() : m.end() + 12]):
            continue  # the old side of "old name to new"
        if first in MOVED and first not in LAYERS or not resolves(dotted):
            found.append(f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {dotted}")
    return found


def stale_paths(name: str, text: str) -> list[str]:
    return [
        f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(1)}"
        for m in PATH.finditer(text)
        if m.group(1) not in USERS_FILES
        and text[m.end() : m.end() + 1] != "{"  # a template: tests/test_{name}.py
        and "NAME" not in m.group(1)
        and not (ROOT / m.group(1)).exists()
        and not (ROOT / name).parent.joinpath(m.group(1)).exists()  # a page's link, relative to the page
    ]


def test_every_module_named_exists():
    stale = [s for name, text in texts() for s in stale_names(name, text)]
    assert not stale, "\n".join(stale)


def test_every_project_file_named_exists():
    stale = [s for name, text in texts() for s in stale_paths(name, text)]
    assert not stale, "\n".join(stale)


@pytest.mark.parametrize(
    ("text", "stale"),
    [
        ("see :mod:`loopfsm.store.runstore`", True),
        ("`loopfsm.core.errors.StreamEventError`", True),
        ("`loopfsm.router.store.records`", False),
        ("`loopfsm.router.commands` to `loopfsm.cli.router_commands`", False),
        ("the `loopfsm.registries` entry point group; event `loopfsm.transition`", False),
    ],
)
def test_the_name_check_tells_moved_from_present(text, stale):
    assert bool(stale_names("x", text)) is stale


def test_the_path_check_finds_a_moved_test_file():
    assert stale_paths("x", "(`tests/test_layers.py`)") and not stale_paths("x", "(`tests/core/test_layers.py`)")
