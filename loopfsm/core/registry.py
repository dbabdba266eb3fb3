"""The explicit registry of named guards, actions, results, codecs and errors.

A machine file refers to Python code only by name, and a name resolves only
against a ``Registry`` that Python code built on purpose.  Nothing is ever
imported from a string found in YAML, so a machine file cannot make loopfsm
run code its author did not register.

A guard or action declares its parameters as keyword-only arguments with type
annotations; the checker compares the YAML ``params`` against that signature,
so a typo in a parameter name is caught at load time, not mid-run.
"""

from __future__ import annotations

import builtins
import inspect
import typing
from keyword import iskeyword
from types import FunctionType, GenericAlias, ModuleType
from dataclasses import dataclass
from typing import Any, TypeVar
from collections.abc import Callable, Iterable

from .errors import RegistryError

KINDS = ("guard", "action", "result", "generator")

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Param:
    """One keyword parameter a registered callable takes from the YAML, and whether it must be given."""

    name: str
    type: Any  # a Python type, or Any when unannotated
    required: bool
    values_of: str | None = None  # annotated ``Annotated[..., ValuesOf("arg")]``: names values of that feed argument


@dataclass(frozen=True)
class Entry:
    """One registered callable and the parameters YAML may (or must) give it."""

    kind: str
    name: str
    fn: Callable[..., Any]
    params: dict[str, Param]
    # A guard whose answer depends on nothing but these feed arguments (and its params):
    # for an argument with an enum, each branch list is narrowed per value once.
    reads: frozenset[str] | None = None

    @property
    def doc(self) -> str:
        """The function's docstring, cleaned: read by help texts only, so not at registration."""
        return inspect.cleandoc(self.fn.__doc__ or "")


@dataclass(frozen=True)
class Codec:
    """How a field type that is not plain JSON travels into and out of a snapshot."""

    name: str
    py_type: type | tuple[type, ...]
    to_json: Callable[[Any], Any]
    from_json: Callable[[Any], Any]
    schema: dict[str, Any]
    # Bumped when the JSON a codec writes changes meaning: snapshots record it, and a
    # table whose codec has another version refuses them (a migration's transform converts).
    version: int = 1
    # Values of the type `loopfsm verify` feeds an argument of this type (a few telling ones).
    examples: tuple[Any, ...] = ()


class DataField(str):
    """Annotate a parameter ``field: DataField`` when its YAML value names one of the machine's data fields.

    The checker then refuses a name the machine does not declare when the file
    is loaded, instead of the guard failing at its first call.
    """


@dataclass(frozen=True)
class ValuesOf:
    """Annotate a parameter ``Annotated[list[str], ValuesOf("lane")]`` when its YAML value lists values of the feed's
    argument ``lane``.

    The checker then holds each value to that argument's ``enum`` where the
    guard is used, as it holds a ``when:``: a misspelt value is an error at its
    own line when the file is loaded, instead of a comparison that silently
    never matches.
    """

    arg: str


class StateName(str):
    """Annotate a parameter ``state: StateName`` (or ``states: list[StateName]``) when its YAML value names
    states of the machine.

    The checker then resolves each name as it does a branch's ``to:``: a name
    the machine does not declare is an error at its own line when the file is
    loaded, instead of a comparison that silently never matches.
    """


def _identity(value: Any) -> Any:
    return value


BUILTIN_CODECS: dict[str, Codec] = {
    "integer": Codec("integer", int, _identity, _identity, {"type": "integer"}),
    "boolean": Codec("boolean", bool, _identity, _identity, {"type": "boolean"}),
    "string": Codec("string", str, _identity, _identity, {"type": "string"}),
    "number": Codec("number", (int, float), _identity, _identity, {"type": "number"}),
    "json": Codec("json", object, _identity, _identity, {}),
}


