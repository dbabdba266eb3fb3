"""The router: one protocol request in, one response envelope out, every machine composed around the IO.

``Router.handle(session_id, request)`` is the seed's acquire / process /
release.  The store admits the request against the saved row (router_run's
``admit`` table); the turn loop asks the engine brain ``next_step``, calls
the model through the fallback breaker, mediates each tool call with the
session's permissions (router_run's ``mediate`` table) and the per-tool
breakers, and the step is checkpointed (rows, next phase, response, release)
in one transaction.  No run is held in memory between requests: what a
paused run needs to continue is its *run-input bundle*, one ``input`` row.

This module is the facade (the connection pool, the one entry point, the
dispatch); each concern is a module of its own, functions over the request's
:class:`~.context.Ctx`: :mod:`.admission` (refusals, replays, a new run),
:mod:`.turn` (model turns), :mod:`.tool_calls`, :mod:`.approvals`,
:mod:`.sealing` (an encrypted session's seals), :mod:`.responses` (release
and checkpoint), over the typed bundle of :mod:`.bundle`.

Rules chosen where the seed is silent (docs/router.md, "Rules chosen where seed 002 is
silent", repeats them):

- The run-input bundle (brain snapshot, the tool breakers of the run, pending
  calls, content awaiting its seal) is kept while the run lives and is
  overwritten with an empty row the moment the run ends, whichever way it
  ends (completed, sealed, break, inject, expiry, failure).  In a plaintext
  session it is clear JSON; in an encrypted session it is sealed under the
  router's own key (:mod:`loopfsm.router.atrest`), so no content of an
  encrypted session is ever written in clear.  A bundle that does not open
  (another router key) is a clear error; only ``break`` ends such a run.
- Trace rows carry the stable event name and, for a model call, only its
  metadata (provider, model, route, outcome class, token counts as the
  provider reported them, latency measured here on a monotonic clock), never
  a payload, so there is nothing in them to seal.
- The stored response of an encrypted session's live run is a content-free
  stub; a re-sent request_id is answered from the bundle's copy.
- Standalone approvals (router_run.yaml states the rules, its decisions
  ``disclosure_gate``, ``cost_gate``, ``approval_answer`` and
  ``after_approval`` make them): before every model call the router asks
  whether the call needs the user's consent to disclose the conversation to
  a remote provider, or would pass the run's token ceiling; ``submit_plan``
  raises a plan approval after the reply.  Each carries its argument hash and
  ``expires_at``; an answer at or after it ends the run (expired), a rejection
  ends it (aborted).  Every approval is recorded as a ``trace`` row
  (``approval/<id>``: kind, hash, status, approver, expiry; no content).  A run
  has at most one approved plan.
- ``remember`` writes a session memory row under an id derived from the
  session and the key (a later value replaces it); in an encrypted session
  it rides ``to_encrypt`` like every router-authored content and is written
  only sealed.
- Every tool call of an encrypted session is sealed under its ``tool_call:*``
  ref: results the client ran are sealed by the client, router-authored
  answers (deny, unknown tool, breaker rejection) ride ``to_encrypt``.
"""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from loopfsm.router.crypto import Keyring
from loopfsm.core.errors import SnapshotError
from loopfsm.machines.errors import FencedOut
from loopfsm.router.errors import DamagedRow, ProtocolError
from ...machines.fallback_breaker import FallbackBreaker
from loopfsm.machines.router_run import ROUTER_RUN
from loopfsm.router.providers import Provider
from loopfsm.router.store import Lease, RunStore, claims, open_store
from loopfsm.router.store.claims import Claim
from loopfsm.router.store.records import wall_clock_ms
from ..session_id import SESSION_ID_PATTERN
from .. import protocol as P
from ..atrest import SealedState, SealedStateError
from ..tools import DEFAULT_PERMISSIONS
from . import admission, approvals, responses, sealing, spans, tool_calls, turn
from .context import Ctx, Outcome, Resume
from .demo import DEMO_SCRIPT
from .metrics import RouterMetrics, request_label

T = TypeVar("T")

SESSION_ID = re.compile(SESSION_ID_PATTERN)  # fullmatch: no newline


