"""A standard-library-only check of ``loopfsm/lazyclass.py``, to run under any CPython.

The deferral leans on how the interpreter looks attributes up (``__get__`` on
placeholders, ``inspect.signature``'s way through a class), which changes
between versions.  ``python lazyclass_check.py path/to/lazyclass.py`` loads the
module from its file (no loopfsm, no third-party package needed), compares
deferred classes with ``@dataclasses.dataclass`` ones, and prints ``ok``.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import inspect
import pickle
import sys
from typing import Any


def load(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("lazyclass_under_check", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def twins(lazy: Any, options: dict[str, Any], doc: bool = True, module: str = __name__) -> tuple[type, type]:
    """The same class body decorated by the standard decorator and by the deferred one."""

    def make(decorate: Any) -> type:
        ns: dict[str, Any] = {
            "__annotations__": {"x": "int", "tags": "list[str]", "y": "str"},
            "tags": dataclasses.field(default_factory=list),
            "y": "why",
            "__module__": module,
            "__qualname__": "Point",
        }
        if doc:
            ns["__doc__"] = "A point."
        return decorate(**options)(type("Point", (), ns))

    return make(dataclasses.dataclass), make(lazy)


CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((1,), {}),
    ((1, ["a"], "z"), {}),
    ((), {"x": 2, "y": "q"}),
    ((5,), {"tags": ["t"]}),
    ((), {}),
    ((1,), {"z": 0}),
    ((1, [], "", 4), {}),
    ((1,), {"x": 1}),
]


def outcome(cls: type, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    try:
        return vars(cls(*args, **kw))
    except TypeError as err:
        return str(err)


def check(lazy: Any) -> None:
    for options in ({}, {"frozen": True}, {"frozen": True, "order": True}, {"eq": False}):
        # Introspection before any instance: the class is made and answers as the standard one.
        std, ours = twins(lazy, options)
        assert not inspect.isfunction(ours.__dict__["__init__"]), options
        assert str(inspect.signature(ours)) == str(inspect.signature(std)), options
        assert [f.name for f in dataclasses.fields(ours)] == ["x", "tags", "y"], options
        # Instances first: each call shape binds (or fails) exactly as the standard __init__.
        for args, kw in CALLS:
            std, ours = twins(lazy, options)
            assert outcome(ours, args, kw) == outcome(std, args, kw), (options, args, kw)
        std, ours = twins(lazy, options)
        a = ours(1)
        assert str(inspect.signature(ours)) == str(inspect.signature(std)), options  # after the plain __init__
        assert repr(a) == repr(std(1)) and (a == ours(1)) == (std(1) == std(1)), options
        assert repr(copy.deepcopy(a)) == repr(a), options
        if options.get("frozen"):
            assert hash(ours(1, ())) == hash(std(1, ()))
            try:
                a.x = 2  # type: ignore[attr-defined]
            except dataclasses.FrozenInstanceError:
                pass
            else:
                raise AssertionError("a frozen instance took an assignment")
        if options.get("order"):
            assert ours(1) < ours(2)
    assert pickle.loads(pickle.dumps(Pickled(2, ("a",)))) == Pickled(2, ("a",))


if __name__ == "__main__":
    lazyclass = load(sys.argv[1])

    @lazyclass.dataclass(frozen=True)
    class Pickled:
        n: int
        words: tuple[str, ...] = ()

    check(lazyclass.dataclass)
    print("ok", ".".join(map(str, sys.version_info[:3])))
