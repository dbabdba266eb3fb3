"""Labels shared by every renderer, so the SVG, Mermaid and Markdown views of a table agree."""

from __future__ import annotations

import json
from typing import Any

from loopfsm.core.spec import Branch, Condition, Decision, Ref, Rule, Spec, policy_ref


_UNITS = (("h", 3_600_000), ("min", 60_000), ("s", 1_000))
_MOST = 10_000  # a count this large is spelled in parts


def duration(ms: int) -> str:
    """Milliseconds as a reviewer reads them: the largest unit that divides exactly, up to hours.

    86400000 -> "24 h", 30000 -> "30 s", 90000 -> "90 s", 1500 -> "1500 ms".
    Hours are the top unit: "24 h" is how a time-to-live is usually said.  A
    count that would reach five digits is spelled in parts instead, still
    exact: 90061000 -> "25 h 1 min 1 s", not "90061 s".
    """
    for unit, size in _UNITS:
        if ms and ms % size == 0 and abs(ms) // size < _MOST:
            return f"{ms // size} {unit}"
    if abs(ms) < _MOST:
        return f"{ms} ms"
    rest, parts = abs(ms), []
    for unit, size in (*_UNITS, ("ms", 1)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count} {unit}")
    return ("-" if ms < 0 else "") + " ".join(parts)


def is_duration(name: str, v: Any) -> bool:
    """Durations are named ``*_ms`` throughout the machines (``pause_ttl_ms``, ``ttl_ms``)."""
    return name.endswith("_ms") and isinstance(v, int) and not isinstance(v, bool)


def value_label(spec: Spec, v: Any, name: str = "") -> str:
    """A parameter value; a policy reference shows its current YAML default and its name.

    A duration (a policy or parameter named ``*_ms``) is shown in units: ``24 h``.
    """
    ref = policy_ref(v)
    if ref is not None:
        p = spec.policy.get(ref)
        if p is None:
            return f"? (policy.{ref})"
        shown = duration(p.default) if is_duration(ref, p.default) else json.dumps(p.default)
        return f"{shown} (policy.{ref})"
    if is_duration(name, v):
        return duration(v)
    return v if isinstance(v, str) else json.dumps(v)


def ref_label(spec: Spec, ref: Ref) -> str:
    if ref.options:
        return "(" + " or ".join(guards_label(spec, opt) for opt in ref.options) + ")"
    args = ", ".join(f"{k}={value_label(spec, v, k)}" for k, v in ref.params.items())
    core = f"{ref.name}({args})" if args else ref.name
    return f"not {core}" if ref.negate else core


def guards_label(spec: Spec, guards: tuple[Ref, ...]) -> str:
    return " and ".join(ref_label(spec, g) for g in guards)


def condition_label(spec: Spec, b: Branch | Rule) -> str:
    """What must hold for branch or rule ``b``: its ``when:`` conditions, then its guards (empty: always)."""
    return " and ".join([*b.conditions(), *(ref_label(spec, g) for g in b.guards)])


def said(c: Condition, nullable: frozenset[str] = frozenset()) -> str:
    """A ``when:`` condition as a card's "if the feed says" line says it: a flag by its name ("not" it when
    false), else its label; a false flag that may be null too by its label ("enc=false"): null is not false."""
    if len(c.values) == 1 and isinstance(c.values[0], bool) and (c.values[0] or c.arg not in nullable):
        return c.arg if c.values[0] else f"not {c.arg}"
    return c.label()


def branch_label(spec: Spec, event: str, b: Branch) -> str:
    """``event [guard] / action, action`` — the UML transition label.

    Diagrams name actions without their parameters (the review sheet has them
    in full): a trip action's five policy numbers would bury the graph.
    """
    text = event
    if b.guarded:
        text += f" [{condition_label(spec, b)}]"
    actions = spec.actions_of(event, b)
    if actions:
        text += " / " + ", ".join(a.name for a in actions)
    return text


def state_title(spec: Spec, name: str) -> str:
    """``AwaitingModel { turn }`` for states that carry data."""
    fields = spec.states[name].data
    return f"{name} {{ {', '.join(fields)} }}" if fields else name


def rule_words(spec: Spec, r: Rule) -> list[str]:
    """What a decision rule asks, in words: its YAML description, else its conditions and guards.

    The description is what the rule is for; the conditions follow it only
    when there is none (the review sheet's table has them in full).
    """
    if r.description:
        return [r.description]
    conds = ["state in " + ", ".join(r.states)] if r.states is not None else []
    return conds + [*r.conditions(), *(ref_label(spec, g) for g in r.guards)]


def decision_signature(d: Decision) -> str:
    """``admit(request, lock, policy)``: what a decision is asked with, as the chart's first box."""
    return f"{d.name}({', '.join([*d.args, 'policy'])})"


def chain_steps(spec: Spec, d: Decision) -> tuple[list[tuple[int, Rule, bool]], bool]:
    """The rules a flowchart of ``d`` draws, each marked final when it answers unconditionally.

    The walk stops at the first rule after which every state has an answer;
    the flag returned says whether some state is left with none (drawn as
    "no answer (raises)").
    """
    steps: list[tuple[int, Rule, bool]] = []
    covered: set[str] = set()
    for i, r in enumerate(d.rules):
        if not r.guarded:
            covered |= set(r.states or spec.states)
        final = not r.guarded and (r.states is None or covered == set(spec.states))
        steps.append((i, r, final))
        if final:
            return steps, False
    return steps, True
