"""``loopfsm router serve`` and ``loopfsm client run``: the service and its client on the command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, TextIO


def _port(text: str) -> int:
    """A TCP port, refused by argparse (a usage error) when it is not one."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, got {port}")
    return port


def _tokens(text: str) -> int:
    """A number of tokens, 0 or more: refused by argparse (a usage error) otherwise."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of tokens: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"a number of tokens is 0 or more, got {n}")
    return n


def _workers(text: str) -> int:
    """A number of router processes, 1 to 64: refused by argparse (a usage error) otherwise."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of processes: {text!r}") from None
    if not 1 <= n <= 64:
        raise argparse.ArgumentTypeError(f"--workers is 1 to 64 processes, got {n}")
    return n


def _router_url(text: str) -> str:
    """An http(s) URL: a typo fails at once instead of being retried as an unreachable router."""
    from urllib.parse import urlsplit  # noqa: PLC0415 - only when the option is given

    if not text.startswith(("http://", "https://")) or len(text) <= len("https://"):
        raise argparse.ArgumentTypeError(f"the router's address is an http:// or https:// URL, got {text[:100]!r}")
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port that is not 0-65535
    except ValueError:  # an unclosed [IPv6 bracket, a port out of range
        raise argparse.ArgumentTypeError(f"the router's address is not a URL, got {text[:100]!r}") from None
    if not parts.hostname:
        raise argparse.ArgumentTypeError(f"the router's address names no host, got {text[:100]!r}")
    return text


def _session(text: str) -> str:
    """A session id the router accepts (1-64 letters, digits, '_', '.' or '-'), checked before anything is sent."""
    import re  # noqa: PLC0415

    from loopfsm.router.session_id import SESSION_ID_PATTERN  # noqa: PLC0415

    if not re.fullmatch(SESSION_ID_PATTERN, text):
        raise argparse.ArgumentTypeError(f"a session id is 1-64 letters, digits, '_', '.' or '-', got {text[:80]!r}")
    return text


