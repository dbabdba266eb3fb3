"""A semantic diff of two versions of one machine file, in words a reviewer reads.

A text diff of YAML shows which lines moved; a reviewer wants to know what
the machine now does differently: which branch gained a guard, which policy
default changed, whether a decision rule moved up the chain, and whether the
runs saved last week still restore.  Only the schema is needed (no registry),
so the diff works on any two checkouts of a file, e.g. as a git diff driver.

Every change is marked as behaviour or wording.  Descriptions are wording;
everything the snapshot fingerprint covers is behaviour.  When the fingerprint
changed but no itemised change explains it (a key this module does not know
yet), the changed paths are listed, so nothing is ever reported as unchanged
that is not.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any

from loopfsm.core.errors import SpecError
from loopfsm.core.shape import Plan, plan, shape_of
from loopfsm.core.spec import (
    WILDCARD,
    Branch,
    EventDef,
    FieldDef,
    MigrationDef,
    Ref,
    Rule,
    Spec,
    build_spec,
    policy_ref,
)
from loopfsm.core.policy_checks import policy_readers


@dataclass(frozen=True)
class Change:
    text: str
    behaviour: bool = True
    proof: bool = False  # an invariant changed: what verify proves, never what the machine does

    @property
    def mark(self) -> str:
        """``*`` a behaviour change, ``!`` a change to what verify proves or feeds, ``~`` a reworded description."""
        return "*" if self.behaviour else "!" if self.proof else "~"


@dataclass
class MachineDiff:
    old: Spec
    new: Spec
    changes: list[Change]

    @property
    def behaviour_changed(self) -> bool:
        return self.old.fingerprint != self.new.fingerprint or any(c.behaviour for c in self.changes)

    @property
    def snapshots_restore(self) -> bool:
        """Whether every run saved under OLD restores under NEW (as it is or through NEW's migrations)."""
        return self.old.name == self.new.name and self.saved_runs.ok and not self.narrowed

    @property
    def narrowed(self) -> list[str]:
        """Fields whose new bounds or choices refuse some value the old table allowed.

        The shape does not carry bounds, so these runs pass the shape test;
        ``restore`` then checks the values against the new table and refuses
        the runs holding such a value (a snapshot never restores outside its table).
        """
        out = [f"field {n}" for n, f in self.old.data.items() if n in self.new.data and _narrows(f, self.new.data[n])]
        for state, s in self.old.states.items():
            now = self.new.states.get(state)
            if now is not None:
                out += [
                    f"field {n} of state {state}"
                    for n, f in s.data.items()
                    if n in now.data and _narrows(f, now.data[n])
                ]
        return out

    @property
    def saved_runs(self) -> Plan:
        """How NEW reads runs saved under OLD: decided by their shape, exactly as ``restore`` decides.

        Codec versions live in a registry, which a diff does not load; they are
        not compared here (``restore`` compares them).
        """
        return plan(self.new, shape_of(self.old), {})

    def snapshot_note(self) -> str:
        """The one line that says what a deploy of NEW does to the runs saved under OLD, and why."""
        if self.old.name != self.new.name:
            return f"saved runs are refused: the machine was renamed {self.old.name} -> {self.new.name}"
        verdict = self.saved_runs
        narrowed = self.narrowed
        unless = (
            f" unless they hold a value the narrowed bounds or choices of {', '.join(narrowed)} refuse"
            if narrowed
            else ""
        )
        if verdict.ok:
            added = [n for n in self.new.data if n not in self.old.data] + [
                f"{n} of state {state}"
                for state, s in self.new.states.items()
                if state in self.old.states
                for n in s.data
                if n not in self.old.states[state].data
            ]
            extra = f"; new fields take their defaults ({', '.join(added)})" if added and not verdict.steps else ""
            if not verdict.steps:
                return f"saved runs restore as they are{unless}{extra}"
            return "saved runs restore through " + _steps_words(verdict.steps) + unless
        why = "; ".join(verdict.problems)
        through = f" even through {_steps_words(verdict.steps)}" if verdict.steps else ""
        if set(verdict.refused_states) == set(self.old.states):
            return f"saved runs are refused{through}: {why}"
        states = ", ".join(verdict.refused_states)
        return f"saved runs in {states} are refused{through}: {why}; runs in other states restore{unless}"

    def lines(self) -> list[str]:
        proofs = any(c.proof for c in self.changes)
        verdict = (
            "behaviour changed"
            if self.behaviour_changed
            else "invariants and descriptions only"
            if proofs
            else "descriptions only"
            if self.changes
            else "no changes"
        )
        out = [f"{self.new.name}: {verdict}"]
        out += [f"  {c.mark} {c.text}" for c in self.changes]
        out.append(f"  {self.snapshot_note()}")
        return out


def load_for_diff(path: str) -> Spec:
    """Read and schema-check a file without its registry; SpecError on anything unusable."""
    from loopfsm.core.loader import schema_problems
    from loopfsm.core.source import SourceProblems, read_file

    try:
        src = read_file(path)
    except SourceProblems as err:
        raise SpecError(err.problems) from None
    problems = schema_problems(src)
    if problems:
        raise SpecError(problems)
    spec = build_spec(src)
    # A work in progress may have dead ends or unused states, and still compares; a branch from or
    # to a state that does not exist does not (its words would name nothing).
    unknown = [
        src.problem(path, f"unknown state '{name}'")
        for ev in spec.events.values()
        for state, branches in ev.sources.items()
        for name, path in [(state, ("events", ev.name, "from", state))]
        + [(b.dest, (*b.path, "to")) for b in branches if b.dest]
        if name != WILDCARD and name not in spec.states
    ]
    if unknown:
        raise SpecError(unknown)
    return spec


# -- words -------------------------------------------------------------------
def value(v: Any) -> str:
    name = policy_ref(v)
    if name is not None:
        return f"policy.{name}"
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True)


