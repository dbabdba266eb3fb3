"""Compiling a checked spec, once, into everything instances share.

The compiler's output is the only place Python meets the table: per feed, a
:class:`~loopfsm.core.backend.Feed` holding its branches with the registered guards
and actions they name (bound to their YAML parameters per policy object by
:mod:`loopfsm.core.binding`), a policy class whose defaults are the YAML's, a data class whose fields are the
YAML's, argument binders per feed, decision chains flattened per state, and the
codecs and validators snapshots go through.  None of it is rebuilt per instance.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import itertools
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar
from collections.abc import Callable

from .backend import Branch, Feed
from .binding import Bound, Call, Guard, PerPolicy, bind, bind_guard, call_of, condition_of, guard_of
from .errors import FeedArgumentError, FeedRefused, PolicyError, RegistryError, SnapshotError, shown, shown_fingerprint
from .fieldtypes import INT_MAX, INT_MIN, default_value, json_schema, policy_value_problem, python_checker
from .loader import load
from .registries import registry_named
from .registry import Codec, Registry
from .runtime import SNAPSHOT_FORMAT, Binder, MachineInstance
from .spec import MISSING, FieldDef, Spec
from . import tracing as _tracing
from .tracing import branch_name, compile_attributes

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


def _converter(f: FieldDef, one: Callable[[Any], Any], codec: Codec) -> Callable[[Any], Any]:
    """Lift a codec's per-value function (to or from JSON) over the field's nullability and list-ness."""
    if codec.name == "json":
        one = copy.deepcopy  # snapshots must never alias an instance's mutable JSON values
    if f.nullable:
        inner = one
        one = lambda v: None if v is None else inner(v)  # noqa: E731
    if f.list:
        return lambda v: [one(x) for x in v]
    return one


def _encoder(f: FieldDef, codec: Codec, machine: str) -> Callable[[Any], Any]:
    """To JSON, after holding the value to the field's declaration: an action may have set anything,
    and a snapshot its own restore would refuse must not be taken at all."""
    convert = _converter(f, codec.to_json, codec)
    ok = python_checker(f, codec)

    def encode(value: Any) -> Any:
        if not ok(value):
            raise SnapshotError(
                f"{machine}: cannot snapshot: field '{f.name}' holds {shown(value)}, "
                f"which is not {_what(f, value)}{_bounds_text(f)} (an action set it)"
            )
        return convert(value)

    return encode


def _what(f: FieldDef, value: Any) -> str:
    what = f"a list of {f.type} values" if f.list else f"{'an' if f.type[0] in 'aeiou' else 'a'} {f.type}"
    return what + (" (signed 64-bit)" if type(value) is int and not INT_MIN <= value <= INT_MAX else "")


def _decoder(f: FieldDef, codec: Codec, machine: str) -> Callable[[Any], Any]:
    """From JSON, then held to the field's declaration in Python terms: the schema check before it
    takes ``1.0`` for an integer and lets NaN into a json field; this does not, so a restored
    instance holds only values a feed could have produced."""
    convert = _converter(f, codec.from_json, codec)
    ok = python_checker(f, codec)

    def decode(value: Any) -> Any:
        out = convert(value)
        if not ok(out):
            raise SnapshotError(
                f"{machine}: refusing snapshot: field '{f.name}' holds {shown(value)}, "
                f"which is not {_what(f, out)}{_bounds_text(f)}"
            )
        return out

    return decode


def _limits(f: FieldDef) -> list[str]:
    """A field's bounds in words (``at least 0``, ``at most 9``): what a refused value is told it missed."""
    return ([f"at least {f.minimum}"] if f.minimum is not None else []) + (
        [f"at most {f.maximum}"] if f.maximum is not None else []
    )


def _bounds_text(f: FieldDef) -> str:
    parts = _limits(f)
    enum = [f"one of {', '.join(map(repr, f.enum))}"] if f.enum else []
    extra = parts + enum + (["or None"] if f.nullable else [])
    return f" ({', '.join(extra)})" if extra else ""


def _fields_schema(fields: dict[str, FieldDef], codecs: dict[str, Codec]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": sorted(fields),
        "additionalProperties": False,
        "properties": {n: json_schema(f, codecs[f.type]) for n, f in fields.items()},
    }


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
            for (n, check), v in zip(pairs, pos, strict=True):
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
                limits = ([f"one of {', '.join(map(repr, f.enum))}"] if f.enum else []) + _limits(f)
                choices = f" ({', '.join(limits)})" if limits else ""
                wide = " (signed 64-bit)" if type(v) is int and not INT_MIN <= v <= INT_MAX else ""
                wide += " (finite)" if type(v) is float and not math.isfinite(v) else ""
                raise FeedArgumentError(
                    f"{machine}: {what} '{event}' argument '{n}' must be {'a list of ' if f.list else ''}"
                    f"{f.type}{choices}{' or None' if f.nullable else ''}{wide}, got {type(v).__name__} {shown(v)}"
                )
        return bound

    return bind


