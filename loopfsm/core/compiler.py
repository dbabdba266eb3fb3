"""Compiling a checked spec, once, into everything instances share.

The compiler's output is the only place Python meets the table: per feed, a
:class:`~loopfsm.core.interpreter.Feed` holding its branches with the registered guards
and actions they name (bound to their YAML parameters per policy object by
:mod:`loopfsm.core.binding`), a policy class whose defaults are the YAML's, a data class whose fields are the
YAML's, argument binders per feed, decision chains flattened per state, and the
codecs and validators snapshots go through.  None of it is rebuilt per instance.
"""

from __future__ import annotations

import copy
import functools
import dataclasses
import inspect
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple
from collections.abc import Callable

from .interpreter import Branch, Feed
from .engines import EngineName, Engines, InterpreterEngine, TransitionsEngine, engine_name
from .binding import Bound, Call, Guard, PerPolicy, bind, bind_guard, call_of, condition_of, guard_of
from .errors import (
    FeedArgumentError,
    FeedRefused,
    IncompatibleSnapshot,
    PolicyError,
    did_you_mean,
    SnapshotError,
    shown,
    shown_fingerprint,
)
from .fieldtypes import INT_MAX, INT_MIN, default_value, policy_value_problem, python_checker
from .loader import load
from .registries import registry_named
from .registry import Codec, Registry
from .instance import READ_FORMATS, SNAPSHOT_FORMAT, MachineInstance
from .shape import MigratingRun, Shape, migrate_run, plan, shape_of, values_unlike_shape
from .fieldcodecs import field_decoder, field_encoder, fields_validator, limits, no_fields_problem
from .spec import MISSING, FieldDef, Spec
from . import tracing as _tracing
from .tracing import branch_name, compile_attributes

if TYPE_CHECKING:  # pragma: no cover
    from transitions import Machine

_PY_POLICY = {"integer": int, "boolean": bool, "string": str, "number": float}


class Rule(NamedTuple):
    """One rule of a decision chain as compiled: its name, its guards (all must hold) and its result."""

    name: str
    guards: tuple[Guard, ...]
    result: Call


class BoundRule(NamedTuple):
    """A :class:`Rule` with its guards and result bound for one policy."""

    name: str
    guards: tuple[Bound, ...]
    result: Bound


def _bound_guard(guard: Guard, policy: Any) -> Bound:
    bound = bind_guard(guard, policy)
    assert not isinstance(bound, bool)  # without a probe a guard is always a callable
    return bound


def _policy_bound(call: Call) -> Callable[[Any], Any]:
    """A one-argument getter (a feed's or decision's ``ctx``) calling ``call`` bound for ``ctx.policy``."""
    per_policy = PerPolicy(lambda policy: bind(call, policy))

    def get(ctx: Any) -> Any:
        return per_policy.get(ctx.policy)(ctx.model, ctx)

    return get


def _refusal(machine: str, event: str, legal: tuple[str, ...], why: str, branch: str) -> Callable[[Any, Any], None]:
    """The one action of a ``refuse:`` branch: tell the trace, then raise before anything changed."""

    def refuse(model: Any, ctx: Any) -> None:
        if _tracing.ACTIVE:
            _tracing.refusal_done(model, event, branch)
        raise FeedRefused(machine, model._state, event, legal, reason=why)

    return refuse


def _make_policy_class(spec: Spec, cls_name: str, module: str | None) -> type:
    """A frozen dataclass whose fields, types, defaults and bounds are the YAML's ``policy``.

    Built as ``dataclasses.make_dataclass`` builds it (its module stays ``types``
    unless a typed class names one).
    """
    params = list(spec.policy.values())

    def __post_init__(self: Any) -> None:
        for p in params:
            v = getattr(self, p.name)
            problem = policy_value_problem(p, v)
            if problem:
                raise PolicyError(f"{spec.name}: policy '{p.name}' = {shown(v)} {problem}")

    namespace: dict[str, Any] = {
        "__annotations__": {p.name: _PY_POLICY[p.type] for p in params},
        "__module__": module or "types",  # where users import it from, so it pickles and reprs by that name
        "__qualname__": cls_name,
        "__doc__": f"Policy of machine '{spec.name}'; defaults come from its YAML file.\n\n"
        + "\n".join(f"{p.name}: {p.description}" for p in params),
        "__post_init__": __post_init__,
    }
    namespace.update((p.name, dataclasses.field(default=p.default)) for p in params)
    return dataclass(frozen=True)(type(cls_name, (), namespace))