def add_commands(sub: Any) -> None:
    s = sub.add_parser("router", help="serve the reference router over HTTP")
    rs = s.add_subparsers(dest="router_command", required=True, metavar="ACTION")
    t = rs.add_parser("serve", help="serve execute / continue / stream on HOST:PORT (uvicorn)")
    t.add_argument(
        "--store",
        required=True,
        metavar="URL",
        help="sqlite:///runs.db or postgresql://user@host/db (created if missing)",
    )
    t.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1, reachable from this machine only)",
    )
    t.add_argument("--port", type=_port, default=8787, help="TCP port to listen on (default: 8787)")
    t.add_argument("--prefix", default="loopfsm_", help="table name prefix (default: loopfsm_)")
    t.add_argument(
        "--workers",
        type=_workers,
        default=1,
        metavar="N",
        help="router processes serving the port, each with its own store connections and the holder id HOLDER-wI; "
        "a process that dies is started again (default: 1, no supervisor)",
    )
    t.add_argument(
        "--script",
        metavar="FILE",
        help="YAML script of model replies (default: the built-in demo script)",
    )
    t.add_argument(
        "--metrics",
        action="store_true",
        help="also serve the router's metrics as Prometheus text at GET /metrics (off by default: the port "
        "serves clients; OTEL_METRICS_EXPORTER or an OTLP endpoint sends them by OpenTelemetry instead)",
    )
    t.add_argument(
        "--holder",
        help="this router's lock-holder id, claimed in the store while it serves (a second router asking for it "
        "is refused); keep it across restarts so recovery frees its locks (default: router-HOSTNAME-PORT, this "
        "machine's host name)",
    )
    t.add_argument(
        "--permissions",
        help='JSON object of default tool permissions, e.g. {"shell": "deny"}',
    )
    t.add_argument(
        "--sweep-every",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="sweep the store this often: free expired leases, end paused runs past their pause TTL "
        "(default: 60; 0 turns it off, e.g. when `loopfsm store sweep` runs from cron)",
    )
    t.add_argument(
        "--provider",
        choices=PROVIDERS,
        default="scripted",
        help="the primary model's API (default: scripted, offline); keys come from the environment only "
        "(ANTHROPIC_API_KEY, OPENAI_API_KEY; ANTHROPIC_BASE_URL / OPENAI_BASE_URL point at a proxy)",
    )
    t.add_argument("--model", help="the primary model's name (needed for anthropic and openai)")
    t.add_argument(
        "--fallback-provider",
        choices=PROVIDERS,
        help="the API the fallback breaker switches to when the primary fails (default: the primary's)",
    )
    t.add_argument("--fallback-model", help="the fallback model's name (needed for a fallback on another API)")
    t.add_argument(
        "--disclosure",
        choices=("off", "first_call", "every_call"),
        default="off",
        help="ask every session's user before the conversation goes to a remote model (router_run policy; "
        "default: off)",
    )
    t.add_argument(
        "--cost-ceiling",
        type=_tokens,
        default=0,
        metavar="TOKENS",
        help="ask before a model call takes a run past this many tokens (router_run policy; default: 0, no ceiling)",
    )
    t.add_argument(
        "--key-file",
        metavar="PATH",
        help="the router key that seals encrypted sessions' run state at rest; must exist, the same file for "
        "every router of the store (default: $XDG_STATE_HOME/loopfsm/router.key, created owner-only if missing)",
    )
    t = rs.add_parser("keygen", help="write a new owner-only router key file for --key-file (never overwrites)")
    t.add_argument("path", metavar="PATH")
    t.add_argument(
        "--rotate",
        action="store_true",
        help="add a new current key to the existing file PATH, keeping its keys so runs sealed under them open",
    )
    s.set_defaults(func=cmd_router)

    s = sub.add_parser("client", help="run the reference client against a router")
    cs = s.add_subparsers(dest="client_command", required=True, metavar="ACTION")
    t = cs.add_parser(
        "run",
        help="send a prompt and carry its run to the end, running tools in the workspace",
    )
    t.add_argument("prompt", metavar="PROMPT", help="what you ask the model: the run's first user message")
    t.add_argument(
        "--router",
        type=_router_url,
        default="http://127.0.0.1:8787",
        metavar="URL",
        help="the router to talk to (default: http://127.0.0.1:8787, where `loopfsm router serve` listens)",
    )
    t.add_argument(
        "--session",
        type=_session,
        required=True,
        metavar="ID",
        help="the session the run belongs to: 1-64 letters, digits, '_', '.' or '-' (required)",
    )
    t.add_argument("--workspace", default=".", metavar="DIR", help="directory the tools are confined to (default: .)")
    t.add_argument("--yes", action="store_true", help="approve every ask call and approval without asking")
    t.add_argument(
        "--keyring", metavar="FILE", help="keyring file: makes the session end-to-end encrypted (created if missing)"
    )
    t.add_argument(
        "--disclosure",
        choices=("off", "first_call", "every_call"),
        help="ask before the conversation is sent to a remote model: before the run's first call or every call "
        "(the router's own rule applies too)",
    )
    t.add_argument(
        "--cost-ceiling",
        type=_tokens,
        metavar="TOKENS",
        help="ask before a model call would take the run past this many tokens (input plus output)",
    )
    t.add_argument("-q", "--quiet", action="store_true", help="no progress lines (questions are still asked)")
    t.add_argument("--json", action="store_true", help="print the last response envelope as JSON instead of the text")
    t.add_argument(
        "--no-stream",
        action="store_true",
        help="plain request/response instead of the router's event stream (progress then shows per response)",
    )
    t.add_argument(
        "--break-live",
        action="store_true",
        help="if the session still has a live run (an earlier client stopped at a pause), break it, then run PROMPT",
    )
    s.set_defaults(func=cmd_client)


