"""The review sheet: a state x feed matrix in the style of seed 000, plus policy, data and chains.

Illegal cells are spelled out, not left blank: "illegal" is where a state
machine earns its keep, and a reviewer should see every one of them.
"""

from __future__ import annotations

import json

from loopfsm.verification.coverage import rows_of
from loopfsm.core.spec import MISSING, Branch, FieldDef, Spec
from loopfsm.rendering import dot, mermaid, review
from loopfsm.rendering.labels import condition_label, duration, guards_label, is_duration, ref_label, state_title

ILLEGAL = "illegal (raises `IllegalFeed`)"


def _esc(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _cell(spec: Spec, event: str, state: str, sources: dict[str, tuple[Branch, ...]]) -> str:
    """The matrix cell of ``event`` in ``state``; ``sources`` is ``spec.expanded_sources`` of the event,
    worked out once per feed (once per cell made the sheet of a 5,000-state machine quadratic)."""
    ev = spec.events[event]
    if state not in sources:
        if spec.states[state].terminal and spec.terminal_behaviour(ev) == "ignore":
            return "ignored (terminal is forever)"
        return ILLEGAL
    parts = []
    for b in sources[state]:
        move = f"→ `{b.dest}`" if b.dest else ("refused" if b.refusal is not None else "stay")
        if b.guarded:
            move = f"if `{condition_label(spec, b)}` {move}"
        elif len(sources[state]) > 1:
            move = f"else {move}"
        if b.actions:
            move += " / " + ", ".join(f"`{ref_label(spec, a)}`" for a in b.actions)
        parts.append(move)
    if all(b.guarded for b in sources[state]) and ev.otherwise is None:
        parts.append("one holds for every feed (the `when:` lists take every value)")
    elif all(b.guarded for b in sources[state]):
        parts.append("none holds: " + ("stay" if ev.otherwise == "stay" else "raises `NoBranchMatched`"))
    return "; ".join(parts)


def _field_type(f: FieldDef) -> str:
    t = f.type + ("[]" if f.list else "") + ("?" if f.nullable else "")
    if f.enum is not None:
        t += " (" + " \\| ".join(json.dumps(v) for v in f.enum) + ")"
    return str(t)


def _fields_table(title: str, fields: dict[str, FieldDef]) -> list[str]:
    if not fields:
        return []
    out = [f"### {title}", "", "| field | type | default | description |", "| --- | --- | --- | --- |"]
    for f in fields.values():
        t = f.type + ("[]" if f.list else "") + ("?" if f.nullable else "")
        d = "" if f.default is MISSING else json.dumps(f.default)
        out.append(f"| `{f.name}` | {t} | {d} | {review.prose(f.description)} |")
    return out + [""]


def _invariants_table(spec: Spec) -> list[str]:
    """What ``loopfsm verify`` proves of this machine, one row per invariant."""
    out = ["## Invariants (checked by `loopfsm verify`, to a bound)", ""]
    out += ["| invariant | kind | in states | property | description |", "| --- | --- | --- | --- | --- |"]
    for inv in spec.invariants.values():
        holds = _esc(guards_label(spec, inv.holds)) or "any"
        if inv.kind == "step":
            feeds = ", ".join(inv.feeds) if inv.feeds else "every feed"
            when = _esc(guards_label(spec, inv.when))
            prop = f"after {feeds}{f' when {when}' if when else ''}: {holds}"
        else:
            prop = holds
        states = ", ".join(inv.states) if inv.states else "any"
        out.append(f"| `{inv.name}` | {inv.kind} | {states} | {prop} | {review.prose(inv.description)} |")
    out.append("")
    return out


def review_sheet(spec: Spec) -> str:
    out = [
        f"# {spec.name}",
        "",
        spec.description.strip(),
        "",
        f"Generated from `{spec.file.rsplit('/', 1)[-1]}` by `loopfsm build`; edit the YAML, not this file.",
        "",
        "## Reading the diagram",
        "",
        f"`{spec.name}.svg` draws each state as a card of its ways, each way's arrow leaving from its line; its legend,"
        " under the title:",
        "",
        *(f"- {mark}: {words}" for mark, _, words in dot.legend(spec).sheet_rows()),
        "",
    ]
    out += ["## States", "", "| state | kind | description |", "| --- | --- | --- |"]
    for s in spec.states.values():
        kind = ", ".join(["initial"] * s.initial + ["terminal"] * s.terminal + [f"`{t}`" for t in s.tags])
        out.append(f"| `{state_title(spec, s.name)}` | {kind} | {review.prose(s.description)} |")
    out.append("")
    # Each feed's sources are worked out once, for the review and the matrix alike
    # (once per cell made the sheet of a 5,000-state machine quadratic).
    sources = {e: spec.expanded_sources(ev) for e, ev in spec.events.items()}
    out += review.design_review(spec, sources)
    events = list(spec.events)
    if events:
        out += [
            "## Was in x Feed",
            "",
            "| Was in | " + " | ".join(f"`{e}`" for e in events) + " |",
            "| --- |" + " --- |" * len(events),
        ]
        for state in spec.states:
            out.append(f"| `{state}` | " + " | ".join(_esc(_cell(spec, e, state, sources[e])) for e in events) + " |")
        out.append("")
        if spec.before:
            out += [
                "Before the actions of every branch taken, of any feed: "
                + ", ".join(f"`{ref_label(spec, a)}`" for a in spec.before)
                + ".",
                "",
            ]
        out += ["### Feeds", "", "| feed | arguments | before each branch | description |", "| --- | --- | --- | --- |"]
        for ev in spec.events.values():
            args = ", ".join(f"{a.name}: {a.type}{'[]' if a.list else ''}" for a in ev.args.values())
            before = ", ".join(f"`{ref_label(spec, a)}`" for a in ev.before)
            out.append(f"| `{ev.name}` | {args} | {_esc(before)} | {review.prose(ev.description)} |")
        out.append("")
    if spec.policy:
        out += [
            "## Policy",
            "",
            "| parameter | type | default | bounds | description |",
            "| --- | --- | --- | --- | --- |",
        ]
        for p in spec.policy.values():
            bounds = " ".join(
                x
                for x in (
                    f">= {p.minimum}" if p.minimum is not None else "",
                    f"<= {p.maximum}" if p.maximum is not None else "",
                )
                if x
            )
            default = json.dumps(p.default) + (f" ({duration(p.default)})" if is_duration(p.name, p.default) else "")
            out.append(f"| `{p.name}` | {p.type} | {default} | {bounds} | {review.prose(p.description)} |")
        out.append("")
    out += _fields_table("Data", spec.data)
    for d in spec.decisions.values():
        out += [f"## Decision `{d.name}`", "", d.description.strip(), ""]
        if d.args:
            out += ["| argument | type | description |", "| --- | --- | --- |"]
            for a in d.args.values():
                out.append(f"| `{a.name}` | {_field_type(a)} | {review.prose(a.description)} |")
            out.append("")
        out += ["| # | rule | in states | guard | answer |", "| --- | --- | --- | --- | --- |"]
        for i, r in enumerate(d.rules, 1):
            states = ", ".join(r.states) if r.states else "any"
            out.append(
                f"| {i} | `{r.name}` | {states} | {_esc(condition_label(spec, r)) or 'always'} | "
                f"`{_esc(ref_label(spec, r.result))}` |"
            )
        out += ["", "```mermaid", mermaid.decision_flowchart(spec, d).rstrip(), "```", ""]
    if spec.outcomes:
        out += ["## Outcomes", "", "| outcome | error | description |", "| --- | --- | --- |"]
        for o in spec.outcomes.values():
            err = (
                "none"
                if o.error is None
                else (f"`{o.error}`" if isinstance(o.error, str) else f"the outcome's `{o.error['field']}`")
            )
            out.append(f"| `{o.name}` | {err} | {review.prose(o.description)} |")
        out.append("")
    if spec.invariants:
        out += _invariants_table(spec)
    excused = [r for r in rows_of(spec.source.doc) if r.excuse]
    if excused:
        out += ["## Rows excused from transition coverage", "", "| row | why no test takes it |", "| --- | --- |"]
        out += [f"| {r.kind} `{r.name}` | {review.prose(r.excuse or '')} |" for r in excused]
        out.append("")
    out += review.traced(spec)
    out += ["## State diagram", "", "```mermaid", mermaid.state_diagram(spec).rstrip(), "```", ""]
    return "\n".join(out)
