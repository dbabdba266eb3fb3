"""The review site over HTTP (an ASGI app), and the same pages written to a folder.

Each browser session has a cookie naming its runs, one :class:`Simulation`
per machine, kept in memory and dropped oldest first past ``MAX_SESSIONS`` or
``MAX_SITE_BYTES``; nothing is shared between sessions.  Request bodies are read
up to a limit, every refusal is a 4xx with a one-line message the page shows,
never a traceback, and only pages of the site itself are answered (its host
names, its origin, JSON or YAML bodies): the site runs the project's code.
A machine's page is drawn once (Graphviz runs once per machine, not per visit).
"""

from __future__ import annotations

import json
import secrets
from collections import OrderedDict
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from loopfsm.core.errors import LoopFsmError
from loopfsm.verification import tracefile

from loopfsm.review_site.errors import ReviewSiteError
from loopfsm.review_site.pages import SiteMachine, index_page, machine_page, source_page
from loopfsm.review_site.simulator import Simulation

COOKIE = "loopfsm_review"
MAX_SESSIONS = 64
#: A trace file uploaded to the page: verify's counterexamples are a few KiB; a run keeps at most 2,000 steps.
MAX_TRACE_UPLOAD = 2 * 1024 * 1024
#: What every session's runs may keep together; past it the sessions used longest ago are dropped.
MAX_SITE_BYTES = 256 * 1024 * 1024
MAX_JSON_BYTES = 1024 * 1024
ASSETS = {"review.js": "text/javascript", "review.css": "text/css"}


def asset(name: str) -> str:
    return resources.files("loopfsm.review_site").joinpath("assets", name).read_text(encoding="utf-8")


def write_static(machines: list[SiteMachine], out: Path, diff: str | None = None) -> list[Path]:
    """The site's pages without the simulator (or ``diff``, a diff page, alone), written under ``out``."""
    files = {Path("index.html"): index_page(machines, static=True) if diff is None else diff}
    for m in machines:
        files[Path("machines") / f"{m.name}.html"] = machine_page(m, static=True)
        files[Path("source") / f"{m.name}.html"] = source_page(m)
    for name in ASSETS:
        files[Path("assets") / name] = asset(name)
    written = []
    for rel, text in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


class Site:
    """The machines shown, their start snapshot if one was given, and every session's runs."""

    def __init__(self, machines: list[SiteMachine], start: dict[str, Any] | None = None) -> None:
        self.machines = {m.name: m for m in machines}
        self.start = start
        self.sessions: OrderedDict[str, dict[str, Simulation]] = OrderedDict()

    def machine(self, name: str) -> SiteMachine:
        m = self.machines.get(name)
        if m is None:
            raise ReviewSiteError("no such machine on this site", 404)
        return m

    def runs(self, request: Request) -> tuple[str, dict[str, Simulation]]:
        token = request.cookies.get(COOKIE, "")
        if token not in self.sessions:
            token = secrets.token_urlsafe(18)
            self.sessions[token] = {}
            while len(self.sessions) > MAX_SESSIONS:
                self.sessions.popitem(last=False)
        self.sessions.move_to_end(token)
        return token, self.sessions[token]

    def trim(self, keep: str) -> None:
        """Drop the sessions used longest ago (never ``keep``) while every run together keeps too much."""
        while len(self.sessions) > 1 and self.held() > MAX_SITE_BYTES:
            oldest = next(iter(self.sessions))
            if oldest == keep:
                break
            del self.sessions[oldest]

    def held(self) -> int:
        return sum(sim.bytes for runs in self.sessions.values() for sim in runs.values())

    def run(self, request: Request, name: str) -> tuple[str, Simulation]:
        m = self.machine(name)
        token, runs = self.runs(request)
        if name not in runs:
            start = self.start if self.start is not None and self.start.get("machine") == name else None
            runs[name] = Simulation(m.compiled, start)
        return token, runs[name]


async def _body(request: Request, limit: int) -> bytes:
    size = 0
    chunks = []
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ReviewSiteError(f"the upload is larger than {limit // 1024} KiB", 413)
        chunks.append(chunk)
    return b"".join(chunks)


async def _json(request: Request) -> Any:
    raw = await _body(request, MAX_JSON_BYTES)
    try:
        value = json.loads(raw or b"{}")
    except (ValueError, RecursionError):
        raise ReviewSiteError("the request is not JSON") from None
    problem = tracefile.not_json(value, "the request")  # NaN, half a surrogate pair: nothing JSON can answer with
    if problem is not None:
        raise ReviewSiteError(problem)
    return value


def _with_cookie(response: Response, token: str) -> Response:
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict")
    return response


#: Host names the site answers to besides the one it listens on: a page of another site that has its name
#: resolve to 127.0.0.1 (DNS rebinding) names itself in the Host header and is refused.
LOCAL_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")


