"""The turn loop: ask the engine brain for its next step, call the model through the fallback breaker, go on.

A request runs model turns until the run needs the client (tool calls, an
approval, seals) or ends, at most ``max_rounds`` of them.  Before each model
call the approval gates are asked (:mod:`.approvals`); after each reply the
assistant message is written and its tool calls mediated (:mod:`.tool_calls`).
Model-call latency is measured here, at the edge, on the router's monotonic
clock, and written as trace metadata only.
"""

from __future__ import annotations

import time
from typing import Any, cast

from loopfsm.router.errors import ProviderError, StreamEventError
from loopfsm.core.errors import ScriptError
from loopfsm.machines.errors import StreamProtocolError
from ...machines.breaker_values import Route
from ...machines.engine_brain import LoopMachine
from ...machines.engine_values import CallLLM, CallTools, Compact, Completed, Done, Failed
from ...machines.fallback_breaker import FallbackOutcome
from ...machines.tool_breaker import ToolHealth
from loopfsm.router.providers import ModelReply, ModelRequest
from .. import protocol as P
from ..tools import ALL_TOOLS
from .approvals import gate_before_call
from .context import Ctx, Outcome, Services
from .tool_calls import TOOL_NAMES, mediate


class _RunFailed(Exception):
    """The run cannot go on (model unavailable, turn cap, script exhausted): it ends as failed."""


class ModelCall:
    """One model call, timed at the edge: its trace row, and its span when a tracer is configured."""

    def __init__(self, services: Services, provider: str, model: str, route: str):
        self.services, self.provider, self.model, self.route = services, provider, model, route
        self.started, self.started_ns = services.monotonic(), time.time_ns()

    def done(self, outcome: str, reply: ModelReply | None = None) -> dict[str, Any]:
        latency_ms = max(0.0, (self.services.monotonic() - self.started) * 1000.0)
        row: dict[str, Any] = {
            "event": "model.responded" if reply is not None else "model.failed",
            "provider": self.provider,
            "model": self.model,
            "response_model": (reply.model or None) if reply is not None else None,
            "route": self.route,
            "fallback": self.route == "fallback",
            "outcome": outcome,
            "input_tokens": reply.input_tokens if reply is not None else None,
            "output_tokens": reply.output_tokens if reply is not None else None,
            "stop_reason": reply.stop_reason if reply is not None else None,
            "latency_ms": round(latency_ms, 3),
        }
        self.services.metrics.model_call(self.route, outcome)
        if self.services.tracer is not None:
            from loopfsm.core.otel import record_model_call  # OpenTelemetry is loaded only when a tracer is configured

            record_model_call(self.services.tracer, row, self.started_ns, self.started_ns + int(latency_ms * 1e6))
        return row


def _auth_failed(provider: str) -> _RunFailed:
    return _RunFailed(
        f"model setup error: the {provider} API refused the router's credentials (auth); "
        "check the API key in the router's environment"
    )


def call_model(ctx: Ctx, brain: LoopMachine) -> tuple[ModelReply, str]:
    """Call the model the fallback breaker routes to, retrying within ``max_model_attempts``.

    Returns the reply and the model asked (the brain traces it as ``gen_ai.request.model``).

    Every call writes a ``model.called`` trace row, then one ``model.responded`` or ``model.failed``
    row with its metadata (:class:`ModelCall`), never content.  A provider that refused its
    credentials (``auth``) is not asked again in this turn: when the breaker routes back to it the
    run fails as a setup error.  A reply whose stream breaks its protocol is refused: the breaker
    counts it as ``transient`` and the run fails.
    """
    s = ctx.services
    messages = tuple(brain.full_history())
    last: ProviderError | None = None
    refused_credentials: set[int] = set()
    for _ in range(s.max_model_attempts):
        with s.breaker_lock:
            route = s.breaker.route(ctx.now)
        if not isinstance(route, Route):
            raise _RunFailed(f"model unavailable ({route.reason})")
        primary = route.model == "primary"
        provider = s.provider if primary else s.fallback
        name = str(getattr(provider, "name", type(provider).__name__))
        if id(provider) in refused_credentials:
            with s.breaker_lock:
                s.breaker.record(ctx.now, route, "auth")
            raise _auth_failed(name)
        request = ModelRequest(s.model if primary else s.fallback_model, messages, tuple(ALL_TOOLS))
        # A scripted model answers by position: each route keeps its own count in the run's bundle, so a
        # retried or restarted turn asks for the same reply, and a scripted failure moves on to the next.
        counts = ctx.run.model_calls
        index = counts.get(route.model, 0)
        counts[route.model] = index + 1
        ctx.event("model.called")
        call = ModelCall(s, name, request.model, route.model)
        try:
            if hasattr(provider, "reply_at"):
                reply: ModelReply = provider.reply_at(index, request)
            else:
                reply = provider.complete(request)
        except ProviderError as err:
            ctx.trace(call.done(err.outcome))
            last = err
            with s.breaker_lock:
                if err.outcome != "invalid_request":
                    s.breaker.record(ctx.now, route, cast(FallbackOutcome, err.outcome), retry_after=err.retry_after_ms)
            if err.outcome == "auth":
                refused_credentials.add(id(provider))
            if err.outcome in ("invalid_request", "context_length", "content_policy"):
                break
            continue
        except (StreamEventError, StreamProtocolError) as err:
            ctx.trace(call.done("malformed_stream"))
            with s.breaker_lock:
                s.breaker.record(ctx.now, route, "transient")
            raise _RunFailed(f"the {name} reply was refused, its stream is malformed: {str(err)[:300]}") from None
        except ScriptError as err:
            ctx.trace(call.done("script_error"))
            raise _RunFailed(f"scripted model: {err}") from None
        ctx.trace(call.done("success", reply))
        with s.breaker_lock:
            s.breaker.record(ctx.now, route, "success")
        return reply, request.model
    if last is not None and last.outcome == "auth":
        raise _auth_failed(last.provider)
    raise _RunFailed(f"model call failed ({last.outcome if last else 'unknown'})")


