"""Mermaid views: ``stateDiagram-v2`` for the states, ``flowchart`` for each decision chain.

Mermaid renders inline on most code hosts, so these are what a reviewer sees
in a pull request without running anything.
"""

from __future__ import annotations

import textwrap

from loopfsm.core.spec import Decision, Ref, Rule, Spec
from .labels import branch_label, chain_steps, decision_signature, ref_label
from .overview import ANY, Edge, overview


def _text(s: str) -> str:
    # Mermaid ends a transition label at a newline and a flowchart label at a quote.
    return s.replace('"', "'").replace(":", " -").replace("\n", " ")


MAX_LINE = 120


def _fit(prefix: str, label: str) -> str:
    """``prefix: label`` cut to at most MAX_LINE characters (the detailed view has the rest)."""
    line = f"{prefix}: {_text(label)}"
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 1].rstrip() + "…"


def _feeds(e: Edge, words: bool = True) -> str:
    # "feed (why; why)": a second colon would read as Mermaid syntax, so words go in brackets.
    if not words:
        return ", ".join(e.feeds)
    return ", ".join(f"{', '.join(feeds)} ({w})" if w else ", ".join(feeds) for feeds, w in e.groups())


def _edge(prefix: str, e: Edge) -> str:
    """The edge with its words if the line fits, else with its feed names only, else cut."""
    line = _fit(prefix, _feeds(e))
    return line if not line.endswith("…") else _fit(prefix, _feeds(e, words=False))


def state_diagram(spec: Spec, *, detailed: bool = False) -> str:
    """The overview (one edge per pair, see :mod:`.overview`), or every branch with ``detailed``."""
    lines = ["stateDiagram-v2", f"    [*] --> {spec.initial}"]
    for s in spec.states.values():
        if s.data:
            lines.append(f"    {s.name}: {s.name} {{ {', '.join(s.data)} }}")
    if detailed:
        for ev in spec.events.values():
            for state, branches in spec.expanded_sources(ev).items():
                for b in branches:
                    lines.append(f"    {state} --> {b.dest or state}: {_text(branch_label(spec, ev.name, b))}")
    else:
        ov = overview(spec)
        for e in ov.edges:
            label = ", ".join(e.feeds) if e.loop else _feeds(e)
            lines.append(_fit(f"    {e.src} --> {e.dst}", label) if e.loop else _edge(f"    {e.src} --> {e.dst}", e))
        if ov.any_moves or ov.any_stays:
            lines.append(f'    state "{ov.any_label}" as {ANY}')
            for e in ov.any_moves:
                lines.append(_edge(f"    {ANY} --> {e.dst}", e))
            if ov.any_stays:
                lines.append(f"    note right of {ANY}")
                lines.append("        accepted there without moving:")
                lines += [f"        {chunk}" for chunk in textwrap.wrap(", ".join(ov.any_stays), 100)]
                lines.append("    end note")
        for sh in ov.shared:
            label = textwrap.shorten(sh.label, MAX_LINE - len(sh.node) - 20, placeholder=" …")
            lines.append(f'    state "{label}" as {sh.node}')
            for e in sh.moves:
                lines.append(_edge(f"    {sh.node} --> {e.dst}", e))
            if sh.stays:
                lines.append(f"    note right of {sh.node}")
                lines.append("        accepted there without moving:")
                lines += [f"        {chunk}" for chunk in textwrap.wrap(", ".join(sh.stays), 100)]
                lines.append("    end note")
        notes = ([ANY] if ov.any_moves or ov.any_stays else []) + [sh.node for sh in ov.shared]
        if notes:
            lines.append("    classDef housekeeping fill:#ffffff,stroke:#777,stroke-dasharray:4 3")
            lines.append(f"    class {','.join(notes)} housekeeping")
    for t in spec.terminal_states:
        lines.append(f"    {t} --> [*]")
    if spec.terminal_states:
        lines.append("    classDef terminal fill:#e6e6e6,stroke:#333,stroke-width:3px")
        lines.append(f"    class {','.join(spec.terminal_states)} terminal")
    return "\n".join(lines) + "\n"


def _guard_name(g: Ref) -> str:
    if g.options:
        return "(" + " or ".join(" and ".join(_guard_name(x) for x in opt) for opt in g.options) + ")"
    return ("not " if g.negate else "") + g.name


def _question(r: Rule) -> str:
    # Guard names without their numbers: the table beside the chart has them in full.
    conds = ["state in " + "/".join(r.states)] if r.states is not None else []
    conds += [*r.conditions(), *(_guard_name(g) for g in r.guards)]
    return f"[{r.name}] {' and '.join(conds)}?"


def _node(prefix: str, open_: str, text: str, close: str) -> str:
    line = f'{prefix}{open_}"{_text(text)}"{close}'
    if len(line) > MAX_LINE:
        keep = MAX_LINE - len(prefix) - len(open_) - len(close) - 3
        line = f'{prefix}{open_}"{_text(text)[:keep].rstrip()}…"{close}'
    return line


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
        lines.append(_node(f"    {prev}{arrow}q{i}", "{", _question(r), "}"))
        lines.append(f"    q{i} -- yes --> {answer}")
        prev, label = f"q{i}", "no"
    if unanswered:
        lines.append(f'    {prev} -- no --> none["no answer (raises)"]')
    return "\n".join(lines) + "\n"