def create_app(
    machines: list[SiteMachine],
    start: dict[str, Any] | None = None,
    diff: str | None = None,
    host: str = "127.0.0.1",
) -> Starlette:
    """The ASGI app serving ``machines``; ``start`` (a snapshot) is where a run of its machine begins; ``diff``
    (a diff page) is served as the index instead; ``host`` is the address it listens on."""
    site = Site(machines, start)
    ordered = list(site.machines.values())

    async def index(request: Request) -> Response:
        return HTMLResponse(diff if diff is not None else index_page(ordered, static=False))

    drawn: dict[str, str] = {}

    async def page(request: Request) -> Response:
        m = site.machine(_html_name(request))
        if m.name not in drawn:
            drawn[m.name] = await run_in_threadpool(machine_page, m, static=False)
        return HTMLResponse(drawn[m.name])

    async def source(request: Request) -> Response:
        return HTMLResponse(source_page(site.machine(_html_name(request))))

    async def assets(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            raise ReviewSiteError("no such file", 404)
        return PlainTextResponse(asset(name), media_type=ASSETS[name])

    async def state(request: Request) -> Response:
        token, sim = site.run(request, request.path_params["name"])
        return _with_cookie(JSONResponse(sim.view()), token)

    async def new(request: Request) -> Response:
        name = request.path_params["name"]
        m = site.machine(name)
        body = await _json(request)
        if not isinstance(body, dict):
            raise ReviewSiteError("expected a JSON object")
        snapshot, policy = body.get("snapshot"), body.get("policy") or {}
        if snapshot is not None and not isinstance(snapshot, dict):
            raise ReviewSiteError("a snapshot is a JSON object, as snapshot() writes it")
        if not isinstance(policy, dict):
            raise ReviewSiteError("policy maps policy numbers to values")
        token, runs = site.runs(request)
        runs[name] = Simulation(m.compiled, snapshot, policy)
        return _with_cookie(JSONResponse(runs[name].view()), token)

    async def feed(request: Request) -> Response:
        body = await _json(request)
        if not isinstance(body, dict) or not isinstance(body.get("feed"), str):
            raise ReviewSiteError("expected {feed: name, args: {...}}")
        token, sim = site.run(request, request.path_params["name"])
        outcome = sim.feed(body["feed"], body.get("args") or {})
        site.trim(token)
        return _with_cookie(JSONResponse({"outcome": outcome.as_json(), "view": sim.view()}), token)

    async def back(request: Request) -> Response:
        token, sim = site.run(request, request.path_params["name"])
        sim.back()
        return _with_cookie(JSONResponse(sim.view()), token)

    async def snapshot(request: Request) -> Response:
        name = request.path_params["name"]
        token, sim = site.run(request, name)
        headers = {"Content-Disposition": f'attachment; filename="{name}.snapshot.json"'}
        return _with_cookie(JSONResponse(sim.snapshot(), headers=headers), token)

    async def trace_file(request: Request) -> Response:
        name = request.path_params["name"]
        token, sim = site.run(request, name)
        headers = {"Content-Disposition": f'attachment; filename="{name}.trace.yaml"'}
        return _with_cookie(PlainTextResponse(sim.trace(), media_type="application/yaml", headers=headers), token)

    async def load_trace(request: Request) -> Response:
        raw = await _body(request, MAX_TRACE_UPLOAD)
        # Read off the event loop: other reviewers' requests are answered meanwhile.
        trace = await run_in_threadpool(tracefile.loads, raw, "the uploaded trace")
        token, sim = site.run(request, request.path_params["name"])
        sim.load(trace)
        return _with_cookie(JSONResponse(sim.view()), token)

    async def next_step(request: Request) -> Response:
        token, sim = site.run(request, request.path_params["name"])
        outcome = sim.next()
        site.trim(token)
        return _with_cookie(JSONResponse({"outcome": outcome.as_json(), "view": sim.view()}), token)

    async def refused(request: Request, exc: Exception) -> Response:
        status = exc.status if isinstance(exc, ReviewSiteError) else 400
        return JSONResponse({"error": str(exc)}, status_code=status)

    async def not_found(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": "no such page on this site"}, status_code=404)

    routes = [
        Route("/", index),
        Route("/index.html", index),
        Route("/machines/{name}", page),
        Route("/source/{name}", source),
        Route("/assets/{name}", assets),
        Route("/api/{name}/state", state),
        Route("/api/{name}/new", new, methods=["POST"]),
        Route("/api/{name}/feed", feed, methods=["POST"]),
        Route("/api/{name}/back", back, methods=["POST"]),
        Route("/api/{name}/snapshot.json", snapshot),
        Route("/api/{name}/trace.yaml", trace_file),
        Route("/api/{name}/trace", load_trace, methods=["POST"]),
        Route("/api/{name}/next", next_step, methods=["POST"]),
    ]
    hosts = sorted({*LOCAL_NAMES, host, f"[{host}]"})
    return Starlette(
        routes=routes,
        exception_handlers={LoopFsmError: refused, 404: not_found},
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=hosts), Middleware(SameSite, hosts=hosts)],
    )


class SameSite:
    """Refuses a POST another site's page could send: one naming another origin, or a body that is not JSON or
    YAML (a form or text/plain POST needs no preflight, so any page could send one; a JSON one does)."""

    def __init__(self, app: Any, hosts: list[str]) -> None:
        self.app, self.hosts = app, set(hosts)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            origin = headers.get("origin")
            kind = headers.get("content-type", "").split(";")[0].strip().lower()
            why = None
            if origin is not None and (origin == "null" or urlsplit(origin).hostname not in self.hosts):
                why = "a request from another site's page is refused", 403
            elif kind not in ("application/json", "application/yaml"):
                why = "a POST here carries JSON (or a trace file as application/yaml)", 415
            if why is not None:
                await JSONResponse({"error": why[0]}, status_code=why[1])(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _html_name(request: Request) -> str:
    name: str = request.path_params["name"]
    return name[: -len(".html")] if name.endswith(".html") else name
