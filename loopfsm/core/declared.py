"""Machine classes declared in Python, with typed methods, compiled from their YAML on first use.

    class Turnstile(DeclaredMachine, machine="turnstile", registry=REGISTRY, policy="TurnstilePolicy"):
        def coin(self, amount: int, *, policy: TurnstilePolicy | None = None) -> None: ...

Importing a module that declares such a class must not read or compile the
machine file: a registry is looked up while that very file is being checked,
and an edit to it must be reported as itself.  This module sits above both the
runtime (the base class) and the compiler (which it calls on first use), so
neither of those imports the other's way back.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from .compiler import CompiledMachine, compile_spec
from .errors import ConfigError
from .loader import load
from .registry import Registry
from .resources import machine_path
from .instance import MachineInstance

_compile_lock = threading.Lock()


class _CompiledOnFirstUse:
    """``cls.compiled`` of a declared class: compiled on first use, then a plain class attribute."""

    def __get__(self, obj: object, owner: type[DeclaredMachine]) -> CompiledMachine:
        # A subclass of a declared class (one adding on_enter_<state> methods) shares its machine.
        declared = next((k for k in owner.__mro__ if "_machine_source" in k.__dict__), owner)
        with _compile_lock:
            found = declared.__dict__.get("compiled")
            if isinstance(found, _CompiledOnFirstUse) or found is None:
                source = declared.__dict__.get("_machine_source")
                if source is None:
                    raise TypeError(
                        f"{owner.__name__} is not bound to a machine: declare it "
                        "with class X(DeclaredMachine, machine=..., registry=...)"
                    )
                machine, registry = source
                path = machine_path(machine)
                spec = load(path, registry)
                if spec.name != machine:  # an edited table put under another machine's name
                    raise ConfigError(f"{path} declares machine '{spec.name}', not '{machine}'")
                compile_spec(spec, registry, bind=declared)
            return declared.__dict__["compiled"]  # type: ignore[no-any-return]


class DeclaredMachine(MachineInstance):
    """Base of a machine class written in Python: ``machine=`` names a shipped machine file, ``registry=``
    the registry its names resolve in, ``policy=`` the name its policy class takes.

    The registry learns the class (``registry.instance_class``), so a user's
    edited copy of the machine file compiles with these typed methods too.
    """

    __slots__ = ()
    compiled: ClassVar[CompiledMachine] = _CompiledOnFirstUse()  # type: ignore[assignment]

    def __init_subclass__(
        cls, machine: str | None = None, registry: Registry | None = None, policy: str | None = None, **kw: Any
    ) -> None:
        super().__init_subclass__(**kw)
        if machine is not None:
            if registry is None:
                raise TypeError(f"{cls.__name__}: machine={machine!r} needs registry=")
            cls._machine_source = (machine, registry)  # type: ignore[attr-defined]
            cls.compiled = _CompiledOnFirstUse()  # type: ignore[assignment]
            registry.instance_class = cls
        if policy is not None:
            cls.policy_class_name = policy