_INT64 = range(INT_MIN, INT_MAX + 1)  # ``v in _INT64`` is O(1) for an int


def _feed_binder(general: Callable[..., dict[str, Any]], args: dict[str, FieldDef], codecs: dict[str, Codec]) -> Binder:
    """A feed's binder with the argument types it can accept by their exact types alone.

    ``tuple(map(type, args)) in signatures`` is one C-level test for the common
    call (plain ``int`` / ``str`` / ``None`` values); an argument with an enum
    keeps a set-membership test on top, one with bounds its full check.  Lists,
    JSON and anything whose type does not settle the question take the general
    binder (signatures is None).
    """
    per_arg: list[tuple[type, ...]] = []
    value_checks: list[tuple[int, Callable[[Any], bool]]] = []
    for i, f in enumerate(args.values()):
        codec = codecs[f.type]
        py = codec.py_type if isinstance(codec.py_type, tuple) else (codec.py_type,)
        if f.list or codec.name == "json" or object in py:
            return Binder(general, tuple(args), None, ())
        per_arg.append((*py, type(None)) if f.nullable else py)
        if f.enum is not None and f.minimum is None and f.maximum is None:
            value_checks.append((i, frozenset((*f.enum, *((None,) if f.nullable else ()))).__contains__))
        elif f.minimum is None and f.maximum is None and py == (int,) and not f.nullable:
            value_checks.append((i, _INT64.__contains__))  # the exact type is int here: one C-level test
        elif f.minimum is not None or f.maximum is not None or int in py:
            value_checks.append((i, python_checker(f, codec)))  # bounds, and an int's 64-bit range
    if math.prod(len(t) for t in per_arg) > 64:
        return Binder(general, tuple(args), None, ())
    return Binder(general, tuple(args), frozenset(itertools.product(*per_arg)), tuple(value_checks))


_T = TypeVar("_T")