def _params_of(fn: Callable[..., Any], kind: str, name: str) -> dict[str, Param]:
    plain = _plain_params(fn, kind, name)
    if plain is not None:
        return plain
    sig = inspect.signature(fn)
    positional = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) != 2:
        raise _positional_error(kind, name, len(positional))
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # one unresolvable annotation (a TYPE_CHECKING-only import): the others still count
        hints = _hints_one_by_one(fn)
    try:
        extras = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # noqa: BLE001 - as above: without them, no parameter is held to an argument's values
        extras = {}
    out: dict[str, Param] = {}
    for p in sig.parameters.values():
        if p.kind is p.KEYWORD_ONLY:
            marks = getattr(extras.get(p.name), "__metadata__", ())
            values_of = next((m.arg for m in marks if isinstance(m, ValuesOf)), None)
            out[p.name] = Param(p.name, hints.get(p.name, Any), p.default is inspect.Parameter.empty, values_of)
        elif p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            raise _varargs_error(kind, name)
    return out


def _hints_one_by_one(fn: Callable[..., Any]) -> dict[str, Any]:
    """Each annotation evaluated as ``get_type_hints`` would, alone: one that does not resolve is left out (Any)."""
    namespace = getattr(fn, "__globals__", {})
    out: dict[str, Any] = {}
    for key, value in (getattr(fn, "__annotations__", None) or {}).items():
        try:
            out[key] = typing.get_type_hints(_Annotated(key, value), namespace)[key]
        except Exception:  # noqa: BLE001 - this one stays unknown; its neighbours are still checked
            continue
    return out


class _Annotated:
    """An object carrying one annotation, for ``typing.get_type_hints`` to evaluate on its own."""

    def __init__(self, key: str, value: Any):
        self.__annotations__ = {key: value}


def _positional_error(kind: str, name: str, count: int) -> RegistryError:
    return RegistryError(
        f"{kind} '{name}' must take exactly two positional arguments (machine, ctx) "
        f"and its YAML parameters as keyword-only arguments; it takes {count} positional"
    )


def _varargs_error(kind: str, name: str) -> RegistryError:
    return RegistryError(f"{kind} '{name}' may not take *args or **kwargs: its parameters must be declared")


_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08


def _plain_params(fn: Callable[..., Any], kind: str, name: str) -> dict[str, Param] | None:
    """What ``_params_of`` finds, read straight off a plain function; None for anything else.

    ``inspect.signature`` and ``typing.get_type_hints`` cost about as much as
    the rest of registering a function, and every registry a process imports
    registers dozens.  For a plain function (no ``__wrapped__``, no
    ``__signature__``) whose annotations are bare names of classes (``int``,
    ``DataField``, or a missing name, which makes every hint unknown just as
    ``get_type_hints`` failing does) the answer comes from the code object
    and one dictionary lookup per annotation; anything else takes the general path.
    """
    if type(fn) is not FunctionType or hasattr(fn, "__wrapped__") or "__signature__" in fn.__dict__:
        return None
    if getattr(fn, "__no_type_check__", None):
        return None
    hints = _plain_hints(fn)
    if hints is None:
        return None
    code = fn.__code__
    if code.co_argcount != 2:
        raise _positional_error(kind, name, code.co_argcount)
    names = code.co_varnames[2 : 2 + code.co_kwonlyargcount]
    if code.co_flags & (_CO_VARARGS | _CO_VARKEYWORDS):
        raise _varargs_error(kind, name)
    defaults = fn.__kwdefaults__ or {}
    return {n: Param(n, hints.get(n, Any), n not in defaults) for n in names}


