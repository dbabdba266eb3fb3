"""Decision rules that changed between two versions of a machine, state by state, for a diff page's picture.

``loopfsm diff`` lists a decision's changes rule by rule; a reviewer looking at
the picture asks a different question: in which states can ``decide`` now
answer differently?  That is worked out from the compiled specs, per state:
the rules ``decide`` tries in a state are those whose ``states:`` include it
(or that have none), in order, up to the first that always answers.  A state
is marked when that list, one of its rules, or a policy default one of them
reads differs between OLD and NEW.  A rule's rewording, or a change to a rule
never tried in a state (another state's rule, or one after a rule that always
answers there), changes no answer there and marks nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loopfsm.core.spec import Decision, Rule, Spec, leaf_refs, policy_ref
from loopfsm.rendering.diff import field_words, ref, refs, value


@dataclass(frozen=True)
class DecisionChange:
    """What changed in one decision as ``decide`` asks it in one state: the words, how many rules they are about,
    and the policy numbers whose defaults changed under a rule that reads them."""

    decision: str
    state: str
    changes: tuple[str, ...]
    rules: int
    policies: tuple[str, ...] = ()

    def short(self) -> str:
        """The few words drawn beside the state: ``admit: 2 rules changed``, ``admit: policy pause_ttl_ms changed``,
        ``resume: decision removed``."""
        if self.changes and self.changes[0].startswith(("decision added", "decision removed")):
            return f"{self.decision}: {self.changes[0].split(';')[0]}"
        parts = [f"{self.rules} rule{'s' if self.rules != 1 else ''}"] if self.rules else []
        parts += [f"policy {p}" for p in self.policies]
        return f"{self.decision}: {', '.join(parts)} changed" if parts else f"{self.decision}: changed"


def decision_changes(old: Spec, new: Spec) -> list[DecisionChange]:
    """Each (decision, state of NEW) whose answer may differ, in NEW's decision and state order.

    A rule without ``states:`` is tried in every state; a change to it is
    reported in each state it is reached in, not once for "everywhere" (a note
    box on the picture): before a policy meeting a reviewer asks which runs,
    waiting where, may now be answered differently, and in states where an
    earlier rule always answers first (agent_loop's ``terminal_is_forever`` in
    its final states) nothing changed, which a note would wrongly include.  The
    page's list says such a change once, with all its states.
    """
    out: list[DecisionChange] = []
    names = list(new.decisions) + [n for n in old.decisions if n not in new.decisions]
    for name in names:
        od, nd = old.decisions.get(name), new.decisions.get(name)
        for state in new.states:
            words, rules, policies = _in_state(old, new, od, nd, state)
            if words:
                out.append(DecisionChange(name, state, tuple(words), len(rules), tuple(policies)))
    return out


def grouped(changes: Sequence[DecisionChange]) -> list[tuple[str, tuple[str, ...], list[str]]]:
    """(decision, what changed, the states it changed in): one rule changed alike in six states is one entry."""
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for c in changes:
        groups.setdefault((c.decision, c.changes), []).append(c.state)
    return [(d, words, states) for (d, words), states in groups.items()]


def tried(d: Decision | None, state: str) -> list[Rule]:
    """The rules ``decide`` tries in ``state``, in order, up to the first that always answers there."""
    out: list[Rule] = []
    for r in d.rules if d is not None else ():
        if r.states is None or state in r.states:
            out.append(r)
            if not r.guarded:
                break
    return out


def _in_state(
    old: Spec, new: Spec, od: Decision | None, nd: Decision | None, state: str
) -> tuple[list[str], set[str], list[str]]:
    """The words for what changed in ``state``, the rules whose own text they are about, and the policy numbers
    read there whose defaults changed."""
    before, after = tried(od, state), tried(nd, state)
    if od is None or nd is None:
        chain = after or before
        if not chain:
            return [], set(), []
        verb = "added" if od is None else "removed"
        return [f"decision {verb}; rules tried here: {', '.join(r.name for r in chain)}"], {r.name for r in chain}, []
    words: list[str] = []
    rules: set[str] = set()
    policies: list[str] = []
    was = {r.name: r for r in before}
    now = {r.name: r for r in after}
    for r in before:
        if r.name not in now:
            words.append(_gone(r, nd, after))
            rules.add(r.name)
    for i, r in enumerate(after):
        q = was.get(r.name)
        if q is None:
            words.append(_came(r, od, before, i))
            rules.add(r.name)
            continue
        said = _rule(q, r)
        words += said
        if said:
            rules.add(r.name)
        for name, (a, b) in _defaults_changed(old, new, q, r).items():
            words.append(f"rule {r.name}: reads policy {name}, default {value(a)} -> {value(b)}")
            policies += [name] if name not in policies else []
    kept_old = [r.name for r in before if r.name in now]
    kept_new = [r.name for r in after if r.name in was]
    if kept_old != kept_new:
        words.append(f"rule order {', '.join(kept_old)} -> {', '.join(kept_new)} (first hit wins)")
        rules |= {a for a, b in zip(kept_old, kept_new, strict=True) if a != b}
    open_end = not (before and not before[-1].guarded) or not (after and not after[-1].guarded)
    if open_end and od.otherwise != nd.otherwise:
        words.append(f"when no rule answers here: {od.otherwise or 'raise'} -> {nd.otherwise or 'raise'}")
    if before or after:
        words += _args(od, nd)
    return words, rules, policies


def _gone(r: Rule, nd: Decision, after: list[Rule]) -> str:
    """Why a rule tried here before is not now: removed, scoped away, or answered before it is reached."""
    kept = next((x for x in nd.rules if x.name == r.name), None)
    if kept is None:
        return f"rule {r.name} removed: {_rule_words(r)}"
    if kept.states != r.states:
        return f"rule {r.name} no longer tried here (states {_scope(r)} -> {_scope(kept)})"
    return f"rule {r.name} no longer reached here: {after[-1].name} answers first"


def _came(r: Rule, od: Decision, before: list[Rule], at: int) -> str:
    """Why a rule is tried here now: added, scoped here, or no longer answered before it is reached."""
    was = next((x for x in od.rules if x.name == r.name), None)
    if was is None:
        return f"rule {r.name} added, tried {_ordinal(at + 1)} here: {_rule_words(r)}"
    if was.states != r.states:
        return f"rule {r.name} now tried here (states {_scope(was)} -> {_scope(r)}): {_rule_words(r)}"
    return f"rule {r.name} now reached here (after {before[-1].name} no longer always answers): {_rule_words(r)}"


def _rule(q: Rule, r: Rule) -> list[str]:
    """A rule tried here in both versions: its ``when:``, guards and answer."""
    where = f"rule {r.name}"
    out: list[str] = []
    if q.conditions() != r.conditions():
        out.append(f"{where}: when {_when(q)} -> {_when(r)}")
    if [ref(g) for g in q.guards] != [ref(g) for g in r.guards]:
        out.append(f"{where}: guard {refs(q.guards, 'always')} -> {refs(r.guards, 'always')}")
    if ref(q.result) != ref(r.result):
        out.append(f"{where}: answer {ref(q.result)} -> {ref(r.result)}")
    return out


def _defaults_changed(old: Spec, new: Spec, q: Rule, r: Rule) -> dict[str, tuple[Any, Any]]:
    """The policy numbers both versions of a rule read whose default changed: a run under the defaults is
    answered against another number.  (A rule now reading another number says so in its guard's words.)"""
    out: dict[str, tuple[Any, Any]] = {}
    for name in _policy_read(r):
        a, b = old.policy.get(name), new.policy.get(name)
        if name in _policy_read(q) and a is not None and b is not None and a.default != b.default:
            out[name] = (a.default, b.default)
    return out


def _args(od: Decision, nd: Decision) -> list[str]:
    """The decision's arguments added, removed or retyped: every rule tried may read them (its guards too)."""
    a = {n: field_words(f) for n, f in od.args.items()}
    b = {n: field_words(f) for n, f in nd.args.items()}
    out = [f"argument {n} removed" for n in a if n not in b]
    for n, w in b.items():
        if n not in a:
            out.append(f"argument {n} added ({w})")
        elif a[n] != w:
            out.append(f"argument {n} {a[n]} -> {w}")
    return out


def _policy_read(r: Rule) -> list[str]:
    """The policy numbers a rule's guards and answer read, in file order."""
    found: list[str] = []
    for leaf in leaf_refs((*r.guards, r.result)):
        for v in leaf.params.values():
            name = policy_ref(v)
            if name is not None and name not in found:
                found.append(name)
    return found


def _when(r: Rule) -> str:
    return " and ".join(r.conditions()) or "none"


def _scope(r: Rule) -> str:
    return "any" if r.states is None else "/".join(r.states)


def _rule_words(r: Rule) -> str:
    cond = [*r.conditions(), *(ref(g) for g in r.guards)]
    return f"{' and '.join(cond) or 'always'} => {ref(r.result)}"


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