class Router:
    """The reference router service over a run-state store; safe to call from many threads.

    Each request borrows a store connection from the router's pool for as
    long as it is served and gives it back, so the process holds at most as
    many connections as requests it ever served at once (a server's worker
    threads come and go; a connection per thread would pile up).  A
    connection that failed mid-request is closed, not reused.  The model
    fallback breaker is the process's (it guards the provider this process
    calls), behind a lock.
    """

    def __init__(
        self,
        store_url: str,
        *,
        prefix: str = "loopfsm_",
        holder: str | None = None,
        provider: Provider | None = None,
        fallback: Provider | None = None,
        permissions: dict[str, str] | None = None,
        policy: dict[str, Any] | None = None,
        approval_ttl_ms: int | None = None,
        max_rounds: int = 32,
        max_model_attempts: int | None = None,
        model: str = "scripted",
        fallback_model: str | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        create: bool = False,
        store_fault: Callable[[str], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        tracer: Any = None,
        key: Keyring | str | os.PathLike[str] | None = None,
    ):
        """``key`` is the router key sealing encrypted sessions' run state: a Keyring, a key file, or None
        for the default file (see :mod:`loopfsm.router.atrest`; a file is read when first needed)."""
        from loopfsm.router.providers.scripted import ScriptedProvider  # the demo model, only when none is given

        self.store_url, self.prefix = store_url, prefix
        self.sealed_state = SealedState(key)
        self.holder = holder or f"router-{uuid.uuid4().hex[:12]}"
        self.provider: Any = provider if provider is not None else ScriptedProvider(DEMO_SCRIPT)
        self.fallback: Any = fallback if fallback is not None else self.provider
        self.permissions = dict(DEFAULT_PERMISSIONS if permissions is None else permissions)
        self.model, self.clock, self._fault = model, clock, store_fault
        self.fallback_model = fallback_model or model
        # Model-call latency is measured here, at the edge, on a monotonic clock (seconds, like
        # time.monotonic); ``tracer`` (an OpenTelemetry Tracer) also gets each call as a GenAI span.
        self.monotonic, self.tracer = monotonic, tracer
        self.breaker = FallbackBreaker()
        # By default enough attempts for the breaker to trip and the fallback to answer within one turn.
        trip_after = int(self.breaker.compiled.default_policy.trip_after)
        attempts = trip_after + 1 if max_model_attempts is None else max_model_attempts
        self.max_rounds, self.max_model_attempts = max_rounds, attempts
        self.breaker_lock = threading.Lock()
        states = tuple(self.breaker.compiled.spec.states)
        self.metrics = RouterMetrics(lambda: str(self.breaker.state), states)
        self._local = threading.local()
        self._stores: list[RunStore] = []  # every connection open, to close them all at the end
        self._idle: list[RunStore] = []  # the pool: open connections no request holds now
        self._stores_lock = threading.Lock()
        # router_run's policy: the YAML defaults, overridden by ``policy`` (and the older ``approval_ttl_ms``)
        overrides = dict(policy or {})
        if approval_ttl_ms is not None:
            overrides["approval_ttl_ms"] = approval_ttl_ms
        self.policy = ROUTER_RUN.policy(overrides) if overrides else ROUTER_RUN.default_policy
        if create:
            open_store(store_url, prefix=prefix, create=True).close()

    # -- plumbing ---------------------------------------------------------------------------
    def store(self) -> RunStore:
        """The connection this thread's request holds (one is borrowed for a caller outside ``handle``)."""
        s: RunStore | None = getattr(self._local, "store", None)
        if s is None:
            s = self._borrow()
            self._local.store = s
        return s

    def _borrow(self) -> RunStore:
        with self._stores_lock:
            if self._idle:
                return self._idle.pop()
        s = open_store(self.store_url, prefix=self.prefix, clock=self.clock, fault=self._fault)
        with self._stores_lock:
            self._stores.append(s)
        return s

    def _give_back(self, s: RunStore, *, broken: bool) -> None:
        """Back to the pool, or closed and forgotten when the request failed on it."""
        with self._stores_lock:
            if not broken:
                self._idle.append(s)
                return
            if s in self._stores:
                self._stores.remove(s)
        try:
            s.close()
        except Exception:  # noqa: BLE001 - a connection that already failed may fail to close too
            pass

    def connections(self) -> int:
        """How many store connections this router holds open (in use or idle in its pool)."""
        with self._stores_lock:
            return len(self._stores)

    def _on_store(self, work: Callable[[RunStore], T]) -> T:
        """``work`` on a pooled connection, given back after (closed instead when ``work`` raised): the starting
        thread and the endpoints keep no connection of their own."""
        s = self._borrow()
        broken = True
        try:
            out = work(s)
            broken = False
            return out
        finally:
            self._give_back(s, broken=broken)

    def claim(self, token: str | None = None) -> Claim:
        """Claim this router's holder id in the store (see :mod:`loopfsm.router.store.claims`), before
        :meth:`recover`: :class:`~loopfsm.router.errors.HolderClaimed` when a live process serves under it."""
        return self._on_store(lambda s: claims.claim(s, self.holder, token=token))

    def release(self, mine: Claim) -> bool:
        """Give up a claim :meth:`claim` made (when it is still this process's); whether it was."""
        return self._on_store(lambda s: claims.release(s, mine))

    def claim_keeper(self, mine: Claim) -> claims.ClaimKeeper:
        """A keeper renewing ``mine`` every third of the lease on a connection of its own (the caller starts it)."""

        def opened() -> RunStore:
            return open_store(self.store_url, prefix=self.prefix, clock=self.clock)

        # the lease the router's stores grant (open_store's default), which is how long a claim lasts
        return claims.ClaimKeeper(opened, mine, every_s=int(ROUTER_RUN.default_policy.lease_ms) / 3000)

    def store_problem(self) -> str | None:
        """Why the store cannot serve requests now (its error's class, never an address), or None when it can."""
        try:
            self._on_store(lambda s: s.check_schema())
        except Exception as err:  # noqa: BLE001 - any failure to connect or answer is "not ready", said by its class
            return f"unreachable ({type(err).__name__})"
        return None

    def recover(self) -> list[str]:
        """Startup: free the locks this router's previous incarnation held; their runs resume from phase.

        Call it after :meth:`claim`: only a process that owns the holder id may free its locks."""
        return self._on_store(lambda s: s.recover(self.holder))

    def close(self) -> None:
        with self._stores_lock:
            for s in self._stores:
                try:
                    s.close()
                except Exception:  # noqa: BLE001 - closing on shutdown is best effort
                    pass
            self._stores.clear()
            self._idle.clear()

    def _continuations(self, session_id: str) -> list[str]:
        return admission.continuations(self, session_id, bool(SESSION_ID.fullmatch(session_id or "")))

    # -- the one entry point ----------------------------------------------------------------
    def handle(
        self,
        session_id: str,
        request: object,
        *,
        on_event: Callable[[str], None] | None = None,
        trace_context: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Serve one request; never raises for anything a client can send, nor when the store is unreachable.

        The request holds one pooled connection while it is served and gives it back when it ends.  With a
        tracer it is one ``invoke_agent`` span (:mod:`.spans`), continuing ``trace_context``'s trace (the
        request's ``traceparent`` and ``tracestate`` headers) when it names one.
        """
        began = time.monotonic()
        if self.tracer is None:
            response = self._serve_one(session_id, request, on_event)
            self.metrics.answered(request, response, time.monotonic() - began)
            return response
        shown = request_label(request)
        session = session_id if isinstance(session_id, str) and SESSION_ID.fullmatch(session_id) else None
        with spans.turn(self.tracer, session, shown, self.provider.name, trace_context) as span:
            self._local.span = span
            try:
                response = self._serve_one(session_id, request, on_event)
            finally:
                self._local.span = None
            span.answered(response)
        self.metrics.answered(request, response, time.monotonic() - began)
        return response

    def _serve_one(self, session_id: str, request: object, on_event: Callable[[str], None] | None) -> dict[str, Any]:
        outer: RunStore | None = getattr(self._local, "store", None)  # a caller outside handle keeps its own
        self._local.store = None
        broken = False
        try:
            return self._handle(session_id, request, on_event)
        except Exception as err:  # noqa: BLE001 - the store went away mid-request: say so, the client re-sends
            broken = True  # a fresh connection next time
            return P.error(
                "internal", f"router unavailable ({type(err).__name__}); re-send the same request", [], retryable=True
            )
        finally:
            mine: RunStore | None = getattr(self._local, "store", None)
            self._local.store = outer
            if mine is not None:
                self._give_back(mine, broken=broken)

    def _handle(self, session_id: str, request: object, on_event: Callable[[str], None] | None) -> dict[str, Any]:
        emit = on_event or (lambda name: None)
        if not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id):
            return P.error("invalid", "session id must be 1-64 letters, digits, '_', '.' or '-'", ["execute", "inject"])
        try:
            req = P.parse_request(request)
        except ProtocolError as err:
            return P.error("invalid", str(err), self._continuations(session_id))
        store = self.store()
        try:
            adm = store.admit(session_id, req.type, req.request_id, holder=self.holder)
        except SnapshotError as err:  # admission restores the saved phase first: nothing was taken or changed
            return admission.unreadable(err)
        if adm.outcome == "replayed":
            return admission.replay(self, session_id, adm.response, lambda: self._continuations(session_id))
        if adm.outcome == "refused":
            return admission.refused(adm, req.type)
        lease = adm.lease
        assert lease is not None
        emit("lock.preempted" if adm.preempted else "lock.taken_over" if adm.took_over else "lock.acquired")
        ctx = Ctx(self, session_id, req, lease, adm.record, store.now(), emit, adm.phase)
        ctx.expire = adm.answer == "expire"  # the admission table found the pause too old: it only ends
        ctx.span = getattr(self._local, "span", None)
        ctx.events.append(
            "lock.preempted" if adm.preempted else "lock.taken_over" if adm.took_over else "lock.acquired"
        )
        try:
            return responses.finish(ctx, self._process(ctx))
        except FencedOut:
            return P.error(
                "interrupted",
                "this request was preempted by a break or inject, or its lease expired",
                self._continuations(session_id),
            )
        except ProtocolError as err:
            self._release(lease)
            return P.error("invalid", str(err), list(ctx.phase.decide("continuations")))
        except (SealedStateError, DamagedRow) as err:  # said without content; nothing of the request kept
            self._release(lease)
            return P.error("internal", str(err), list(ctx.phase.decide("continuations")))
        except SnapshotError as err:  # the run's brain or breakers were saved in a shape these tables cannot read
            self._release(lease)
            allowed = adm.record.phase_machine().decide("continuations")  # as saved: this request changed nothing
            return admission.unreadable(err, [c for c in ("inject", "break") if c in allowed])
        except Exception as err:  # noqa: BLE001 - a bug must not wedge the run: release, say so without content
            self._release(lease)
            return P.error(
                "internal",
                f"router error ({type(err).__name__}); the request changed nothing",
                list(adm.record.phase_machine().decide("continuations")),
            )

    def _release(self, lease: Lease) -> None:
        try:
            self.store().release(lease)
        except FencedOut:
            pass

    def _process(self, ctx: Ctx) -> Outcome:
        """Dispatch the admitted request to its concern; a run that goes on is driven by the turn loop."""
        t = ctx.req.type
        live = ctx.phase.state != "Idle"
        if live:
            ctx.bundle = admission.load_bundle(ctx, ctx.phase.data.run_id)
        if t == "break":
            return Outcome("broken", data={"ended": "user"})
        step: Outcome | Resume
        if t in ("execute", "inject"):
            step = admission.start(ctx, prior=ctx.bundle if live else None)
        else:
            since = int(ctx.phase.state_data.get("since", ctx.now))
            if ctx.expire or ctx.now - since >= self.policy.pause_ttl_ms:
                ctx.event("run.expired")
                return Outcome("expired", data={"ended": "expired"})
            if t == "tool_results":
                step = tool_calls.take_results(ctx)
            elif t == "approval_decisions":
                step = approvals.answer(ctx)
            elif t == "decrypted":
                step = sealing.decrypted(ctx)
            elif t == "sealed":
                step = sealing.sealed(ctx)
            else:  # pragma: no cover - admission refuses it first
                raise ProtocolError(f"{t} cannot be processed here")
        if isinstance(step, Resume):
            return turn.advance(ctx, step.brain, step.health)
        return step


__all__ = ["DEMO_SCRIPT", "Router", "SESSION_ID"]
