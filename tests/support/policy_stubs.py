"""The shipped policy classes' stub, ``loopfsm/machines/policies.pyi``, as ``loopfsm stub`` writes it.

``python -m tests.support.policy_stubs`` rewrites the file after a policy block changed;
tests/machines/test_policy_types.py fails until it is current.
"""

from __future__ import annotations

from loopfsm.core.declared import DeclaredMachine
from loopfsm.machines import (
    AgentLoop,
    FallbackBreaker,
    LoopMachine,
    RouterClient,
    RouterRun,
    RunLock,
    StreamAssembly,
    ToolBreaker,
    Turnstile,
)
from loopfsm.rendering.stubs import stub_module
from tests.support.docs_pages import ROOT

SHIPPED: tuple[type[DeclaredMachine], ...] = (
    AgentLoop,
    LoopMachine,
    FallbackBreaker,
    RouterClient,
    RouterRun,
    RunLock,
    StreamAssembly,
    ToolBreaker,
    Turnstile,
)
STUB = ROOT / "loopfsm" / "machines" / "policies.pyi"


def shipped_stub() -> str:
    classes = {cls.compiled.Policy.__name__: cls.compiled.spec for cls in SHIPPED}
    return stub_module(classes, "\n".join(f"machines/{spec.name}.yaml" for spec in classes.values()))


if __name__ == "__main__":
    STUB.write_text(shipped_stub(), encoding="utf-8")
    print(f"wrote {STUB.relative_to(ROOT)}")
