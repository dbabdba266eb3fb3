"""loopfsm: state machines of LLM agent runtimes, declared as YAML tables.

The public surface is deliberately small: load or compile a machine file,
register the guards and actions it names, and catch the errors it raises.
"""

from loopfsm.core.catalog import load_machine
from loopfsm.core.compiler import CompiledMachine, compile_file, compile_spec
from loopfsm.core.declared import DeclaredMachine
from loopfsm.core.errors import (
    ActionError,
    CallbackError,
    ConfigError,
    DecisionError,
    FeedArgumentError,
    FeedRefused,
    IllegalFeed,
    IncompatibleSnapshot,
    LoopFsmError,
    NoBranchMatched,
    PolicyError,
    RegistryError,
    ScriptError,
    SnapshotError,
    SpecError,
    UnknownFeed,
)
from loopfsm.core.loader import load, parse
from loopfsm.core.registry import Registry
from loopfsm.core.instance import MachineInstance
from loopfsm.core.shape import MigratingRun

# The other layers' errors, importable from here too, each from the package that raises it.  Imported on
# first use (PEP 562): ``loopfsm.machines`` imports every shipped machine, which ``import loopfsm`` must not.
_ERRORS_ELSEWHERE = {
    "FencedOut": "loopfsm.machines.errors",
    "StreamFailed": "loopfsm.machines.errors",
    "StreamProtocolError": "loopfsm.machines.errors",
    "ClientError": "loopfsm.router.errors",
    "NotAScriptedModel": "loopfsm.router.errors",
    "ProtocolError": "loopfsm.router.errors",
    "ProviderError": "loopfsm.router.errors",
    "SealError": "loopfsm.router.errors",
    "SealedStateError": "loopfsm.router.errors",
    "StoreError": "loopfsm.router.errors",
    "DamagedRow": "loopfsm.router.errors",
    "DamagedHistory": "loopfsm.router.errors",
    "HolderClaimed": "loopfsm.router.errors",
    "ClaimLost": "loopfsm.router.errors",
    "SessionTraceError": "loopfsm.router.errors",
    "StreamEventError": "loopfsm.router.errors",
    "GraphvizMissing": "loopfsm.rendering.errors",
    "DrawingTooSlow": "loopfsm.rendering.errors",
    "RenderError": "loopfsm.rendering.errors",
    "ReviewError": "loopfsm.verification.errors",
    "ReviewSiteError": "loopfsm.review_site.errors",
}


def __getattr__(name: str) -> object:
    module = _ERRORS_ELSEWHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'loopfsm' has no attribute {name!r}")
    from importlib import import_module  # noqa: PLC0415

    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    """The eager names and the errors imported on first use, so ``dir(loopfsm)`` and completion list them all."""
    return sorted({*globals(), *_ERRORS_ELSEWHERE})


__all__ = [
    "CompiledMachine",
    "compile_file",
    "compile_spec",
    "load",
    "load_machine",
    "parse",
    "Registry",
    "MachineInstance",
    "DeclaredMachine",
    "MigratingRun",
    "LoopFsmError",
    "SpecError",
    "IllegalFeed",
    "NoBranchMatched",
    "FeedArgumentError",
    "UnknownFeed",
    "PolicyError",
    "SnapshotError",
    "IncompatibleSnapshot",
    "DecisionError",
    "ActionError",
    "CallbackError",
    "RegistryError",
    "RenderError",
    "ReviewError",
    "ReviewSiteError",
    "GraphvizMissing",
    "DrawingTooSlow",
    "ScriptError",
    "SealError",
    "SealedStateError",
    "ConfigError",
    "FencedOut",
    "StoreError",
    "DamagedRow",
    "DamagedHistory",
    "HolderClaimed",
    "ClaimLost",
    "SessionTraceError",
    "FeedRefused",
    "StreamProtocolError",
    "StreamEventError",
    "StreamFailed",
    "ProviderError",
    "ProtocolError",
    "ClientError",
    "NotAScriptedModel",
]