PROVIDERS = ("scripted", "anthropic", "openai", "openai-responses")
#: Where each API's key is read from: the environment only (a flag would land in shell history and
#: process listings).  The SDKs read these variables themselves; the router only checks one is set.
KEY_VARIABLES = {
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
    "openai": ("OPENAI_API_KEY",),
    "openai-responses": ("OPENAI_API_KEY",),
}


def _provider(kind: str, model: str | None, script: str | None, role: str = "provider") -> Any:
    """The model client for ``--provider`` (or ``--fallback-provider``); every setup problem is a ConfigError."""
    from loopfsm.core.errors import ConfigError, ScriptError

    if kind == "scripted":
        from loopfsm.drivers.schemas import driver_hint
        from loopfsm.router.errors import NotAScriptedModel
        from loopfsm.router.providers.scripted import ScriptedProvider
        from loopfsm.router.service import DEMO_SCRIPT

        if not script:
            return ScriptedProvider(DEMO_SCRIPT)
        try:
            return ScriptedProvider.from_file(script)
        except NotAScriptedModel as err:
            raise ScriptError(f"{err}{driver_hint(err.document)}") from None
    flag = "--provider" if role == "provider" else "--fallback-provider"
    if not model:
        raise ConfigError(f"{flag} {kind} needs {'--model' if role == 'provider' else '--fallback-model'}")
    if not any(os.environ.get(v) for v in KEY_VARIABLES[kind]):
        raise ConfigError(f"{flag} {kind} needs {KEY_VARIABLES[kind][0]} in the router's environment")
    try:
        # No SDK retries: the router's attempts and the fallback breaker decide, and must see every failure.
        if kind == "anthropic":
            from loopfsm.router.providers.anthropic_api import AnthropicProvider

            return AnthropicProvider(max_retries=0)
        if kind == "openai-responses":
            from loopfsm.router.providers.openai_responses_api import OpenAIResponsesProvider

            return OpenAIResponsesProvider(max_retries=0)
        from loopfsm.router.providers.openai_api import OpenAIProvider

        return OpenAIProvider(max_retries=0)
    except ConfigError:
        raise
    except Exception as err:  # noqa: BLE001 - an SDK refusing to start is a usage problem here, said without detail
        raise ConfigError(f"cannot start the {kind} client ({type(err).__name__})") from None