def ref(r: Ref) -> str:
    if r.options:
        return "(" + " or ".join(" and ".join(ref(x) for x in opt) for opt in r.options) + ")"
    args = ", ".join(f"{k}={value(v)}" for k, v in r.params.items())
    core = f"{r.name}({args})" if args else r.name
    return f"not {core}" if r.negate else core


def refs(rs: tuple[Ref, ...], empty: str = "none") -> str:
    return ", ".join(ref(r) for r in rs) or empty


def field_words(f: FieldDef) -> str:
    t = f.type + ("[]" if f.list else "") + ("?" if f.nullable else "")
    if f.enum is not None:
        t += " in " + "/".join(value(v) for v in f.enum)
    if repr(f.default) != "MISSING":
        t += f" = {value(f.default)}"
    return t


def _allows(f: FieldDef, v: Any) -> bool:
    """Whether ``f``'s choices and bounds accept the value ``v`` (types aside: the shape compares those)."""
    if v is None:
        return f.nullable
    if f.enum is not None and v not in f.enum:
        return False
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (f.minimum is None or v >= f.minimum) and (f.maximum is None or v <= f.maximum)
    return True


def _narrows(old: FieldDef, new: FieldDef) -> bool:
    """Whether ``new`` refuses a value ``old`` allowed: a choice dropped, or a bound added or tightened."""
    if old.enum is not None:
        return not all(_allows(new, v) for v in old.enum)
    if new.enum is not None:
        return True
    lower = new.minimum is not None and (old.minimum is None or new.minimum > old.minimum)
    upper = new.maximum is not None and (old.maximum is None or new.maximum < old.maximum)
    return lower or upper


