"""loopfsm's value classes are standard dataclasses, complete from the moment they are defined."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import subprocess
import sys
from typing import Any

import pytest

# Run in a fresh interpreter, so no class has been built, compared or printed before it is looked at.
SURVEY = """
import dataclasses, importlib, inspect, json, pkgutil
import loopfsm
from loopfsm.machines.router_client import RouterClient
from loopfsm.machines.router_run import RouterRun
from loopfsm.machines.run_lock import RunLock
import loopfsm.machines as m

names = [i.name for i in pkgutil.walk_packages(loopfsm.__path__, "loopfsm.") if not i.name.endswith("__main__")]
classes = []
for name in names:
    module = importlib.import_module(name)
    classes += [v for v in vars(module).values() if isinstance(v, type) and v.__module__ == name]
machines = [getattr(m, n) for n in m.__all__ if hasattr(getattr(m, n), "compiled")]
classes += [c.compiled.Policy for c in machines + [RouterClient, RouterRun, RunLock]]
# Read each class's own attributes before anything else touches the class.
own = {f"{c.__module__}.{c.__qualname__}": dict(vars(c)) for c in classes if "__dataclass_fields__" in vars(c)}
not_made = sorted(
    name
    for name, attrs in own.items()
    if not isinstance(attrs["__dataclass_fields__"], dict)
    or not all(isinstance(f, dataclasses.Field) for f in attrs["__dataclass_fields__"].values())
    or not all(inspect.isfunction(attrs[k]) for k in ("__init__", "__repr__", "__eq__") if k in attrs)
)
print(json.dumps({"count": len(own), "not_made": not_made}))
"""


@pytest.mark.slow
def test_every_value_class_is_a_whole_standard_dataclass_before_its_first_use(tmp_path: Any) -> None:
    env = {**os.environ, "LOOPFSM_CACHE_DIR": str(tmp_path)}
    for _ in range(2):  # the first run fills the spec cache; the second loads every machine from it
        run = subprocess.run([sys.executable, "-c", SURVEY], env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        survey = json.loads(run.stdout)
        assert survey["not_made"] == []
        assert survey["count"] >= 60  # the value, result, error and policy classes of every module and machine


def test_a_policy_class_is_what_make_dataclass_makes() -> None:
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