def advance(ctx: Ctx, brain: LoopMachine, health: ToolHealth) -> Outcome:
    """Run model turns until the run needs the client, a gate, or ends; bounded by ``max_rounds``."""
    run = ctx.run
    try:
        for _ in range(ctx.services.max_rounds):
            step = brain.next_step()
            if isinstance(step, Done):
                if brain.state != "Terminal":
                    brain.begin(step)
                return ended(ctx, brain)
            if isinstance(step, Compact):
                raise _RunFailed("the conversation outgrew the context window (this router does not compact)")
            if isinstance(step, CallTools):  # pragma: no cover - tools are answered before asking again
                raise _RunFailed("tool calls left unanswered")
            assert isinstance(step, CallLLM)
            gated = gate_before_call(ctx, brain, health)
            if gated is not None:
                return gated
            brain.begin(step)
            reply, model = call_model(ctx, brain)
            run.add_tokens(reply.input_tokens + reply.output_tokens, reply.context_tokens)
            brain.model_response(
                reply.message, reply.context_tokens, TOOL_NAMES, tool_health=health, now=ctx.now, model=model
            )
            run.turn += 1
            turn = run.turn
            aid = ctx.rid(f"assistant/{turn}")
            aref = f"message:{aid}"
            run.history_refs.append(aref)
            if ctx.encrypted:
                ctx.hold_for_seal(aref, P.message_text(reply.message.to_json()), {"role": "assistant", "turn": turn})
            else:
                ctx.put("message", aid, {"role": "assistant", "turn": turn}, content=reply.message.to_json())
            if brain.state == "Terminal":
                return ended(ctx, brain)
            out = mediate(ctx, brain, health, aref)
            if out is not None:
                return out
        raise _RunFailed(f"more than {ctx.services.max_rounds} model turns in one request")
    except _RunFailed as err:
        ctx.event("run.failed")
        return Outcome("failed", data={"ended": "failed", "error": str(err)})


def ended(ctx: Ctx, brain: LoopMachine) -> Outcome:
    """The brain is done: completed (an encrypted run first hands out its last seals), or the run failed."""
    outcome = brain.outcome()
    if isinstance(outcome, Completed):
        if ctx.encrypted:
            to_seal = [{"ref": r, "meta": m} for r, m in sorted((ctx.run.pending or {}).items())]
            # Nothing after the seals reads the brain or the breakers (only `sealed` or break_run leave
            # AwaitingEncrypt): the bundle drops a stale snapshot of an earlier pause rather than writing the
            # whole conversation again (4.4% of an encrypted turn's instructions, more in a long conversation).
            ctx.run.brain = ctx.run.health = None
            return Outcome("completed", pause={"to_seal": to_seal}, data={"message": outcome.final_text})
        brain.commit_pending()
        ctx.run.committed = [m.to_json() for m in brain.history()]
        return Outcome("completed", data={"message": outcome.final_text})
    err = outcome.error if isinstance(outcome, Failed) else None
    raise _RunFailed(str(err) if err else f"run ended: {type(outcome).__name__}")
