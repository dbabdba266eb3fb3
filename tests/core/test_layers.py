"""The package's layers, read from its imports: no circles, and each layer imports only those below it.

Every import counts: at the top of a module, inside a function (imported on
first use) or under ``TYPE_CHECKING``.  The layers, lowest first:

- ``loopfsm.core``: reading, checking, compiling and running a table;
- ``loopfsm.machines``: the shipped machines with their guards and actions;
- ``loopfsm.router``: the router product (service, store, client, providers, streams, crypto);
- ``loopfsm.drivers``: ``loopfsm run MACHINE --script`` for the brain, the agent loop and the router run;
- ``loopfsm.verification``: ``verify``, ``paths``, the trace files ``replay`` reads, coverage;
- ``loopfsm.rendering``: diagrams, review sheets, exports, typed policy stubs and ``diff``;
- ``loopfsm.review_site``: the review site's pages and simulator (``loopfsm review``);
- ``loopfsm.cli``: the command line, the project's settings, ``loopfsm new``;
- ``loopfsm.pytest_plugin``: the pytest plugin (coverage of the table's rows, saved-run checks).

The package's own ``__init__`` is the public face: the core, and each layer's
``errors`` module.
"""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "loopfsm"
LAYERS = ("core", "machines", "router", "drivers", "verification", "rendering", "review_site", "cli", "pytest_plugin")
MAX_LINES = 700


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    # A stub-only module (``machines/policies.pyi``) is a module to the type checker that imports it.
    for path in [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.pyi")]:
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (a name imported from a package counts as its submodule)."""
    mods = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, (path, is_pkg) in mods.items():
        base = mod.split(".") if is_pkg else mod.split(".")[:-1]
        deps: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                deps.update(resolve(a.name) for a in node.names if a.name.split(".")[0] == "loopfsm")
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    target = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.split(".")[0] != "loopfsm":
                    continue
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    deps.add(resolve(sub) if sub in mods else resolve(target))
        deps.discard(None)
        deps.discard(mod)
        graph[mod] = {d for d in deps if d is not None}
    return graph


def shortest_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """The shortest import circle, as the modules in order, or None (breadth-first from each module)."""
    best: list[str] | None = None
    for start in sorted(graph):
        parent = {start: ""}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    cycle = [*reversed(path), start]
                    if best is None or len(cycle) < len(best):
                        best = cycle
                    queue.clear()
                    break
                if nxt not in parent:
                    parent[nxt] = node
                    queue.append(nxt)
    return best


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else module


def allowed(importer: str, imported: str) -> bool:
    lo, li = layer_of(importer), layer_of(imported)
    if li not in LAYERS:  # the top-level __init__ / __main__
        return False
    if lo == "loopfsm":  # the public face: the core, and each layer's errors
        return li == "core" or imported.endswith(".errors")
    if lo == "loopfsm.__main__":
        return li == "cli"
    return LAYERS.index(li) <= LAYERS.index(lo)


def test_the_graph_sees_imports_inside_functions_and_type_checking_blocks():
    graph = import_graph()
    assert "loopfsm.core.compiler" in graph["loopfsm.core.declared"]  # a top-level import
    assert "loopfsm.machines.breaker_values" in graph["loopfsm.machines.engine_values"]  # inside a function
    assert "loopfsm.machines.agent_loop" in graph["loopfsm.machines"]  # under TYPE_CHECKING
    assert shortest_cycle({"a": {"b"}, "b": {"c", "a"}, "c": {"a"}}) == ["a", "b", "a"]
    assert shortest_cycle({"a": {"b"}, "b": set()}) is None


def test_there_are_no_import_circles():
    cycle = shortest_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_each_layer_imports_only_the_layers_below_it():
    wrong = sorted(
        f"{importer} imports {imported}"
        for importer, deps in import_graph().items()
        for imported in deps
        if not allowed(importer, imported)
    )
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    "importer,imported,ok",
    [
        ("loopfsm.core.instance", "loopfsm.rendering", False),
        ("loopfsm.core.compiler", "loopfsm.router.store", False),
        ("loopfsm.machines.turnstile", "loopfsm.core.instance", True),
        ("loopfsm.router.providers.scripted", "loopfsm.drivers.scriptfile", False),
        ("loopfsm.cli.main", "loopfsm.drivers.run", True),
        ("loopfsm", "loopfsm.router.errors", True),
        ("loopfsm", "loopfsm.router.service", False),
    ],
)
def test_the_layer_rule(importer, imported, ok):
    assert allowed(importer, imported) is ok


def test_the_package_has_only_its_layers_at_the_top():
    top = {p.name for p in PACKAGE.iterdir() if not p.name.startswith(("_", ".")) and p.name != "py.typed"}
    assert top == set(LAYERS), top


def test_the_checker_knows_every_public_name_of_an_instance():
    from loopfsm import DeclaredMachine, MachineInstance
    from loopfsm.core.checks import INSTANCE_API

    for cls in (MachineInstance, DeclaredMachine):
        assert INSTANCE_API == {n for n in dir(cls) if not n.startswith("_")} | {"compiled"}


def test_no_module_is_over_700_lines_and_each_says_what_it_is_for():
    long, silent = {}, []
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        if (n := len(text.splitlines())) > MAX_LINES:
            long[str(path.relative_to(PACKAGE))] = n
        if not ast.get_docstring(ast.parse(text)):
            silent.append(str(path.relative_to(PACKAGE)))
    assert long == {} and silent == []


def test_the_router_service_is_split_by_concern_into_small_modules():
    service = PACKAGE / "router" / "service"
    names = {p.stem for p in service.glob("*.py")}
    assert {"admission", "turn", "approvals", "tool_calls", "sealing", "responses", "bundle"} <= names
    for path in service.glob("*.py"):
        assert len(path.read_text().splitlines()) < 400, path.name
    graph = import_graph()
    assert not any("loopfsm.router.service" in graph[f"loopfsm.router.service.{n}"] for n in names - {"__init__"})


def test_import_loopfsm_loads_the_core_alone():
    """docs/architecture.md: the other layers' errors are importable from ``loopfsm`` but loaded only when asked for."""
    import json
    import os
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[2])
    code = "import json, sys, loopfsm; print(json.dumps(sorted(m for m in sys.modules if m.startswith('loopfsm'))))"
    env = dict(os.environ, PYTHONPATH=root)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    loaded = json.loads(out)
    assert "loopfsm.core" in loaded and "loopfsm.core.errors" in loaded
    assert [m for m in loaded if m != "loopfsm" and not m.startswith("loopfsm.core")] == []
    # and asking for another layer's error loads that layer: the check above would see a leak
    code = code.replace("import json, sys, loopfsm;", "import json, sys, loopfsm; loopfsm.FencedOut;")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert "loopfsm.machines.errors" in json.loads(out)
