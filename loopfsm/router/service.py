"""The router: one protocol request in, one response envelope out, every machine composed around the IO.

``Router.handle(session_id, request)`` is the seed's acquire / process /
release.  The store admits the request against the saved row (router_run's
``admit`` table); the turn loop asks the engine brain ``next_step``, calls
the model through the fallback breaker, mediates each tool call with the
session's permissions (router_run's ``mediate`` table) and the per-tool
breakers, and the step is checkpointed (rows, next phase, response, release)
in one transaction.  No run is held in memory between requests: what a
paused run needs to continue is its *run-input bundle*, one ``input`` row.

Rules chosen where the seed is silent (README "Router service" repeats them):

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
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from ..crypto import Keyring
from ..errors import (
    FencedOut,
    ProtocolError,
    ProviderError,
    ScriptError,
    SnapshotError,
    StreamEventError,
    StreamProtocolError,
)
from ..machines.engine_brain import LoopMachine
from ..machines.engine_values import CallLLM, CallTools, Compact, Completed, Done, Failed
from ..machines.breaker_values import Route
from ..machines.fallback_breaker import FallbackBreaker, FallbackOutcome
from ..machines.messages import Message
from ..machines.router_run import ROUTER_RUN
from ..machines.tool_breaker import ToolHealth, ToolOutcome
from ..providers import ModelReply, ModelRequest, Provider
from ..store import Lease, Row, RunStore, ids, open_store
from ..store.runstore import RunRecord, wall_clock_ms
from ..store.serve import feed_phase
from . import SESSION_ID_PATTERN
from . import protocol as P
from .atrest import SealedState, SealedStateError
from .tools import (
    ALL_TOOLS,
    CLIENT_TOOLS,
    DEFAULT_PERMISSIONS,
    FILE_CHANGING,
    MAX_MEMORY_CHARS,
    MEMORY_TOOL,
    PLAN_TOOL,
    proposed_change,
)

SESSION_ID = __import__("re").compile(SESSION_ID_PATTERN)  # fullmatch: no newline
TOOL_NAMES = [t.name for t in ALL_TOOLS]
#: What a clear row of an encrypted session says for a tool the model named that the router does not offer.
UNKNOWN_TOOL_NAME = "(unknown tool)"


class _Invalid(ProtocolError):
    """The request is well-formed but does not fit the pause it answers."""


@dataclass
class _Outcome:
    """What processing ended with: how to feed the phase, and the response's data."""

    kind: str  # needs_decrypt, gate, tools, completed, failed, expired, aborted, broken, sealed
    pause: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)


def _unreadable(err: SnapshotError) -> dict[str, Any]:
    """The answer for a paused run these tables cannot read: why, by name, and that the run is kept as saved.

    Never a reset: deploying the tables it was saved under, or a migration
    that reads it, resumes it; the message names machines, states and fields
    only, never content.
    """
    return P.error(
        "internal",
        f"this session's run was saved under machine tables this router cannot read ({err}); "
        "it is kept as saved: deploy the tables it was saved under or a migration that reads it",
        [],
        retryable=False,
    )


