"""``@dataclass`` that writes a class's methods the first time the class is used, not when it is defined.

The standard decorator writes ``__init__``, ``__repr__``, ``__eq__``,
``__hash__`` (and, for a frozen class, ``__setattr__`` and ``__delattr__``) as
source text and compiles each with ``exec``: about a millisecond per class on
a modest machine, and loopfsm defines dozens of value classes that most
processes never build (stream results, breaker answers, the brain's steps).
Here the decorator only leaves a placeholder for each attribute the standard
one would add.  The first lookup of any of them (building an instance,
comparing, ``repr``, ``dataclasses.fields``, ``is_dataclass``, a ``match``
statement, ``help``) removes the placeholders and runs the standard decorator
on a copy of the class body with the same options and puts what it made on
the class, so from then on the class is what ``@dataclasses.dataclass`` would
have made (a frozen class's ``__setattr__`` and ``__delattr__`` are written
here, the decorator's two lines, since the decorator's name the copy).

Options the deferral cannot keep apart from the class's identity (``slots``,
which makes a new class) and bases with ``__init_subclass__`` hooks (the copy
would run them twice) get the standard decorator at once.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast, dataclass_transform, overload

T = TypeVar("T", bound=type)

# Every attribute ``dataclasses.dataclass`` may add to a class (3.11 and later).
_MADE = (
    "__init__",
    "__repr__",
    "__eq__",
    "__hash__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
    "__setattr__",
    "__delattr__",
    "__match_args__",
    "__dataclass_fields__",
    "__dataclass_params__",
)

_lock = threading.RLock()  # materializing a class may materialize its bases first


class _Plan:
    """One deferred class: its body as written, the decorator's options, the names standing in."""

    __slots__ = ("cls", "namespace", "options", "names", "done")

    def __init__(self, cls: type, options: dict[str, Any]):
        self.cls = cls
        self.options = options
        self.namespace = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
        self.namespace["__qualname__"] = cls.__qualname__
        self.names: list[str] = []
        self.done = False


class _Pending:
    """A placeholder: looking it up makes the class for real, then answers as the real class does."""

    __slots__ = ("plan", "name")

    def __init__(self, plan: _Plan, name: str):
        self.plan, self.name = plan, name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        _materialize(self.plan)
        # Answer exactly as the real attribute's own descriptor protocol would for this (obj, owner):
        # callers such as 3.13's inspect.signature bind through __get__(cls, type) themselves.
        for klass in self.plan.cls.__mro__:
            if self.name in klass.__dict__:
                real = klass.__dict__[self.name]
                get = getattr(type(real), "__get__", None)
                return real if get is None else get(real, obj, owner)
        raise AttributeError(self.name)


def _materialize(plan: _Plan) -> None:
    """Run the standard decorator on a copy of the class body, then move what it made onto the class.

    Each placeholder is replaced in one assignment, so another thread never
    finds an attribute missing: it finds a placeholder and waits on the lock,
    or finds the real thing.
    """
    with _lock:
        if plan.done:
            return
        cls = plan.cls
        model: type = dataclasses.dataclass(type(cls.__name__, cls.__bases__, dict(plan.namespace)), **plan.options)
        made = model.__dict__
        for name in plan.namespace.get("__annotations__", {}):  # defaults as the decorator leaves them
            if name in made:
                setattr(cls, name, made[name])
            elif name in cls.__dict__:
                delattr(cls, name)
        frozen = _frozen_methods(cls, model) if plan.options.get("frozen") else {}
        for name in plan.names:
            if name in frozen:
                setattr(cls, name, frozen[name])
            elif name in made:
                setattr(cls, name, made[name])
            else:
                delattr(cls, name)
        plan.done = True


def _frozen_methods(cls: type, model: type) -> dict[str, Any]:
    """A frozen dataclass's ``__setattr__`` and ``__delattr__``, for ``cls`` (the decorator's name the copy)."""
    owner: type[Any] = cls
    fields = tuple(f.name for f in dataclasses.fields(model))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is owner or name in fields:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(owner, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is owner or name in fields:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(owner, self).__delattr__(name)

    for fn in (__setattr__, __delattr__):
        fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"
    return {"__setattr__": __setattr__, "__delattr__": __delattr__}


def _defer(cls: T, options: dict[str, Any]) -> T:
    hooks = any("__init_subclass__" in b.__dict__ for b in cls.__mro__[1:] if b is not object)
    if options.get("slots") or options.get("weakref_slot") or hooks:
        return cast(T, dataclasses.dataclass(cls, **options))
    plan = _Plan(cls, options)
    own = cls.__dict__
    for name in _MADE:
        if name not in own:
            setattr(cls, name, _Pending(plan, name))
            plan.names.append(name)
    if not own.get("__doc__"):
        plan.names.append("__doc__")
        cls.__doc__ = _Pending(plan, "__doc__")  # type: ignore[assignment]  # type.__doc__ calls its __get__
    return cls


@overload
def dataclass(cls: T, /) -> T: ...


@overload
def dataclass(
    *,
    init: bool = True,
    repr: bool = True,
    eq: bool = True,
    order: bool = False,
    unsafe_hash: bool = False,
    frozen: bool = False,
    match_args: bool = True,
    kw_only: bool = False,
    slots: bool = False,
) -> Callable[[T], T]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def dataclass(cls: T | None = None, /, **options: Any) -> Any:
    """``dataclasses.dataclass`` with the same options, its method generation deferred to first use."""
    if cls is None:
        return lambda c: _defer(c, options)
    return _defer(cls, options)
