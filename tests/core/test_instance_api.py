"""One API for every machine: state, state_data, data, can, allowed_feeds, policy=, load_machine, errors."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from typing import Any
from pathlib import Path

import pytest

import loopfsm
from loopfsm import load_machine
from loopfsm.core.errors import FeedArgumentError, LoopFsmError, RegistryError, UnknownFeed
from loopfsm.machines import FallbackBreaker, LoopMachine, ToolBreaker, ToolHealth, Turnstile
from loopfsm.machines.engine_brain import CallLLM, MachinePolicy
from loopfsm.machines.router_client import RouterClient
from loopfsm.machines.turnstile import TurnstilePolicy
from loopfsm.core.registries import known_registries, registry_named

ROOT = Path(__file__).resolve().parents[2]
CLASSES = {
    "turnstile": Turnstile,
    "engine_brain": LoopMachine,
    "tool_breaker": ToolBreaker,
    "fallback_breaker": FallbackBreaker,
    "router_client": RouterClient,
}


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_every_instance_has_the_same_face(name):
    m = CLASSES[name]()
    assert isinstance(m.state, str) and m.state == m.compiled.initial
    assert isinstance(m.state_data, dict) and m.data is not None
    assert m.allowed_feeds() and all(m.can(f) for f in m.allowed_feeds())
    assert not any(m.can(f) for f in m.compiled.events if f not in m.allowed_feeds())
    assert load_machine(name) is CLASSES[name].compiled and load_machine(name).Instance is CLASSES[name]


@pytest.mark.parametrize("name", known_registries())
def test_shipped_classes_declare_every_feed_as_a_typed_method(name):
    """Every installed machine's YAML feeds are real methods of its class (type checkers see them), none generated."""
    cls = registry_named(name).instance_class
    assert cls is not None, f"registry {name} declares no machine class"
    for feed in cls.compiled.events:
        method = getattr(cls, feed)
        assert "_feed_method" not in method.__qualname__, f"{cls.__name__} lacks a typed method for feed '{feed}'"


def test_can_and_allowed_feeds_answer_from_the_table():
    gate = Turnstile()
    assert gate.allowed_feeds() == ("coin", "push")
    assert gate.can("coin", policy={"fare": 2})  # locked: a coin is always accepted (kept as credit)
    brain = LoopMachine()
    assert "tool_results" not in brain.allowed_feeds() and not brain.can("tool_results")
    assert brain.can("accept_input") and brain.can("accept_input", "hi")
    assert not brain.can("accept_input", 42)  # wrong argument type: refused, nothing changed
    brain.accept_input("hi")
    assert not brain.can("begin", CallLLM(5))  # a stale step: no branch's guard holds
    assert brain.can("begin", CallLLM(0))
    assert brain.state == "Start"  # asking ran no action
    with pytest.raises(UnknownFeed):
        brain.can("no_such_feed")


def test_can_on_a_breaker_changes_nothing():
    b = ToolBreaker()
    assert b.can("acquire", 0, "c1")
    assert b.state == "Closed" and b.data.stats == {}


def test_unknown_feed_and_unknown_decision_raise_one_class():
    m = LoopMachine()
    with pytest.raises(UnknownFeed) as feed_err:
        m.feed("next_stepp")
    with pytest.raises(UnknownFeed) as decision_err:
        m.decide("next_stepp")
    assert type(feed_err.value) is type(decision_err.value)
    assert isinstance(feed_err.value, FeedArgumentError)  # still caught where bad calls were caught


def test_policy_rule_is_the_same_everywhere():
    """None uses the YAML defaults; an object or a mapping overrides for one call; always keyword `policy=`."""
    m = LoopMachine()
    m.accept_input("go")
    assert m.next_step() == m.next_step(policy=MachinePolicy()) == m.next_step(policy={}) == CallLLM(0)
    assert type(m.next_step(policy={"max_turns": 0})).__name__ == "Done"
    with pytest.raises(TypeError):
        m.next_step(MachinePolicy())  # type: ignore[misc]  # keyword only, as on every feed
    gate = Turnstile()
    gate.coin(policy=TurnstilePolicy(fare=2))
    assert gate.state == "locked"
    gate.coin(policy={"fare": 2})
    assert gate.state == "unlocked"
    health = ToolHealth()
    permit = health.acquire("t", 0, "c", policy={"trip_after": 1})
    health.record("t", 1, permit, "failure", policy={"trip_after": 1})
    assert health.states == {"t": "Open"}


