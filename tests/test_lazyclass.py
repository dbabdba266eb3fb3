"""Deferred dataclasses: nothing generated at definition, then exactly what ``dataclasses.dataclass`` makes."""

from __future__ import annotations

import copy
import dataclasses
import glob
import inspect
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import loopfsm.lazyclass
from lazyclass_check import CALLS
from lazyclass_check import twins as _twins
from loopfsm.lazyclass import dataclass as lazy


def twins(options: dict[str, Any], doc: bool = True) -> tuple[type, type]:
    """The same class body decorated by the standard decorator and by the deferred one."""
    return _twins(lazy, options, doc, __name__)


def calls(cls: type) -> list[str]:
    """What each constructor call gives: a repr, or the TypeError's message."""
    out = []
    tries: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((1,), {}),
        ((1, ["a"], "z"), {}),
        ((), {"x": 2, "y": "q"}),
        ((), {}),
        ((1,), {"z": 0}),
        ((1, [], "", 4), {}),
        ((1,), {"x": 1}),
    ]
    for args, kw in tries:
        try:
            out.append(repr(cls(*args, **kw)))
        except TypeError as err:
            out.append(str(err))
    return out


@pytest.mark.parametrize("options", [{}, {"frozen": True}, {"frozen": True, "order": True}, {"eq": False}])
def test_a_deferred_class_behaves_exactly_as_a_standard_dataclass(options: dict[str, Any]) -> None:
    std, ours = twins(options)
    assert not inspect.isfunction(ours.__dict__["__init__"])  # nothing generated yet
    assert str(inspect.signature(ours)) == str(inspect.signature(std))
    assert calls(ours) == calls(std)
    assert [(f.name, f.default, f.default_factory) for f in dataclasses.fields(ours)] == [
        (f.name, f.default, f.default_factory) for f in dataclasses.fields(std)
    ]
    assert ours.__match_args__ == std.__match_args__ == ("x", "tags", "y")
    assert ours.__dataclass_params__.__repr__() == std.__dataclass_params__.__repr__()
    for name in ("__init__", "__repr__", "__eq__", "__hash__", "__lt__"):
        mine, theirs = ours.__dict__.get(name), std.__dict__.get(name)
        assert (mine is None) == (theirs is None), name
        if inspect.isfunction(theirs):
            assert mine.__code__.co_code == theirs.__code__.co_code, name
    a, b = ours(1), ours(1)
    assert a.tags is not b.tags
    assert (a == b) == (std(1) == std(1))
    if options.get("frozen"):
        assert hash(ours(1, ())) == hash(std(1, ()))
        for obj in (a, std(1)):
            with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'x'"):
                obj.x = 2
            with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'y'"):
                del obj.y
            with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'other'"):
                obj.other = 2
        loose = type("Loose", (ours,), {})(1)  # a plain subclass may add attributes, not change fields
        loose.other = 3
        with pytest.raises(dataclasses.FrozenInstanceError):
            loose.x = 2
    assert ("tags" in vars(ours)) == ("tags" in vars(std))
    assert ours.y == std.y == "why"
    if options.get("order"):
        assert ours(1) < ours(2)
    assert repr(copy.deepcopy(a)) == repr(a)


def test_first_use_by_instance_by_match_or_by_introspection_each_makes_the_class() -> None:
    for use in (
        lambda c: c(1),
        lambda c: dataclasses.is_dataclass(c),
        lambda c: c.__match_args__,
        lambda c: c.__doc__,
        lambda c: inspect.signature(c),
    ):
        std, ours = twins({"frozen": True}, doc=False)
        use(ours)
        assert inspect.isfunction(ours.__dict__["__init__"])
        assert ours.__doc__ == std.__doc__  # the signature line the standard decorator writes
        match ours(3):
            case ours(x):  # type: ignore[misc]
                assert x == 3


def test_a_subclass_sees_the_fields_of_a_deferred_base() -> None:
    _, base = twins({"frozen": True})
    sub = dataclasses.dataclass(frozen=True)(
        type("Sub", (base,), {"__annotations__": {"z": "int"}, "z": 0, "__module__": __name__})
    )
    assert [f.name for f in dataclasses.fields(sub)] == ["x", "tags", "y", "z"]
    assert sub(1).z == 0


@lazy(frozen=True)
class Pickled:
    """Module level, so pickle can find it."""

    n: int
    words: tuple[str, ...] = ()


def test_a_deferred_instance_pickles() -> None:
    p = Pickled(2, ("a",))
    assert pickle.loads(pickle.dumps(p)) == p


def test_a_policy_class_is_what_make_dataclass_made_before() -> None:
    from loopfsm.machines import ToolBreakerPolicy, TurnstilePolicy

    for cls in (TurnstilePolicy, ToolBreakerPolicy):
        fields = [(f.name, f.type, dataclasses.field(default=f.default)) for f in dataclasses.fields(cls)]
        ref = dataclasses.make_dataclass(cls.__name__, fields, frozen=True)
        assert str(inspect.signature(cls)) == str(inspect.signature(ref))
        assert repr(cls()) == repr(ref())
        assert cls.__dataclass_params__.__repr__() == ref.__dataclass_params__.__repr__()
        for bad in ({"nope": 1}, {"trip_after": 1, "fare": 1}):
            with pytest.raises(TypeError) as ours:
                cls(**bad)
            with pytest.raises(TypeError) as theirs:
                ref(**bad)
            assert str(ours.value) == str(theirs.value)
        with pytest.raises(dataclasses.FrozenInstanceError):
            cls().x = 1  # type: ignore[attr-defined]


