"""Semantic checks: what a JSON Schema cannot say about a machine.

The schema knows shapes; these checks know meaning: that a branch's target is
a real state, that a guard exists and is given the parameters it declares,
that every state can be reached, that nothing leaves a terminal state, that no
branch hides behind an unguarded one.  Each check appends located problems and
carries on, so a user sees every mistake in a file in one run.
"""

from __future__ import annotations

import keyword
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .errors import Problem, did_you_mean
from .fieldtypes import (
    POLICY_TYPES,
    annotation_accepts,
    annotation_name,
    fits_type,
    named_in,
    yaml_shown,
)
from .field_checks import check_field
from .invariants import BUILTINS, STEP_ONLY
from .migration_checks import check_migrations
from .verify_model import check_verify_model, value_misfit
from .registry import BUILTIN_CODECS, DataField, Entry, Registry, StateName
from .tracing import attribute_problem, branch_name, move_problems, trace_attributes
from .policy_checks import check_policy
from .when_checks import Comparisons, check_condition, falls_short, left_out_words, taken_before, taken_words
from .spec import WILDCARD, Branch, EventDef, FieldDef, Ref, Rule, Spec, leaf_refs, policy_ref

if TYPE_CHECKING:  # pragma: no cover - the YAML reader is not needed to check a cached spec
    from .source import PathT


# What a name becomes in Python: a data field an attribute of ``m.data``, a policy
# number a dataclass field, a feed argument a keyword argument of the feed method
# (beside ``self``, ``policy`` and ``feed``'s ``event``), a state's data a keyword of
# ``ctx.enter``, a feed a method of the instance.  Each must be an identifier that
# collides with nothing already there.
_RESERVED_ARGS = frozenset({"self", "policy", "event"})


#: The public names of every instance (``MachineInstance``'s API and ``compiled``), which a feed must not
#: shadow.  Listed, not read off the class: the runtime sits above the checker.  A test pins the two equal.
INSTANCE_API = frozenset(
    {"allowed_feeds", "can", "compiled", "data", "decide", "engine", "explain", "feed", "is_terminal", "machine"}
    | {"may_trigger", "policy_class_name", "restore", "snapshot", "state", "state_data", "trigger"}
)


#: What ``transitions`` binds on a model (``add_model``, ``GraphMachine``): a feed named so would clash with it
#: on an instance with a machine of its own.  ``may_<feed>`` asks a feed, ``is__state_<state>`` a state.
TRANSITIONS_MODEL_NAMES = frozenset({"get_graph"})
TRANSITIONS_MODEL_PREFIXES = ("may_", "is__state_")


def _feed_name_problem(name: str) -> str | None:
    """A feed name ``transitions`` would bind something else under on the instance, or None."""
    if name in TRANSITIONS_MODEL_NAMES or name.startswith(TRANSITIONS_MODEL_PREFIXES):
        return (
            f"feed '{name}' cannot be used: transitions binds that name on a model "
            f"(get_graph, may_<feed>, is__state_<state>)"
        )
    return None


def _name_problem(name: str, what: str, reserved: Iterable[str] = ()) -> str | None:
    if not name.isidentifier() or keyword.iskeyword(name):
        return (
            f"{what} '{name}' cannot be used: it is a Python keyword"
            if keyword.iskeyword(name)
            else f"{what} '{name}' is not a Python identifier"
        )
    if name.startswith("_"):
        return f"{what} '{name}' cannot be used: names beginning with '_' are reserved for loopfsm's own attributes"
    if name in reserved:
        return f"{what} '{name}' cannot be used: it would collide with the instance API ({name})"
    return None


