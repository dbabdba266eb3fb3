"""The machines that ship with loopfsm, each compiled from its YAML file in ``machines/``.

Names are imported on first use (PEP 562), so importing one machine does not
compile the others.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "Turnstile": "turnstile", "TurnstilePolicy": "turnstile",
    "LoopMachine": "engine_brain", "MachinePolicy": "engine_brain",
    "ToolBreaker": "tool_breaker", "ToolBreakerPolicy": "tool_breaker", "ToolHealth": "tool_breaker",
    "FallbackBreaker": "fallback_breaker", "FallbackBreakerPolicy": "fallback_breaker",
    "AgentLoop": "agent_loop", "AgentLoopPolicy": "agent_loop",
    "StreamAssembly": "stream_assembly", "StreamAssemblyPolicy": "stream_assembly",
    "Allow": "breaker_values", "Reject": "breaker_values", "Route": "breaker_values", "FailFast": "breaker_values",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'loopfsm.machines' has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