def _fields(where: str, old: dict[str, FieldDef], new: dict[str, FieldDef], out: list[Change]) -> None:
    for name in _gone(old, new):
        out.append(Change(f"{where}: field {name} removed"))
    for name in new:
        if name not in old:
            out.append(Change(f"{where}: field {name} added ({field_words(new[name])})"))
        elif field_words(old[name]) != field_words(new[name]):
            out.append(Change(f"{where}: field {name} {field_words(old[name])} -> {field_words(new[name])}"))
        elif old[name].description != new[name].description:
            out.append(Change(f"{where}: field {name} description reworded", False))
    if list(old) != list(new) and set(old) == set(new):
        out.append(Change(f"{where}: fields reordered {', '.join(old)} -> {', '.join(new)}"))


def _wording(where: str, old: str, new: str, out: list[Change]) -> None:
    if old == new:
        return
    if max(len(old), len(new)) <= 60 and "\n" not in old + new:
        out.append(Change(f"{where}: description {json.dumps(old)} -> {json.dumps(new)}", False))
    else:
        out.append(Change(f"{where}: description reworded", False))


# -- sections ----------------------------------------------------------------
def _policy(o: Spec, n: Spec, out: list[Change]) -> None:
    for name in _gone(o.policy, n.policy):
        out.append(Change(f"policy {name} removed"))
    for name, p in n.policy.items():
        q = o.policy.get(name)
        if q is None:
            out.append(Change(f"policy {name} added ({p.type}, default {value(p.default)})"))
            continue
        uses = _policy_uses(n, name)
        where = f"policy {name}" + (f" (read by {uses})" if uses else "")
        for attr in ("type", "default", "minimum", "maximum", "enum"):
            a, b = getattr(q, attr), getattr(p, attr)
            if a != b:
                words = {"minimum": "lower bound", "maximum": "upper bound"}.get(attr, attr)
                out.append(Change(f"{where}: {words} {_opt(a)} -> {_opt(b)}"))
        _wording(f"policy {name}", q.description, p.description, out)


def _opt(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, tuple):
        return "/".join(value(x) for x in v)
    return value(v)


def _policy_uses(spec: Spec, name: str) -> str:
    found = policy_readers(spec)[name]
    return ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")


def _states(o: Spec, n: Spec, out: list[Change]) -> None:
    for name in _gone(o.states, n.states):
        out.append(Change(f"state {name} removed"))
    for name, s in n.states.items():
        t = o.states.get(name)
        if t is None:
            kind = " (initial)" if s.initial else " (terminal)" if s.terminal else ""
            out.append(Change(f"state {name} added{kind}"))
            continue
        if t.initial != s.initial:
            out.append(Change(f"state {name} {'is now' if s.initial else 'is no longer'} the initial state"))
        if t.terminal != s.terminal:
            out.append(Change(f"state {name} {'is now' if s.terminal else 'is no longer'} terminal"))
        _fields(f"state {name} data", t.data, s.data, out)
        _wording(f"state {name}", t.description, s.description, out)
        if t.tags != s.tags:  # what the design review says of the state, not what it does
            out.append(Change(f"state {name} tags [{', '.join(t.tags)}] -> [{', '.join(s.tags)}]", False))


def _sig(b: Branch) -> tuple[Any, ...]:
    """What identifies a branch across versions: its name if it has one, else its guard names and target."""
    if b.name:
        return ("name", b.name)
    return (
        tuple(b.conditions()),
        tuple((ref(g), g.negate) if g.options else (g.name, g.negate) for g in b.guards),
        b.dest,
    )


def _target(b: Branch) -> str:
    """Where a branch goes, as its words read after a guard: ``-> State``, ``stay`` or a refusal."""
    return f"-> {_dest(b)}" if b.dest and b.refusal is None else _dest(b)


def _dest(b: Branch) -> str:
    if b.refusal is not None:
        return f"refuse ({json.dumps(b.refusal)})"
    return b.dest or "stay"


def conditions(b: Branch) -> str:
    """The branch's ``when:`` conditions and guards, as the other views print them ("none": always)."""
    return " and ".join([*b.conditions(), *(ref(g) for g in b.guards)]) or "none"