def test_every_error_class_is_in_errors_and_exported():
    import loopfsm.core.errors as errors

    classes = [v for v in vars(errors).values() if isinstance(v, type) and issubclass(v, LoopFsmError)]
    assert len(classes) >= 13
    for cls in classes:
        assert cls.__module__ == "loopfsm.core.errors"
        assert getattr(loopfsm, cls.__name__) is cls, cls.__name__
    for name in ("DecisionError", "ActionError", "RegistryError", "RenderError", "ScriptError"):
        assert name in loopfsm.__all__


def test_names_module_and_pickle():
    assert (LoopMachine.__name__, LoopMachine.__module__) == ("LoopMachine", "loopfsm.machines.engine_brain")
    assert (MachinePolicy.__name__, MachinePolicy.__module__) == ("MachinePolicy", "loopfsm.machines.engine_brain")
    assert repr(LoopMachine()) == "<LoopMachine Start>"
    with pytest.raises(loopfsm.PolicyError, match="must be a MachinePolicy or a mapping, got int"):
        LoopMachine().next_step(policy=3)
    for cls in CLASSES.values():
        m = cls()
        again = pickle.loads(pickle.dumps(m))
        assert type(again) is cls and again.snapshot() == m.snapshot()
    p = MachinePolicy(max_turns=7)
    assert pickle.loads(pickle.dumps(p)) == p


def test_load_machine_by_path_keeps_the_typed_class(tmp_path):
    f = tmp_path / "brain.yaml"
    f.write_text((ROOT / "machines" / "engine_brain.yaml").read_text().replace("default: 200\n", "default: 0\n", 1))
    edited = load_machine(f)
    assert edited is not LoopMachine.compiled and issubclass(edited.Instance, LoopMachine)
    assert edited.Policy().max_turns == 0 and MachinePolicy().max_turns == 200
    m = edited.new()
    m.accept_input("x")
    assert type(m.next_step()).__name__ == "Done"
    assert load_machine(str(f)).Policy().max_turns == 0
    with pytest.raises(RegistryError, match="unknown registry 'nope'"):
        load_machine("nope")


