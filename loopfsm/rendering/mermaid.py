"""Mermaid views: ``stateDiagram-v2`` for the states, ``flowchart`` for each decision chain.

Mermaid renders inline on most code hosts, so these are what a reviewer sees
in a pull request without running anything.
"""

from __future__ import annotations

import textwrap

from loopfsm.core.spec import Decision, Rule, Spec
from loopfsm.rendering.labels import branch_label, chain_steps, decision_signature, ref_label, rule_words
from loopfsm.rendering.overview import ANY, ANYWHERE, Edge, overview, short, stay_groups


def _html_safe(s: str) -> str:
    # Mermaid reads a label as HTML, where "<open>" would vanish: its entity code #lt; draws "<".
    return s.replace("<", "#lt;")


def _text(s: str) -> str:
    # Mermaid ends a transition label at a newline and a flowchart label at a quote.
    return _html_safe(s.replace('"', "'").replace(":", " -").replace("\n", " "))


MAX_LINE = 120


def _fit(prefix: str, label: str) -> str:
    """``prefix: label`` cut to at most MAX_LINE characters (the detailed view has the rest)."""
    line = f"{prefix}: {_text(label)}"
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 1].rstrip() + "…"


def _feeds(e: Edge, words: bool = True) -> str:
    # "feed (why; why)": a second colon would read as Mermaid syntax, so words go in brackets.
    if not words:
        return e.titles()
    return ", ".join(f"{feeds} ({'; '.join([w, *cases])})" if w else feeds for feeds, w, cases in e.said())


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
            lines.append(_edge(f"    {e.src} --> {e.dst}", e))
        if ov.any_moves or ov.any_stays:
            lines.append(f'    state "{ov.any_label}" as {ANY}')
            for e in ov.any_moves:
                lines.append(_edge(f"    {ANY} --> {e.dst}", e))
            if ov.any_stays:
                lines += _stays_note(ANY, stay_groups(ov.any_stays, ov.any_moves))
        for sh in ov.shared:
            label = textwrap.shorten(sh.label, MAX_LINE - len(sh.node) - 20, placeholder=" …")
            lines.append(f'    state "{label}" as {sh.node}')
            for e in sh.moves:
                lines.append(_edge(f"    {sh.node} --> {e.dst}", e))
            if sh.stays:
                lines += _stays_note(sh.node, stay_groups(sh.stays, sh.moves))
        if ov.anywhere:
            lines.append(f'    state "{_text("; ".join(ov.anywhere_lines(ways=False)))}" as {ANYWHERE}')
        notes = ([ANY] if ov.any_moves or ov.any_stays else []) + [sh.node for sh in ov.shared]
        notes += [ANYWHERE] if ov.anywhere else []
        if notes:
            lines.append("    classDef housekeeping fill:#ffffff,stroke:#777,stroke-dasharray:4 3")
            lines.append(f"    class {','.join(notes)} housekeeping")
    for t in spec.terminal_states:
        lines.append(f"    {t} --> [*]")
    if spec.terminal_states:
        lines.append("    classDef terminal fill:#e6e6e6,stroke:#333,stroke-width:3px")
        lines.append(f"    class {','.join(spec.terminal_states)} terminal")
    return "\n".join(lines) + "\n"


RHOMBUS = 40  # characters a decision rhombus carries per line; a rhombus grows with the square of its text


def _quoted(s: str) -> str:
    # Inside a quoted flowchart label only a quote or a newline ends the text; colons may stay.
    return _html_safe(s.replace('"', "'").replace("\n", " "))


def _question(i: int, r: Rule) -> str:
    """The rhombus: the rule's number and name as a question, wrapped at RHOMBUS characters.

    What the rule asks in words goes on its "yes" edge (see :func:`_because`):
    110 characters in a rhombus drew a diamond wider than the chart.
    """
    return "<br/>".join(textwrap.wrap(_quoted(f"{i + 1}. {r.name}?"), RHOMBUS, break_long_words=False))


def _because(spec: Spec, r: Rule, room: int) -> str:
    """The "yes" edge: what the rule asks in words, wrapped at RHOMBUS characters, in at most ``room``.

    The whole description when it fits the line, else its first clause (the
    chart beside it in SVG and the review sheet have the rest); a cut, if it
    comes to that, falls between words and is marked.
    """
    words = _quoted(" and ".join(rule_words(spec, r)))
    for text in (words, short(words, RHOMBUS), textwrap.shorten(words, RHOMBUS, placeholder=" …")):
        label = "<br/>".join(textwrap.wrap("yes: " + text, RHOMBUS, break_long_words=False))
        if len(label) <= room:
            return label
    return "yes"


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
        lines.append(f'    {prev}{arrow}q{i}{{"{_question(i, r)}"}}')
        lines.append(f"    {answer}")
        edge = f'    q{i} -->|""| a{i}'
        lines.append(edge.replace('""', f'"{_because(spec, r, MAX_LINE - len(edge))}"'))
        prev, label = f"q{i}", "no"
    if unanswered:
        lines.append(f'    {prev} -- no --> none["no answer (raises)"]')
    return "\n".join(lines) + "\n"


def _stays_note(node: str, groups: list[tuple[str, list[str]]]) -> list[str]:
    """A Mermaid note beside ``node`` listing the feeds it stays on, under their headings."""
    lines = [f"    note right of {node}"]
    for heading, feeds in groups:
        lines.append(f"        {heading}")
        lines += [f"        {chunk}" for chunk in textwrap.wrap(", ".join(feeds), 100)]
    return lines + ["    end note"]