def cmd_router(args: argparse.Namespace) -> int:
    from loopfsm.core.errors import ConfigError

    if args.router_command == "keygen":
        return cmd_keygen(args.path, rotate=args.rotate)
    from loopfsm.router.atrest import default_key_path, load_router_key
    from loopfsm.router.http import serve
    from loopfsm.router.service import Router

    if not 0 <= args.sweep_every <= 86400:
        raise ConfigError("--sweep-every is a number of seconds up to 86400, 0 to turn sweeping off")
    provider = _provider(args.provider, args.model, args.script)
    model = args.model or "scripted"
    fb_kind = args.fallback_provider or args.provider
    if fb_kind not in ("scripted", args.provider) and not args.fallback_model:
        raise ConfigError(f"--fallback-provider {fb_kind} needs --fallback-model")
    fb_model = args.fallback_model or (model if fb_kind == args.provider else "scripted")
    fallback = (
        provider
        if (fb_kind, fb_model) == (args.provider, model)
        else _provider(fb_kind, fb_model, args.script, role="fallback")
    )
    try:
        perms = json.loads(args.permissions) if args.permissions else None
    except ValueError:
        raise ConfigError("--permissions must be a JSON object") from None
    if perms is not None and not (
        isinstance(perms, dict) and all(v in ("allow", "ask", "deny") for v in perms.values())
    ):
        raise ConfigError('--permissions maps tool names to "allow", "ask" or "deny"')
    if args.cost_ceiling < 0:
        raise ConfigError("--cost-ceiling is a number of tokens, 0 or more")
    from loopfsm.router.telemetry import TracingSetup

    tracing = TracingSetup.from_environment()  # a wrong OTEL_* value stops the start, in one line
    made_key = args.key_file is None and not os.path.lexists(default_key_path())  # said at start: a file outside
    key = load_router_key(args.key_file)  # read now: a missing or unsafe key file stops the start, not a run
    tables = _machine_tables()  # which tables this router runs: an operator deploying edited ones sees them named
    router = Router(
        args.store,
        prefix=args.prefix,
        holder=args.holder or _default_holder(args.port),
        provider=provider,
        fallback=fallback,
        permissions=perms,
        policy={"disclosure": args.disclosure, "cost_ceiling_tokens": args.cost_ceiling},
        create=True,
        model=model,
        fallback_model=fb_model,
        key=key,
    )

    workers = f", {args.workers} worker processes" if args.workers > 1 else ""

    def bound(port: int) -> None:
        if not args.holder:  # with --port 0 the system chose the port: the default holder id names it, not 0
            router.holder = _default_holder(port)

    def listening(port: int) -> None:
        print(
            f"loopfsm router serving on http://{args.host}:{port} (store {args.store.split('://')[0]}, "
            f"holder {router.holder}{workers}; model {args.provider}/{model}, fallback {fb_kind}/{fb_model})",
            file=sys.stderr,
            flush=True,
        )
        where = args.key_file or default_key_path()
        if made_key:
            print(
                f"wrote a new router key file {where} (owner-only): encrypted sessions' run state is sealed under "
                "it; keep it with the store, or name one with --key-file",
                file=sys.stderr,
                flush=True,
            )
        else:
            print(
                f"encrypted sessions' run state is sealed under the router key in {where}", file=sys.stderr, flush=True
            )
        print(tables, file=sys.stderr, flush=True)
        if tracing is not None:
            print(tracing.described(), file=sys.stderr, flush=True)

    serve(
        router,
        args.host,
        args.port,
        sweep_every_s=args.sweep_every or None,
        on_listening=listening,
        workers=args.workers,
        on_bound=bound,
        tracing=tracing,
        metrics=args.metrics,
    )
    return 0


def _default_holder(port: int) -> str:
    """``router-HOSTNAME-PORT``: routers on different machines (or pods) sharing a store get different ids without
    being told, and a router restarted on its machine and port gets its own again."""
    import socket

    return f"router-{socket.gethostname()}-{port}"


def _machine_tables() -> str:
    """Which machine tables this process runs, in one line; every one of them compiled now.

    A mistake in an edited table (or a ``LOOPFSM_MACHINES`` that is not a
    directory) then stops the start with its file:line:col, instead of
    answering the first request that needs the machine.
    """
    from loopfsm.core.catalog import load_machine
    from loopfsm.core.resources import MACHINES_VARIABLE, edited_machines_dir, machine_path

    names = ("router_run", "run_lock", "engine_brain", "tool_breaker", "fallback_breaker", "stream_assembly")
    for name in names:
        load_machine(name)
    edited = edited_machines_dir()
    if edited is None:
        return "machine tables: the shipped ones"
    mine = [n for n in names if machine_path(n).parent == edited]
    return f"machine tables: {', '.join(mine) or 'none'} from {edited} ({MACHINES_VARIABLE}), the others shipped"


def cmd_keygen(path: str, *, rotate: bool = False) -> int:
    """``loopfsm router keygen [--rotate] PATH``: a new router key, owner-only; an existing file is never replaced.

    ``--rotate`` adds a fresh current key to an existing file and keeps the
    others: routers started with it seal under the new key and still open
    what the old ones sealed.
    """
    from loopfsm.router.crypto import Keyring
    from loopfsm.core.errors import ConfigError
    from loopfsm.router.errors import SealError
    from loopfsm.router.atrest import create_key_file

    if rotate:
        try:
            keyring = Keyring.load(path)
            kid = keyring.rotate()
            keyring.save(path)
        except SealError as err:
            raise ConfigError(f"router key file {path}: {err}") from None
        except OSError as err:
            raise ConfigError(f"cannot write router key file {path}: {err.strerror or err}") from None
        print(
            f"added router key {kid} to {path} as the current one ({len(keyring.key_ids)} keys); restart the "
            "routers of the store with it, and keep the old keys until the runs sealed under them have ended"
        )
        return 0
    try:
        made = create_key_file(path)
    except OSError as err:
        raise ConfigError(f"cannot write router key file {path}: {err.strerror or err}") from None
    if not made:
        raise ConfigError(
            f"{path} exists: a router key file is never overwritten (move it away first, or add a key with --rotate)"
        )
    print(f"wrote router key file {path} (owner-only); give it to every router of the store with --key-file")
    return 0


