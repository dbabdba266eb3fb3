"""Issue 26's layout: no module over 700 lines, and the router service's modules import no circle."""

from __future__ import annotations

import ast
from pathlib import Path

import loopfsm

ROOT = Path(loopfsm.__file__).parent
SERVICE = ROOT / "router" / "service"
MAX_LINES = 700


def test_no_module_is_over_700_lines():
    long = {
        str(p.relative_to(ROOT)): n for p in ROOT.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def _imports_within_service(path: Path) -> set[str]:
    """The sibling modules a service module imports, at any level (a function-level import counts too)."""
    got: set[str] = set()
    siblings = {p.stem for p in SERVICE.glob("*.py")}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module is None:
                got |= {a.name for a in node.names if a.name in siblings}
            else:
                got.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("loopfsm.router.service"):
            got.add(node.module.split(".")[3] if node.module.count(".") >= 3 else "__init__")
    return got - {path.stem}


def test_the_service_modules_import_no_circle():
    graph = {p.stem: _imports_within_service(p) for p in SERVICE.glob("*.py")}
    assert graph["context"] and graph["__init__"] >= {
        "admission",
        "approvals",
        "responses",
        "sealing",
        "tool_calls",
        "turn",
    }
    assert all("__init__" not in deps for deps in graph.values())  # nothing imports the facade
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        assert node not in path, " -> ".join(path + [node])
        if node in done:
            return
        for dep in graph.get(node, set()):
            visit(dep, path + [node])
        done.add(node)

    for name in graph:
        visit(name, [])


def test_each_service_module_is_under_400_lines_and_says_why():
    for p in SERVICE.glob("*.py"):
        text = p.read_text()
        assert len(text.splitlines()) < 400, p.name
        assert ast.get_docstring(ast.parse(text)), p.name
