"""Labels shared by every renderer, so the SVG, Mermaid and Markdown views of a table agree."""

from __future__ import annotations

import json
from typing import Any

from loopfsm.core.spec import Branch, Decision, Ref, Rule, Spec, policy_ref


def value_label(spec: Spec, v: Any) -> str:
    """A parameter value; a policy reference shows its name and its current YAML default."""
    name = policy_ref(v)
    if name is not None:
        p = spec.policy.get(name)
        default = json.dumps(p.default) if p is not None else "?"
        return f"{default} (policy.{name})"
    return v if isinstance(v, str) else json.dumps(v)


def ref_label(spec: Spec, ref: Ref) -> str:
    if ref.options:
        return "(" + " or ".join(guards_label(spec, opt) for opt in ref.options) + ")"
    args = ", ".join(f"{k}={value_label(spec, v)}" for k, v in ref.params.items())
    core = f"{ref.name}({args})" if args else ref.name
    return f"not {core}" if ref.negate else core


def guards_label(spec: Spec, guards: tuple[Ref, ...]) -> str:
    return " and ".join(ref_label(spec, g) for g in guards)


def condition_label(spec: Spec, b: Branch | Rule) -> str:
    """What must hold for branch or rule ``b``: its ``when:`` conditions, then its guards (empty: always)."""
    return " and ".join([*b.conditions(), *(ref_label(spec, g) for g in b.guards)])


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