def cmd_client(args: argparse.Namespace) -> int:
    from loopfsm.router.client import Client
    from loopfsm.router.crypto import Keyring
    from loopfsm.core.errors import ConfigError

    keyring = None
    if args.keyring:
        if not os.path.exists(args.keyring):
            try:
                Keyring.generate().save(args.keyring)
            except OSError as err:
                raise ConfigError(f"cannot create keyring {args.keyring}: {err.strerror or err}") from None
            print(f"created keyring {args.keyring} (owner-only)", file=sys.stderr)
        keyring = Keyring.load(args.keyring)

    def approver(kind: str, info: dict[str, Any]) -> Any:
        what = (
            f"{info['name']} {json.dumps(info.get('arguments', {}))[:200]}"
            if kind == "tool"
            else f"{kind}: {info.get('summary', '')[:400]}"
        )
        if args.yes:
            print(f"  approved: {what}", file=sys.stderr)
            return "approved"
        if not sys.stdin.isatty():
            print(f"  rejected (no terminal to ask; use --yes): {what}", file=sys.stderr)
            return "rejected"
        verb = "allow" if kind == "tool" else "approve"
        answer = input(f"  {verb} {what}? [y/N/b(reak)] ").strip().lower()
        return "approved" if answer in ("y", "yes") else "break" if answer in ("b", "break") else "rejected"

    progress = Progress(sys.stderr, quiet=args.quiet, tty=sys.stderr.isatty())

    def on_progress(what: str, info: dict[str, Any]) -> None:
        if what == "retry" and info.get("why") == "transport":
            progress.resend(progress_line(what, info))
        else:
            progress.line(progress_line(what, info))

    client = Client(
        args.router,
        args.session,
        workspace=args.workspace,
        keyring=keyring,
        approver=approver,
        on_progress=on_progress,
        on_trace=lambda name: progress.line(f"  {TRACE_LINES[name]}" if name in TRACE_LINES else None),
        stream=not args.no_stream,
    )
    gates: dict[str, Any] = {}
    if args.disclosure:
        gates["disclosure"] = args.disclosure
    if args.cost_ceiling is not None:
        if args.cost_ceiling < 0:
            raise ConfigError("--cost-ceiling is a number of tokens, 0 or more")
        gates["cost_ceiling_tokens"] = args.cost_ceiling
    try:
        resp = client.run(args.prompt, gates=gates or None, break_live=args.break_live)
    finally:
        progress.close()
        client.close()
    data = resp["data"]
    done = resp["status"] == "completed" or data.get("ended") == "completed"
    if args.json:
        print(json.dumps(resp, indent=2, sort_keys=True))
    elif done:
        print(client.last_message or "")
    elif resp["status"] == "error":  # the run may still be waiting (run_live, a run its tables cannot read)
        print(f"client stopped: error {data.get('code', '')} {data.get('error', '')}".strip())
    else:
        print(f"run ended: {resp['status']} {data.get('ended', '')}".strip())
        if data.get("code") == "run_live":
            print(
                f"(session {args.session} still has a run waiting at a pause: answer it, or run again "
                "with --break-live to break it first)",
                file=sys.stderr,
            )
    if done and client.rejected:
        # The model's answer was printed as it said it; it may claim work the rejected calls would have done.
        names = ", ".join(_name(n) for n in client.rejected)
        why = "" if args.yes or sys.stdin.isatty() else " (no terminal to ask: --yes allows them)"
        count = "1 tool call was" if len(client.rejected) == 1 else f"{len(client.rejected)} tool calls were"
        print(
            f"loopfsm client: {count} rejected and did not run: {names}{why}; the answer above may say otherwise",
            file=sys.stderr,
        )
        return 1
    return 0 if done else 1


