# Written by `loopfsm stub` from the policy blocks of: do not edit.
#   machines/agent_loop.yaml
#   machines/engine_brain.yaml
#   machines/fallback_breaker.yaml
#   machines/router_client.yaml
#   machines/router_run.yaml
#   machines/run_lock.yaml
#   machines/stream_assembly.yaml
#   machines/tool_breaker.yaml
#   machines/turnstile.yaml
# Type checkers read this file; at run time each class is built from the YAML.

from dataclasses import dataclass
from typing import Literal

@dataclass(frozen=True)
class AgentLoopPolicy:
    """Policy of machine 'agent_loop'; defaults come from its YAML file."""

    max_attempts: int = 3

@dataclass(frozen=True)
class MachinePolicy:
    """Policy of machine 'engine_brain'; defaults come from its YAML file."""

    max_turns: int = 200
    context_window: int = 200000
    compact_threshold: int = 80
    auto_compact: bool = True

@dataclass(frozen=True)
class FallbackBreakerPolicy:
    """Policy of machine 'fallback_breaker'; defaults come from its YAML file."""

    trip_after: int = 3
    cooldown_ms: int = 60000
    cooldown_multiplier: int = 2
    max_cooldown_ms: int = 900000
    probe_ttl_ms: int = 60000
    recover_after: int = 2
    fallback_fail_max: int = 3
    max_outstanding: int = 1000
    when_fallback_fails: Literal["fail_fast", "try_primary"] = "fail_fast"

@dataclass(frozen=True)
class RouterClientPolicy:
    """Policy of machine 'router_client'; defaults come from its YAML file."""

@dataclass(frozen=True)
class RouterRunPolicy:
    """Policy of machine 'router_run'; defaults come from its YAML file."""

    default_permission: Literal["allow", "ask", "deny"] = "ask"
    pause_ttl_ms: int = 86400000
    lease_ms: int = 30000
    approval_ttl_ms: int = 600000
    disclosure: Literal["off", "first_call", "every_call"] = "off"
    cost_ceiling_tokens: int = 0

@dataclass(frozen=True)
class RunLockPolicy:
    """Policy of machine 'run_lock'; defaults come from its YAML file."""

@dataclass(frozen=True)
class StreamAssemblyPolicy:
    """Policy of machine 'stream_assembly'; defaults come from its YAML file."""

    max_blocks: int = 4096
    max_chars: int = 67108864

@dataclass(frozen=True)
class ToolBreakerPolicy:
    """Policy of machine 'tool_breaker'; defaults come from its YAML file."""

    trip_after: int = 5
    failure_rate_percent: int = 50
    slow_rate_percent: int = 0
    window_size: int = 20
    minimum_calls: int = 10
    cooldown_ms: int = 30000
    cooldown_multiplier: int = 2
    max_cooldown_ms: int = 600000
    jitter_percent: int = 0
    max_probes: int = 1
    max_outstanding: int = 1000
    probe_ttl_ms: int = 30000
    recover_after: int = 2
    half_open_max_ms: int = 120000

@dataclass(frozen=True)
class TurnstilePolicy:
    """Policy of machine 'turnstile'; defaults come from its YAML file."""

    fare: int = 1