def branch_words(b: Branch) -> str:
    guard = f"if {conditions(b)} " if b.guarded else ""
    return f"{guard}{_target(b)}" + (f" / {refs(b.actions)}" if b.actions else "")


def _branches(where: str, old: tuple[Branch, ...], new: tuple[Branch, ...], out: list[Change]) -> None:
    old_sigs, new_sigs = [_sig(b) for b in old], [_sig(b) for b in new]
    sm = difflib.SequenceMatcher(a=old_sigs, b=new_sigs, autojunk=False)
    removed: list[int] = []
    added: list[int] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            for a, b, j in zip(old[i1:i2], new[j1:j2], range(j1, j2), strict=True):
                _branch(f"{where} [{j}]", a, b, out)
            continue
        removed += range(i1, i2)
        added += range(j1, j2)
    # A branch taken out in one place and put back in another is one that moved: guard order
    # changes behaviour, so it is a change, but not a branch lost and another made.
    for i in list(removed):
        to = next((k for k in added if new_sigs[k] == old_sigs[i]), None)
        if to is not None:
            removed.remove(i)
            added.remove(to)
            out.append(Change(f"{where} [{i}] moved to [{to}]: {branch_words(new[to])}"))
            _branch(f"{where} [{to}]", old[i], new[to], out)
    out.extend(Change(f"{where} [{i}] removed: {branch_words(old[i])}") for i in removed)
    out.extend(Change(f"{where} [{j}] added: {branch_words(new[j])}") for j in added)


def _branch(where: str, a: Branch, b: Branch, out: list[Change]) -> None:
    if a.name != b.name:
        out.append(Change(f"{where}: trace name {a.name or '(by position)'} -> {b.name or '(by position)'}"))
    if a.dest != b.dest or a.refusal != b.refusal:
        out.append(Change(f"{where}: target {_dest(a)} -> {_dest(b)}"))
    if a.conditions() != b.conditions():
        out.append(Change(f"{where}: when {_when(a)} -> {_when(b)}"))
    if [ref(g) for g in a.guards] != [ref(g) for g in b.guards]:
        out.append(Change(f"{where}: guard {refs(a.guards)} -> {refs(b.guards)}"))
    if [ref(x) for x in a.actions] != [ref(x) for x in b.actions]:
        out.append(Change(f"{where}: actions {refs(a.actions)} -> {refs(b.actions)}"))
    _wording(where, a.description, b.description, out)


def _when(b: Branch | Rule) -> str:
    return " and ".join(b.conditions()) or "none"


def _sources(spec: Spec, ev: EventDef) -> dict[str, tuple[Branch, ...]]:
    return dict(ev.sources)


def _events(o: Spec, n: Spec, out: list[Change]) -> None:
    for name in _gone(o.events, n.events):
        out.append(Change(f"feed {name} removed"))
    for name, e in n.events.items():
        f = o.events.get(name)
        if f is None:
            states = ", ".join("any live state" if s == WILDCARD else s for s in e.sources)
            out.append(Change(f"feed {name} added (from {states})"))
            continue
        _fields(f"feed {name} arguments", f.args, e.args, out)
        if [ref(x) for x in f.before] != [ref(x) for x in e.before]:
            out.append(Change(f"feed {name} before each branch: {refs(f.before)} -> {refs(e.before)}"))
        for attr, words in (("otherwise", "when no guard holds"), ("on_terminal", "in terminal states")):
            if getattr(f, attr) != getattr(e, attr):
                out.append(
                    Change(f"feed {name} {words}: {getattr(f, attr) or 'default'} -> {getattr(e, attr) or 'default'}")
                )
        old_src, new_src = _sources(o, f), _sources(n, e)
        for state in _gone(old_src, new_src):
            out.append(Change(f"{name} from {_st(state)}: no longer accepted"))
        for state, bs in new_src.items():
            if state not in old_src:
                out.append(Change(f"{name} from {_st(state)}: now accepted: " + "; ".join(branch_words(b) for b in bs)))
            else:
                _branches(f"{name} from {_st(state)}", old_src[state], bs, out)
        _wording(f"feed {name}", f.description, e.description, out)


