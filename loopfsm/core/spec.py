"""The machine file as typed Python values, built once a document passed the JSON Schema.

Every element keeps the path it came from, so later checks (and the compiler)
can report problems at the exact line of the YAML the user edits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - a spec from the cache is built without the YAML reader
    from .source import PathT, Source

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()
WILDCARD = "*"


def policy_ref(value: Any) -> str | None:
    """The policy name if ``value`` is a ``{policy: name}`` parameter, else None."""
    if isinstance(value, dict) and set(value) == {"policy"}:
        name: str = value["policy"]
        return name
    return None


@dataclass(frozen=True)
class Ref:
    """A named guard, action or result with the parameters the YAML gives it.

    A guard written ``{any: [...]}`` is a Ref named ``any`` whose ``options``
    are the alternatives (each a tuple of guards that must all hold); it holds
    when one option does, tried in order.
    """

    name: str
    params: dict[str, Any]
    negate: bool
    path: PathT
    options: tuple[tuple[Ref, ...], ...] = ()

    def leaves(self) -> tuple[Ref, ...]:
        """The named guards, actions or results this reference calls: itself, or every option's guards."""
        if not self.options:
            return (self,)
        return tuple(leaf for opt in self.options for g in opt for leaf in g.leaves())


def leaf_refs(refs: tuple[Ref, ...]) -> tuple[Ref, ...]:
    """Every named callable in ``refs``, ``any:`` alternatives flattened, in file order."""
    return tuple(leaf for r in refs for leaf in r.leaves())


@dataclass(frozen=True)
class ArgValues:
    """An argument's ``verify:`` block: where ``loopfsm verify`` takes its values in a configuration.

    Each source given adds its values: ``from_data`` (data fields) and
    ``from_state_data`` (the field's value, each item of a list; its ``key`` of each when given), the
    registered ``generators`` (called with the configuration), then ``values``.
    """

    from_data: tuple[str, ...]
    from_state_data: str | None
    key: str | None
    generators: tuple[Ref, ...]
    values: tuple[Any, ...]
    path: PathT


@dataclass(frozen=True)
class FieldDef:
    """One declared field of data, state data, a feed's arguments or an outcome, with its YAML position."""

    name: str
    type: str
    list: bool
    nullable: bool
    default: Any
    description: str
    path: PathT
    enum: tuple[Any, ...] | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    verify: ArgValues | None = None  # an argument's values for verify (feeds' and decisions' arguments only)


@dataclass(frozen=True)
class PolicyParam:
    """One policy number or setting from the YAML's ``policy:`` block, its default and bounds."""

    name: str
    type: str
    default: Any
    minimum: float | None
    maximum: float | None
    enum: tuple[Any, ...] | None
    description: str
    path: PathT
    read_by: str | None = None  # what reads it outside the table (a store, a service), in the YAML's words


@dataclass(frozen=True)
class StateDef:
    """One state: whether it starts or ends the machine, and the data it carries while current."""

    name: str
    initial: bool
    terminal: bool
    data: dict[str, FieldDef]
    description: str
    path: PathT
    tags: tuple[str, ...] = ()  # facts for the design review (calls_tools, ...); never behaviour


@dataclass(frozen=True)
class Condition:
    """One entry of a branch's ``when:``: the feed argument ``arg`` holds one of ``values``.

    ``choice`` is True when the YAML gave a list (``outcome: [gate, tools]``),
    so views can print it the way it was written.
    """

    arg: str
    values: tuple[Any, ...]
    choice: bool
    path: PathT

    def label(self) -> str:
        """``outcome=gate`` or ``outcome in [gate, tools]``: how every view prints the condition."""
        shown = [_literal(v) for v in self.values]
        return f"{self.arg} in [{', '.join(shown)}]" if self.choice else f"{self.arg}={shown[0]}"


