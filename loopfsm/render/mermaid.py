"""Mermaid views: ``stateDiagram-v2`` for the states, ``flowchart`` for each decision chain.

Mermaid renders inline on most code hosts, so these are what a reviewer sees
in a pull request without running anything.
"""

from __future__ import annotations

from ..spec import Decision, Spec
from .labels import branch_label, chain_steps, decision_signature, ref_label, rule_question


def _text(s: str) -> str:
    # Mermaid ends a transition label at a newline and a flowchart label at a quote.
    return s.replace('"', "'").replace(":", " -").replace("\n", " ")


def state_diagram(spec: Spec) -> str:
    lines = ["stateDiagram-v2", f"    [*] --> {spec.initial}"]
    for s in spec.states.values():
        if s.data:
            lines.append(f"    {s.name}: {s.name} {{ {', '.join(s.data)} }}")
    for ev in spec.events.values():
        for state, branches in spec.expanded_sources(ev).items():
            for b in branches:
                lines.append(f"    {state} --> {b.dest or state}: {_text(branch_label(spec, ev.name, b))}")
    for t in spec.terminal_states:
        lines.append(f"    {t} --> [*]")
    if spec.terminal_states:
        lines.append("    classDef terminal fill:#e6e6e6,stroke:#333,stroke-width:3px")
        lines.append(f"    class {','.join(spec.terminal_states)} terminal")
    return "\n".join(lines) + "\n"


def decision_flowchart(spec: Spec, d: Decision) -> str:
    lines = ["flowchart TD", f'    ask["{decision_signature(d)}"]']
    prev, label = "ask", ""
    steps, unanswered = chain_steps(spec, d)
    for i, r, final in steps:
        arrow = f" -- {label} --> " if label else " --> "
        answer = f'a{i}["{_text(ref_label(spec, r.result))}"]'
        if final:
            lines.append(f"    {prev}{arrow}{answer}")
            break
        lines.append(f'    {prev}{arrow}q{i}{{"{_text(rule_question(spec, r))}"}}')
        lines.append(f"    q{i} -- yes --> {answer}")
        prev, label = f"q{i}", "no"
    if unanswered:
        lines.append(f'    {prev} -- no --> none["no answer (raises)"]')
    return "\n".join(lines) + "\n"
