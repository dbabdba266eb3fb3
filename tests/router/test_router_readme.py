"""The router run in the docs: the README's store example, the router_run page's tables, the performance figures."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.docs_pages import page

README = page("README.md")
ROUTER_RUN_PAGE = page("docs/machines/router_run.md")
PERFORMANCE = page("docs/performance.md")


def test_store_example_prints_what_the_readme_says(capsys):
    block = README.split("<!-- example: store -->")[1].split("```python\n")[1].split("```")[0]
    exec(compile(block, "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out == ["completed ['lock.acquired', 'run.started', 'run.completed', 'lock.released']", "replayed 1"]
    after = README.split("<!-- example: store -->")[1]
    assert "prints `completed ['lock.acquired', 'run.started', 'run.completed', 'lock.released']`" in after
    assert "and `replayed 1`" in after


def test_admission_table_in_the_docs_lists_the_yaml_rules_in_order():
    from loopfsm.machines.router_run import ROUTER_RUN

    rules = [r.name for r in ROUTER_RUN.spec.decisions["admit"].rules]
    answers = [r.result.params["value"] for r in ROUTER_RUN.spec.decisions["admit"].rules]
    section = ROUTER_RUN_PAGE.split("**Admission**")[1].split("**Pause states**")[0]
    table = [line.split("|")[3].strip() for line in section.splitlines() if line.startswith("| ") and line[2].isdigit()]
    # the page merges the five per-phase 'admit' rules into one row
    merged = [
        a
        for i, a in enumerate(answers)
        if not (rules[i].endswith("_answer") and rules[i] != "decrypt_answer") and rules[i] != "new_prompt"
    ]
    assert [re.search(r"`(\w+)`", t).group(1) for t in table] == merged


def test_store_figures_are_pasted_from_the_benchmark():
    figures = PERFORMANCE.split("## Run-state store")[1].split("```")[1]
    for backend in ("SQLite", "PostgreSQL"):
        assert f"  {backend}" in figures and "store p50" in figures and "plain SQL p50" in figures
        assert f"{backend:<11} 8 distinct runs" in figures and f"{backend:<11} one contended run" in figures
    assert figures.count("client CPU per step: store") == 2


def test_router_benchmark_output_is_pasted():
    """docs/performance.md shows router_bench.py's current output: its lines and goals, not an older script's."""
    bench = (Path(__file__).resolve().parents[2] / "benchmarks" / "router_bench.py").read_text(encoding="utf-8")
    section = PERFORMANCE.split("`python benchmarks/router_bench.py`")[1]
    figures = section.split("```\n")[1]
    labels = ("p50 turn, 1 client (ms)", " clients / 1 client", "server CPU / turn (ms)", "client CPU / turn (ms)")
    for label in (*labels, "goals (router):"):
        assert label in bench and label in figures, label
    for store in ("SQLite (WAL)", "PostgreSQL"):
        assert f"{store}: 11 rows per run" in figures, store
    for label in ("p50 turn, in process (ms)", "p50 GET /healthz (ms)"):
        assert label in bench and figures.count(label) == 2, label  # once per store
    assert figures.count("p50 over HTTP / in process") == 4  # per store: its table and the goals
    # per store: p50 and HTTP / in process in its table and in the goals, router CPU plain and encrypted in the
    # goals; 4 clients / 1 client per store for 1, 2 and 4 processes, twice
    assert figures.count("goal <= ") == 12 and figures.count("goal >= 3x") == 12
    assert figures.count("router CPU / turn, encrypted (execute, decrypted, sealed)") == 2
    for label in ("CPU per turn: router", "cores busy", "ceiling", "allows", "(`serve --workers N`)"):
        assert label in bench and label in figures, label
    assert "2 router processes: " in figures and "4 router processes: " in figures
    assert "uvicorn with " in figures and "fsync of 4 KiB" in figures  # the machine and stack are named