class _Checker:
    def __init__(self, spec: Spec, registry: Registry | None):
        self.spec = spec
        self.reg = registry
        # Without a registry, names that only it can vouch for are collected here
        # (kind -> names) instead of checked, so a caller can say what went unchecked.
        self.unchecked: dict[str, set[str]] = {}
        self.src = spec.source
        self.problems: list[Problem] = []
        self.used: dict[str, set[str]] = {"guard": set(), "action": set(), "result": set(), "generator": set()}
        self.unresolved = False  # a state name did not resolve: graph checks would only echo it
        self.feed_args: dict[str, FieldDef] | None = None  # the arguments of the feed whose branches are checked
        self.work = Comparisons()  # of branches with earlier ones, looking for those never taken: bounded

    def error(self, path: PathT, message: str, *, key: bool = False) -> None:
        self.problems.append(self.src.problem(path, message, key=key))

    def warn(self, path: PathT, message: str, *, key: bool = False) -> None:
        self.problems.append(self.src.problem(path, message, key=key, severity="warning"))

    def branch_place(self, b: Branch, i: int, beside: Branch | None = None) -> str:
        """ "branch 1", its place in its list; a ``first:`` one before a state's own by its path and line."""
        if beside is None or b.path[:-1] == beside.path[:-1]:
            return f"branch {b.path[-1] if isinstance(b.path[-1], int) else i}"
        at = self.src.problem(b.path, "")
        return f"the branch {at.path} (line {at.line})"

    def never(self, b: Branch, i: int, state: str) -> str:
        """ "branch 3 of 'go' from 'a' can never be taken"; a state's own branch after ``first:`` ones is traced
        by its place among all the state tries (``go/a[4]`` for branch 3), said too when the two differ."""
        feed = str(b.path[1])
        traced = f" (traced as {branch_name(feed, b.source, b.index, b.name)})" if b.index != b.path[-1] else ""
        return f"{self.branch_place(b, i)} of '{feed}' from '{state}'{traced} can never be taken"

    # -- references -------------------------------------------------------
    def state_ref(self, name: str, path: PathT, *, key: bool = False) -> bool:
        if name in self.spec.states:
            return True
        self.unresolved = True
        self.error(path, f"unknown state '{name}'{did_you_mean(name, self.spec.states)}", key=key)
        return False

    def skip(self, kind: str, name: str) -> None:
        self.unchecked.setdefault(kind, set()).add(name)

    def ref(self, kind: str, ref: Ref) -> None:
        self.used[kind].add(ref.name)
        if self.reg is None:
            self.skip(kind, ref.name)
            return
        entries = self.reg.entries[kind]
        name_path = ref.path + (("name",) if ref.params or ref.negate else ())
        if ref.name not in entries:
            known = entries.keys()
            hint = did_you_mean(ref.name, known) or (
                f" (registry '{self.reg.name}' has: {', '.join(sorted(known))})"
                if known
                else f" (registry '{self.reg.name}' has no {kind}s)"
            )
            self.error(name_path, f"unknown {kind} '{ref.name}'{hint}")
            return
        if ref.negate and kind != "guard":
            self.error(ref.path + ("negate",), f"'negate' applies to guards only, not to {kind} '{ref.name}'")
        self.params(entries[ref.name], ref)

    def params(self, entry: Entry, ref: Ref) -> None:
        declared = entry.params
        misspelt = False
        for pname, value in ref.params.items():
            ppath = ref.path + ("params", pname)
            if pname not in declared:
                sig = ", ".join(declared) or "no parameters"
                self.error(
                    ppath,
                    f"{entry.kind} '{entry.name}' has no parameter '{pname}'"
                    f"{did_you_mean(pname, declared)} (it takes: {sig})",
                    key=True,
                )
                misspelt = True
                continue
            want = declared[pname].type
            values_of = declared[pname].values_of
            if values_of is not None:
                self.argument_values(entry, pname, values_of, value, ppath)
            if want is DataField and isinstance(value, str) and value not in self.spec.data:
                self.error(
                    ppath,
                    f"parameter '{pname}' of {entry.kind} '{entry.name}' names a data field, "
                    f"but the machine has no data field '{value}'{did_you_mean(value, self.spec.data)}",
                )
                continue
            for where, name in named_in(want, StateName, value) if annotation_accepts(want, value) else ():
                if name not in self.spec.states:  # resolved like a branch's `to:`, each at its own place
                    self.error(
                        ppath + where,
                        f"parameter '{pname}' of {entry.kind} '{entry.name}' names {'states' if where else 'a state'}"
                        f", but the machine has no state '{name}'{did_you_mean(name, self.spec.states)}",
                    )
            if (ref_name := policy_ref(value)) is not None:
                pol = self.spec.policy.get(ref_name)
                if pol is None:
                    self.error(
                        ppath + ("policy",),
                        f"unknown policy parameter '{ref_name}'{did_you_mean(ref_name, self.spec.policy)}",
                    )
                elif fits_type(POLICY_TYPES[pol.type], pol.default) and not annotation_accepts(want, pol.default):
                    # (a default of the wrong type is reported once, at the policy, not again at each use)
                    self.error(
                        ppath,
                        f"parameter '{pname}' of {entry.kind} '{entry.name}' expects "
                        f"{annotation_name(want)}, but policy '{pol.name}' is {pol.type}",
                    )
            elif not annotation_accepts(want, value):
                self.error(
                    ppath,
                    f"parameter '{pname}' of {entry.kind} '{entry.name}' expects "
                    f"{annotation_name(want)}, got {type(value).__name__} {value!r}",
                )
        for pname, p in declared.items():
            if p.required and pname not in ref.params and not misspelt:
                self.error(ref.path, f"{entry.kind} '{entry.name}' needs parameter '{pname}'")

    def argument_values(self, entry: Entry, pname: str, arg: str, value: Any, ppath: PathT) -> None:
        """A parameter annotated ``ValuesOf(arg)`` lists values of the feed's ``arg``: each must be in its enum."""
        if self.feed_args is None:  # a decision rule's or an invariant's guard: no feed to hold it to
            return
        f = self.feed_args.get(arg)
        if f is None:
            self.error(
                ppath,
                f"parameter '{pname}' of {entry.kind} '{entry.name}' names values of argument "
                f"'{arg}', which this feed does not take",
            )
            return
        if f.enum is None:
            return
        for i, v in enumerate(value if isinstance(value, list) else [value]):
            if v not in f.enum:
                hint = did_you_mean(v, [str(x) for x in f.enum]) if isinstance(v, str) else ""
                self.error(
                    ppath + ((i,) if isinstance(value, list) else ()),
                    f"parameter '{pname}' of {entry.kind} '{entry.name}' lists values of argument '{arg}', which "
                    f"is never {yaml_shown(v)} (it is one of {', '.join(map(str, f.enum))}){hint}",
                )

    # -- names that become Python ------------------------------------------
    def names(self) -> None:
        spec = self.spec

        def check(name: str, path: tuple[object, ...], what: str, reserved: Iterable[str] = ()) -> None:
            problem = _name_problem(name, what, reserved)
            if problem:
                self.error(path, problem, key=True)

        for s in spec.states.values():
            if s.name.startswith("_"):  # the diagrams' own nodes (__start__, __any__, __again__) are named so
                self.error(
                    s.path,
                    f"state '{s.name}' cannot be used: names beginning with '_' are reserved for loopfsm's own",
                    key=True,
                )
        for f in spec.data.values():
            check(f.name, f.path, "data field")
        for p in spec.policy.values():
            check(p.name, p.path, "policy parameter", ("self",))
        for s in spec.states.values():
            for f in s.data.values():
                check(f.name, f.path, "state data field", ("self",))
        api = INSTANCE_API
        for ev in spec.events.values():
            check(ev.name, ev.path, "feed", api)
            clash = _feed_name_problem(ev.name)
            if clash and not _name_problem(ev.name, "feed", api):
                self.error(ev.path, clash, key=True)
            for f in ev.args.values():
                check(f.name, f.path, "feed argument", _RESERVED_ARGS)
        for o in spec.outcomes.values():
            for f in o.data.values():
                check(f.name, f.path, "outcome data field", ("self",))
        for d in spec.decisions.values():
            for f in d.args.values():
                check(f.name, f.path, "decision argument", ("self", "decision", "policy"))

    # -- fields, policy ----------------------------------------------------
    def fields(self, fields: dict[str, FieldDef], *, need_default: bool = False) -> None:
        for f in fields.values():
            if self.reg is None and f.type not in BUILTIN_CODECS:
                self.skip("field type", f.type)
                continue
            codecs = self.reg.codecs if self.reg is not None else BUILTIN_CODECS
            name = self.reg.name if self.reg is not None else None
            check_field(f, codecs, self.error, registry=name, need_default=need_default)

    # -- states and events -------------------------------------------------
    def states(self) -> None:
        initial = [s for s in self.spec.states.values() if s.initial]
        if not initial:
            self.error(("states",), "no initial state: mark exactly one state 'initial: true'")
        for extra in initial[1:]:
            self.error(
                extra.path + ("initial",),
                f"second initial state '{extra.name}' (already '{initial[0].name}'); a machine starts in exactly one",
            )
        for s in self.spec.states.values():
            if s.initial and s.terminal:
                self.error(
                    s.path + ("terminal",), f"initial state '{s.name}' is terminal: the machine could never move"
                )
            if s.terminal and s.tags:  # every tag says what a live state does; the review would read it as true
                self.error(
                    s.path + ("tags",),
                    f"terminal state '{s.name}' is tagged {', '.join(s.tags)}: a finished run calls no tools, "
                    "waits for no approval and retries nothing",
                )
            self.fields(s.data)

    def events(self) -> None:
        spec = self.spec
        for a in spec.before:
            self.ref("action", a)
        for ev in spec.events.values():
            self.fields(ev.args)
            self.branch_names(ev)
            for a in ev.before:
                self.ref("action", a)
            self.first_scopes(ev)
            self.feed_args = ev.args
            for state, branches in ev.sources.items():
                if state != WILDCARD:
                    self.state_ref(state, ev.path + ("from", state), key=True)
                if not branches:
                    self.error(
                        ev.path + ("from", state),
                        f"'{ev.name}' from '{state}' has no branches: neither its own nor a 'first:' one tried there",
                        key=True,
                    )
                    continue
                unguarded_at = None
                for i, b in enumerate(branches):
                    taken = taken_before(branches[:i], b, ev.args, self.work) if self.work.left else []
                    if unguarded_at is not None:
                        self.error(
                            b.path,
                            f"{self.never(b, i, state)}: "
                            f"{self.branch_place(branches[unguarded_at], unguarded_at, b)} before it has no "
                            f"guard and always wins",
                        )
                    elif taken:
                        places = [self.branch_place(branches[j], j, b) for j in taken]
                        never = self.never(b, i, state)
                        self.error(b.path, f"{never}: {taken_words(places, [branches[j] for j in taken])}")
                    elif not b.guarded:
                        unguarded_at = i
                    for c in b.when:
                        check_condition(f"feed '{ev.name}'", ev.args, c, self.error, self.work)
                    for g in leaf_refs(b.guards):
                        self.ref("guard", g)
                    for a in b.actions:
                        self.ref("action", a)
                    if b.refusal is not None and b.actions:
                        self.error(b.path + ("actions",), "a refusal changes nothing, so it runs no actions")
                    if b.dest is not None:
                        self.state_ref(b.dest, b.path + ("to",))
                    src_state = spec.states.get(state)
                    if src_state is not None and src_state.terminal and b.dest not in (None, state):
                        self.error(
                            b.path + ("to",),
                            f"transition out of terminal state '{state}' to '{b.dest}': terminal states are forever",
                        )
                at = ev.path + ("from", state)
                if unguarded_at is None and ev.otherwise is None and falls_short(branches, ev.args, self.work, at):
                    self.error(
                        at,
                        f"every branch of '{ev.name}' from '{state}' is guarded, but the event does not "
                        "declare what happens when none holds: add 'otherwise: stay' or 'otherwise: raise'"
                        + left_out_words(self.work),
                        key=True,
                    )
        self.feed_args = None

    def first_scopes(self, ev: EventDef) -> None:
        """A ``states:`` scope belongs to a ``first:`` branch and names states the feed lists by name.

        A state reached only through ``"*"`` shares one list of branches with the other such states,
        so a branch for some of them only has no place there: the state is listed instead.
        """
        for branches in ev.sources.values():
            for b in branches:
                if b.states is not None and not b.shared:
                    self.error(
                        b.path + ("states",),
                        f"'states:' scopes a branch of '{ev.name}'s 'first:' list; a branch under "
                        "'from:' is tried in its own state only",
                    )
        for b in ev.first:
            for j, state in enumerate(b.states or ()):
                where = b.path + ("states", j)
                if state not in self.spec.states:
                    self.state_ref(state, where)
                elif state not in ev.sources:
                    self.error(
                        where,
                        f"'{ev.name}' is not fed in '{state}' by name: list '{state}' under 'from:' "
                        "(with [] if it has no branches of its own) for a 'first:' branch to be tried there",
                    )

    def branch_names(self, ev: EventDef) -> None:
        """Traces identify a branch by feed, source state and name: two branches from one state may not share one."""
        for state, branches in ev.sources.items():
            seen: set[str] = set()
            for i, b in enumerate(branches):
                name = b.name or f"{ev.name}/{state}[{i}]"
                if name in seen:
                    self.error(
                        b.path + ("name",),
                        f"branch name '{name}' of '{ev.name}' from '{state}' is already "
                        "used by another branch from that state; traces need it unique",
                    )
                seen.add(name)

    def graph(self) -> None:
        spec = self.spec
        if self.unresolved or sum(s.initial for s in spec.states.values()) != 1:
            return  # the errors already reported explain the graph better than its symptoms would
        edges: dict[str, set[str]] = {s: set() for s in spec.states}
        for ev in spec.events.values():
            for state, branches in spec.expanded_sources(ev).items():
                for b in branches:
                    if b.dest in spec.states:
                        edges[state].add(b.dest)
        seen = {spec.initial}
        todo = deque([spec.initial])
        while todo:
            for nxt in edges[todo.popleft()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        for s in spec.states.values():
            if s.name not in seen:
                self.error(s.path, f"state '{s.name}' is unreachable from the initial state '{spec.initial}'", key=True)
        terminals = set(spec.terminal_states)
        if terminals:
            # A machine that can end should always be able to: warn about states from
            # which no terminal state is reachable (a run caught there never finishes).
            # Walk the edges backwards from the terminal states: linear in the table's size.
            into: dict[str, list[str]] = {name: [] for name in edges}
            for name, outs in edges.items():
                for dest in outs:
                    into[dest].append(name)
            reaches = set(terminals)
            back = deque(terminals)
            while back:
                for prev in into[back.popleft()]:
                    if prev not in reaches:
                        reaches.add(prev)
                        back.append(prev)
            for s in spec.states.values():
                if s.name in seen and s.name not in reaches and (edges[s.name] - {s.name}):
                    self.warn(
                        s.path,
                        f"state '{s.name}' can never reach a terminal state "
                        f"({', '.join(sorted(terminals))}): a run that gets there never ends",
                        key=True,
                    )
        if len(spec.states) > 1:
            for s in spec.states.values():
                if not s.terminal and not (edges[s.name] - {s.name}):
                    self.error(
                        s.path,
                        f"non-terminal state '{s.name}' is a dead end: no feed leads out of it "
                        "(mark it 'terminal: true' or add a branch to another state)",
                        key=True,
                    )

    # -- decisions and outcomes ------------------------------------------------
    def decisions(self) -> None:
        spec = self.spec
        for d in spec.decisions.values():
            self.fields(d.args)
            if "policy" in d.args:
                self.error(
                    d.args["policy"].path,
                    "a decision argument may not be named 'policy': the policy is passed beside the arguments",
                    key=True,
                )
            covered: set[str] = set()
            names: dict[str, int] = {}
            tried: list[tuple[Rule, set[str]]] = []
            for i, r in enumerate(d.rules):
                if r.name in names:
                    self.error(
                        r.path + ("name",),
                        f"rule name '{r.name}' is used twice in '{d.name}' "
                        f"(first at rule {names[r.name]}); traces need unique names",
                    )
                names.setdefault(r.name, i)
                scope = set(r.states) if r.states is not None else set(spec.states)
                for j, st in enumerate(r.states or ()):
                    self.state_ref(st, r.path + ("states", j))
                wide = [e for e, where in tried if scope <= where] if self.work.spend(len(tried), r.path) else []
                taken = taken_before(wide, r, d.args, self.work)
                if scope and scope <= covered:
                    self.error(
                        r.path,
                        f"rule '{r.name}' of '{d.name}' can never be chosen: earlier unguarded "
                        f"rules already answer in {', '.join(sorted(scope))}",
                    )
                elif scope and taken:
                    self.error(
                        r.path,
                        f"rule '{r.name}' of '{d.name}' can never be chosen: "
                        + taken_words([repr(wide[j].name) for j in taken], [wide[j] for j in taken], rules=True),
                    )
                tried.append((r, scope))
                for c in r.when:
                    check_condition(f"decision '{d.name}'", d.args, c, self.error, self.work)
                for g in leaf_refs(r.guards):
                    self.ref("guard", g)
                self.ref("result", r.result)
                if not r.guarded:
                    covered |= scope
            missing = sorted(set(spec.states) - covered)
            if missing and d.otherwise is None:
                self.error(
                    d.path + ("rules",),
                    f"decision '{d.name}' has no answer in state(s) {', '.join(missing)}: "
                    "end with an unguarded rule, or declare 'otherwise: raise'",
                )

    def outcomes(self) -> None:
        for o in self.spec.outcomes.values():
            self.fields(o.data)
            err = o.error
            if isinstance(err, str) and self.reg is None:
                self.skip("error class", err)
            elif isinstance(err, str) and self.reg is not None and err not in self.reg.errors:
                self.error(o.path + ("error",), f"unknown error class '{err}'{did_you_mean(err, self.reg.errors)}")
            if isinstance(err, dict) and err["field"] not in o.data:
                self.error(o.path + ("error", "field"), f"outcome '{o.name}' has no data field '{err['field']}'")

    def trace(self) -> None:
        for attr in trace_attributes(self.spec):
            problem = attribute_problem(self.spec, attr)
            if problem:
                self.error(attr.path, problem)
            for path, words in move_problems(self.spec, attr):
                self.error(path, words)
            if attr.ref is not None:
                self.ref("result", attr.ref)

    def invariants(self) -> None:
        """Invariants name states, feeds and guards like the table does; built-in guards are checked here too."""
        spec = self.spec
        for inv in spec.invariants.values():
            for j, st in enumerate(inv.states or ()):
                self.state_ref(st, inv.path + ("states", j))
            for j, feed in enumerate(inv.feeds or ()):
                if feed not in spec.events:
                    self.error(
                        inv.path + ("step", "feeds", j), f"unknown feed '{feed}'{did_you_mean(feed, spec.events)}"
                    )
            for ref in inv.refs():
                registered = self.reg is not None and ref.name in self.reg.entries["guard"]
                if registered or (self.reg is None and ref.name not in BUILTINS.entries["guard"]):
                    self.ref("guard", ref)
                elif ref.name in BUILTINS.entries["guard"]:
                    self.params(BUILTINS.entries["guard"][ref.name], ref)
                    if ref.name in STEP_ONLY and (inv.kind != "step" or ref.path[2:4] == ("step", "when")):
                        self.error(
                            ref.path,
                            f"guard '{ref.name}' compares with the configuration before a feed: "
                            "it belongs in a step's 'then'",
                        )
                else:
                    assert self.reg is not None
                    known = [*self.reg.entries["guard"], *BUILTINS.entries["guard"]]
                    self.error(
                        ref.path + (("name",) if ref.params or ref.negate else ()),
                        f"unknown guard '{ref.name}'{did_you_mean(ref.name, known)}"
                        f" (invariants use the guards of registry '{self.reg.name}' and the built-in "
                        f"{', '.join(sorted(BUILTINS.entries['guard']))})",
                    )

    def arg_values(self) -> None:
        """An argument's ``verify:`` block names data, state data and generators that exist."""
        spec = self.spec
        state_fields = {n for s in spec.states.values() for n in s.data}
        args = [*(e.args for e in spec.events.values()), *(d.args for d in spec.decisions.values())]
        for f in (f for a in args for f in a.values()):
            v = f.verify
            if v is None:
                continue
            for j, name in enumerate(v.from_data):
                if name not in spec.data:
                    where = v.path + ("from_data",) + ((j,) if len(v.from_data) > 1 else ())
                    self.error(where, f"unknown data field '{name}'{did_you_mean(name, spec.data)}")
            if v.from_state_data is not None and v.from_state_data not in state_fields:
                self.error(
                    v.path + ("from_state_data",),
                    f"no state carries a data field '{v.from_state_data}'"
                    f"{did_you_mean(v.from_state_data, state_fields)}",
                )
            if v.key is not None and not v.from_data and v.from_state_data is None:
                self.error(v.path + ("key",), "'key' picks from the values of from_data or from_state_data: give one")
            sources = [
                (v.path + ("from_data",) + ((j,) if len(v.from_data) > 1 else ()), "data field", n, [spec.data[n]])
                for j, n in enumerate(v.from_data)
                if n in spec.data
            ]
            if v.from_state_data in state_fields:
                defs = [s.data[v.from_state_data] for s in spec.states.values() if v.from_state_data in s.data]
                sources.append((v.path + ("from_state_data",), "state data field", v.from_state_data, defs))
            for where, kind, name, defs in sources:
                for d in defs:
                    said = self._source_misfit(f, d, v.key)
                    if said:
                        self.error(where, f"{kind} '{name}' {said}")
                        break
            for g in v.generators:
                self.ref("generator", g)
            for i, item in enumerate(v.values):  # (a registry type's values are JSON its codec decodes)
                takes = value_misfit(f, item)
                if takes is not None:
                    self.error(v.path + ("values", i), f"value {item!r} is not {takes}: argument '{f.name}' takes it")

    @staticmethod
    def _source_misfit(f: FieldDef, source: FieldDef, key: str | None) -> str | None:
        """Why values picked from field ``source`` (each item of a list, its ``key``) are not values of ``f``."""
        if key is not None:
            scalar = source.type in BUILTIN_CODECS and source.type != "json"
            return f"holds {source.type}, which has no '{key}' to pick" if scalar else None
        if "json" in (f.type, source.type):
            return None
        if source.type != f.type:
            return f"holds {source.type}, argument '{f.name}' takes {f.type}"
        if f.list:
            return f"gives one {source.type} at a time, argument '{f.name}' takes a list" if source.list else None
        return None

    def unused(self) -> None:
        if self.reg is None:
            return
        for kind in ("guard", "action"):
            for name in sorted(set(self.reg.entries[kind]) - self.used[kind]):
                self.warn(
                    (),
                    f"registered {kind} '{name}' of registry '{self.reg.name}' is used by no rule "
                    f"of machine '{self.spec.name}'",
                )

    def migrations(self) -> None:
        """The ``migrations:`` chain (see :mod:`loopfsm.core.migration_checks`)."""
        check_migrations(self.spec, self.reg, self)

    def whole_numbers(self) -> None:
        """The settings counted in whole numbers hold integers: JSON Schema's "integer" takes ``2.0``, and
        YAML 1.2's ``1e1`` is 10.0, so ``verify: {depth: 1e1}`` passed and ``loopfsm verify`` then failed."""
        spec, vm = self.spec, self.spec.verify_model
        said: list[tuple[PathT, Any]] = [(("version",), spec.version)]
        if vm is not None:
            said += [(vm.path + ("depth",), vm.depth), (vm.path + ("max_states",), vm.max_states)]
        for m in spec.migrations:
            said.append((m.path + ("from",), m.from_version))
            said += [(m.path + ("reads", "codecs", name), v) for name, v in m.reads_codecs.items()]
        for path, value in said:
            if isinstance(value, float):
                whole = f" (write {int(value)})" if value.is_integer() and abs(value) < 1e18 else ""
                self.error(path, f"expected an integer here, got number {value!r}{whole}")

    def run(self) -> list[Problem]:
        self.names()
        check_policy(self.spec, self.error, self.warn)
        self.fields(self.spec.data, need_default=True)
        self.states()
        self.events()
        self.graph()
        self.decisions()
        self.work.report(self.warn)
        self.outcomes()
        self.trace()
        self.migrations()
        self.whole_numbers()
        self.invariants()
        self.arg_values()
        check_verify_model(self.spec, self.error, self.state_ref)
        self.unused()
        return self.problems


def check_spec(spec: Spec, registry: Registry) -> list[Problem]:
    """Every semantic problem of ``spec`` against ``registry`` (errors and warnings)."""
    return _Checker(spec, registry).run()


def check_structure(spec: Spec) -> tuple[list[Problem], dict[str, list[str]]]:
    """The checks that need only the file, and what was left unchecked for want of its registry.

    Everything but the registry's names is still checked (states, reachability, shadowing, policy bounds,
    built-in field types); the second value maps "guard", "action", "result", "field type" and "error class"
    to the names only the registry could vouch for."""
    checker = _Checker(spec, None)
    problems = checker.run()
    return problems, {kind: sorted(names) for kind, names in checker.unchecked.items()}