def test_threads_meeting_a_deferred_class_all_get_the_real_one() -> None:
    import threading

    def race(cls: type) -> list[str]:
        start, made = threading.Barrier(6), []

        def build() -> None:
            start.wait()
            try:
                made.append(repr(cls(1)))
            except Exception as err:  # noqa: BLE001 - the test reports any failure
                made.append(f"{type(err).__name__}: {err}")

        threads = [threading.Thread(target=build) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return made

    for _ in range(20):
        assert race(twins({"frozen": True}, doc=False)[1]) == ["Point(x=1, tags=[], y='why')"] * 6


def test_compiled_branches_carry_plans_only_and_snapshot_codecs_wait_for_a_snapshot() -> None:
    from loopfsm.backend import Branch
    from loopfsm.machines import LoopMachine

    compiled = LoopMachine.compiled
    branches = [b for ev in compiled.events.values() for bs in ev.branches.values() for b in bs]
    assert branches and all(isinstance(b, Branch) for b in branches)
    brain = LoopMachine()
    assert LoopMachine.restore(brain.snapshot()).snapshot() == brain.snapshot()
    assert "state_decoders" in vars(compiled)


@pytest.mark.parametrize("options", [{}, {"frozen": True}, {"eq": False}])
def test_building_instances_binds_as_the_standard_init_without_making_the_class(options: dict[str, Any]) -> None:
    for args, kw in CALLS:
        std, ours = twins(options)
        try:
            want: Any = vars(std(*args, **kw))
        except TypeError as err:
            want = str(err)
        try:
            got: Any = vars(ours(*args, **kw))
        except TypeError as err:
            got = str(err)
        assert got == want, (args, kw)
        made = not isinstance(want, str)
        # a call the plain __init__ binds leaves every other method unwritten; a refused one makes the class
        assert inspect.isfunction(ours.__dict__["__repr__"]) is not made, (args, kw)
    std, ours = twins(options)
    a, b = ours(1), ours(1)
    assert a.tags == [] and a.tags is not b.tags  # a factory default runs per instance
    assert type(ours.__dict__.get("__setattr__")).__name__ == ("_Pending" if options.get("frozen") else "NoneType")
    assert str(inspect.signature(ours)) == str(inspect.signature(std))  # asking makes the class
    assert "__signature__" not in vars(ours) and repr(a) == repr(std(1))


def test_a_plain_class_that_may_differ_takes_the_standard_init() -> None:
    for extra in (
        {"__post_init__": lambda self: None},
        {"__annotations__": {"x": "int", "k": "ClassVar[int]"}, "k": 1},
    ):
        ns: dict[str, Any] = {"__annotations__": {"x": "int"}, "__module__": __name__, **extra}
        cls = lazy(frozen=True)(type("P", (), ns))
        cls(1)
        assert inspect.isfunction(cls.__dict__["__repr__"])  # made for real by the first instance


def test_a_spec_from_the_cache_builds_without_making_its_classes(tmp_path: Any) -> None:
    code = (
        "import loopfsm.machines as m, loopfsm.spec as s, inspect\n"
        "m.LoopMachine.compiled\n"
        "print(sorted(c.__name__ for c in (s.Ref, s.FieldDef, s.StateDef, s.Branch, s.EventDef, s.Spec)"
        " if inspect.isfunction(c.__dict__.get('__repr__'))))\n"
    )
    env = {**os.environ, "LOOPFSM_CACHE_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)  # fills the cache
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]"


def _other_pythons() -> list[str]:
    """CPython 3.11+ interpreters besides this one: ``$LOOPFSM_TEST_PYTHONS`` (os.pathsep-separated), then pyenv's."""
    found = [p for p in os.environ.get("LOOPFSM_TEST_PYTHONS", "").split(os.pathsep) if p]
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found += sorted(glob.glob(os.path.join(root, "versions", "3.1[1-9].*", "bin", "python3")))
    here = sys.version_info[:2]
    out, seen = [], {here}
    for exe in found:
        try:
            ver = subprocess.run(
                [exe, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True, timeout=30
            ).stdout.split()
        except (OSError, subprocess.TimeoutExpired):
            continue
        key = tuple(map(int, ver)) if len(ver) == 2 else None
        if key is not None and key >= (3, 11) and key not in seen:
            seen.add(key)
            out.append(exe)
    return out


def test_the_standalone_check_passes_here_and_on_every_other_python_found() -> None:
    """lazyclass leans on how the interpreter looks attributes up, so it is checked on each CPython at hand."""
    script = Path(__file__).with_name("lazyclass_check.py")
    for exe in [sys.executable, *_other_pythons()]:
        run = subprocess.run(
            [exe, str(script), loopfsm.lazyclass.__file__], capture_output=True, text=True, timeout=120
        )
        assert run.returncode == 0 and run.stdout.startswith("ok "), (exe, run.stdout, run.stderr[-2000:])


def test_a_class_built_often_is_made_for_real(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loopfsm.lazyclass, "PLAIN_INIT_CALLS", 3)
    std, ours = twins({"frozen": True})
    built = [ours(i) for i in range(3)]
    assert not inspect.isfunction(ours.__dict__["__repr__"])  # three by the plain binder
    built.append(ours(3, ["t"], y="z"))
    assert inspect.isfunction(ours.__dict__["__repr__"])  # the fourth made the class
    assert [vars(b) for b in built] == [vars(std(i)) for i in range(3)] + [vars(std(3, ["t"], y="z"))]
    assert ours.__dict__["__init__"].__code__.co_code == std.__dict__["__init__"].__code__.co_code
