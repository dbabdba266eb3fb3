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

Building instances is the one use that does not need the rest: a machine
file loaded from the spec cache builds hundreds of values of a dozen classes
and never compares or prints one.  So for a plain class (no base, no
``__post_init__``, no ``InitVar``/``ClassVar``/keyword-only fields) the
first instance gets an ``__init__`` that binds the fields the way the
standard one does, without generating code; any call it cannot bind exactly
(a missing or unknown argument) is handed to the standard ``__init__``, so
errors read the same, and every other use makes the class for real, as does
the thousandth instance (a class built that often is on a hot path, where the
generated ``__init__`` is faster).

Options the deferral cannot keep apart from the class's identity (``slots``,
which makes a new class) and bases with ``__init_subclass__`` hooks (the copy
would run them twice) get the standard decorator at once.
"""

from __future__ import annotations

import dataclasses
import threading
from types import MethodType
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

# Made only with an option set: no placeholder otherwise (one for ``__setattr__`` would make every
# assignment to an instance of a plain class build the class).
_ONLY_IF = {
    "__setattr__": "frozen",
    "__delattr__": "frozen",
    "__lt__": "order",
    "__le__": "order",
    "__gt__": "order",
    "__ge__": "order",
}

_lock = threading.RLock()  # materializing a class may materialize its bases first


class _Plan:
    """One deferred class: its body as written, the decorator's options, the names standing in."""

    __slots__ = ("cls", "namespace", "options", "names", "done", "fast")

    def __init__(self, cls: type, options: dict[str, Any]):
        self.cls = cls
        self.options = options
        self.namespace = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
        self.namespace["__qualname__"] = cls.__qualname__
        self.names: list[str] = []
        self.done = False
        self.fast: Callable[..., None] | None | bool = False  # False: not yet looked at


class _Pending:
    """A placeholder: looking it up makes the class for real, then answers as the real class does."""

    __slots__ = ("plan", "name")

    def __init__(self, plan: _Plan, name: str):
        self.plan, self.name = plan, name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        # An instance being built (3.13's inspect asks with the class itself as ``obj``).
        if self.name == "__init__" and isinstance(obj, self.plan.cls):
            fast = _fast_init(self.plan)
            if fast is not None:
                return MethodType(fast, obj)
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


_NO: Any = object()

# A class whose instances are built more often than this is made for real (its standard methods
# generated): a load from the spec cache builds a few hundred of its busiest class, a run may
# build one per feed, where the generated __init__ beats this generic one.
PLAIN_INIT_CALLS = 1000


def _fast_init(plan: _Plan) -> Callable[..., None] | None:
    """An ``__init__`` binding the fields as the standard one would, put on the class; None if it could differ."""
    with _lock:
        if plan.fast is False:
            plan.fast = None if plan.done else _plain_init(plan)
            if plan.fast is not None:
                plan.cls.__init__ = plan.fast  # type: ignore[misc]
                # inspect.signature(cls) asks for this first: it makes the class, which then answers.
                plan.cls.__signature__ = _Pending(plan, "__signature__")  # type: ignore[attr-defined]
                plan.names.append("__signature__")
        return plan.fast if not plan.done and callable(plan.fast) else None


def _plain_init(plan: _Plan) -> Callable[..., None] | None:
    cls, ns, options = plan.cls, plan.namespace, plan.options
    if cls.__bases__ != (object,) or not options.get("init", True) or options.get("kw_only"):
        return None
    if "__post_init__" in ns or "__slots__" in ns or "__setattr__" in ns:
        return None
    names: list[str] = []
    defaults: dict[str, tuple[Any, bool]] = {}  # name -> (value or factory, is a factory)
    for name, hint in ns.get("__annotations__", {}).items():
        if isinstance(hint, str):
            if any(word in hint for word in ("ClassVar", "InitVar", "KW_ONLY")):
                return None
        elif not isinstance(hint, type) or hint is dataclasses.KW_ONLY:
            return None
        value = ns.get(name, _NO)
        if isinstance(value, dataclasses.Field):
            if not value.init or value.kw_only is True:
                return None
            if value.default is not dataclasses.MISSING:
                defaults[name] = (value.default, False)
            elif value.default_factory is not dataclasses.MISSING:
                defaults[name] = (value.default_factory, True)
        elif value is not _NO:
            if hasattr(type(value), "__get__") or type(value).__hash__ is None:
                return None  # a descriptor or a mutable default: the standard decorator's own handling
            defaults[name] = (value, False)
        if name not in defaults and defaults:
            return None  # a required field after a default: the standard decorator refuses the class
        names.append(name)
    fields, count = tuple(names), len(names)
    tails = [fields[k:] for k in range(count + 1)]
    left = [PLAIN_INIT_CALLS]  # instances this binder still builds before the class is made for real

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        left[0] -= 1
        if left[0] < 0:  # a class built this often is on a hot path: the generated __init__ is faster
            return _standard_init(plan, self, args, kwargs)
        given = len(args)
        if given == count and not kwargs:
            self.__dict__.update(zip(fields, args, strict=True))
            return None
        if given > count:
            return _standard_init(plan, self, args, kwargs)
        values = list(args)
        used = 0
        for name in tails[given]:
            if name in kwargs:
                values.append(kwargs[name])
                used += 1
            else:
                found = defaults.get(name)
                if found is None:
                    return _standard_init(plan, self, args, kwargs)
                values.append(found[0]() if found[1] else found[0])
        if used != len(kwargs):
            return _standard_init(plan, self, args, kwargs)
        self.__dict__.update(zip(fields, values, strict=True))
        return None

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


def _standard_init(plan: _Plan, obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """A call the plain ``__init__`` cannot bind exactly: the standard one binds it, or raises its own error."""
    _materialize(plan)
    plan.cls.__init__(obj, *args, **kwargs)  # type: ignore[misc]


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
        if name in _ONLY_IF and not options.get(_ONLY_IF[name]):
            continue  # never added without that option, so attribute assignment stays plain
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
