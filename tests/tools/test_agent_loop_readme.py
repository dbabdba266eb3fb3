"""The agent loop's example in the README and its trace in docs/machines/agent_loop.md are the ones that work."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from tests.support.docs_pages import page, section
from loopfsm.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SECTION = section(page("README.md"), "### The agent loop")
PAGE = page("docs/machines/agent_loop.md")


def test_agent_loop_example_prints_what_the_readme_says(capsys):
    block = SECTION.split("<!-- example: agent-loop -->\n```python\n")[1].split("```")[0]
    assert len(block.strip().splitlines()) < 40
    exec(compile(block, "README-agent-loop", "exec"), {})
    printed = SECTION.split("\nprints\n")[1].split("```\n", 1)[1].split("```")[0]
    assert capsys.readouterr().out == printed


def test_pasted_agent_loop_trace_is_what_the_command_prints(monkeypatch):
    pasted = PAGE.split("$ loopfsm run agent_loop --script examples/approval_expires.yaml\n")[1].split("```")[0]
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["run", "agent_loop", "--script", "examples/approval_expires.yaml"]) == 0
    assert out.getvalue() == pasted
    assert "approval_decided [approval_lapsed]" in pasted and "awaiting_approval -> expired" in pasted


def test_the_diagram_the_readme_shows_exists():
    assert "![agent loop](diagrams/agent_loop.svg)" in SECTION
    assert "![agent loop](../../diagrams/agent_loop.svg)" in PAGE
    assert (ROOT / "diagrams" / "agent_loop.svg").read_text().lstrip().startswith("<?xml")