def _make_data_class(spec: Spec) -> type:
    fields = spec.data
    names = tuple(fields)

    # Immutable defaults are shared; only lists and mappings are copied per instance.
    fixed = tuple(
        (n, f.default)
        for n, f in fields.items()
        if f.default is not MISSING and not isinstance(f.default, (list, dict)) and not f.list
    )
    fresh = tuple((n, f) for n, f in fields.items() if (n, f.default) not in fixed)

    def __init__(self: Any) -> None:
        for n, v in fixed:
            setattr(self, n, v)
        for n, f in fresh:
            setattr(self, n, default_value(f))

    def __eq__(self: Any, other: Any) -> bool:
        return type(other) is type(self) and all(getattr(self, n) == getattr(other, n) for n in names)

    def __repr__(self: Any) -> str:
        return f"{type(self).__name__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in names) + ")"

    return type(
        f"{spec.name}_data",
        (),
        {"__slots__": names, "__init__": __init__, "__eq__": __eq__, "__repr__": __repr__, "__hash__": None},
    )


def _make_binder(
    machine: str, event: str, args: dict[str, FieldDef], codecs: dict[str, Codec], what: str = "feed"
) -> Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]:
    """Bind positional/keyword feed arguments to the declared ones, checking types, before anything runs."""
    names = tuple(args)
    checks = {n: python_checker(f, codecs[f.type]) for n, f in args.items()}

    def signature() -> inspect.Signature:  # built only when a call needs more than the fast path
        return inspect.Signature(
            [
                inspect.Parameter(
                    n,
                    inspect.Parameter.POSITIONAL_OR_KEYWORD,
                    default=inspect.Parameter.empty if f.default is MISSING else f.default,
                )
                for n, f in args.items()
            ]
        )

    defaults = {n: f for n, f in args.items() if f.default is not MISSING}

    pairs = tuple((n, checks[n]) for n in names)
    name_set = frozenset(names)

    def bind(pos: tuple[Any, ...], kw: dict[str, Any]) -> dict[str, Any]:
        if not names and not pos and not kw:
            return {}
        if not kw and len(pos) == len(names):  # the typed methods' call: every argument, in order
            bound = {}
            for (n, check), v in zip(pairs, pos):  # noqa: B905 - equal lengths; strict=True measured 20% of a bind
                if not check(v):
                    break
                bound[n] = v
            else:
                return bound
            bound = dict(zip(names, pos, strict=True))  # a wrong type: explained below
        elif not pos and kw.keys() <= name_set and all(n in kw or n in defaults for n in names):
            # keywords only (how decisions are asked): no Signature needed
            bound = {n: kw[n] if n in kw else default_value(defaults[n]) for n in names}
        else:
            try:
                sig = signature()
                ba = sig.bind(*pos, **kw)
            except TypeError as err:
                raise FeedArgumentError(f"{machine}: {what} '{event}{sig}': {err}") from None
            bound = dict(ba.arguments)
            for n in defaults:
                if n not in bound:
                    bound[n] = default_value(defaults[n])
        for n, v in bound.items():
            if not checks[n](v):
                f = args[n]
                words = ([f"one of {', '.join(map(repr, f.enum))}"] if f.enum else []) + limits(f)
                choices = f" ({', '.join(words)})" if words else ""
                wide = " (signed 64-bit)" if type(v) is int and not INT_MIN <= v <= INT_MAX else ""
                wide += " (finite)" if type(v) is float and not math.isfinite(v) else ""
                raise FeedArgumentError(
                    f"{machine}: {what} '{event}' argument '{n}' must be {'a list of ' if f.list else ''}"
                    f"{f.type}{choices}{' or None' if f.nullable else ''}{wide}, got {type(v).__name__} {shown(v)}"
                )
        return bound

    return bind


