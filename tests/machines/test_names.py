"""Names a person or a tool is told by (tool names, owners, approvers, run ids): something visible, bounded."""

from __future__ import annotations

import pytest

from loopfsm import FeedArgumentError, FeedRefused
from loopfsm.machines import AgentLoop, ToolHealth
from loopfsm.machines.names import MAX_NAME, invisible, name_problem

NOBODY = ["", " ", "\t\n", "\u200b", "\u200e\u200f", "\u00a0", "\u2028", "\u0301", "\ufeff", "\u202e"]
SOMEBODY = ["a", "工具", "σ", "7", "-", "€", " ops ", "a\u200b"]


@pytest.mark.parametrize("name", NOBODY)
def test_names_with_nothing_visible_name_nobody(name):
    assert invisible(name) and name_problem(name) in ("is empty", "holds no visible character")


@pytest.mark.parametrize("name", SOMEBODY)
def test_names_with_something_visible_are_names(name):
    assert not invisible(name) and name_problem(name) is None


def test_a_name_is_bounded_and_the_bound_is_said():
    assert name_problem("x" * MAX_NAME) is None
    assert name_problem("x" * (MAX_NAME + 1)) == f"is longer than {MAX_NAME} characters ({MAX_NAME + 1:,})"


@pytest.mark.parametrize("tool", ["", "\u200b", "x" * 100_000])
def test_tool_health_refuses_a_tool_name_that_names_no_tool_and_files_no_breaker(tool):
    health = ToolHealth()
    with pytest.raises(FeedArgumentError, match="tool_health: a tool name ") as refused:
        health.acquire(tool, 0, "c1")
    assert len(str(refused.value)) < 200 and health.breakers == {}
    with pytest.raises(FeedArgumentError):
        health.breaker(tool)


@pytest.mark.parametrize("owner", ["\u200b", "\u00a0\u200e"])
def test_a_hand_off_to_an_invisible_owner_is_refused(owner):
    loop = AgentLoop.new_run("r1", "o", None)
    before = loop.snapshot()
    with pytest.raises(FeedRefused, match="owner is empty"):
        loop.hand_off(owner, 1)
    assert loop.snapshot() == before
    with pytest.raises(FeedArgumentError, match="new_run's 'owner' holds no visible character"):
        AgentLoop.new_run("r2", owner, None)