def _st(state: str) -> str:
    return "any live state" if state == WILDCARD else state


def _decisions(o: Spec, n: Spec, out: list[Change]) -> None:
    for name in _gone(o.decisions, n.decisions):
        out.append(Change(f"decision {name} removed"))
    for name, d in n.decisions.items():
        c = o.decisions.get(name)
        if c is None:
            out.append(Change(f"decision {name} added ({len(d.rules)} rules)"))
            continue
        _fields(f"decision {name} arguments", getattr(c, "args", {}) or {}, getattr(d, "args", {}) or {}, out)
        if c.otherwise != d.otherwise:
            out.append(
                Change(f"decision {name} when no rule answers: {c.otherwise or 'raise'} -> {d.otherwise or 'raise'}")
            )
        old_rules = {r.name: r for r in c.rules}
        new_rules = {r.name: r for r in d.rules}
        for r in c.rules:
            if r.name not in new_rules:
                out.append(Change(f"decision {name}: rule {r.name} removed"))
        for i, r in enumerate(d.rules):
            q = old_rules.get(r.name)
            where = f"decision {name} rule {r.name}"
            if q is None:
                out.append(Change(f"decision {name}: rule {r.name} added at {i + 1}: {_rule_words(r)}"))
                continue
            if q.states != r.states:
                out.append(Change(f"{where}: states {_states_words(q.states)} -> {_states_words(r.states)}"))
            if q.conditions() != r.conditions():
                out.append(Change(f"{where}: when {_when(q)} -> {_when(r)}"))
            if [ref(g) for g in q.guards] != [ref(g) for g in r.guards]:
                out.append(Change(f"{where}: guard {refs(q.guards, 'always')} -> {refs(r.guards, 'always')}"))
            if ref(q.result) != ref(r.result):
                out.append(Change(f"{where}: answer {ref(q.result)} -> {ref(r.result)}"))
            _wording(where, q.description, r.description, out)
        kept_old = [r.name for r in c.rules if r.name in new_rules]
        kept_new = [r.name for r in d.rules if r.name in old_rules]
        if kept_old != kept_new:
            out.append(
                Change(f"decision {name}: rule order {', '.join(kept_old)} -> {', '.join(kept_new)} (first hit wins)")
            )
        _wording(f"decision {name}", c.description, d.description, out)


def _states_words(states: tuple[str, ...] | None) -> str:
    return "any" if states is None else "/".join(states)


def _rule_words(r: Any) -> str:
    cond = [f"state in {'/'.join(r.states)}"] if r.states is not None else []
    cond += [*r.conditions(), *(ref(g) for g in r.guards)]
    return f"{' and '.join(cond) or 'always'} => {ref(r.result)}"


def _outcomes(o: Spec, n: Spec, out: list[Change]) -> None:
    for name in _gone(o.outcomes, n.outcomes):
        out.append(Change(f"outcome {name} removed"))
    for name, x in n.outcomes.items():
        y = o.outcomes.get(name)
        if y is None:
            out.append(Change(f"outcome {name} added"))
            continue
        if y.error != x.error:
            out.append(Change(f"outcome {name} error: {value(y.error)} -> {value(x.error)}"))
        _fields(f"outcome {name} data", y.data, x.data, out)
        _wording(f"outcome {name}", y.description, x.description, out)


def _steps_words(steps: tuple[MigrationDef, ...]) -> str:
    if len(steps) == 1:
        return f"the migration from version {steps[0].from_version}"
    return "the migrations from versions " + ", ".join(str(m.from_version) for m in steps)