def _literal(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


class _Conditioned:
    """What a branch and a decision rule share: ``when:`` conditions on the arguments, then guards."""

    guards: tuple[Ref, ...]
    when: tuple[Condition, ...]

    @property
    def guarded(self) -> bool:
        """Whether it can fail to hold (in its states): it has a ``when:`` or a guard."""
        return bool(self.guards or self.when)

    def conditions(self) -> list[str]:
        """The ``when:`` conditions as every view prints them, in the YAML's order."""
        return [c.label() for c in self.when]


@dataclass(frozen=True)
class Branch(_Conditioned):
    """One way a feed can go from a state: its ``when:`` conditions and guards tried in order, then the
    destination and actions."""

    guards: tuple[Ref, ...]
    dest: str | None  # None: stay
    actions: tuple[Ref, ...]
    description: str
    path: PathT
    name: str | None = None  # optional stable name for traces; else feed/source[index]
    refusal: str | None = None  # a refusal branch: raise FeedRefused with these words, change nothing
    when: tuple[Condition, ...] = ()  # conditions on the feed's arguments, checked before the guards
    # Where traces place it: the source state as written ('*' included) and its index among that
    # state's branches, a feed's ``first:`` branches counted ahead of the state's own.  ``path`` is
    # where the YAML says it, which for a ``first:`` branch is one place shared by every state.
    source: str = ""
    index: int = 0
    states: tuple[str, ...] | None = None  # a ``first:`` branch's ``states:`` scope, as written

    @property
    def shared(self) -> bool:
        """Whether the feed's ``first:`` list says it, for every state it is tried in."""
        return bool(self.path[2] == "first")


@dataclass(frozen=True)
class EventDef:
    """One feed: its arguments and, per source state, its branches in the order the YAML lists them."""

    name: str
    description: str
    args: dict[str, FieldDef]
    sources: dict[str, tuple[Branch, ...]]  # as written, '*' included
    otherwise: str | None
    on_terminal: str | None
    path: PathT
    before: tuple[Ref, ...] = ()  # actions run ahead of whichever branch of this feed is taken
    first: tuple[Branch, ...] = ()  # the ``first:`` list as written; ``sources`` has them in place


@dataclass(frozen=True)
class Rule(_Conditioned):
    """One row of a decision: in which states it applies, its ``when:`` conditions and guards, and the result
    it answers."""

    name: str
    states: tuple[str, ...] | None
    guards: tuple[Ref, ...]
    result: Ref
    description: str
    path: PathT
    when: tuple[Condition, ...] = ()  # conditions on the decision's arguments, checked before the guards


@dataclass(frozen=True)
class Decision:
    """A question the machine answers without changing (``next_step``): rules tried in order."""

    name: str
    description: str
    rules: tuple[Rule, ...]
    otherwise: str | None
    path: PathT
    args: dict[str, FieldDef] = field(default_factory=dict)


@dataclass(frozen=True)
class OutcomeDef:
    """One way the machine can end, and which error (if any) a failed run maps to."""

    name: str
    description: str
    error: Any  # None | str | {"field": name}
    data: dict[str, FieldDef]
    path: PathT


@dataclass(frozen=True)
class MigrationDef:
    """One ``migrations:`` entry: how snapshots of version ``from_version`` become the next version's.

    ``reads`` is that old version's shape as its snapshots record it (data
    field -> type words, state -> field -> type words, and the codec versions
    when given), so the chain can be checked without the old file.  ``fields``
    and ``defaults`` name a state's field as ``State.field``.
    """

    from_version: int
    reads_data: dict[str, str]
    reads_states: dict[str, dict[str, str]]
    states: dict[str, str]
    fields: dict[str, str]
    defaults: dict[str, Any]
    transform: str | None
    path: PathT
    reads_codecs: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Invariant:
    """A property ``loopfsm verify`` proves; it never changes what the machine does.

    ``kind`` is ``always`` (``holds`` hold in every reachable configuration in
    ``states``), ``step`` (for an accepted feed of ``feeds`` from a
    configuration in ``states`` where ``when`` holds, ``holds`` hold of the next
    one) or ``reach`` (some reachable configuration in ``states`` satisfies
    ``holds``: a goal that needs an example).
    """

    name: str
    description: str
    kind: str
    states: tuple[str, ...] | None
    holds: tuple[Ref, ...]
    path: PathT
    when: tuple[Ref, ...] = ()
    feeds: tuple[str, ...] | None = None

    def refs(self) -> tuple[Ref, ...]:
        """Every named guard it calls, ``any:`` flattened."""
        return leaf_refs(self.when) + leaf_refs(self.holds)


@dataclass(frozen=True)
class Start:
    """A configuration runs start from: a new instance with these fields set (``state`` None: the initial one)."""

    state: str | None
    state_data: dict[str, Any]
    data: dict[str, Any]
    path: PathT


@dataclass(frozen=True)
class VerifyModel:
    """What ``verify:`` declares; each unset part falls back to ``loopfsm verify``'s own defaults."""

    path: PathT = ("verify",)
    description: str = ""
    depth: int | None = None
    max_states: int | None = None
    policy: dict[str, Any] = field(default_factory=dict)
    values: dict[str, list[Any]] = field(default_factory=dict)
    forget: tuple[str, ...] = ()
    starts: tuple[Start, ...] = ()
    unexercised: dict[str, str] = field(default_factory=dict)


def parse_verify_model(raw: dict[str, Any] | None) -> VerifyModel | None:
    """The model of a schema-valid ``verify:`` section (None when the file has none)."""
    if raw is None:
        return None
    path: PathT = ("verify",)
    return VerifyModel(
        path,
        raw.get("description", ""),
        raw.get("depth"),
        raw.get("max_states"),
        dict(raw.get("policy") or {}),
        {k: list(v) for k, v in (raw.get("values") or {}).items()},
        tuple(raw.get("forget") or ()),
        tuple(
            Start(s.get("state"), dict(s.get("state_data") or {}), dict(s.get("data") or {}), path + ("start", i))
            for i, s in enumerate(raw.get("start") or ())
        ),
        dict(raw.get("unexercised") or {}),
    )


@dataclass
class Spec:
    """A whole machine file, typed.  ``source`` keeps positions for later error reports."""

    name: str
    description: str
    registry: str | None
    terminal_feeds: str
    policy: dict[str, PolicyParam]
    data: dict[str, FieldDef]
    states: dict[str, StateDef]
    events: dict[str, EventDef]
    decisions: dict[str, Decision]
    outcomes: dict[str, OutcomeDef]
    source: Source
    warnings: list[Any] = field(default_factory=list)
    # Names only the machine's registry could vouch for, when it was checked without one
    # (kind -> names); empty after a full check.
    unchecked: dict[str, list[str]] = field(default_factory=dict)
    before: tuple[Ref, ...] = ()  # actions run ahead of whichever branch of any feed is taken
    version: int = 1  # carried by every snapshot; migrations say how older versions are read
    migrations: tuple[MigrationDef, ...] = ()
    invariants: dict[str, Invariant] = field(default_factory=dict)
    verify_model: VerifyModel | None = None  # the ``verify:`` section: the bound verify explores to

    @property
    def file(self) -> str:
        return self.source.file

    @property
    def initial(self) -> str:
        return next(s.name for s in self.states.values() if s.initial)

    def actions_of(self, event: str, branch: Branch) -> tuple[Ref, ...]:
        """What runs when ``branch`` of ``event`` is taken: the machine's and the feed's ``before``, then its own."""
        return (*self.before, *self.events[event].before, *branch.actions)

    @property
    def terminal_states(self) -> list[str]:
        return [s.name for s in self.states.values() if s.terminal]

    def expanded_sources(self, event: EventDef) -> dict[str, tuple[Branch, ...]]:
        """Source state -> branches, with '*' expanded to every non-terminal state not listed by name.

        A state named explicitly overrides the wildcard for that state, so a
        file can say "from anywhere, except here it works differently".
        """
        out: dict[str, tuple[Branch, ...]] = {}
        wild = event.sources.get(WILDCARD)
        for state in self.states.values():
            if state.name in event.sources:
                out[state.name] = event.sources[state.name]
            elif wild is not None and not state.terminal:
                out[state.name] = wild
        return out

    def terminal_behaviour(self, event: EventDef) -> str:
        return event.on_terminal or self.terminal_feeds

    @cached_property
    def fingerprint(self) -> str:
        """Hash of everything that affects behaviour or snapshots; descriptions are left out.

        Snapshots carry it for information and as a fast path: an equal
        fingerprint (with an equal shape) restores without comparing shapes;
        any other is judged by shape (:mod:`loopfsm.core.shape`).  ``diff`` reads
        it as "behaviour changed".  The trace table only describes, so it is
        left out, and so are coverage excuses (``untested:``) and state tags.
        """

        def strip(node: Any) -> Any:
            if isinstance(node, dict):
                return {k: strip(v) for k, v in node.items() if k not in ("description", "untested", "read_by")}
            if isinstance(node, list):
                return [strip(v) for v in node]
            return node

        # Traces, invariants and the verification model never change behaviour: adding a proof must not
        # orphan saved runs.
        doc = {k: v for k, v in self.source.doc.items() if k not in ("trace", "invariants", "verify")}
        # Nor do the argument values verify is told to try (an argument's `verify:`).
        for section in ("events", "decisions"):
            if isinstance(doc.get(section), dict):
                doc[section] = {n: _without_arg_values(e) for n, e in doc[section].items()}
        # Saying a branch once in `first:` instead of in every state changes no behaviour.
        if isinstance(doc.get("events"), dict):
            doc["events"] = {n: _first_in_place(e) for n, e in doc["events"].items()}
        # A state's tags only inform the design review: adding one must not orphan saved runs.
        doc["states"] = {n: {k: v for k, v in s.items() if k != "tags"} for n, s in doc["states"].items()}
        body = json.dumps(strip(doc), sort_keys=True, separators=(",", ":"), default=str)
        import hashlib  # noqa: PLC0415 - OpenSSL's load is paid only by a spec that was not cached

        return "sha256:" + hashlib.sha256(body.encode()).hexdigest()[:32]


def _without_arg_values(entry: Any) -> Any:
    """A feed or decision without its arguments' ``verify:`` blocks (for the fingerprint)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("args"), dict):
        return entry
    args = {
        a: {k: v for k, v in f.items() if k != "verify"} if isinstance(f, dict) else f for a, f in entry["args"].items()
    }
    return {**entry, "args": args}


def tried_in(branch: dict[str, Any], state: str) -> bool:
    """Whether a feed's ``first:`` branch (as the YAML has it) is tried in ``state``: in every state the feed is
    fed in, or in those its ``states:`` names.  The loader, the fingerprint and coverage rows all ask this."""
    return state in (branch.get("states") or (state,))


def _first_in_place(entry: Any) -> Any:
    """A feed's document with its ``first:`` branches copied into the states they are tried in, as a
    table that repeats them would say it."""
    if not isinstance(entry, dict) or "first" not in entry:
        return entry
    first = entry["first"]
    sources = {
        state: [{k: v for k, v in b.items() if k != "states"} for b in first if tried_in(b, state)] + list(branches)
        for state, branches in entry["from"].items()
    }
    return {**{k: v for k, v in entry.items() if k != "first"}, "from": sources}


def _ref(raw: Any, path: PathT) -> Ref:
    if isinstance(raw, str):
        return Ref(raw, {}, False, path)
    return Ref(raw["name"], dict(raw.get("params") or {}), bool(raw.get("negate", False)), path)


def _refs(raw: list[Any] | None, path: PathT) -> tuple[Ref, ...]:
    return tuple(_ref(a, path + (j,)) for j, a in enumerate(raw or []))


def _guard(raw: Any, path: PathT) -> Ref:
    if isinstance(raw, dict) and "any" in raw:
        options = tuple(_guards(opt, path + ("any", i)) for i, opt in enumerate(raw["any"]))
        return Ref("any", {}, False, path, options)
    return _ref(raw, path)


def _guards(raw: Any, path: PathT) -> tuple[Ref, ...]:
    if raw is None:
        return ()
    if isinstance(raw, list):
        return tuple(_guard(r, path + (i,)) for i, r in enumerate(raw))
    return (_guard(raw, path),)


def _when(raw: dict[str, Any] | None, path: PathT) -> tuple[Condition, ...]:
    out = []
    for arg, value in (raw or {}).items():
        choice = isinstance(value, list)
        out.append(Condition(arg, tuple(value) if choice else (value,), choice, path + (arg,)))
    return tuple(out)


def _fields(raw: dict[str, Any] | None, path: PathT) -> dict[str, FieldDef]:
    out: dict[str, FieldDef] = {}
    for name, f in (raw or {}).items():
        out[name] = FieldDef(
            name,
            f["type"],
            bool(f.get("list", False)),
            bool(f.get("nullable", False)),
            f.get("default", MISSING),
            f.get("description", ""),
            path + (name,),
            tuple(f["enum"]) if "enum" in f else None,
            f.get("minimum"),
            f.get("maximum"),
            _arg_values(f["verify"], path + (name, "verify")) if "verify" in f else None,
        )
    return out


def _arg_values(raw: dict[str, Any], path: PathT) -> ArgValues:
    gens = raw.get("generator")
    gens_path = path + ("generator",)
    generators = (
        _refs(gens, gens_path) if isinstance(gens, list) else (() if gens is None else (_ref(gens, gens_path),))
    )
    data = raw.get("from_data")
    return ArgValues(
        tuple(data) if isinstance(data, list) else () if data is None else (data,),
        raw.get("from_state_data"),
        raw.get("key"),
        generators,
        tuple(raw.get("values") or ()),
        path,
    )


def _branch(b: dict[str, Any], p: PathT, source: str, index: int) -> Branch:
    return Branch(
        _guards(b.get("guard"), p + ("guard",)),
        b.get("to"),
        tuple(_ref(a, p + ("actions", j)) for j, a in enumerate(b.get("actions") or [])),
        b.get("description", ""),
        p,
        b.get("name"),
        b.get("refuse"),
        _when(b.get("when"), p + ("when",)),
        source,
        index,
        tuple(b["states"]) if "states" in b else None,
    )


def build_spec(src: Source) -> Spec:
    """Turn a schema-valid document into a :class:`Spec`."""
    doc = src.doc
    policy = {
        name: PolicyParam(
            name,
            p["type"],
            p["default"],
            p.get("minimum"),
            p.get("maximum"),
            tuple(p["enum"]) if "enum" in p else None,
            p["description"],
            ("policy", name),
            p.get("read_by"),
        )
        for name, p in (doc.get("policy") or {}).items()
    }
    states = {
        name: StateDef(
            name,
            bool(s.get("initial", False)),
            bool(s.get("terminal", False)),
            _fields(s.get("data"), ("states", name, "data")),
            s["description"],
            ("states", name),
            tuple(s.get("tags") or ()),
        )
        for name, s in doc["states"].items()
    }
    events: dict[str, EventDef] = {}
    for name, e in (doc.get("events") or {}).items():
        first: list[tuple[dict[str, Any], PathT]] = [
            (b, ("events", name, "first", i)) for i, b in enumerate(e.get("first") or [])
        ]
        sources: dict[str, tuple[Branch, ...]] = {}
        for state, branches in e["from"].items():
            # A `first:` branch is tried ahead of the state's own in every state its scope names
            # (all of them without one); each state gets its own copy, placed as traces name it.
            rows: list[tuple[dict[str, Any], PathT]] = [(b, p) for b, p in first if tried_in(b, state)]
            rows += [(b, ("events", name, "from", state, i)) for i, b in enumerate(branches)]
            sources[state] = tuple(_branch(b, p, state, i) for i, (b, p) in enumerate(rows))
        events[name] = EventDef(
            name,
            e["description"],
            _fields(e.get("args"), ("events", name, "args")),
            sources,
            e.get("otherwise"),
            e.get("on_terminal"),
            ("events", name),
            _refs(e.get("before"), ("events", name, "before")),
            tuple(_branch(b, p, "", i) for i, (b, p) in enumerate(first)),
        )
    decisions: dict[str, Decision] = {}
    for name, d in (doc.get("decisions") or {}).items():
        rules = []
        for i, r in enumerate(d["rules"]):
            rp = ("decisions", name, "rules", i)
            rules.append(
                Rule(
                    r.get("name") or f"rule_{i}",
                    tuple(r["states"]) if "states" in r else None,
                    _guards(r.get("guard"), rp + ("guard",)),
                    _ref(r["result"], rp + ("result",)),
                    r.get("description", ""),
                    rp,
                    _when(r.get("when"), rp + ("when",)),
                )
            )
        decisions[name] = Decision(
            name,
            d["description"],
            tuple(rules),
            d.get("otherwise"),
            ("decisions", name),
            _fields(d.get("args"), ("decisions", name, "args")),
        )
    outcomes = {
        name: OutcomeDef(
            name, o["description"], o["error"], _fields(o.get("data"), ("outcomes", name, "data")), ("outcomes", name)
        )
        for name, o in (doc.get("outcomes") or {}).items()
    }
    spec = Spec(
        doc["machine"],
        doc["description"],
        doc.get("registry"),
        doc.get("terminal_feeds", "raise"),
        policy,
        _fields(doc.get("data"), ("data",)),
        states,
        events,
        decisions,
        outcomes,
        src,
    )
    spec.before = _refs(doc.get("before"), ("before",))
    spec.version = doc.get("version", 1)
    spec.migrations = tuple(_migration(m, ("migrations", i)) for i, m in enumerate(doc.get("migrations") or []))
    spec.invariants = _invariants(doc.get("invariants"))
    spec.verify_model = parse_verify_model(doc.get("verify"))
    return spec


def _migration(raw: dict[str, Any], path: PathT) -> MigrationDef:
    reads = raw["reads"]
    return MigrationDef(
        raw["from"],
        dict(reads.get("data") or {}),
        {name: dict(fields or {}) for name, fields in reads["states"].items()},
        dict(raw.get("states") or {}),
        dict(raw.get("fields") or {}),
        dict(raw.get("defaults") or {}),
        raw.get("transform"),
        path,
        dict(reads.get("codecs") or {}),
    )


def _invariants(raw: dict[str, Any] | None) -> dict[str, Invariant]:
    out: dict[str, Invariant] = {}
    for name, inv in (raw or {}).items():
        path = ("invariants", name)
        states = tuple(inv["states"]) if "states" in inv else None
        if "step" in inv:
            step = inv["step"]
            sp = path + ("step",)
            out[name] = Invariant(
                name,
                inv["description"],
                "step",
                states,
                _guards(step["then"], sp + ("then",)),
                path,
                _guards(step.get("when"), sp + ("when",)),
                tuple(step["feeds"]) if "feeds" in step else None,
            )
        else:
            kind = "always" if "always" in inv else "reach"
            value = inv[kind]
            out[name] = Invariant(
                name, inv["description"], kind, states, () if value is True else _guards(value, path + (kind,)), path
            )
    return out
