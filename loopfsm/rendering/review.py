"""The review sheet's answers to seed 003's design-review checklist, and its "Traced" section.

Every answer is read from the table: terminal states from ``terminal:``, the
states that call tools, wait for approval or recover from their ``tags:``
(facts a transition table cannot say by itself), retryable transitions from
the branches around a ``recovering`` state, what is persisted from the
snapshot's envelope and the declared data, what is traced from the ``trace:``
table.  A machine that tags nothing gets "no state is tagged ...", which is
what its file says; it never gets a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from loopfsm.core.otel import DECISION_EVENT, TRANSITION_EVENT
from loopfsm.core.instance import SNAPSHOT_FORMAT
from loopfsm.core.compiler import SNAPSHOT_KEYS
from loopfsm.core.spec import Branch, Spec
from loopfsm.core.tracing import TraceAttribute, branch_name, trace_attributes
from loopfsm.rendering.labels import condition_label, ref_label

Sources = dict[str, dict[str, tuple[Branch, ...]]]  # feed -> state -> its branches, '*' expanded

#: The keys of every snapshot (``instance.snapshot()``), in the order it writes them.


def _code(names: list[str] | tuple[str, ...]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _esc(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def prose(s: str) -> str:
    """A description in a table cell: as :func:`_esc`, and a ``<`` outside code spans as ``&lt;``,
    so the Markdown reader draws it instead of taking ``<b>`` or ``<open>`` as HTML."""
    parts = _esc(s).split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;") for i, p in enumerate(parts))


@dataclass(frozen=True)
class Around:
    """One branch that enters or leaves a recovering state: its feed, ends, stable name and guards."""

    feed: str
    source: str
    dest: str
    name: str
    guards: str  # the guards as the matrix words them; "" for none

    def line(self) -> str:
        when = f", if `{self.guards}`" if self.guards else ""
        return f"`{self.feed}` from `{self.source}` → `{self.dest}` (branch `{self.name}`){when}"


def _around(spec: Spec, sources: Sources, recovering: str) -> tuple[list[Around], list[Around]]:
    """The branches that move into ``recovering`` from elsewhere, and those that move out of it."""
    into: list[Around] = []
    out: list[Around] = []
    for ev in spec.events.values():
        for state, branches in sources[ev.name].items():
            for b in branches:
                if b.dest is None or b.refusal is not None or b.dest == state:
                    continue
                if b.dest == recovering or state == recovering:
                    a = Around(ev.name, state, b.dest, _name(ev.name, b), condition_label(spec, b))
                    (into if b.dest == recovering else out).append(a)
    return into, out


def _name(feed: str, b: Branch) -> str:
    return branch_name(feed, b.source, b.index, b.name)


def _tagged(spec: Spec, tag: str) -> list[str]:
    return [s.name for s in spec.states.values() if tag in s.tags]


def _terminal_answer(spec: Spec, all_sources: Sources) -> str:
    terminal = spec.terminal_states
    if not terminal:
        return "None: no state is terminal, so the machine never ends."
    taken: list[str] = []
    ignored: list[str] = []
    for ev in spec.events.values():
        if any(s in all_sources[ev.name] for s in terminal):
            taken.append(ev.name)
        elif spec.terminal_behaviour(ev) == "ignore":
            ignored.append(ev.name)
    parts = [f"{_code(terminal)}; an instance that reaches one is over."]
    if taken:
        parts.append(f"There {_code(taken)} {'is' if len(taken) == 1 else 'are'} still taken (see the matrix).")
    if ignored:
        parts.append(f"{_code(ignored)} {'is' if len(ignored) == 1 else 'are'} ignored.")
    if len(taken) + len(ignored) < len(spec.events):
        parts.append(("Every other feed" if taken or ignored else "Every feed") + " raises `IllegalFeed` there.")
    return " ".join(parts)


def _tag_answer(spec: Spec, tag: str, what: str) -> str:
    states = _tagged(spec, tag)
    if not states:
        return f"No state is tagged `{tag}`: the table says no state {what}."
    return f"{_code(states)} (tagged `{tag}`)."


def _retry_lines(spec: Spec, sources: Sources) -> list[str]:
    recovering = _tagged(spec, "recovering")
    if not recovering:
        return ["No state is tagged `recovering`: no transition of this machine retries a failed step.", ""]
    out = [
        "A failed step is retried, compensated or given up through "
        f"{_code(recovering)} (tagged `recovering`). Each guard is the branch's own; a branch is tried only "
        "after the ones before it in its matrix cell did not hold.",
        "",
    ]
    for state in recovering:
        into, leave = _around(spec, sources, state)
        out.append(f"- into `{state}`:" + ("" if into else " no branch"))
        out += [f"  - {a.line()}" for a in into]
        out.append(f"- out of `{state}`:" + ("" if leave else " no branch"))
        out += [f"  - {a.line()}" for a in leave]
    return out + [""]


def _persisted_lines(spec: Spec) -> list[str]:
    keys = ", ".join(f'"{k}"' for k in SNAPSHOT_KEYS)
    out = [
        f"`snapshot()` is one JSON object with the keys {keys} (`format` {SNAPSHOT_FORMAT}). "
        "Besides the machine's name, its version, fingerprint and shape (what restore judges an edited "
        "table by) and the state's name it holds:",
        "",
        "- data: " + (_code(list(spec.data)) if spec.data else "none declared") + ";",
    ]
    with_data = [s for s in spec.states.values() if s.data]
    if with_data:
        out.append("- state data, for the current state only:")
        out += [f"  - `{s.name}`: {_code(list(s.data))}" for s in with_data]
    else:
        out.append("- state data: no state declares any.")
    out += [
        "",
        "Policy is not persisted: it is fed in with each call (the YAML holds its defaults).",
        "",
    ]
    return out


def _traced_answer(spec: Spec) -> str:
    branches = [b for ev in spec.events.values() for bs in ev.sources.values() for b in bs]
    named = sum(1 for b in branches if b.name)
    attrs = trace_attributes(spec)
    what = f"{len(attrs)} attribute{'s' * (len(attrs) != 1)} from the `trace:` table" if attrs else "no attributes"
    if named == len(branches):
        names = "every branch has a YAML `name:`"
    elif named == 0:
        names = "branches are named `feed/source[index]`"
    else:
        names = f"{named} of the {len(branches)} branches have a YAML `name:`, the others are `feed/source[index]`"
    return (
        "Every transition: each feed and each decision makes one record naming the branch or rule taken "
        f"({names}), with {what}; see Traced."
    )


def design_review(spec: Spec, sources: Sources) -> list[str]:
    """The "Design review" section: seed 003's six questions, each answered from the table.

    ``sources`` maps each feed to its ``spec.expanded_sources``, worked out once by the sheet.
    """
    out = [
        "## Design review",
        "",
        "The checklist of a design review, answered from the table; the states' `tags:` say what a "
        "transition table cannot (which states call tools, wait for approval or recover).",
        "",
        "**What are the terminal states?** " + _terminal_answer(spec, sources),
        "",
        "**Which states can call tools?** " + _tag_answer(spec, "calls_tools", "calls tools"),
        "",
        "**Which states require human approval?** " + _tag_answer(spec, "awaits_approval", "waits for approval"),
        "",
        "**Which transitions are retryable?**",
        "",
        *_retry_lines(spec, sources),
        "**What state is persisted?**",
        "",
        *_persisted_lines(spec),
        "**What transition is traced?** " + _traced_answer(spec),
        "",
    ]
    return out


def _source(spec: Spec, attr: TraceAttribute) -> str:
    if attr.kind == "result":
        assert attr.ref is not None
        return f"result `{ref_label(spec, attr.ref)}`"
    words = {"data": "data", "state_data": "state data", "arg": "argument"}[attr.kind]
    return f"{words} `{attr.field}`"


def _where(spec: Spec, attr: TraceAttribute) -> str:
    """On which records the attribute appears (it is left out wherever its value is null)."""
    if attr.moves is not None:
        where = "records of " + ", ".join(f"`{a} -> {b}`" for a, b in attr.moves) + " (left out while null)"
    else:
        where = _where_read(spec, attr)
    if attr.read == "after_or_before":
        where += "; kept on the move that clears it"
    return where


def _where_read(spec: Spec, attr: TraceAttribute) -> str:
    if attr.kind == "data":
        f = spec.data.get(attr.field)
        return "every record" + (" (left out while null)" if f is not None and f.nullable else "")
    if attr.kind == "state_data":
        states = [s.name for s in spec.states.values() if attr.field in s.data]
        return f"records that end in {_code(states)}"
    if attr.kind == "arg":
        feeds = [e.name for e in spec.events.values() if attr.field in e.args]
        decisions = [d.name for d in spec.decisions.values() if attr.field in d.args]
        parts = ([f"feed{'s' * (len(feeds) > 1)} {_code(feeds)}"] if feeds else []) + (
            [f"decision{'s' * (len(decisions) > 1)} {_code(decisions)}"] if decisions else []
        )
        return "records of " + " and ".join(parts)
    return "every record where the result answers a value"


def _description(spec: Spec, attr: TraceAttribute) -> str:
    raw = spec.source.doc.get("trace", {}).get(attr.name, {})
    return str(raw.get("description", ""))


def traced(spec: Spec) -> list[str]:
    """The "Traced" section: what every record carries, then the ``trace:`` table row by row."""
    out = [
        "## Traced",
        "",
        f"Each feed makes one record (`{TRANSITION_EVENT}` in OpenTelemetry) and each decision one "
        f"(`{DECISION_EVENT}`): the machine, the state left, the feed or decision, the branch or rule taken, "
        "and the state entered (a feed that is refused or illegal makes none).",
        "",
    ]
    attrs = trace_attributes(spec)
    if not attrs:
        return out + ["The file has no `trace:` table, so records carry no attributes of their own.", ""]
    out += [
        "Attributes from the `trace:` table, read after the feed or decision ran (`read: after_or_before`: "
        "a value the feed cleared is read from just before it ran); a null value is left out, and an "
        "attribute limited to some moves (`moves:`) is left out of every other record, decisions included:",
        "",
        "| attribute | from | on which transitions | description |",
        "| --- | --- | --- | --- |",
    ]
    for a in attrs:
        out.append(f"| `{a.name}` | {_source(spec, a)} | {_where(spec, a)} | {prose(_description(spec, a))} |")
    return out + [""]
