"""loopfsm: state machines of LLM agent runtimes, declared as YAML tables.

The public surface is deliberately small: load or compile a machine file,
register the guards and actions it names, and catch the errors it raises.
"""

from loopfsm.core.catalog import load_machine
from loopfsm.core.compiler import CompiledMachine, compile_file, compile_spec
from loopfsm.core.errors import (
    ActionError,
    ClientError,
    ConfigError,
    DecisionError,
    FeedArgumentError,
    FencedOut,
    FeedRefused,
    GraphvizMissing,
    IllegalFeed,
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
from loopfsm.core.loader import load, parse
from loopfsm.core.registry import Registry
from loopfsm.core.runtime import MachineInstance

__all__ = [
    "CompiledMachine",
    "compile_file",
    "compile_spec",
    "load",
    "load_machine",
    "parse",
    "Registry",
    "MachineInstance",
    "LoopFsmError",
    "SpecError",
    "IllegalFeed",
    "NoBranchMatched",
    "FeedArgumentError",
    "UnknownFeed",
    "PolicyError",
    "SnapshotError",
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