_INT64 = range(INT_MIN, INT_MAX + 1)  # ``v in _INT64`` is O(1) for an int


class CompiledMachine:
    """Everything instances of one spec share; built once by :func:`compile_spec`."""

    def __init__(self, spec: Spec, registry: Registry, base: type | None = None, bind: type | None = None):
        self.spec = spec
        self.registry = registry
        self.name = spec.name
        self.fingerprint = spec.fingerprint
        self.initial = sys.intern(spec.initial)  # see LoopEvent._plans_for: state names are interned
        self.terminal_states = frozenset(spec.terminal_states)
        codecs = registry.codecs

        typed = bind or base
        camel = "".join(w.capitalize() for w in spec.name.split("_"))
        cls_name = typed.__name__ if typed is not None else camel
        declared = getattr(typed, "policy_class_name", None) if typed is not None else None
        policy_name = declared if isinstance(declared, str) else cls_name + "Policy"
        module = typed.__module__ if typed is not None else None
        self.Policy = _make_policy_class(spec, policy_name, module)
        self.Data = _make_data_class(spec)

        self.events: dict[str, Feed] = {}
        self.binders: dict[str, Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]] = {}
        for ev in spec.events.values():
            sources = spec.expanded_sources(ev)
            legal = tuple(sources)  # once per feed: per branch, a chain of n states compiled in n**2
            made: dict[int, Branch] = {}  # a '*' branch is one Branch shared by every state it covers
            per_state: dict[str, tuple[Branch, ...]] = {}
            for state, branches in sources.items():
                for b in branches:
                    if id(b) not in made:
                        made[id(b)] = self._branch(spec, registry, ev.name, legal, b)
                per_state[state] = tuple(made[id(b)] for b in branches)
            all_guarded = {s for s, bs in sources.items() if all(b.guarded for b in bs)}
            self.events[ev.name] = Feed(
                spec.name,
                ev.name,
                per_state,
                ignored_in=frozenset(
                    s for s in spec.terminal_states if s not in sources and spec.terminal_behaviour(ev) == "ignore"
                ),
                # No otherwise: check let it pass only where the when: lists take every feed; loud if not so
                otherwise_raise=frozenset(all_guarded if ev.otherwise != "stay" else ()),
                enums={
                    n: (*f.enum, *((None,) if f.nullable else ())) for n, f in ev.args.items() if f.enum and not f.list
                },
            )
            self.binders[ev.name] = _make_binder(spec.name, ev.name, ev.args, codecs)
        # What a feed looks up, in one place: its Feed and (None for a feed without arguments) its binder.
        # Keyed by interned names, so a typed method's literal feed name matches by identity.
        self.feed_table: dict[str, tuple[Feed, Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]] | None]] = {
            sys.intern(name): (self.events[name], self.binders[name] if spec.events[name].args else None)
            for name in self.events
        }

        # Decision chains: per decision, per state, the rules that apply there in order.
        self.decisions: dict[str, dict[str, tuple[Rule, ...]]] = {}
        self.decision_binders = {}
        for d in spec.decisions.values():
            self.decision_binders[d.name] = _make_binder(spec.name, d.name, d.args, codecs, "decision")
            rules: dict[str, list[Rule]] = {sys.intern(s): [] for s in spec.states}
            for r in d.rules:
                rule = Rule(
                    r.name,
                    (*(condition_of(c) for c in r.when), *(guard_of(registry, g) for g in r.guards)),
                    call_of(registry, "result", r.result),
                )
                for s in r.states or spec.states:
                    rules[s].append(rule)
            self.decisions[d.name] = {s: tuple(rs) for s, rs in rules.items()}
        self._bound_rules: PerPolicy[dict[tuple[str, str], tuple[BoundRule, ...]]] = PerPolicy(lambda _: {})

        self.engines = Engines(self)
        self.trace_attributes = compile_attributes(spec, lambda ref: _policy_bound(call_of(registry, "result", ref)))
        # Snapshot validators are compiled on the first restore (most processes never restore),
        # and only for field sets that exist: a state without data needs no validator.
        self._codecs = codecs
        self._validators: tuple[Any, dict[str, Any]] | None = None

        bases = (
            (base,)
            if base is not None and issubclass(base, MachineInstance)
            else ((base, MachineInstance) if base is not None else (MachineInstance,))
        )
        feeds = {ev.name: _feed_method(ev.name, ev.description) for ev in spec.events.values()}
        if bind is not None:
            # A declared class (``class Turnstile(MachineInstance, machine=...)``) becomes the
            # instance class itself; feeds it does not declare as typed methods are added.
            for name, method in feeds.items():
                if not hasattr(bind, name):
                    setattr(bind, name, method)
            bind.compiled = self  # type: ignore[attr-defined]
            self.Instance: type[MachineInstance] = bind
        else:
            namespace: dict[str, Any] = {
                "__slots__": (),
                "compiled": self,
                "__doc__": f"An instance of machine '{spec.name}'.\n\n{spec.description}",
            }
            for name, method in feeds.items():
                if not any(hasattr(b, name) for b in bases):
                    namespace[name] = method
            if module is not None:
                namespace["__module__"] = module
            self.Instance = type(cls_name, bases, namespace)
        # A guard registered with reads= is asked with those arguments alone when the interpreter narrows
        # a feed's branches; one that needs more is refused here, for both engines, not at a first feed.
        for feed in self.events.values():
            if feed.narrow_on is not None:
                feed.rows(feed.legal_states[0], {}, self.default_policy)

    @staticmethod
    def _branch(spec: Spec, registry: Registry, event: str, legal: tuple[str, ...], b: Any) -> Branch:
        """A branch of the table with its guards and actions as the YAML names them, ``when:`` conditions first."""
        name = branch_name(event, b.source, b.index, b.name)
        if b.refusal is not None:  # a refusal runs nothing but itself
            actions: tuple[Call, ...] = (Call("refuse", _refusal(spec.name, event, legal, b.refusal, name), {}),)
        else:
            actions = tuple(call_of(registry, "action", a) for a in spec.actions_of(event, b))
        return Branch(
            name=name,
            dest=b.dest,
            data_keys=frozenset(spec.states[b.dest].data) if b.dest else frozenset(),
            guards=(*(condition_of(c) for c in b.when), *(guard_of(registry, g) for g in b.guards)),
            actions=actions,
            refusal=b.refusal,
        )

    def decision_rules(self, decision: str, state: str, policy: Any) -> tuple[BoundRule, ...]:
        """The rules of ``decision`` that apply in ``state``, bound for ``policy``; KeyError for an unknown one."""
        bound = self._bound_rules.get(policy)
        key = (decision, state)
        found = bound.get(key)
        if found is None:
            found = bound[key] = tuple(
                BoundRule(r.name, tuple(_bound_guard(g, policy) for g in r.guards), bind(r.result, policy))
                for r in self.decisions[decision][state]
            )
        return found

    # Snapshot codecs per field, made on the first snapshot or restore (most processes do neither).
    @functools.cached_property
    def data_encoders(self) -> dict[str, Callable[[Any], Any]]:
        return self._per_field(self.spec.data, field_encoder)

    @functools.cached_property
    def data_decoders(self) -> dict[str, Callable[[Any], Any]]:
        return self._per_field(self.spec.data, field_decoder)

    @functools.cached_property
    def state_encoders(self) -> dict[str, dict[str, Callable[[Any], Any]]]:
        return {s.name: self._per_field(s.data, field_encoder) for s in self.spec.states.values()}

    @functools.cached_property
    def state_decoders(self) -> dict[str, dict[str, Callable[[Any], Any]]]:
        return {s.name: self._per_field(s.data, field_decoder) for s in self.spec.states.values()}

    def _per_field(
        self, fields: dict[str, FieldDef], make: Callable[[FieldDef, Codec, str], Callable[[Any], Any]]
    ) -> dict[str, Callable[[Any], Any]]:
        return {n: make(f, self._codecs[f.type], self.name) for n, f in fields.items()}

    @functools.cached_property
    def default_policy(self) -> Any:
        """The policy of the YAML's defaults (made on first use: most of a compile's callers never feed)."""
        return self.Policy()

    def policy(self, value: Any = None) -> Any:
        """The policy to use for one call: ``None`` means the YAML defaults; a mapping is converted."""
        if value is None:
            return self.default_policy
        if isinstance(value, self.Policy):
            return value
        if isinstance(value, Mapping):
            for name in value:
                if name not in self.spec.policy:
                    known = did_you_mean(str(name), self.spec.policy)
                    raise PolicyError(f"{self.name}: no policy number {str(name)[:100]!r}{known}")
            try:
                return self.Policy(**value)
            except TypeError as err:
                raise PolicyError(f"{self.name}: {err}") from None
        raise PolicyError(
            f"{self.name}: policy must be a {self.Policy.__name__} or a mapping, got {type(value).__name__}"
        )

    def outcome_error(self, outcome_name: str, outcome: Any) -> Any:
        """The error an outcome maps to by the YAML's ``outcomes`` table (None for success).

        Total by construction: the checker refuses an outcome whose error class
        or field does not exist.
        """
        err = self.spec.outcomes[outcome_name].error
        if err is None:
            return None
        if isinstance(err, str):
            return self.registry.errors[err](self.spec.outcomes[outcome_name].description)
        return getattr(outcome, err["field"])

    def new(
        self,
        *,
        engine: EngineName | None = None,
        machine_class: type[Machine] | None = None,
        machine_options: Mapping[str, Any] | None = None,
    ) -> MachineInstance:
        """A new instance (see :class:`~loopfsm.core.instance.MachineInstance` for the keywords)."""
        return self.Instance(
            engine=self.engine if engine is None else engine,
            machine_class=machine_class,
            machine_options=machine_options,
        )

    def restore(
        self,
        snap: Mapping[str, Any],
        *,
        engine: EngineName | None = None,
        machine_class: type[Machine] | None = None,
        machine_options: Mapping[str, Any] | None = None,
    ) -> MachineInstance:
        """The instance ``snap`` records, on the engine named (see :meth:`MachineInstance.restore`)."""
        instance: MachineInstance = self.Instance.restore(
            snap,
            engine=self.engine if engine is None else engine,
            machine_class=machine_class,
            machine_options=machine_options,
        )
        return instance

    #: The engine :meth:`new` and :meth:`restore` use when given none (None: the process's default).
    engine: EngineName | None = None

    def with_engine(self, engine: EngineName) -> CompiledMachine:
        """This compiled machine, its tables shared, whose :meth:`new` and :meth:`restore` use ``engine``."""
        view = copy.copy(self)
        view.engine = engine_name(engine, f"{self.name}: engine=")
        return view

    def engine_for(
        self,
        instance: MachineInstance,
        engine: EngineName | None = None,
        machine_class: type[Machine] | None = None,
        machine_options: Mapping[str, Any] | None = None,
    ) -> InterpreterEngine | TransitionsEngine:
        """The engine ``instance`` runs on (:meth:`loopfsm.core.engines.Engines.for_instance`)."""
        return self.engines.for_instance(instance, engine, machine_class, machine_options)

    @property
    def machine(self) -> Machine:
        """The stock ``transitions.Machine`` that instances of :attr:`Instance` without a machine of their
        own run on (see :attr:`MachineInstance.machine`)."""
        return self.engines.shared(self.Instance).machine

    @functools.cached_property
    def codec_versions(self) -> dict[str, int]:
        """Each field type's codec version, as snapshots record it."""
        return {name: codec.version for name, codec in self._codecs.items()}

    @functools.cached_property
    def shape(self) -> Shape:
        """The shape of this table's runs: what a snapshot records so an edited table can judge it."""
        return shape_of(self.spec, self.codec_versions)

    @functools.cached_property
    def _shape_json(self) -> dict[str, Any]:
        return self.shape.to_json()

    def check_snapshot(self, snap: Mapping[str, Any]) -> Mapping[str, Any]:
        """Refuse anything that is not a whole snapshot this table can read; explain exactly why.

        Returns the values to restore: ``snap`` itself when it was taken under
        this very table, else a copy carried through the table's migrations
        and given the defaults of fields added since (see :mod:`loopfsm.core.shape`).
        """

        def fail(msg: str) -> SnapshotError:
            return SnapshotError(f"{self.name}: refusing snapshot: {msg}")

        if not isinstance(snap, Mapping):
            raise fail(f"expected a JSON object, got {type(snap).__name__}")
        fmt = snap.get("format")
        if type(fmt) is not int or fmt not in READ_FORMATS:
            raise fail(f"format {shown(fmt)} is not a supported format ({', '.join(map(str, READ_FORMATS))})")
        envelope = _ENVELOPE if fmt == SNAPSHOT_FORMAT else _ENVELOPE_1
        missing = [k for k in envelope if k not in snap]
        if missing:
            raise fail(f"missing {', '.join(missing)}")
        extra = [k for k in snap if k not in envelope]
        if extra:
            raise fail(f"unknown key {shown(extra[0])} (a format-{fmt} snapshot holds exactly {', '.join(envelope)})")
        if snap["machine"] != self.name:
            raise fail(f"it is of machine {shown(snap['machine'])}")
        if not isinstance(snap["fingerprint"], str):
            raise fail(f"fingerprint {shown_fingerprint(snap['fingerprint'])} is not a string")
        same = snap["fingerprint"] == self.fingerprint and (
            fmt == 1
            or (
                type(snap["version"]) is int
                and snap["version"] == self.spec.version
                and snap["shape"] == self._shape_json
            )
        )
        if not same:
            if fmt == 1:
                raise fail(
                    "it was taken under another version of the spec (fingerprint "
                    f"{shown_fingerprint(snap['fingerprint'])}, this spec is {shown_fingerprint(self.fingerprint)}), "
                    "and a format-1 snapshot does not record the shape an edited table could judge it by"
                )
            snap = self._read_older(snap, fail)
        if not isinstance(snap["state"], str) or snap["state"] not in self.spec.states:
            raise fail(f"unknown state {shown(snap['state'])}")
        data_validator, state_validators = self._validators or self._compile_validators()
        for where, validator, value in (
            ("data", data_validator, snap["data"]),
            ("state_data", state_validators.get(snap["state"]), snap["state_data"]),
        ):
            detail = no_fields_problem(value) if validator is None else validator(value)
            if detail is not None:
                detail = detail.replace("data", where, 1)
                raise fail(f"{detail} (in state {shown(snap['state'])})" if where == "state_data" else detail)
        return snap

    def _read_older(self, snap: Mapping[str, Any], fail: Callable[[str], SnapshotError]) -> dict[str, Any]:
        """A snapshot taken under another version of the table, as this one reads it, or refused by name."""
        version = snap["version"]
        if type(version) is not int or version < 1:
            raise fail(f"version {shown(version)} is not a positive integer")
        shape = Shape.from_json(self.name, version, snap["shape"])
        if shape is None:
            raise fail("its shape is not a shape (data, states and codecs, by name and type)")
        state = snap["state"]
        if not isinstance(state, str) or state not in shape.states:
            raise fail(f"state {shown(state)} is not one of the states its shape records")
        if not isinstance(snap["data"], dict) or not isinstance(snap["state_data"], dict):
            raise fail("data and state_data must be JSON objects")
        # Values that are not the fields their own shape records would be filled or dropped without a word.
        unrecorded = values_unlike_shape(snap["data"], shape.data, "data") or values_unlike_shape(
            snap["state_data"], shape.states[state], "state_data"
        )
        if unrecorded is not None:
            raise fail(unrecorded)
        verdict = plan(self.spec, shape, self.codec_versions, state)
        if not verdict.ok:
            listed = verdict.problems[:_PROBLEMS_SHOWN]
            more = len(verdict.problems) - len(listed)
            raise IncompatibleSnapshot(
                f"{self.name}: refusing snapshot taken under version {version}: this table cannot read it: "
                + "; ".join(listed)
                + (f"; and {more} more" if more else "")
                + ("" if self.spec.migrations else " (and the table declares no migrations)"),
                verdict.problems[:_PROBLEMS_KEPT],
            )
        run = MigratingRun(state, dict(snap["state_data"]), dict(snap["data"]))
        try:
            run = migrate_run(run, verdict.steps, self.registry.migrations.__getitem__)
        except Exception as err:  # a registered transform failed: say which, never what it held
            names = ", ".join(m.transform for m in verdict.steps if m.transform)
            raise fail(f"migration transform {names} failed ({type(err).__name__})") from None
        if not isinstance(run, MigratingRun) or not isinstance(run.data, dict) or not isinstance(run.state_data, dict):
            raise fail("a migration transform returned something other than a run")
        if not isinstance(run.state, str) or run.state not in self.spec.states:
            raise fail(f"after migration its state {shown(run.state)} does not exist")
        data = dict(run.data)
        for name, f in self.spec.data.items():
            if name not in data:
                data[name] = self.data_encoders[name](default_value(f))
        state_data = dict(run.state_data)
        for name, f in self.spec.states[run.state].data.items():
            if name not in state_data and (f.default is not MISSING or f.list or f.nullable):
                state_data[name] = self.state_encoders[run.state][name](default_value(f))
        return {"state": run.state, "state_data": state_data, "data": data}

    def _compile_validators(self) -> tuple[Any, dict[str, Any]]:
        """Validators generated from the YAML's field types and compiled to Python once (fastjsonschema).

        Restoring a 100-message brain must not cost what interpreting a schema
        per node costs; compiling them is left to the first restore.
        """
        spec, codecs = self.spec, self._codecs
        self._validators = (
            fields_validator(spec.data, codecs),
            {s.name: fields_validator(s.data, codecs) for s in spec.states.values() if s.data},
        )
        return self._validators

    def __repr__(self) -> str:
        return f"<CompiledMachine {self.name} {self.fingerprint}>"