def _plain_hints(fn: FunctionType) -> dict[str, Any] | None:
    """The hints ``get_type_hints`` would find, when every annotation is a bare class name (else None);
    a name that does not resolve (a TYPE_CHECKING-only import) is left out, the others kept."""
    namespace = fn.__globals__
    hints: dict[str, Any] = {}
    for key, value in fn.__annotations__.items():
        if value is None or value == "None":
            hints[key] = type(None)
            continue
        if isinstance(value, str):
            if not value.isidentifier() or iskeyword(value):
                return None
            if value in namespace:
                value = namespace[value]
            else:
                found = namespace.get("__builtins__", builtins)
                table = found.__dict__ if isinstance(found, ModuleType) else found
                if value not in table:
                    continue  # this one stays unknown (Any); its neighbours are still checked
                value = table[value]
        if not isinstance(value, type) or isinstance(value, GenericAlias) or value in (typing.Generic, typing.Protocol):
            return None
        hints[key] = value
    return hints


class Registry:
    """Named guards, actions, results, codecs and error classes for one family of machines."""

    def __init__(self, name: str):
        self.name = name
        self.entries: dict[str, dict[str, Entry]] = {k: {} for k in KINDS}
        self.codecs: dict[str, Codec] = dict(BUILTIN_CODECS)
        self.errors: dict[str, type] = {}
        self.migrations: dict[str, Callable[..., Any]] = {}
        # The typed instance class declared for this registry's machine, if any
        # (set by ``class X(MachineInstance, machine=..., registry=...)``).
        self.instance_class: type | None = None

    def _register(self, kind: str, fn: F | None, name: str | None, reads: frozenset[str] | None = None) -> Any:
        def add(f: Callable[..., Any]) -> Callable[..., Any]:
            if not callable(f):
                raise RegistryError(f"registry '{self.name}': a {kind} is a callable, got {type(f).__name__}")
            key = name or getattr(f, "__name__", None)
            if name is not None and (not isinstance(name, str) or not name.isidentifier() or iskeyword(name)):
                raise RegistryError(
                    f"registry '{self.name}': {kind} name {name!r} is not a Python identifier (YAML names it)"
                )
            if not isinstance(key, str) or not key.isidentifier() or iskeyword(key):
                what = "a lambda" if key == "<lambda>" else f"a {type(f).__name__}"
                raise RegistryError(
                    f"registry '{self.name}': a {kind} is named in YAML by a Python identifier, "
                    f"and {what} has none: register it with name=..."
                )
            if key in self.entries[kind]:
                raise RegistryError(f"registry '{self.name}': {kind} '{key}' is registered twice")
            self.entries[kind][key] = Entry(kind, key, f, _params_of(f, kind, key), reads)
            return f

        return add(fn) if fn is not None else add

    def guard(self, fn: F | None = None, *, name: str | None = None, reads: tuple[str, ...] | None = None) -> Any:
        """Register ``fn(machine, ctx, **params) -> bool``.

        ``reads=("outcome",)`` promises the answer depends only on those feed
        arguments and the guard's params, never on the machine: for a feed whose
        argument is an enum, the branches are then narrowed once per value
        instead of asking the guard on every feed.
        """
        if reads is not None and (isinstance(reads, str) or not all(isinstance(r, str) for r in reads)):
            raise RegistryError(f"registry '{self.name}': reads= takes a tuple of argument names, got {reads!r}")
        return self._register("guard", fn, name, None if reads is None else frozenset(reads))

    def action(self, fn: F | None = None, *, name: str | None = None) -> Any:
        """Register ``fn(machine, ctx, **params)``; it may mutate the machine's data and ``ctx.enter``."""
        return self._register("action", fn, name)

    def result(self, fn: F | None = None, *, name: str | None = None) -> Any:
        """Register ``fn(machine, ctx, **params) -> value``, the answer of a decision rule."""
        return self._register("result", fn, name)

    def generator(self, fn: F | None = None, *, name: str | None = None) -> Any:
        """Register ``fn(machine, ctx, **params) -> iterable``: values ``loopfsm verify`` feeds an argument.

        An argument's ``verify: {generator: name}`` in the YAML names it; it is
        called in every configuration explored, with ``ctx.policy`` and
        ``ctx.clock`` (the largest time fed so far), and must not change the
        machine.  It never runs outside verify and paths (replay feeds what the trace holds).
        """
        return self._register("generator", fn, name)

    def codec(
        self,
        name: str,
        py_type: type | tuple[type, ...],
        to_json: Callable[[Any], Any],
        from_json: Callable[[Any], Any],
        schema: dict[str, Any] | None = None,
        version: int = 1,
        *,
        examples: Iterable[Any] = (),
    ) -> None:
        """Register a field type: ``version`` is recorded in snapshots (bump it when the JSON changes meaning);
        ``examples`` are values of it that ``loopfsm verify`` feeds an argument of it."""
        if name in self.codecs:
            raise RegistryError(f"registry '{self.name}': codec '{name}' is registered twice")
        if not isinstance(name, str) or not name.isidentifier():
            raise RegistryError(f"registry '{self.name}': a codec is named in YAML by an identifier, got {name!r}")
        types = py_type if isinstance(py_type, tuple) else (py_type,)
        if not types or not all(isinstance(t, type) for t in types):
            raise RegistryError(
                f"registry '{self.name}': codec '{name}' needs a Python type (or a tuple of them), got {py_type!r}"
            )
        if not (callable(to_json) and callable(from_json)):
            raise RegistryError(f"registry '{self.name}': codec '{name}' needs callables to_json and from_json")
        if schema is not None and not isinstance(schema, dict):
            raise RegistryError(f"registry '{self.name}': codec '{name}' schema is a JSON Schema object (a dict)")
        if type(version) is not int or version < 1:
            raise RegistryError(
                f"registry '{self.name}': codec '{name}' version is a positive integer, got {version!r}"
            )
        samples = tuple(examples) if not isinstance(examples, (str, bytes)) else (examples,)
        for sample in samples:
            if not isinstance(sample, types):
                raise RegistryError(
                    f"registry '{self.name}': codec '{name}' example of type {type(sample).__name__} "
                    f"is not a {' or '.join(t.__name__ for t in types)}"
                )
        self.codecs[name] = Codec(name, py_type, to_json, from_json, schema or {}, version, samples)

    def migration(self, fn: Callable[..., Any] | None = None, *, name: str | None = None) -> Any:
        """Register ``fn(run: MigratingRun) -> MigratingRun | None``, named by a ``migrations:`` entry's ``transform``.

        It converts what a table cannot say (a value retyped, a field computed
        from others); it runs after that entry's renames and defaults, and what
        it leaves is checked against the new table like any snapshot.
        """

        def add(f: Callable[..., Any]) -> Callable[..., Any]:
            key = name or getattr(f, "__name__", None)
            if not callable(f) or not isinstance(key, str) or not key.isidentifier() or iskeyword(key):
                raise RegistryError(
                    f"registry '{self.name}': a migration is a named callable (register a lambda with name=...)"
                )
            if key in self.migrations:
                raise RegistryError(f"registry '{self.name}': migration '{key}' is registered twice")
            self.migrations[key] = f
            return f

        return add(fn) if fn is not None else add

    def error(self, cls: type, name: str | None = None) -> type:
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise RegistryError(f"registry '{self.name}': an error class is an exception class, got {cls!r}")
        key = name or cls.__name__
        if key in self.errors and self.errors[key] is not cls:
            raise RegistryError(f"registry '{self.name}': error class '{key}' is registered twice")
        self.errors[key] = cls
        return cls

    def get(self, kind: str, name: str) -> Entry:
        try:
            return self.entries[kind][name]
        except KeyError:
            raise RegistryError(f"registry '{self.name}' has no {kind} named '{name}'") from None

    def __repr__(self) -> str:
        counts = ", ".join(f"{len(v)} {k}s" for k, v in self.entries.items())
        return f"<Registry {self.name}: {counts}>"


EMPTY = Registry("empty")