class _made_on_first_use(Generic[_T]):
    """``functools.cached_property``, storing the value as an ordinary attribute.

    ``cached_property`` writes through the instance's ``__dict__``, and once an
    object's ``__dict__`` has been asked for, CPython (3.11) stops specialising
    attribute loads on it: every ``compiled.feed_table`` a feed reads would take
    the generic lookup.  Storing through ``object.__setattr__`` keeps the
    instance's attributes where the interpreter reads them fastest.  (Two
    threads asking at once may both compute it; the values are equal.)
    """

    def __init__(self, fn: Callable[[Any], _T]):
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __get__(self, obj: Any, owner: Any = None) -> _T:
        if obj is None:
            return self  # type: ignore[return-value]
        value = self.fn(obj)
        object.__setattr__(obj, self.name, value)
        return value


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
                otherwise_raise=frozenset(all_guarded if ev.otherwise == "raise" else ()),
                enums={
                    n: (*f.enum, *((None,) if f.nullable else ())) for n, f in ev.args.items() if f.enum and not f.list
                },
            )
            self.binders[ev.name] = _make_binder(spec.name, ev.name, ev.args, codecs)
        # What a feed looks up, in one place: its Feed and (None for a feed without arguments) its binder.
        # Keyed by interned names, so a typed method's literal feed name matches by identity.
        self.feed_table: dict[str, tuple[Feed, Binder | None]] = {
            sys.intern(name): (
                self.events[name],
                _feed_binder(self.binders[name], spec.events[name].args, codecs) if spec.events[name].args else None,
            )
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

    @staticmethod
    def _branch(spec: Spec, registry: Registry, event: str, legal: tuple[str, ...], b: Any) -> Branch:
        """A branch of the table with its guards and actions as the YAML names them, ``when:`` conditions first."""
        name = branch_name(event, b.path[3], b.path[4], b.name)
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

    def to_transitions(self, policy: Any = None, machine_class: Any = None, **options: Any) -> Any:
        """A stock ``transitions.Machine`` (or ``machine_class``, an extension of it) running this table.

        Its model's triggers are the feeds; see :mod:`loopfsm.core.transitions_machine`.
        """
        from .transitions_machine import to_transitions

        return to_transitions(self, policy, machine_class, **options)

    # Snapshot codecs per field, made on the first snapshot or restore (most processes do neither).
    @_made_on_first_use
    def data_encoders(self) -> dict[str, Callable[[Any], Any]]:
        return self._per_field(self.spec.data, _encoder)

    @_made_on_first_use
    def data_decoders(self) -> dict[str, Callable[[Any], Any]]:
        return self._per_field(self.spec.data, _decoder)

    @_made_on_first_use
    def state_encoders(self) -> dict[str, dict[str, Callable[[Any], Any]]]:
        return {s.name: self._per_field(s.data, _encoder) for s in self.spec.states.values()}

    @_made_on_first_use
    def state_decoders(self) -> dict[str, dict[str, Callable[[Any], Any]]]:
        return {s.name: self._per_field(s.data, _decoder) for s in self.spec.states.values()}

    def _per_field(
        self, fields: dict[str, FieldDef], make: Callable[[FieldDef, Codec, str], Callable[[Any], Any]]
    ) -> dict[str, Callable[[Any], Any]]:
        return {n: make(f, self._codecs[f.type], self.name) for n, f in fields.items()}

    @_made_on_first_use
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

    def new(self) -> MachineInstance:
        return self.Instance()

    def restore(self, snap: Mapping[str, Any]) -> MachineInstance:
        instance: MachineInstance = self.Instance.restore(snap)
        return instance

    def check_snapshot(self, snap: Any) -> None:
        """Refuse anything that is not a whole, matching snapshot; explain exactly why."""

        def fail(msg: str) -> SnapshotError:
            return SnapshotError(f"{self.name}: refusing snapshot: {msg}")

        if not isinstance(snap, Mapping):
            raise fail(f"expected a JSON object, got {type(snap).__name__}")
        missing = [k for k in _ENVELOPE if k not in snap]
        if missing:
            raise fail(f"missing {', '.join(missing)}")
        extra = [k for k in snap if k not in _ENVELOPE]
        if extra:
            raise fail(f"unknown key {shown(extra[0])} (a snapshot holds exactly {', '.join(_ENVELOPE)})")
        if type(snap["format"]) is not int or snap["format"] != SNAPSHOT_FORMAT:
            raise fail(f"format {shown(snap['format'])} is not the supported format {SNAPSHOT_FORMAT}")
        if snap["machine"] != self.name:
            raise fail(f"it is of machine {shown(snap['machine'])}")
        if snap["fingerprint"] != self.fingerprint:
            raise fail(
                "it was taken under another version of the spec (fingerprint "
                f"{shown_fingerprint(snap['fingerprint'])}, this spec is {shown_fingerprint(self.fingerprint)})"
            )
        if not isinstance(snap["state"], str) or snap["state"] not in self.spec.states:
            raise fail(f"unknown state {shown(snap['state'])}")
        data_validator, state_validators = self._validators or self._compile_validators()
        for where, validator, value in (
            ("data", data_validator, snap["data"]),
            ("state_data", state_validators.get(snap["state"]), snap["state_data"]),
        ):
            detail = _no_fields_problem(value) if validator is None else validator(value)
            if detail is not None:
                detail = detail.replace("data", where, 1)
                raise fail(f"{detail} (in state {shown(snap['state'])})" if where == "state_data" else detail)

    def _compile_validators(self) -> tuple[Any, dict[str, Any]]:
        """Validators generated from the YAML's field types and compiled to Python once (fastjsonschema).

        Restoring a 100-message brain must not cost what interpreting a schema
        per node costs; compiling them is left to the first restore.
        """
        spec, codecs = self.spec, self._codecs
        self._validators = (
            _fields_validator(spec.data, codecs),
            {s.name: _fields_validator(s.data, codecs) for s in spec.states.values() if s.data},
        )
        return self._validators

    def __repr__(self) -> str:
        return f"<CompiledMachine {self.name} {self.fingerprint}>"


_ENVELOPE = ("format", "machine", "fingerprint", "state", "state_data", "data")


def _fields_validator(fields: dict[str, FieldDef], codecs: dict[str, Codec]) -> Callable[[Any], str | None] | None:
    """A checker returning why a value does not fit ``fields`` (None if it does); None when there are no fields."""
    if not fields:
        return None
    import fastjsonschema  # noqa: PLC0415 - only processes that restore pay for it

    try:
        check = fastjsonschema.compile(_fields_schema(fields, codecs))
    except fastjsonschema.JsonSchemaDefinitionException as err:  # a codec's own schema is not one
        used = sorted({f.type for f in fields.values() if codecs[f.type].schema})
        raise RegistryError(
            f"the schema of codec {', '.join(map(repr, used)) or '?'} is not a valid JSON Schema: {err}"
        ) from None

    def problem(value: Any) -> str | None:
        try:
            check(value)
        except fastjsonschema.JsonSchemaException as err:
            return str(getattr(err, "message", err))
        return None

    return problem


def _no_fields_problem(value: Any) -> str | None:
    """What the generated validator would say of a value for an empty field set, without one."""
    if not isinstance(value, dict):
        return "data must be object"
    if value:
        return f"data must not contain {set(value)!r} properties"
    return None


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