# A snapshot's shape is untrusted input: a refusal names its first problems, not ten thousand of them.
_PROBLEMS_SHOWN = 10
_PROBLEMS_KEPT = 100

_ENVELOPE = ("format", "machine", "version", "fingerprint", "shape", "state", "state_data", "data")
#: The keys of every snapshot ``snapshot()`` writes, in order (the review sheet lists them).
SNAPSHOT_KEYS = _ENVELOPE
_ENVELOPE_1 = ("format", "machine", "fingerprint", "state", "state_data", "data")  # before shapes were recorded


def _feed_method(event: str, doc: str) -> Callable[..., Any]:
    def method(self: Any, *args: Any, policy: Any = None, **kwargs: Any) -> Any:
        return self.feed(event, *args, policy=policy, **kwargs)

    method.__name__ = event
    method.__doc__ = doc
    return method


def compile_spec(
    spec: Spec, registry: Registry | None = None, *, base: type | None = None, bind: type | None = None
) -> CompiledMachine:
    """Compile a checked spec.

    ``base`` is a class with a typed API the instance class should have (it
    defaults to the class the registry's machine declares, so an edited copy
    of a shipped machine keeps its typed methods); ``bind`` makes a declared
    class the instance class itself.
    """
    reg = registry if registry is not None else registry_named(spec.registry)
    if base is None and bind is None:
        base = reg.instance_class
    return CompiledMachine(spec, reg, base, bind)


def compile_file(
    path: str | Path, registry: Registry | None = None, *, base: type | None = None, bind: type | None = None
) -> CompiledMachine:
    """Load, check and compile a machine file in one call."""
    spec = load(path, registry)
    return compile_spec(spec, registry, base=base, bind=bind)