def test_builtin_registries_are_entry_points_and_importing_one_compiles_nothing():
    """Run in a fresh interpreter: resolving every registry must leave every machine class uncompiled."""
    code = textwrap.dedent("""
        from loopfsm.core.registries import known_registries, registry_named
        from loopfsm.core.declared import _CompiledOnFirstUse
        names = known_registries()
        assert {"turnstile", "engine_brain", "tool_breaker", "fallback_breaker"} <= set(names), names
        for n in names:
            reg = registry_named(n)
            if reg.instance_class is not None:
                assert isinstance(vars(reg.instance_class)["compiled"], _CompiledOnFirstUse), n
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.stdout.strip() == "ok", out.stderr
    assert "turnstile" in known_registries() and registry_named("turnstile").instance_class is Turnstile
    assert "_BUILTIN" not in vars(sys.modules["loopfsm.core.registries"])


def test_edit_to_the_shipped_brain_is_reported_once_at_its_line(tmp_path):
    """The edit of issue 8: `to: AwaitingTools` -> `to: AwaitingToolz`, in the file the package itself runs."""
    text = (ROOT / "machines" / "engine_brain.yaml").read_text()
    lines = text.splitlines(keepends=True)
    n = next(i for i, line in enumerate(lines) if line.strip() == "- to: AwaitingTools")
    lines[n] = lines[n].replace("AwaitingTools", "AwaitingToolz")
    edited = tmp_path / "engine_brain.yaml"
    edited.write_text("".join(lines))
    col = lines[n].index("AwaitingToolz") + 1
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        import loopfsm.core.resources as r
        shipped = r.machine_path
        r.machine_path = lambda name: Path({str(edited)!r}) if name == "engine_brain" else shipped(name)
        from loopfsm.cli.main import main
        sys.exit(main(["check", {str(edited)!r}]))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 1, out.stderr
    hits = [line for line in out.stderr.splitlines() if "AwaitingToolz" in line]
    assert len(hits) == 1, out.stderr
    assert hits[0].startswith(f"{edited}:{n + 1}:{col}:"), hits[0]
    assert "registry" not in out.stderr and "Traceback" not in out.stderr


def test_tool_health_snapshot_has_the_common_envelope():
    health = ToolHealth()
    health.acquire("t", 0, "c")
    snap = health.snapshot()
    assert {k: snap[k] for k in ("format", "machine", "fingerprint")} == {
        "format": 2,
        "machine": "tool_health",
        "fingerprint": ToolBreaker.compiled.fingerprint,
    }
    assert ToolHealth.restore(snap).states == {"t": "Closed"}
    # Each breaker's snapshot records its shape; the envelope's fingerprint is for information.
    assert ToolHealth.restore({**snap, "fingerprint": "sha256:0"}).states == {"t": "Closed"}
    with pytest.raises(loopfsm.SnapshotError, match="another version"):
        ToolHealth.restore({**snap, "format": 1, "fingerprint": "sha256:0"})
    with pytest.raises(loopfsm.SnapshotError):
        ToolHealth.restore({"format": 1, "kind": "tool_health", "breakers": {}})  # the old envelope


def test_dir_lists_every_public_name_even_those_imported_on_first_use():
    """The other layers' errors are imported on first use; ``dir()`` (and a REPL's completion) must still list them."""
    assert set(loopfsm.__all__) <= set(dir(loopfsm)), set(loopfsm.__all__) - set(dir(loopfsm))
    assert all(hasattr(loopfsm, name) for name in loopfsm.__all__)


def test_every_shipped_machine_class_is_in_loopfsm_machines_and_in_its_dir():
    """The README says every shipped machine is a class in ``loopfsm.machines``; the router's three were not."""
    import importlib  # noqa: PLC0415
    import pkgutil  # noqa: PLC0415

    import loopfsm.machines as machines  # noqa: PLC0415
    from loopfsm import DeclaredMachine  # noqa: PLC0415

    declared = set()
    for info in pkgutil.iter_modules(machines.__path__):
        module = importlib.import_module(f"loopfsm.machines.{info.name}")
        declared |= {
            name
            for name, obj in vars(module).items()
            if isinstance(obj, type) and issubclass(obj, DeclaredMachine) and obj.__module__ == module.__name__
        }
    assert declared and declared <= set(machines.__all__) <= set(dir(machines))
    assert all(getattr(machines, name).__name__ == name for name in declared)


def _outcome(call: Any, *args: Any, **kwargs: Any) -> tuple[str, str]:
    try:
        return ("answered", repr(call(*args, **kwargs)))
    except LoopFsmError as err:
        return (type(err).__name__, str(err))


@pytest.mark.parametrize("engine", ["transitions", "interpreter"])
def test_feed_and_trigger_bind_arguments_and_policies_alike(engine):
    """``feed`` holds ``_run``'s lines written out (a frame less): both must refuse and run the same calls."""
    calls = [
        ("acquire", (0, "c1"), {}),
        ("record", (), {"now": 1, "call_id": "c1", "outcome": "failure", "generation": 0}),
        ("acquire", (2, "c2"), {"policy": {"trip_after": 1}}),
        ("record", (3, "c2", "failure", 0), {"policy": {"trip_after": 1}}),
        ("record", (4, "c2", "nope", 0), {}),
        ("record", (4,), {}),
        ("acquire", (5, "c3"), {"policy": {"trip_aftr": 1}}),
        ("acquire", (5, "c3"), {"policy": 7}),
        ("acquire", (5, "c3", "extra"), {}),
        ("nap", (), {}),
        ("tick", (10**9,), {}),
        ("acquire", (10**9 + 1, "c4"), {}),
    ]
    fed, triggered = ToolBreaker(engine=engine), ToolBreaker(engine=engine)
    for event, args, kwargs in calls:
        by_feed = _outcome(fed.feed, event, *args, **kwargs)
        by_trigger = _outcome(triggered.trigger, event, *args, **kwargs)
        if by_feed[0] == "answered":
            assert by_trigger[0] == "answered"
        else:
            assert by_trigger == by_feed
        assert fed.snapshot() == triggered.snapshot()
    assert fed.state == "HalfOpen" and fed.data.generation == 2