class _Ctx:
    """One admitted request being processed."""

    def __init__(
        self,
        router: Router,
        session_id: str,
        req: P.Request,
        lease: Lease,
        record: RunRecord,
        now: int,
        emit: Callable[[str], None],
    ):
        self.router, self.session_id, self.req = router, session_id, req
        self.lease, self.record, self.now = lease, record, now
        self.phase = record.phase_machine()
        self.rows: list[Row] = []
        self.events: list[str | dict[str, Any]] = []
        self._emit = emit
        self.bundle: dict[str, Any] = {}
        self.run_id: str = self.phase.data.run_id or ""
        self.to_encrypt: dict[str, str] = {}
        self.expire = False
        # The session's history row as read once for this request (None: not read yet); only the
        # request's own checkpoint writes it, and it holds the lock until then.
        self.history: dict[str, Any] | None = None

    def event(self, name: str) -> None:
        self.events.append(name)
        self._emit(name)

    def trace(self, row: dict[str, Any]) -> None:
        """An event with metadata (a model call's provider, tokens, latency): a trace row of its own."""
        self.events.append(row)
        self._emit(row["event"])

    # -- rows -------------------------------------------------------------------------------
    def rid(self, slot: str) -> str:
        """A new row's id, from (session, run, step, slot): no other step of any run can mint it.

        A row a later step updates (a tool call's result, a diff's status) is
        addressed by the ref minted here, never by deriving the id again.
        """
        return ids.row_id(self.session_id, self.run_id, self.lease.step, slot)

    @property
    def encrypted(self) -> bool:
        return bool(self.bundle.get("mode") == "encrypted")

    def put(self, kind: str, row_id: str, meta: dict[str, Any], content: Any = None, sealed: Any = None) -> None:
        """Write a row now; in an encrypted session content never reaches a row (only its seal does)."""
        body = None if self.encrypted else content
        self.rows.append(Row(kind, f"{kind}/{row_id}", meta, body=body, sealed=sealed, row_id=row_id))
        self.bundle.setdefault("meta", {})[f"{kind}:{row_id}"] = meta

    def hold_for_seal(self, ref: str, text: str, meta: dict[str, Any]) -> None:
        """Router-authored content of an encrypted session: handed out in to_encrypt, written when sealed."""
        self.to_encrypt[ref] = text
        self.bundle.setdefault("pending", {})[ref] = meta
        self.bundle.setdefault("meta", {})[ref] = meta


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
        from ..providers.scripted import ScriptedProvider

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
        self._breaker_lock = threading.Lock()
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

    def recover(self) -> list[str]:
        """Startup: free the locks this router's previous incarnation held; their runs resume from phase."""
        s = self._borrow()  # from the pool and back, so the starting thread keeps no connection of its own
        broken = True
        try:
            freed = s.recover(self.holder)
            broken = False
            return freed
        finally:
            self._give_back(s, broken=broken)

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
        rec = self.store().load(session_id) if SESSION_ID.fullmatch(session_id or "") else None
        try:
            phase = rec.phase_machine() if rec is not None else ROUTER_RUN.new()
        except SnapshotError:  # a run these tables cannot read accepts nothing until one that can is deployed
            return []
        return list(phase.decide("continuations"))

    # -- the one entry point ----------------------------------------------------------------
    def handle(
        self, session_id: str, request: object, *, on_event: Callable[[str], None] | None = None
    ) -> dict[str, Any]:
        """Serve one request; never raises for anything a client can send, nor when the store is unreachable.

        The request holds one pooled connection while it is served and gives it back when it ends.
        """
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
            return _unreadable(err)
        if adm.outcome == "replayed":
            return self._replay(session_id, adm.response)
        if adm.outcome == "refused":
            if adm.answer == "idle":
                return P.envelope("idle", {"run_id": adm.record.phase_machine().data.last_run_id}, [])
            msg = {
                "busy": "another request of this session is being processed; re-send it",
                "run_live": "a run is live: answer its pause, or break / inject",
                "not_allowed": f"{req.type} is not an allowed continuation now",
                "request_id_reused": "an earlier step of this session used this request_id and only the latest "
                "request is replayed: send a new request_id",
            }.get(adm.answer, adm.answer)
            return P.error(adm.answer, msg, adm.allowed_continuations, retry_after_ms=adm.retry_after_ms)
        lease = adm.lease
        assert lease is not None
        emit("lock.preempted" if adm.preempted else "lock.taken_over" if adm.took_over else "lock.acquired")
        ctx = _Ctx(self, session_id, req, lease, adm.record, store.now(), emit)
        ctx.expire = adm.answer == "expire"  # the admission table found the pause too old: it only ends
        ctx.events.append(
            "lock.preempted" if adm.preempted else "lock.taken_over" if adm.took_over else "lock.acquired"
        )
        try:
            out = self._process(ctx)
            return self._finish(ctx, out)
        except FencedOut:
            return P.error(
                "interrupted",
                "this request was preempted by a break or inject, or its lease expired",
                self._continuations(session_id),
            )
        except ProtocolError as err:
            self._release(lease)
            return P.error("invalid", str(err), list(ctx.phase.decide("continuations")))
        except SealedStateError as err:  # said without content; the run waits for the right key or a break
            self._release(lease)
            return P.error("internal", str(err), list(ctx.phase.decide("continuations")))
        except SnapshotError as err:  # the run's brain or breakers were saved in a shape these tables cannot read
            self._release(lease)
            return _unreadable(err)
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

    def _replay(self, session_id: str, stored: Any) -> dict[str, Any]:
        if isinstance(stored, dict) and isinstance(stored.get("data"), dict) and stored["data"].get("replay_bundle"):
            row = self.store().row(session_id, "input", stored["data"]["replay_bundle"])
            try:
                bundle = self.sealed_state.read_bundle(session_id, row)
            except SealedStateError as err:
                return P.error("internal", str(err), self._continuations(session_id))
            if bundle is not None and isinstance(bundle.get("response"), dict):
                return dict(bundle["response"])
            return P.error("expired", "the run this request belonged to has ended", self._continuations(session_id))
        if isinstance(stored, dict):
            return dict(stored)
        return P.error(
            "response_lost", "this request was processed; its response was not kept", self._continuations(session_id)
        )

    # -- processing -------------------------------------------------------------------------
    def _load_bundle(self, ctx: _Ctx, run_id: str) -> dict[str, Any]:
        row = self.store().row(ctx.session_id, "input", f"b-{run_id}")
        try:
            bundle = self.sealed_state.read_bundle(ctx.session_id, row)
        except SealedStateError:
            if ctx.req.type != "break":
                raise
            return {"mode": "encrypted"}  # only a sealed bundle fails to open: break ends the run without it
        if bundle is None:
            raise _Invalid("the live run's bundle is missing")  # pragma: no cover - only a damaged store
        return bundle

    def _process(self, ctx: _Ctx) -> _Outcome:
        t = ctx.req.type
        live = ctx.phase.state != "Idle"
        if live:
            ctx.bundle = self._load_bundle(ctx, ctx.phase.data.run_id)
        if t == "break":
            return _Outcome("broken", data={"ended": "user"})
        if t in ("execute", "inject"):
            return self._start(ctx, prior=ctx.bundle if live else None)
        since = int(ctx.phase.state_data.get("since", ctx.now))
        if ctx.expire or ctx.now - since >= self.policy.pause_ttl_ms:
            ctx.event("run.expired")
            return _Outcome("expired", data={"ended": "expired"})
        if t == "tool_results":
            return self._tool_results(ctx)
        if t == "approval_decisions":
            return self._approvals(ctx)
        if t == "decrypted":
            return self._decrypted(ctx)
        if t == "sealed":
            return self._sealed(ctx)
        raise _Invalid(f"{t} cannot be processed here")  # pragma: no cover - admission refuses it first

    def _history_row(self, ctx: _Ctx) -> dict[str, Any]:
        """The session's history row, read from the store at most once per request."""
        if ctx.history is None:
            row = self.store().row(ctx.session_id, "input", "history")
            ctx.history = dict(row.body) if row is not None and isinstance(row.body, dict) else {}
        return dict(ctx.history)

    def _start(self, ctx: _Ctx, prior: dict[str, Any] | None) -> _Outcome:
        req = ctx.req
        history = self._history_row(ctx)
        if req.type == "execute":
            mode = req.data.get("mode", "plaintext")
            perms = req.data.get("permissions")
            gates = dict(req.data.get("gates") or {})
            text = req.data["prompt"]
        else:
            mode = (prior or {}).get("mode") or history.get("mode") or "plaintext"
            perms = (prior or {}).get("permissions")
            gates = dict((prior or {}).get("gates") or {})
            text = req.data["message"]
        if history.get("mode") not in (None, mode):
            raise _Invalid(f"this session is {history['mode']}: its mode is fixed by its first run")
        sealed = req.data.get("encrypted") or {}
        ref = P.prompt_ref(req.request_id)
        if mode == "encrypted" and set(sealed) != {ref}:
            raise _Invalid(f"an encrypted session's prompt travels sealed under {ref} (and nothing else)")
        if mode == "plaintext" and sealed:
            raise _Invalid("a plaintext session sends no sealed content")
        ctx.run_id = ids.run_id(ctx.session_id, req.request_id)
        ctx.bundle = {
            "mode": mode,
            "permissions": dict(self.permissions if perms is None else perms),
            "gates": gates,
            "model_calls": {},
            "turn": 0,
            "prompt_ref": ref,
            "history_refs": [ref],
        }
        prompt_id = ref.split(":", 1)[1]
        ctx.put(
            "message",
            prompt_id,
            {"role": "user", "run": "prompt"},
            content=Message.user(text).to_json(),
            sealed=sealed.get(ref),
        )
        brain = LoopMachine()
        if mode == "encrypted" and history.get("refs"):
            to_decrypt = {}
            for r in history["refs"]:
                kind, rid = r.split(":", 1)
                row = self.store().row(ctx.session_id, kind, rid)
                if row is not None and row.sealed is not None:
                    to_decrypt[r] = row.sealed
            ctx.bundle["prompt"] = text  # clear, short-lived: the run-input bundle
            ctx.bundle["decrypt_order"] = list(to_decrypt)
            return _Outcome(
                "needs_decrypt",
                pause={"to_decrypt": list(to_decrypt), "input_ref": f"input:b-{ctx.run_id}", "pending_seal": []},
                data={"to_decrypt": to_decrypt},
            )
        for m in history.get("messages", []):
            brain.inject(Message.from_json(m))
        brain.commit_pending()
        brain.accept_input(text)
        return self._advance(ctx, brain, ToolHealth())

    # -- the turn loop ----------------------------------------------------------------------
    def _call_model(self, ctx: _Ctx, brain: LoopMachine) -> ModelReply:
        """Call the model the fallback breaker routes to, retrying within ``max_model_attempts``.

        Every call writes a ``model.called`` trace row, then one ``model.responded`` or ``model.failed``
        row with its metadata (:func:`model_call_row`), never content.  A provider that refused its
        credentials (``auth``) is not asked again in this turn: when the breaker routes back to it the
        run fails as a setup error.  A reply whose stream breaks its protocol is refused: the breaker
        counts it as ``transient`` and the run fails.
        """
        messages = tuple(brain.full_history())
        last: ProviderError | None = None
        refused_credentials: set[int] = set()
        for _ in range(self.max_model_attempts):
            with self._breaker_lock:
                route = self.breaker.route(ctx.now)
            if not isinstance(route, Route):
                raise _RunFailed(f"model unavailable ({route.reason})")
            primary = route.model == "primary"
            provider = self.provider if primary else self.fallback
            name = str(getattr(provider, "name", type(provider).__name__))
            if id(provider) in refused_credentials:
                with self._breaker_lock:
                    self.breaker.record(ctx.now, route, "auth")
                raise _RunFailed(
                    f"model setup error: the {name} API refused the router's credentials (auth); "
                    "check the API key in the router's environment"
                )
            request = ModelRequest(self.model if primary else self.fallback_model, messages, tuple(ALL_TOOLS))
            # A scripted model answers by position: each route keeps its own count in the run's bundle, so a
            # retried or restarted turn asks for the same reply, and a scripted failure moves on to the next.
            counts = ctx.bundle.setdefault("model_calls", {})
            index = counts.get(route.model, 0)
            counts[route.model] = index + 1
            ctx.event("model.called")
            call = _ModelCall(self, name, request.model, route.model)
            try:
                if hasattr(provider, "reply_at"):
                    reply: ModelReply = provider.reply_at(index, request)
                else:
                    reply = provider.complete(request)
            except ProviderError as err:
                ctx.trace(call.done(err.outcome))
                last = err
                with self._breaker_lock:
                    if err.outcome != "invalid_request":
                        self.breaker.record(
                            ctx.now, route, cast(FallbackOutcome, err.outcome), retry_after=err.retry_after_ms
                        )
                if err.outcome == "auth":
                    refused_credentials.add(id(provider))
                if err.outcome in ("invalid_request", "context_length", "content_policy"):
                    break
                continue
            except (StreamEventError, StreamProtocolError) as err:
                ctx.trace(call.done("malformed_stream"))
                with self._breaker_lock:
                    self.breaker.record(ctx.now, route, "transient")
                raise _RunFailed(f"the {name} reply was refused, its stream is malformed: {str(err)[:300]}") from None
            except ScriptError as err:
                ctx.trace(call.done("script_error"))
                raise _RunFailed(f"scripted model: {err}") from None
            ctx.trace(call.done("success", reply))
            with self._breaker_lock:
                self.breaker.record(ctx.now, route, "success")
            return reply
        if last is not None and last.outcome == "auth":
            raise _RunFailed(
                f"model setup error: the {last.provider} API refused the router's credentials (auth); "
                "check the API key in the router's environment"
            )
        raise _RunFailed(f"model call failed ({last.outcome if last else 'unknown'})")

    def _advance(self, ctx: _Ctx, brain: LoopMachine, health: ToolHealth) -> _Outcome:
        """Run model turns until the run needs the client, a gate, or ends; bounded by ``max_rounds``."""
        try:
            for _ in range(self.max_rounds):
                step = brain.next_step()
                if isinstance(step, Done):
                    if brain.state != "Terminal":
                        brain.begin(step)
                    return self._ended(ctx, brain, health)
                if isinstance(step, Compact):
                    raise _RunFailed("the conversation outgrew the context window (this router does not compact)")
                if isinstance(step, CallTools):  # pragma: no cover - tools are answered before asking again
                    raise _RunFailed("tool calls left unanswered")
                assert isinstance(step, CallLLM)
                gated = self._gate_before_call(ctx, brain, health)
                if gated is not None:
                    return gated
                brain.begin(step)
                reply = self._call_model(ctx, brain)
                ctx.bundle["tokens"] = ctx.bundle.get("tokens", 0) + reply.input_tokens + reply.output_tokens
                ctx.bundle["context_tokens"] = reply.context_tokens
                brain.model_response(reply.message, reply.context_tokens, TOOL_NAMES, tool_health=health, now=ctx.now)
                ctx.bundle["turn"] += 1
                turn = ctx.bundle["turn"]
                aid = ctx.rid(f"assistant/{turn}")
                aref = f"message:{aid}"
                ctx.bundle["history_refs"].append(aref)
                if ctx.encrypted:
                    ctx.hold_for_seal(
                        aref, P.message_text(reply.message.to_json()), {"role": "assistant", "turn": turn}
                    )
                else:
                    ctx.put("message", aid, {"role": "assistant", "turn": turn}, content=reply.message.to_json())
                if brain.state == "Terminal":
                    return self._ended(ctx, brain, health, final_ref=aref)
                out = self._mediate(ctx, brain, health, aref)
                if out is not None:
                    return out
            raise _RunFailed(f"more than {self.max_rounds} model turns in one request")
        except _RunFailed as err:
            ctx.event("run.failed")
            return _Outcome("failed", data={"ended": "failed", "error": str(err)})

    def _mediate(self, ctx: _Ctx, brain: LoopMachine, health: ToolHealth, aref: str) -> _Outcome | None:
        """Mediate the brain's pending calls; None when every call was answered here (the loop goes on)."""
        turn = ctx.bundle["turn"]
        resolved: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        gate: dict[str, Any] | None = None
        pending = list(brain.data.pending_tools)
        for p in pending:
            call = p.call
            cid = ctx.rid(f"tool_call/{turn}/{call.id}")
            ref = f"tool_call:{cid}"
            ctx.bundle["history_refs"].append(ref)
            ctx.event("tool.requested")
            # A name the router does not offer is the model's own words: in an encrypted session only the seal has it.
            name = call.name if not ctx.encrypted or call.name in TOOL_NAMES else UNKNOWN_TOOL_NAME
            base = {"call_id": call.id, "name": name, "turn": turn}
            answer: Message | None = p.answer
            route = "pre_answered"
            if answer is None and call.name == PLAN_TOOL.name:
                if len(pending) > 1 or gate is not None:
                    answer = Message.tool_result(
                        call.id, "submit_plan must be the only call of its turn", is_error=True
                    )
                elif ctx.bundle.get("plan_approved"):
                    answer = Message.tool_result(call.id, "a plan was already approved for this run")
                else:
                    gate = {"call": call.to_json(), "ref": ref, "generation": p.generation}
                    continue
            if answer is None and call.name == MEMORY_TOOL.name:
                med = ctx.phase.decide(
                    "mediate", policy=self.policy, permission=ctx.bundle["permissions"].get(call.name)
                )
                if med["route"] != "deny":
                    answer, route = self._remember(ctx, call.id, call.arguments, turn), "memory"
            if answer is None:
                perm = ctx.bundle["permissions"].get(call.name)
                known = call.name in CLIENT_TOOLS or call.name == MEMORY_TOOL.name
                med = ctx.phase.decide("mediate", policy=self.policy, permission=perm, known=known)
                ctx.event(med["trace"])
                if med["route"] == "deny":
                    route = "deny"
                    answer = Message.tool_result(
                        call.id, f"denied: this session's permissions deny '{call.name}'", is_error=True
                    )
                    if p.generation is not None:
                        from ..machines.breaker_values import Allow

                        health.record(call.name, ctx.now, Allow(call.id, p.generation, tool=call.name), "ignored")
                else:
                    h = P.args_hash(call.name, call.arguments)
                    entry: dict[str, Any] = {
                        "call_id": call.id,
                        "ref": ref,
                        "requires_approval": med["route"],
                        "args_hash": h,
                    }
                    meta = dict(base, permission=med["route"], status="requested", args_hash=h)
                    ctx.put("tool_call", cid, meta, content={"arguments": call.arguments})
                    change = proposed_change(call.name, call.arguments) if call.name in FILE_CHANGING else None
                    if change is not None:
                        did = ctx.rid(f"diff/{turn}/{call.id}")
                        entry["diff_ref"] = f"diff:{did}"
                        dmeta = {"call_id": call.id, "status": "proposed"}
                        if not ctx.encrypted:  # a path is content too: in an encrypted session only the seal has it
                            dmeta["path"] = change["path"]
                        ctx.put("diff", did, dmeta, content=change)
                        if ctx.encrypted:
                            ctx.hold_for_seal(f"diff:{did}", P.canonical(change), dmeta)
                        ctx.event("diff.proposed")
                    calls.append({"entry": entry, "call": call.to_json(), "generation": p.generation})
                    continue
            # answered by the router: recorded as the call's result, visible to the model
            meta = dict(base, permission=route, status="answered", is_error=answer.is_error)
            if ctx.encrypted:
                ctx.put("tool_call", cid, meta)
                ctx.hold_for_seal(ref, P.message_text(answer.to_json()), meta)
            else:
                ctx.put(
                    "tool_call",
                    cid,
                    meta,
                    content={"arguments": call.arguments, "result": answer.text, "is_error": answer.is_error},
                )
            resolved.append(answer.to_json())
        if not calls and gate is None:
            brain.tool_results([Message.from_json(r) for r in resolved])
            return None
        ctx.bundle["resolved"] = resolved
        ctx.bundle["brain"] = brain.snapshot()
        ctx.bundle["health"] = health.snapshot()
        if gate is not None:
            args = gate["call"]["arguments"]
            plan = args.get("plan") if isinstance(args.get("plan"), str) else P.canonical(args)
            pid = ctx.rid(f"plan/{turn}/{gate['call']['id']}")
            approval = self._approval(
                ctx, "plan", f"plan-{turn}-{gate['call']['id']}"[:200], P.args_hash(PLAN_TOOL.name, args), f"plan:{pid}"
            )
            pmeta = {"approval_id": approval["approval_id"], "status": "requested"}
            if ctx.encrypted:
                ctx.hold_for_seal(f"plan:{pid}", plan, pmeta)
            else:
                ctx.put("plan", pid, pmeta, content={"plan": plan})
            shown = dict(approval, summary="" if ctx.encrypted else plan)
            return self._raise_gate(ctx, brain, health, [(approval, shown, {})], plan=gate)
        pending_seal = sorted(ctx.bundle.get("pending", {}))
        ctx.bundle["calls"] = calls
        requests = [dict(c["entry"], name=c["call"]["name"], arguments=c["call"]["arguments"]) for c in calls]
        return _Outcome(
            "tools",
            pause={"calls": [c["entry"] for c in calls], "assistant_ref": aref, "pending_seal": pending_seal},
            data={"tool_requests": requests},
        )

    def _ended(self, ctx: _Ctx, brain: LoopMachine, health: ToolHealth, final_ref: str | None = None) -> _Outcome:
        outcome = brain.outcome()
        if isinstance(outcome, Completed):
            if ctx.encrypted:
                to_seal = [{"ref": r, "meta": m} for r, m in sorted(ctx.bundle.get("pending", {}).items())]
                ctx.bundle["brain"] = brain.snapshot()
                return _Outcome("completed", pause={"to_seal": to_seal}, data={"message": outcome.final_text})
            brain.commit_pending()
            ctx.bundle["committed"] = [m.to_json() for m in brain.history()]
            return _Outcome("completed", data={"message": outcome.final_text})
        err = outcome.error if isinstance(outcome, Failed) else None
        raise _RunFailed(str(err) if err else f"run ended: {type(outcome).__name__}")

    # -- continuations ----------------------------------------------------------------------
    def _take_seals(self, ctx: _Ctx, required: list[str], extra_ok: bool = False) -> dict[str, Any]:
        sealed = dict(ctx.req.data.get("encrypted") or {})
        if not ctx.encrypted:
            if sealed:
                raise _Invalid("a plaintext session sends no sealed content")
            return {}
        missing = sorted(set(required) - set(sealed))
        unknown = sorted(set(sealed) - set(required))
        if missing:
            raise _Invalid(f"sealed content missing for {len(missing)} reference(s), first {missing[0]}")
        if unknown and not extra_ok:
            raise _Invalid(f"sealed content for a reference this pause does not hold: {unknown[0]}")
        return sealed

    def _write_sealed(
        self, ctx: _Ctx, sealed: dict[str, Any], refs: list[str], meta_of: dict[str, dict[str, Any]] | None = None
    ) -> None:
        if not ctx.encrypted:
            return
        metas = ctx.bundle.get("meta", {})
        for ref in refs:
            kind, rid = ref.split(":", 1)
            meta = (meta_of or {}).get(ref) or metas.get(ref) or {}
            ctx.rows.append(Row(kind, f"{kind}/{rid}", meta, sealed=sealed[ref], row_id=rid))
            ctx.bundle.get("pending", {}).pop(ref, None)
        if refs:
            ctx.event("seal.persisted")

    def _restore(self, ctx: _Ctx) -> tuple[LoopMachine, ToolHealth]:
        return LoopMachine.restore(ctx.bundle["brain"]), ToolHealth.restore(ctx.bundle["health"])

    def _tool_results(self, ctx: _Ctx) -> _Outcome:
        from ..machines.breaker_values import Allow

        calls = ctx.bundle.get("calls") or []
        by_id = {c["entry"]["call_id"]: c for c in calls}
        results = ctx.req.data["results"]
        got = [r["call_id"] for r in results]
        if sorted(got) != sorted(by_id):
            raise _Invalid(
                f"tool_results must answer each pending call exactly once (pending {len(by_id)}, got {len(got)})"
            )
        refs = [c["entry"]["ref"] for c in calls]
        pending_seal = list(ctx.phase.state_data.get("pending_seal") or [])
        sealed = self._take_seals(ctx, refs + pending_seal)
        brain, health = self._restore(ctx)
        answers: dict[str, dict[str, Any]] = {}
        meta_of: dict[str, dict[str, Any]] = {}
        for r in results:
            c = by_id[r["call_id"]]
            e, call = c["entry"], c["call"]
            decision = r.get("decision")
            if e["requires_approval"] == "ask" and decision is None:
                raise _Invalid(f"call {r['call_id'][:40]!r} is an ask call: its result carries the decision")
            if e["requires_approval"] == "allow" and decision == "rejected":
                raise _Invalid(f"call {r['call_id'][:40]!r} is allowed: it cannot be rejected")
            if r.get("args_hash") not in (None, e["args_hash"]):
                raise _Invalid(f"call {r['call_id'][:40]!r}: the decision was made for other arguments")
            if decision == "rejected" and not r["is_error"]:
                raise _Invalid(f"call {r['call_id'][:40]!r}: a rejected call's result is an error")
            ok = decision != "rejected" and not r["is_error"]
            if c.get("generation") is not None:
                outcome: ToolOutcome = "ignored" if decision == "rejected" else "success" if ok else "failure"
                health.record(call["name"], ctx.now, Allow(call["id"], c["generation"], tool=call["name"]), outcome)
            meta = {
                "call_id": call["id"],
                "name": call["name"],
                "turn": ctx.bundle["turn"],
                "permission": e["requires_approval"],
                "status": "answered",
                "args_hash": e["args_hash"],
                "is_error": r["is_error"],
                "decision": decision or "allowed",
                "approver": r.get("approver") if decision else None,
            }
            if decision:
                ctx.event("approval.decided")
            ctx.event("tool.result")
            rid = e["ref"].split(":", 1)[1]
            if ctx.encrypted:
                meta_of[e["ref"]] = meta
            else:
                ctx.put(
                    "tool_call",
                    rid,
                    meta,
                    content={"arguments": call["arguments"], "result": r["content"], "is_error": r["is_error"]},
                )
            if "diff_ref" in e:
                status = "applied" if ok else "rejected"
                dref = e["diff_ref"]
                dmeta = dict(ctx.bundle.get("meta", {}).get(dref, {}), status=status)
                ctx.event(f"diff.{status}")
                if ctx.encrypted:
                    meta_of[dref] = dmeta
                else:
                    change = proposed_change(call["name"], call["arguments"])
                    ctx.put("diff", dref.split(":", 1)[1], dmeta, content=change)
            answers[call["id"]] = P.tool_result_message(call["id"], r["content"], r["is_error"])
        self._write_sealed(ctx, sealed, refs + pending_seal, meta_of)
        ordered = [Message.from_json(m) for m in ctx.bundle.get("resolved", [])]
        ordered += [Message.from_json(answers[c["call"]["id"]]) for c in calls]
        brain.tool_results(ordered)
        ctx.bundle["calls"], ctx.bundle["resolved"] = [], []
        return self._advance(ctx, brain, health)

    def _approvals(self, ctx: _Ctx) -> _Outcome:
        """after_approval: check the answers against the pending approvals, then continue, abort or expire."""
        gate = ctx.bundle.get("gate") or {}
        pending = list(gate.get("approvals") or [])
        by_id = {a["approval_id"]: a for a in pending}
        decisions = ctx.req.data["decisions"]
        got = [d["approval_id"] for d in decisions]
        if sorted(got) != sorted(by_id):
            raise _Invalid(
                "approval_decisions must decide each pending approval exactly once "
                f"(pending {len(by_id)}, got {len(got)})"
            )
        for d in decisions:
            if d.get("args_hash") not in (None, by_id[d["approval_id"]]["args_hash"]):
                raise _Invalid(f"approval {d['approval_id'][:40]!r}: the decision was made for other arguments")
        pending_seal = list(ctx.phase.state_data.get("pending_seal") or [])
        sealed = self._take_seals(ctx, pending_seal)
        answers: dict[str, str] = {}
        for d in decisions:
            a = by_id[d["approval_id"]]
            answers[a["approval_id"]] = ctx.phase.decide(
                "approval_answer", policy=self.policy, answer=d["decision"], now=ctx.now, expires_at=a["expires_at"]
            )
            self._record_approval(ctx, a, answers[a["approval_id"]], d["approver"])
            ctx.event("approval.decided")
        verdict = ctx.phase.decide(
            "after_approval",
            policy=self.policy,
            expired="expired" in answers.values(),
            rejected="rejected" in answers.values(),
        )
        plan = gate.get("plan")
        meta_of: dict[str, dict[str, Any]] = {}
        if plan is not None:
            approval = next(a for a in pending if a["kind"] == "plan")
            pref = approval["ref"]
            pmeta = {
                "approval_id": approval["approval_id"],
                "approver": next(d["approver"] for d in decisions if d["approval_id"] == approval["approval_id"]),
                "args_hash": approval["args_hash"],
                "expires_at": approval["expires_at"],
                "status": answers[approval["approval_id"]],
            }
            meta_of[pref] = pmeta
            if not ctx.encrypted:
                ctx.put("plan", pref.split(":", 1)[1], pmeta, content={"plan": plan["call"]["arguments"].get("plan")})
        self._write_sealed(ctx, sealed, pending_seal, meta_of)
        if verdict == "expired":
            ctx.event("approval.expired")
            return _Outcome("expired", data={"ended": "expired"})
        if verdict == "aborted":
            return _Outcome("aborted", data={"ended": "aborted"})
        brain, health = self._restore(ctx)
        details = gate.get("details") or {}
        for a in pending:  # what each approval grants the gated step
            args = details.get(a["approval_id"]) or {}
            if a["kind"] == "disclosure":
                ctx.bundle["disclosed_turn"] = args["turn"]
            elif a["kind"] == "cost_ceiling":
                ctx.bundle["granted_tokens"] = args["spent_tokens"] + args["next_tokens"]
        ctx.bundle["gate"] = None
        if plan is None:  # a gate before a model call: the call goes ahead
            return self._advance(ctx, brain, health)
        ctx.bundle["plan_approved"] = True
        d = next(x for x in decisions if x["approval_id"] == approval["approval_id"])
        call = plan["call"]
        answer = Message.tool_result(call["id"], f"plan approved by {d['approver']}")
        cid = plan["ref"].split(":", 1)[1]
        meta = {
            "call_id": call["id"],
            "name": call["name"],
            "status": "answered",
            "decision": "approved",
            "approver": d["approver"],
            "args_hash": approval["args_hash"],
            "is_error": False,
        }
        if ctx.encrypted:
            ctx.put("tool_call", cid, meta)
            ctx.hold_for_seal(plan["ref"], P.message_text(answer.to_json()), meta)
        else:
            ctx.put(
                "tool_call",
                cid,
                meta,
                content={"arguments": call["arguments"], "result": answer.text, "is_error": False},
            )
        ordered = [Message.from_json(m) for m in ctx.bundle.get("resolved", [])] + [answer]
        brain.tool_results(ordered)
        ctx.bundle["resolved"] = []
        return self._advance(ctx, brain, health)

    # -- gates and memory -------------------------------------------------------------------
    def _remote_providers(self) -> list[str]:
        """Where a model call may send the conversation: the primary and the fallback, if remote.

        A provider is remote unless it says otherwise (``remote = False``), so an
        adapter that forgets to say is asked about, never silently trusted.
        """
        return sorted(
            {
                str(getattr(p, "name", type(p).__name__))
                for p in (self.provider, self.fallback)
                if getattr(p, "remote", True)
            }
        )

    def _approval(
        self, ctx: _Ctx, kind: str, approval_id: str, args_hash: str, ref: str | None = None
    ) -> dict[str, Any]:
        """An approval record as the pause holds it: refs and non-secret metadata only."""
        a: dict[str, Any] = {
            "approval_id": approval_id,
            "kind": kind,
            "args_hash": args_hash,
            "expires_at": ctx.now + self.policy.approval_ttl_ms,
        }
        if ref is not None:
            a["ref"] = ref
        return a

    def _record_approval(self, ctx: _Ctx, a: dict[str, Any], status: str, approver: str | None = None) -> None:
        """The approval's durable record: a trace row (metadata only) rewritten as its status changes."""
        meta = {
            "event": "approval.record",
            "approval_id": a["approval_id"],
            "kind": a["kind"],
            "args_hash": a["args_hash"],
            "expires_at": a["expires_at"],
            "status": status,
            "approver": approver,
            "at": ctx.now,
            "ref": a.get("ref"),
        }
        # minted when the approval is raised, kept in the bundle so the decision rewrites the same row
        minted = ctx.bundle.setdefault("approval_rows", {})
        rid = minted.setdefault(a["approval_id"], ctx.rid(f"approval/{a['approval_id']}"))
        ctx.rows.append(Row("trace", f"approval/{a['approval_id']}", meta, row_id=rid))

    def _raise_gate(
        self,
        ctx: _Ctx,
        brain: LoopMachine,
        health: ToolHealth,
        approvals: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]],
        plan: dict[str, Any] | None = None,
    ) -> _Outcome:
        """Pause at AwaitingApproval: ``approvals`` are (record, what the client is shown, the gated figures)."""
        ctx.bundle["brain"] = brain.snapshot()
        ctx.bundle["health"] = health.snapshot()
        records = [a for a, _, _ in approvals]
        ctx.bundle["gate"] = {
            "approvals": records,
            "details": {a["approval_id"]: args for a, _, args in approvals},
            "plan": plan,
        }
        for a in records:
            self._record_approval(ctx, a, "requested")
            ctx.event("approval.requested")
        pending_seal = sorted(ctx.bundle.get("pending", {}))
        return _Outcome(
            "gate",
            pause={"approvals": records, "pending_seal": pending_seal},
            data={"approvals": [shown for _, shown, _ in approvals]},
        )

    def _gate_before_call(self, ctx: _Ctx, brain: LoopMachine, health: ToolHealth) -> _Outcome | None:
        """Ask router_run's disclosure_gate and cost_gate about the next model call; a gate if either asks."""
        turn = ctx.bundle["turn"]
        gates = ctx.bundle.get("gates") or {}
        remote = self._remote_providers()
        messages = [m.to_json() for m in brain.full_history()]
        disclose = ctx.phase.decide(
            "disclosure_gate",
            policy=self.policy,
            remote=bool(remote),
            session=gates.get("disclosure"),
            first_call=turn == 0,
            approved=ctx.bundle.get("disclosed_turn") == turn,
        )
        spent = int(ctx.bundle.get("tokens", 0))
        estimate = max(int(ctx.bundle.get("context_tokens", 0)), len(P.canonical(messages)) // 4)
        cost = ctx.phase.decide(
            "cost_gate",
            policy=self.policy,
            spent_tokens=spent,
            next_tokens=estimate,
            session_ceiling=int(gates.get("cost_ceiling_tokens", 0)),
            granted_tokens=int(ctx.bundle.get("granted_tokens", 0)),
        )
        asked: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = []
        if disclose == "ask":
            args = {"providers": remote, "turn": turn, "messages": len(messages)}
            a = self._approval(ctx, "disclosure", f"disclosure-{turn}", P.args_hash("disclosure", args))
            n = len(messages)
            summary = (
                f"send the conversation ({n} message{'' if n == 1 else 's'}) to the remote model "
                f"{', '.join(remote)} (model call {turn + 1} of this run)"
            )
            asked.append((a, dict(a, summary=summary, details=args), args))
        if cost["gate"] == "ask":
            args = {k: cost[k] for k in ("ceiling_tokens", "spent_tokens", "next_tokens")}
            args["turn"] = turn
            granted = int(ctx.bundle.get("granted_tokens", 0))
            a = self._approval(ctx, "cost_ceiling", f"cost-{turn}-{granted}", P.args_hash("cost_ceiling", args))
            summary = (
                f"this run has used {args['spent_tokens']} tokens; the next model call (about "
                f"{args['next_tokens']} more) would pass the ceiling of {args['ceiling_tokens']} tokens"
            )
            asked.append((a, dict(a, summary=summary, details=args), args))
        if not asked:
            return None
        return self._raise_gate(ctx, brain, health, asked)

    def _remember(self, ctx: _Ctx, call_id: str, arguments: dict[str, Any], turn: int) -> Message:
        """The remember tool: a session memory row under an id of (session, key); the answer the model sees."""
        key, value = arguments.get("key"), arguments.get("value")
        if not (isinstance(key, str) and 0 < len(key) <= 128 and isinstance(value, str)):
            return Message.tool_result(
                call_id, "remember needs a key (1-128 characters) and a string value", is_error=True
            )
        if len(value) > MAX_MEMORY_CHARS:
            return Message.tool_result(
                call_id, f"a remembered value holds at most {MAX_MEMORY_CHARS} characters", is_error=True
            )
        rid = ids.row_id(ctx.session_id, "", 0, f"memory/{key}")
        meta = {"call_id": call_id, "turn": turn, "status": "remembered"}
        content = {"key": key, "value": value}
        if ctx.encrypted:
            ctx.hold_for_seal(f"memory:{rid}", P.canonical(content), meta)
        else:
            ctx.put("memory", rid, meta, content=content)
        ctx.event("memory.written")
        return Message.tool_result(call_id, f"remembered {key}")

    def _decrypted(self, ctx: _Ctx) -> _Outcome:
        order = list(ctx.bundle.get("decrypt_order") or [])
        plain = ctx.req.data["plaintext"]
        if set(plain) != set(order):
            raise _Invalid("decrypted must return the plaintext of exactly the references in to_decrypt")
        self._take_seals(ctx, list(ctx.phase.state_data.get("pending_seal") or []))
        brain = LoopMachine()
        import json as _json

        for ref in order:
            try:
                msg = Message.from_json(_json.loads(plain[ref]))
            except (ValueError, KeyError, TypeError):
                raise _Invalid(f"{ref}: the opened content is not a conversation message") from None
            brain.inject(msg)
        brain.commit_pending()
        brain.accept_input(ctx.bundle.pop("prompt"))
        ctx.event("context.resolved")
        return self._advance(ctx, brain, ToolHealth())

    def _sealed(self, ctx: _Ctx) -> _Outcome:
        to_seal = [t["ref"] for t in ctx.phase.state_data.get("to_seal") or []]
        sealed = self._take_seals(ctx, to_seal)
        self._write_sealed(ctx, sealed, to_seal, {t["ref"]: t["meta"] for t in ctx.phase.state_data["to_seal"]})
        ctx.bundle["committed_refs"] = True
        return _Outcome("sealed", data={"ended": "completed"})

    # -- release ----------------------------------------------------------------------------
    def _finish(self, ctx: _Ctx, out: _Outcome) -> dict[str, Any]:
        phase, req = ctx.phase, ctx.req
        was_idle = phase.state == "Idle"
        ended: str | None = None
        fed: list[str] = []
        if out.kind in ("broken", "failed", "expired"):
            reason = {"broken": "user", "failed": "failed", "expired": "expired"}[out.kind]
            ended = reason
            if phase.state != "Idle":
                fed = list(phase.break_run(ctx.now, reason) or [])
            elif out.kind == "broken":
                fed = ["run.broken"]
        elif out.kind == "aborted":
            fed = list(phase.approval_decisions("completed", ctx.now, aborted=True) or [])
            ended = "aborted"
        elif out.kind == "sealed":
            fed = list(phase.sealed(ctx.now) or [])
        else:
            outcome = out.kind
            from ..store.serve import Outcome as _StoreOutcome

            fed = feed_phase(
                phase,
                ctx.session_id,
                req.type,
                req.request_id,
                _StoreOutcome(outcome=outcome, encrypted=ctx.encrypted, pause=out.pause),
                ctx.now,
            )
            if phase.state == "Idle":
                ended = phase.data.ended
        run_ended = phase.state == "Idle"
        run_id = ctx.run_id or phase.data.run_id or phase.data.last_run_id
        rows = list(ctx.rows)
        history = None
        if run_ended and out.kind in ("completed", "sealed"):
            h = self._history_row(ctx)
            mode = ctx.bundle.get("mode", "plaintext")
            if mode == "encrypted":
                history = {"mode": mode, "refs": list(h.get("refs", [])) + list(ctx.bundle.get("history_refs", []))}
            else:
                history = {"mode": mode, "messages": ctx.bundle.get("committed", [])}
            rows.append(Row("input", "history", {"mode": mode}, body=history, row_id="history"))
        elif run_ended and ctx.bundle.get("mode") and not self._history_row(ctx):
            rows.append(
                Row(
                    "input",
                    "history",
                    {"mode": ctx.bundle["mode"]},
                    body={"mode": ctx.bundle["mode"]},
                    row_id="history",
                )
            )
        # the response: the phase's envelope, the step's data
        decided = phase.decide("respond", ended=None if out.kind == "sealed" else ended if run_ended else None)
        data: dict[str, Any] = dict(out.data, run_id=run_id)
        if ctx.to_encrypt and not run_ended:
            data["to_encrypt"] = dict(ctx.to_encrypt)
        data["trace_id"] = f"trace:{run_id}"
        response = P.envelope(decided["status"], data, decided["allowed_continuations"])
        stored: dict[str, Any] = response
        old = None if was_idle else ctx.record.phase_machine().data.run_id
        if old and old != run_id:  # an inject ended the old run: its bundle goes with it
            rows.append(Row("input", "bundle", {"run_id": old, "ended": True}, body=None, row_id=f"b-{old}"))
        if run_ended:
            if ctx.bundle:
                rows.append(Row("input", "bundle", {"run_id": run_id, "ended": True}, body=None, row_id=f"b-{run_id}"))
        else:
            bundle = dict(ctx.bundle)
            if ctx.encrypted:
                bundle["response"] = response
                stored = P.envelope(
                    decided["status"],
                    {"run_id": run_id, "replay_bundle": f"b-{run_id}"},
                    decided["allowed_continuations"],
                )
            rows.append(self.sealed_state.bundle_row(ctx.session_id, run_id, bundle, encrypted=ctx.encrypted))
        trace = ctx.events + fed + ["lock.released"]
        self.store().checkpoint(
            ctx.lease, phase, request_id=req.request_id, response=stored, rows=rows, trace=trace, run_id=run_id
        )
        return response


class _ModelCall:
    """One model call, timed at the edge: its trace row, and its span when a tracer is configured."""

    def __init__(self, router: Router, provider: str, model: str, route: str):
        self.router, self.provider, self.model, self.route = router, provider, model, route
        self.started, self.started_ns = router.monotonic(), time.time_ns()

    def done(self, outcome: str, reply: ModelReply | None = None) -> dict[str, Any]:
        latency_ms = max(0.0, (self.router.monotonic() - self.started) * 1000.0)
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
        if self.router.tracer is not None:
            from ..otel import record_model_call

            record_model_call(self.router.tracer, row, self.started_ns, self.started_ns + int(latency_ms * 1e6))
        return row


class _RunFailed(Exception):
    """The run cannot go on (model unavailable, turn cap, script exhausted): it ends as failed."""


#: The default script: a turn that looks around, one that writes a file, a closing line.  Offline, deterministic.
DEMO_SCRIPT: list[dict[str, Any]] = [
    {
        "text": "Let me look at the workspace first.",
        "tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "ls"}}],
        "input_tokens": 120,
        "output_tokens": 20,
    },
    {
        "text": "I will leave a note.",
        "tool_calls": [
            {
                "id": "c2",
                "name": "write_file",
                "arguments": {"path": "NOTES.md", "content": "Visited by the loopfsm demo router.\n"},
            }
        ],
        "input_tokens": 180,
        "output_tokens": 30,
    },
    {"text": "Done: I listed the workspace and wrote NOTES.md.", "input_tokens": 220, "output_tokens": 15},
]
