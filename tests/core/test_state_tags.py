"""State tags: the facts the design review needs that the table cannot say, checked like the rest of the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopfsm import SpecError, parse
from loopfsm.core import loader

from tests.support.specs import make_registry, marked_line

ROOT = Path(__file__).resolve().parents[2]

TEXT = """\
machine: demo
description: a small machine for tests
states:
  idle: {initial: true, description: waiting}
  busy: {TAGS description: working}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: busy
  finish:
    description: stop
    from:
      busy:
        - to: done
"""


def test_tags_are_read_and_change_no_fingerprint():
    plain = parse(TEXT.replace("TAGS ", ""), "m.yaml", make_registry())
    tagged = parse(TEXT.replace("TAGS ", "tags: [calls_tools, recovering], "), "m.yaml", make_registry())
    assert tagged.states["busy"].tags == ("calls_tools", "recovering")
    assert plain.states["busy"].tags == ()
    # Tags inform the review only: saved runs of the untagged file restore under the tagged one.
    assert tagged.fingerprint == plain.fingerprint


def test_an_unknown_tag_is_a_located_schema_error():
    text = TEXT.replace(
        "  busy: {TAGS description: working}", "  busy: {tags: [calls_tool], description: working}   # <-"
    )
    with pytest.raises(SpecError) as info:
        parse(text, "m.yaml", make_registry())
    (err,) = info.value.problems
    assert err.line == marked_line(text)
    assert err.path.startswith("states.busy.tags")
    assert "calls_tools" in err.message  # the allowed values are named


def test_a_tagged_terminal_state_is_an_error():
    text = TEXT.replace("TAGS ", "").replace(
        "  done: {terminal: true, description: finished}",
        "  done: {terminal: true, tags: [awaits_approval], description: finished}   # <-",
    )
    with pytest.raises(SpecError) as info:
        parse(text, "m.yaml", make_registry())
    (err,) = [p for p in info.value.problems if p.severity == "error"]
    assert err.line == marked_line(text)
    assert "terminal state 'done' is tagged awaits_approval" in err.message


@pytest.mark.parametrize(
    ("machine", "tagged"),
    [
        (
            "agent_loop",
            {"executing_tool": "calls_tools", "awaiting_approval": "awaits_approval", "recovering": "recovering"},
        ),
        ("engine_brain", {"AwaitingTools": "calls_tools"}),
        ("router_run", {"AwaitingTool": "calls_tools", "AwaitingApproval": "awaits_approval"}),
        ("router_client", {"RunningTools": "calls_tools", "Approving": "awaits_approval"}),
        ("tool_breaker", {"Closed": "calls_tools", "HalfOpen": "recovering"}),
        ("fallback_breaker", {"Recovering": "recovering"}),
    ],
)
def test_shipped_machines_tag_the_states_that_call_tools_wait_or_recover(machine, tagged):
    spec = loader.load(ROOT / "machines" / f"{machine}.yaml")
    for state, tag in tagged.items():
        assert tag in spec.states[state].tags


def test_diff_shows_a_tag_change_as_no_behaviour_change():
    from loopfsm.rendering.diff import diff_specs  # noqa: PLC0415

    plain = parse(TEXT.replace("TAGS ", ""), "m.yaml", make_registry())
    tagged = parse(TEXT.replace("TAGS ", "tags: [calls_tools], "), "m.yaml", make_registry())
    d = diff_specs(plain, tagged)
    assert "  ~ state busy tags [] -> [calls_tools]" in d.lines()
    assert not d.behaviour_changed


def test_the_machines_that_tag_nothing_are_the_ones_the_changelog_names():
    """The CHANGELOG says which shipped machines have no state to tag; a machine that gains a tag, or a new
    machine without one, must be named there (or tagged)."""
    untagged = sorted(
        p.stem for p in (ROOT / "machines").glob("*.yaml") if not any(s.tags for s in loader.load(p).states.values())
    )
    assert untagged == ["run_lock", "stream_assembly", "turnstile"]
    changelog = " ".join((ROOT / "CHANGELOG.md").read_text(encoding="utf-8").split())
    assert "(`turnstile`, `run_lock` and `stream_assembly` have none)" in changelog
