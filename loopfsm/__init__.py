"""loopfsm: state machines of LLM agent runtimes, declared as YAML tables.

The public surface is deliberately small: load or compile a machine file,
register the guards and actions it names, and catch the errors it raises.
"""

from .catalog import load_machine
from .compiler import CompiledMachine, compile_file, compile_spec
from .errors import (
    ActionError,
    ClientError,
    ConfigError,
    DecisionError,
    FeedArgumentError,
    FencedOut,
    FeedRefused,
    GraphvizMissing,
    IllegalFeed,
    IncompatibleSnapshot,
    LoopFsmError,
    NoBranchMatched,
    PolicyError,
    ProtocolError,
    ProviderError,
    RegistryError,
    RenderError,
    ScriptError,
    SealError,
    SealedStateError,
    SnapshotError,
    SpecError,
    StoreError,
    StreamEventError,
    StreamFailed,
    StreamProtocolError,
    UnknownFeed,
)
from .loader import load, parse
from .registry import Registry
from .runtime import MachineInstance
from .shape import MigratingRun

__all__ = [
    "CompiledMachine",
    "compile_file",
    "compile_spec",
    "load",
    "load_machine",
    "parse",
    "Registry",
    "MachineInstance",
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
    "RegistryError",
    "RenderError",
    "GraphvizMissing",
    "ScriptError",
    "SealError",
    "SealedStateError",
    "ConfigError",
    "FencedOut",
    "StoreError",
    "FeedRefused",
    "StreamProtocolError",
    "StreamEventError",
    "StreamFailed",
    "ProviderError",
    "ProtocolError",
    "ClientError",
]