#: What the router's trace events say, as progress lines: the steps a user waits on or should know of (the
#: response lines and the tools this client runs say the rest).  A name not listed here is not shown, so
#: nothing a router sends reaches the terminal but these fixed lines.
TRACE_LINES = {
    "model.called": "model call started",
    "tool.requested": "tool call proposed",
    "tool.denied": "tool call denied by the session's permissions",
    "diff.proposed": "file change proposed",
    "diff.applied": "file change applied",
    "diff.rejected": "file change rejected",
    "approval.expired": "approval expired",
    "context.resolved": "sealed history opened",
    "run.expired": "the run's pause expired",
    "run.failed": "run failed",
}


@dataclass
class Progress:
    """The client's progress lines on stderr.

    A re-send after a transport error (the router did not answer) is a
    passing state, not an event: on a terminal one line says so and is
    rewritten in place at each attempt; elsewhere (a log, a pipe) only the
    first re-send of a run of them is written, so an unreachable router costs
    one line, not one per attempt.  A question is asked only after a
    response, whose line ends any line left open for rewriting.
    """

    stream: TextIO
    quiet: bool = False
    tty: bool = False
    pending: bool = False  # a rewritten line is on the terminal without its newline
    resending: bool = False  # the last thing said was a re-send

    def line(self, text: str | None) -> None:
        """Print one progress line (nothing for None or with ``quiet``)."""
        if not text or self.quiet:
            return
        self.close()
        self.resending = False
        print(text, file=self.stream, flush=True)

    def resend(self, text: str) -> None:
        """Say that a request is being re-sent: in place on a terminal, once per outage elsewhere."""
        if self.quiet:
            return
        if self.tty:
            self.stream.write(f"\r\x1b[K{text}")
            self.stream.flush()
            self.pending = True
        elif not self.resending:
            print(text, file=self.stream, flush=True)
        self.resending = True

    def close(self) -> None:
        """End a line left open for rewriting, so what comes next starts on a line of its own."""
        if self.pending:
            self.stream.write("\n")
            self.stream.flush()
            self.pending = False


def progress_line(what: str, info: dict[str, Any]) -> str:
    """The line a client event prints: response statuses, tools run, sealing, re-sends (tool names, no content)."""
    if what == "tool":
        return f"  running {_name(info.get('name'))}"
    if what == "retry":
        if info.get("why") == "transport":
            return f"  router unreachable, re-sending {info['type']} (attempt {info['attempt']} of {info['attempts']})"
        return f"  {info.get('why')}: re-sending {info['type']} as a plain request"
    if what == "completed" and info.get("to_encrypt"):
        return f"- completed\n  sealing {len(info['to_encrypt'])} item(s) with your keyring"
    if what == "awaiting_tool":
        return "- awaiting_tool: " + ", ".join(_name(t.get("name")) for t in info.get("tool_requests") or [])
    if what == "awaiting_approval":
        return "- awaiting_approval: " + ", ".join(_name(a.get("kind")) for a in info.get("approvals") or [])
    if what == "awaiting_decrypt":
        return f"- awaiting_decrypt: opening {len(info.get('to_decrypt') or {})} sealed item(s)"
    if what == "idle" and info.get("ended"):
        return f"- idle (run ended: {_name(info.get('ended'))})"
    if what == "error":
        return f"- error: {_name(info.get('code'))}"
    return f"- {_name(what)}"


def _name(value: Any) -> str:
    """A name from the router, shown only if it is one (letters, digits, _ . -): never a terminal escape."""
    text = str(value)
    return text if text and len(text) <= 64 and all(c.isalnum() or c in "_.-" for c in text) else "?"