def _versions(o: Spec, n: Spec, out: list[Change]) -> None:
    if o.version != n.version:
        out.append(Change(f"version {o.version} -> {n.version}"))
    old = {m.from_version: m for m in o.migrations}
    new = {m.from_version: m for m in n.migrations}
    for v in old:
        if v not in new:
            out.append(Change(f"migration from version {v} removed"))
    for v, m in new.items():
        if v not in old:
            out.append(Change(f"migration from version {v} added"))
        elif m != dataclasses.replace(old[v], path=m.path):
            out.append(Change(f"migration from version {v} changed"))


def _gone(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Keys of ``old`` that ``new`` lacks, in the old file's order (a set difference would print at random)."""
    return [k for k in old if k not in new]


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k not in ("description", "untested")}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _raw_paths(a: Any, b: Any, path: tuple[Any, ...] = ()) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in list(a) + [k for k in b if k not in a]:
            out += _raw_paths(a.get(k), b.get(k), path + (k,))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b, strict=True)) for p in _raw_paths(x, y, path + (i,))]
    return [] if a == b else [".".join(map(str, path)) or "(document)"]


def _invariants(o: Spec, n: Spec, out: list[Change]) -> None:
    """Invariants added, removed or rewritten: what verify proves changed, behaviour did not."""
    old_doc = o.source.doc.get("invariants") or {}
    new_doc = n.source.doc.get("invariants") or {}
    for name in o.invariants:
        if name not in n.invariants:
            out.append(Change(f"invariant {name} removed", False, True))
    for name, inv in n.invariants.items():
        if name not in o.invariants:
            out.append(Change(f"invariant {name} added ({inv.kind})", False, True))
        elif _strip(old_doc.get(name)) != _strip(new_doc.get(name)):
            out.append(Change(f"invariant {name} changed", False, True))
        else:
            _wording(f"invariant {name}", o.invariants[name].description, inv.description, out)


def _arg_values(o: Spec, n: Spec, out: list[Change]) -> None:
    """An argument's ``verify:`` block added, removed or changed: what verify feeds changed, behaviour did not."""
    old_args = {(t, a): f.verify for t, args in _arg_fields(o) for a, f in args.items()}
    for taker, args in _arg_fields(n):
        for arg, f in args.items():
            if (taker, arg) in old_args and old_args[(taker, arg)] != f.verify:
                out.append(Change(f"values verify feeds {taker}({arg}) changed", False, True))


def _arg_fields(spec: Spec) -> list[tuple[str, dict[str, Any]]]:
    return [(e.name, e.args) for e in spec.events.values()] + [(d.name, d.args) for d in spec.decisions.values()]


def diff_specs(old: Spec, new: Spec) -> MachineDiff:
    out: list[Change] = []
    if old.name != new.name:
        out.append(Change(f"machine renamed {old.name} -> {new.name}"))
    if old.registry != new.registry:
        out.append(Change(f"registry {old.registry} -> {new.registry}"))
    if old.terminal_feeds != new.terminal_feeds:
        out.append(Change(f"terminal states {old.terminal_feeds} unlisted feeds -> {new.terminal_feeds}"))
    _wording("machine", old.description, new.description, out)
    if [ref(x) for x in old.before] != [ref(x) for x in new.before]:
        out.append(Change(f"before every feed: {refs(old.before)} -> {refs(new.before)}"))
    _versions(old, new, out)
    _policy(old, new, out)
    _fields("data", old.data, new.data, out)
    _states(old, new, out)
    _events(old, new, out)
    _decisions(old, new, out)
    _outcomes(old, new, out)
    _invariants(old, new, out)
    _arg_values(old, new, out)
    if old.fingerprint != new.fingerprint and not any(c.behaviour for c in out):
        for p in _raw_paths(_strip(old.source.doc), _strip(new.source.doc)):
            out.append(Change(f"{p} changed"))
    return MachineDiff(old, new, out)
