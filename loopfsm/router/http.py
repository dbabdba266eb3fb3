"""The router over HTTP: a Starlette ASGI app (serve it with uvicorn).

Routes (all JSON; the OpenAPI document is at ``/openapi.json``):

- ``POST /v1/sessions/{session}/execute``: an ``execute`` request.
- ``POST /v1/sessions/{session}/continue``: any continuation (``tool_results``, ``break`` ...).
- ``POST /v1/sessions/{session}/stream``: either, answered as server-sent events: one ``trace``
  event per step of the turn as it runs (its data is the stable event name, never content), a
  ``: keep-alive`` comment after 10 s of silence, then one ``response`` event with the envelope.
- ``GET /healthz`` (liveness: the process serves) and ``GET /readyz`` (readiness: the store answers; 503 when
  it does not); ``GET /metrics`` (Prometheus text) with ``router serve --metrics``.

Every protocol outcome, refusals included, is HTTP 200 with the response
envelope; a body that is not JSON is 400 and one over the size limit 413,
both still carrying an ``error`` envelope.  Nothing a client sends ends in a
5xx: the router answers its own failures with ``error``/``internal``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable
from typing import Any

from loopfsm.core.errors import ConfigError

from .store.claims import Claim
from .telemetry import Tracing, TracingSetup
from .protocol import MAX_REQUEST_BYTES, MAX_REQUEST_DEPTH, error, nested_deeper_than, protocol_schema
from .service import SESSION_ID, Router

#: Seconds a client has to send a whole request body (a slow or stalled upload is answered 408).
BODY_TIMEOUT_S = 30.0

#: Seconds of silence after which the event stream sends a comment, so a long model call does not look dead.
KEEPALIVE_S = 10.0


#: What a ``trace`` event's data is: one stable dotted event name (``lock.acquired``, ``tool.requested`` ...).
TRACE_NAME = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$"


def stream_events() -> dict[str, Any]:
    """The ``text/event-stream`` media type of ``/stream``, as OpenAPI 3.2 describes a stream of server-sent events.

    ``itemSchema`` is one event, ``{event, data}`` as the SSE format parses it: a ``trace`` event's data is a
    bare event name (not JSON), a ``response`` event's data is the JSON response envelope; ``schema`` is the
    whole stream read as a list of events, which holds exactly one ``response``.  The ``: keep-alive``
    comments are not events.
    """
    trace = {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"const": "trace"},
            "data": {
                "type": "string",
                "pattern": TRACE_NAME,
                "description": "a stable event name such as lock.acquired or tool.requested; never content",
            },
        },
    }
    response = {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"const": "response"},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": {"$ref": "#/components/schemas/response"},
                "description": "the response envelope, as JSON on one line",
            },
        },
    }
    return {
        "schema": {
            "type": "array",
            "contains": {"properties": {"event": {"const": "response"}}, "required": ["event"]},
            "minContains": 1,
            "maxContains": 1,
            "description": "one trace event per step of the turn as it runs, then the response, last",
        },
        "itemSchema": {"oneOf": [trace, response]},
    }


def openapi(schema_url: str = "") -> dict[str, Any]:
    """The OpenAPI 3.2 document of the app (the protocol schema's $defs are its components).

    3.2, not 3.1: it is the version that says how to describe a stream of server-sent events (``itemSchema``).
    """
    defs = json.loads(json.dumps(protocol_schema()["$defs"]).replace("#/$defs/", "#/components/schemas/"))
    sid = {
        "name": "session",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": f"^{SESSION_ID.pattern}$"},  # ECMA's $ is the end
    }

    def op(summary: str, body: str, content: dict[str, Any]) -> dict[str, Any]:
        return {
            "summary": summary,
            "parameters": [sid],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{body}"}}},
            },
            "responses": {
                "200": {"description": "the response envelope", "content": content},
                "400": {"description": "body is not JSON", "content": envelope_content},
                "408": {"description": "body took too long to arrive", "content": envelope_content},
                "413": {"description": "body too large", "content": envelope_content},
            },
        }

    envelope_content = {"application/json": {"schema": {"$ref": "#/components/schemas/response"}}}
    defs["continuation"] = {
        "oneOf": [
            {"$ref": f"#/components/schemas/{k}"}
            for k in (
                "tool_results",
                "approval_decisions",
                "decrypted",
                "sealed",
                "inject",
                "break",
            )
        ]
    }
    return {
        "openapi": "3.2.0",
        "info": {"title": "loopfsm router", "version": "1"},
        "paths": {
            "/v1/sessions/{session}/execute": {"post": op("start a run", "execute", envelope_content)},
            "/v1/sessions/{session}/continue": {"post": op("answer the run's pause", "continuation", envelope_content)},
            "/v1/sessions/{session}/stream": {
                "post": op(
                    "either, streamed as server-sent events",
                    "request",
                    {"text/event-stream": stream_events()},
                )
            },
            "/healthz": {
                "get": {
                    "summary": "liveness",
                    "responses": {
                        "200": {
                            "description": "the router is serving; holder is its lock-holder id",
                            "content": {
                                "application/json": {
                                    "schema": {
                                        "type": "object",
                                        "required": ["ok", "holder"],
                                        "properties": {"ok": {"const": True}, "holder": {"type": "string"}},
                                    }
                                }
                            },
                        }
                    },
                }
            },
            "/readyz": {
                "get": {
                    "summary": "readiness: the store answers",
                    "responses": {
                        code: {
                            "description": what,
                            "content": {
                                "application/json": {
                                    "schema": {
                                        "type": "object",
                                        "required": ["ready", "holder", "store"],
                                        "properties": {
                                            "ready": {"const": code == "200"},
                                            "holder": {"type": "string"},
                                            "store": {"type": "string"},
                                        },
                                    }
                                }
                            },
                        }
                        for code, what in (
                            ("200", "the store answers: requests can be served"),
                            ("503", "the store does not answer; store says why (the error's class, no address)"),
                        )
                    },
                }
            },
        },
        "components": {"schemas": defs},
    }


#: The W3C trace-context headers a request may carry, and the most of each that is read (the standard's limits:
#: 55 characters of traceparent, 32 list members of tracestate of at most 256 characters each, with separators).
TRACE_HEADERS = {"traceparent": 55, "tracestate": 8192}


def carrier(request: Any) -> dict[str, str] | None:
    """The request's trace-context headers (None without a traceparent), longer ones left out, as the standard
    says a receiver does with a malformed one."""
    found = {
        name: value
        for name, most in TRACE_HEADERS.items()
        if (value := request.headers.get(name)) is not None and len(value) <= most
    }
    return found if "traceparent" in found else None


def create_app(
    router: Router,
    *,
    sweep_every_s: float | None = None,
    claim: Claim | None = None,
    tracing: Tracing | None = None,
    metrics: bool = False,
) -> Any:
    """The ASGI app over ``router``; with ``sweep_every_s`` it also sweeps the store that often while it runs, and
    with ``claim`` (the router's holder-id claim) it renews it while it runs and gives it up when it stops.

    ``tracing`` (a started :class:`~loopfsm.router.telemetry.Tracing`) is shut down, sending the spans and
    metrics it still holds.  The sweep, the claim and the telemetry stop in the app's shutdown, not after the
    server returns: uvicorn raises the stop signal again once it has shut down, which ends the process before
    code after ``Server.run`` could run.  ``metrics`` serves the router's metrics as Prometheus text at
    ``GET /metrics``."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    doc = openapi()
    turns: set[asyncio.Future[None]] = set()  # streamed turns still running (kept referenced until done)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        keeper = router.claim_keeper(claim).start() if claim is not None else None
        sweeper = None
        if sweep_every_s:
            from .store.sweep import PeriodicSweep

            sweeper = PeriodicSweep(
                router.store_url,
                prefix=router.prefix,
                interval_s=sweep_every_s,
                clock=router.clock,
            ).start()
        try:
            yield
        finally:
            if sweeper is not None:
                sweeper.stop()
            if keeper is not None:
                keeper.stop()  # and the claim is given up: a successor under this id starts at once
            router.close()
            if tracing is not None:
                tracing.shutdown()

    async def body_of(request: Request, session: str) -> tuple[Any, Response | None]:
        chunks, size = [], 0
        try:
            async with asyncio.timeout(BODY_TIMEOUT_S):  # a body sent a byte a minute holds a worker no longer
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > MAX_REQUEST_BYTES:
                        return None, JSONResponse(error("invalid", "request body too large", []), status_code=413)
                    chunks.append(chunk)
        except ClientDisconnect:  # gone before its body arrived: nothing to serve, nothing to log
            return None, Response(status_code=400)
        except TimeoutError:
            return None, JSONResponse(error("invalid", "request body took too long to arrive", []), status_code=408)
        too_deep = JSONResponse(error("invalid", "request body is nested too deeply", []), status_code=400)
        try:
            body = json.loads(b"".join(chunks))
        except (ValueError, UnicodeDecodeError):
            return None, JSONResponse(error("invalid", "request body is not JSON", []), status_code=400)
        except RecursionError:  # nested deeper than json.loads goes: still the client's mistake, not a 5xx
            return None, too_deep
        if nested_deeper_than(body, MAX_REQUEST_DEPTH):  # the same bound on every interpreter
            return None, too_deep
        return body, None

    def shape(obj: Any, want_execute: bool) -> dict[str, Any] | None:
        if isinstance(obj, dict) and (obj.get("type") == "execute") != want_execute:
            where = "/execute" if obj.get("type") == "execute" else "/continue"
            return error("invalid", f"send {obj.get('type')!s:.20} to {where}", [])
        return None

    def handler(is_execute: bool) -> Any:
        """/execute and /continue: the same checks, each for its own request types."""

        async def handle(request: Request) -> Response:
            session = request.path_params["session"]
            obj, bad = await body_of(request, session)
            if bad is not None:
                return bad
            wrong = shape(obj, is_execute)
            if wrong is not None:
                return JSONResponse(wrong)
            return JSONResponse(await run_in_threadpool(router.handle, session, obj, trace_context=carrier(request)))

        return handle

    async def stream(request: Request) -> Response:
        session = request.path_params["session"]
        obj, bad = await body_of(request, session)
        if bad is not None:
            return bad
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        traced = carrier(request)

        def on_event(name: str) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, ("trace", name))

        async def work() -> None:
            # The worker threads are the ones /execute and /continue use, so their store connections are reused.
            resp = await run_in_threadpool(router.handle, session, obj, on_event=on_event, trace_context=traced)
            queue.put_nowait(("response", json.dumps(resp)))

        # The turn runs to its end even if the client goes away: its re-send is then answered by replay.
        task = asyncio.ensure_future(work())
        turns.add(task)
        task.add_done_callback(turns.discard)

        async def events() -> Any:
            while True:
                try:
                    kind, data = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    yield ": keep-alive\n\n"  # a long model call: proxies and read timeouts see traffic
                    continue
                yield f"event: {kind}\ndata: {data}\n\n"
                if kind == "response":
                    return

        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True, "holder": router.holder})

    async def readyz(request: Request) -> Response:
        problem = await run_in_threadpool(router.store_problem)
        if problem is None:
            return JSONResponse({"ready": True, "holder": router.holder, "store": "ok"})
        return JSONResponse({"ready": False, "holder": router.holder, "store": problem}, status_code=503)

    async def metrics_text(request: Request) -> Response:
        return Response(router.metrics.prometheus(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def openapi_doc(request: Request) -> Response:
        return JSONResponse(doc)

    return Starlette(
        routes=[
            Route("/v1/sessions/{session}/execute", handler(True), methods=["POST"]),
            Route("/v1/sessions/{session}/continue", handler(False), methods=["POST"]),
            Route("/v1/sessions/{session}/stream", stream, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/openapi.json", openapi_doc, methods=["GET"]),
            *([Route("/metrics", metrics_text, methods=["GET"])] if metrics else []),
        ],
        lifespan=lifespan,
    )


def serve(
    router: Router,
    host: str = "127.0.0.1",
    port: int = 8787,
    log_level: str = "warning",
    *,
    sweep_every_s: float | None = None,
    on_listening: Callable[[int], None] | None = None,
    workers: int = 1,
    on_bound: Callable[[int], None] | None = None,
    tracing: TracingSetup | None = None,
    metrics: bool = False,
) -> None:
    """Listen, then recover this router's stale locks, then serve until interrupted (sweeping every ``sweep_every_s``).

    The socket is bound before recovery: a second router started by mistake on a
    port already taken fails there, and never frees the locks of the router that
    is serving.  Then the holder id is claimed (:mod:`loopfsm.router.store.claims`):
    a live router serving under it stops this one here, before it frees a lock.
    ``on_bound`` is called with the port bound (the system's choice for port 0)
    before the claim (to name the holder id after it), ``on_listening`` after it,
    both before recovery.  ``tracing`` (from the ``OTEL_*`` variables) is started in each serving process and
    gives the router its tracer and meter; ``metrics`` serves ``GET /metrics``.  With ``workers`` above 1 this process
    supervises that many forked router processes on the socket (see
    :mod:`loopfsm.router.workers`): each takes the holder id ``HOLDER-wI``,
    frees its own previous incarnation's locks and opens its own store
    connections after the fork; only worker 0 sweeps.
    """
    import socket

    import uvicorn

    if workers < 1:
        raise ConfigError(f"a router serves with 1 worker process or more, got {workers}")
    # IPPROTO_TCP, not the default 0: asyncio turns Nagle off (TCP_NODELAY) only on accepted sockets whose proto
    # says TCP, and they inherit it from this one. Without it every reply on a kept-alive connection waits ~40 ms
    # for the client's delayed ACK.
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT does not block
    try:
        sock.bind((host, port))
    except (OSError, OverflowError) as err:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {getattr(err, 'strerror', None) or err}") from None
    port_taken = sock.getsockname()[1]  # the one asked for, or the system's choice for 0
    try:
        if on_bound is not None:
            on_bound(port_taken)  # may name the holder id after the port
        mine = router.claim()  # before any lock is freed: a live process serving under this id stops the start here
        if on_listening is not None:
            on_listening(port_taken)
    except BaseException:
        sock.close()
        router.close()
        raise

    def run(sweep: float | None, claimed: Claim) -> None:
        started = tracing.start() if tracing is not None else None  # in the serving process: its thread is its own
        if started is not None:
            router.tracer = started.tracer
            if started.meter is not None:
                router.metrics.observe_with(started.meter)
        app = create_app(router, sweep_every_s=sweep, claim=claimed, tracing=started, metrics=metrics)
        uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level)).run(sockets=[sock])

    if workers == 1:
        router.recover()
        run(sweep_every_s, mine)
        return
    from .workers import supervise, worker_holder

    base = router.holder
    try:
        router.recover()  # the locks of a one-process incarnation under the plain holder id
        # Every worker's id is claimed here, before any fork: a second supervisor under the same id stops now, in
        # one line, instead of starting workers that fail one by one.  Each worker takes its claim over (same token).
        made: list[Claim] = []
        try:
            for index in range(workers):
                router.holder = worker_holder(base, index)
                made.append(router.claim())
        except BaseException:
            for claimed in made:
                router.release(claimed)
            raise
        tokens = [claimed.token for claimed in made]
    finally:
        router.holder = base
        router.release(mine)  # the plain id serves no requests under the workers
        router.close()  # no connection of the parent's crosses the fork: each worker opens its own
    # Under uvloop (uvicorn's choice when installed) a worker that wakes accepts every waiting connection, so
    # clients connecting together all land on one process; libuv's switch makes it accept one and yield.
    os.environ["UV_TCP_SINGLE_ACCEPT"] = "1"
    sock.listen(2048)  # connections queue while the workers start

    def child(index: int) -> None:
        router.holder = worker_holder(base, index)
        claimed = router.claim(tokens[index])  # the supervisor's claim, now recording this process
        router.recover()
        run(sweep_every_s if index == 0 else None, claimed)

    supervise(workers, child)
