"""The two breakers speak one language: same names for the same ideas, typed outcomes, reasons from the YAML."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from loopfsm import SpecError, load_machine
from loopfsm.machines import FailFast, FallbackBreaker, ToolBreaker
from loopfsm.machines.fallback_breaker import FallbackOutcome
from loopfsm.machines.tool_breaker import ToolOutcome

ROOT = Path(__file__).resolve().parents[2]
SHARED = {"trip_after", "cooldown_ms", "cooldown_multiplier", "max_cooldown_ms", "probe_ttl_ms", "recover_after"}
OLD = {"consecutive_failures", "open_ms", "open_multiplier", "max_open_ms", "probe_successes"}


def policy_fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls.compiled.Policy)}


def test_same_ideas_have_the_same_policy_names():
    tool, fallback = policy_fields(ToolBreaker), policy_fields(FallbackBreaker)
    assert SHARED <= tool & fallback
    assert not OLD & (tool | fallback)


def test_both_use_the_shared_guards_and_the_word_success():
    for cls in (ToolBreaker, FallbackBreaker):
        spec = cls.compiled.spec
        branches = [b for ev in spec.events.values() for bs in ev.sources.values() for b in bs]
        guards = {g.name for b in branches for g in b.guards}
        assert {"cooldown_over", "stale", "probe_successes_reach"} <= guards
        # both say which outcomes a branch is for in the table, with when:
        assert {c.arg for b in branches for c in b.when} == {"outcome"}
        assert "success" in spec.events["record"].args["outcome"].enum
        assert "ok" not in spec.events["record"].args["outcome"].enum
    assert "open_elapsed" not in ToolBreaker.compiled.registry.entries["guard"]


@pytest.mark.parametrize("cls, literal", [(ToolBreaker, ToolOutcome), (FallbackBreaker, FallbackOutcome)])
def test_outcome_literals_are_the_yaml_enums(cls, literal):
    assert list(typing.get_args(literal)) == list(cls.compiled.spec.events["record"].args["outcome"].enum)
    hints = typing.get_type_hints(cls.record)
    assert hints["outcome"] == literal


def test_fail_fast_reason_comes_from_the_yaml(tmp_path):
    text = (ROOT / "machines" / "fallback_breaker.yaml").read_text()
    assert "primary tripped and the fallback is failing too" in text
    f = tmp_path / "fallback_breaker.yaml"
    f.write_text(text.replace("primary tripped and the fallback is failing too", "both models are down"))
    m = load_machine(f).new()
    p = {"trip_after": 1, "fallback_fail_max": 1, "cooldown_ms": 1000}
    m.record(0, m.route(0, policy=p), "transient", policy=p)
    m.record(1, m.route(1, policy=p), "transient", policy=p)
    assert m.route(2, policy=p) == FailFast(1000, "both models are down")


@pytest.mark.parametrize("outcome", ["auth", "quota"])
def test_trip_reasons_are_written_in_the_yaml_not_derived(outcome):
    b = FallbackBreaker()
    b.record(0, b.route(0), outcome)
    assert b.state_data["reason"] == outcome
    text = (ROOT / "machines" / "fallback_breaker.yaml").read_text()
    assert "reason: null" not in text and f"reason: {outcome}}}" in text


def test_a_null_reason_is_refused_by_the_checker(tmp_path):
    text = (ROOT / "machines" / "fallback_breaker.yaml").read_text()
    f = tmp_path / "fallback_breaker.yaml"
    f.write_text(text.replace("reason: auth}", "reason: null}", 1))
    with pytest.raises(SpecError, match="reason"):
        load_machine(f)
