"""The machines that ship with loopfsm, each compiled from its YAML file in ``machines/``.

Names are imported on first use (PEP 562), so importing one machine does not
compile the others.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Turnstile": "turnstile",
    "TurnstilePolicy": "turnstile",
    "LoopMachine": "engine_brain",
    "MachinePolicy": "engine_brain",
    "ToolBreaker": "tool_breaker",
    "ToolBreakerPolicy": "tool_breaker",
    "ToolHealth": "tool_breaker",
    "FallbackBreaker": "fallback_breaker",
    "FallbackBreakerPolicy": "fallback_breaker",
    "AgentLoop": "agent_loop",
    "AgentLoopPolicy": "agent_loop",
    "StreamAssembly": "stream_assembly",
    "StreamAssemblyPolicy": "stream_assembly",
    "RouterRun": "router_run",
    "RouterRunPolicy": "router_run",
    "RunLock": "run_lock",
    "RunLockPolicy": "run_lock",
    "RouterClient": "router_client",
    "RouterClientPolicy": "router_client",
    "Allow": "breaker_values",
    "Reject": "breaker_values",
    "Route": "breaker_values",
    "FailFast": "breaker_values",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # what type checkers see; at run time each name is imported on first use
    from .agent_loop import AgentLoop as AgentLoop, AgentLoopPolicy as AgentLoopPolicy
    from .breaker_values import Allow as Allow, FailFast as FailFast, Reject as Reject, Route as Route
    from .engine_brain import LoopMachine as LoopMachine, MachinePolicy as MachinePolicy
    from .fallback_breaker import FallbackBreaker as FallbackBreaker, FallbackBreakerPolicy as FallbackBreakerPolicy
    from .router_client import RouterClient as RouterClient, RouterClientPolicy as RouterClientPolicy
    from .router_run import RouterRun as RouterRun, RouterRunPolicy as RouterRunPolicy
    from .run_lock import RunLock as RunLock, RunLockPolicy as RunLockPolicy
    from .stream_assembly import StreamAssembly as StreamAssembly, StreamAssemblyPolicy as StreamAssemblyPolicy
    from .tool_breaker import ToolBreaker as ToolBreaker, ToolBreakerPolicy as ToolBreakerPolicy
    from .tool_breaker import ToolHealth as ToolHealth
    from .turnstile import Turnstile as Turnstile, TurnstilePolicy as TurnstilePolicy


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'loopfsm.machines' has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)


def __dir__() -> list[str]:
    """The names imported on first use too, so ``dir()`` and completion list every machine."""
    return sorted({*globals(), *_EXPORTS})
