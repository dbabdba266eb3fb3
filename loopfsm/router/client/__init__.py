"""The reference client of the router protocol (httpx).

It never leads: every move is the answer to the last response, checked by the
``router_client`` machine (a message the response did not allow raises before
it is sent).  It runs tools in a :class:`Workspace`, asks ``approver`` about
ask calls and standalone approvals, seals and opens content with a
:class:`~loopfsm.router.crypto.Keyring` in an encrypted session, and re-sends the very
same request (same ``request_id``) after a transport error, a 5xx, or any
error answer the router marks ``retryable`` (``busy``, ``interrupted``, an
``internal`` one when its store failed mid-request), up to ``retries`` times;
then it gives up with a :class:`ClientError` that
names the router's scheme, host and port (never a user name, password, path or query).

Each request goes through the router's server-sent-events stream, so
``on_trace(name)`` hears the turn's steps as they happen (``model.called``,
``tool.requested`` ...: event names only, never content); a router that
answers without a stream, or a stream that breaks, makes the client re-send
the same request as plain request/response and stay with that for the rest
of the run.  ``on_progress(what, info)`` is told each response's status, each
tool it runs (``tool``) and each re-send after an error (``retry``: ``type``,
``why``, and for a transport error ``attempt`` and ``attempts``, the number of
the attempt about to be made and the most there will be).

``approver(kind, info)`` answers ``"approved"``, ``"rejected"``, ``"break"`` or
``("inject", text)``; ``kind`` is ``tool`` (an ask call) or an approval kind
(``disclosure``, ``cost_ceiling``, ``plan``), whose ``info`` carries the
router's ``summary`` and ``expires_at``.  ``interrupt(state, response)``,
asked before the client answers any pause, may return ``"break"`` or ``("inject", text)`` to take the
user's escape hatch there instead (the machine refuses one the response did
not allow).  After a run, ``rejected`` names the tool calls the approver
rejected, which did not run (the model's answer may still claim their work).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from loopfsm.router.crypto import Keyring
from loopfsm.router.errors import ClientError
from loopfsm.core.errors import ConfigError
from loopfsm.machines.router_client import RouterClient
from loopfsm.router import protocol as P
from .workspace import Workspace

Approver = Callable[[str, dict[str, Any]], Any]


def _never(kind: str, info: dict[str, Any]) -> Any:
    return "rejected"


class Client:
    def __init__(
        self,
        router_url: str,
        session_id: str,
        *,
        workspace: Workspace | str = ".",
        keyring: Keyring | None = None,
        approver: Approver = _never,
        approver_name: str = "user",
        on_progress: Callable[[str, dict[str, Any]], None] | None = None,
        retries: int = 20,
        retry_delay_s: float = 0.25,
        http: Any = None,
        timeout_s: float = 60.0,
        interrupt: Callable[[str, dict[str, Any]], Any] | None = None,
        stream: bool = True,
        on_trace: Callable[[str], None] | None = None,
    ):
        import httpx

        self.session_id = session_id
        self.router_shown = shown_url(router_url)
        self.workspace = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
        self.keyring, self.approver, self.approver_name = (
            keyring,
            approver,
            approver_name,
        )
        self.on_progress = on_progress or (lambda what, info: None)
        self.on_trace = on_trace or (lambda name: None)
        self.retries, self.retry_delay_s = retries, retry_delay_s
        self.interrupt = interrupt or (lambda state, resp: None)
        try:
            self.http = http or httpx.Client(base_url=router_url.rstrip("/"), timeout=timeout_s)
        except (ValueError, httpx.InvalidURL):
            raise ConfigError(f"the router's address {router_url[:200]!r} is not a URL") from None
        self.stream = stream  # off for the rest of the run once the router has no usable stream
        self.machine = RouterClient()
        self.last_message: str | None = None  # the last completed turn's text (an encrypted one ends idle)
        self.rejected: list[str] = []  # names of this run's tool calls the approver rejected: they did not run
        self.sent: list[dict[str, Any]] = []  # every request put on the wire, re-sends included (tests read it)

    def close(self) -> None:
        self.http.close()

    # -- wire -------------------------------------------------------------------------------
    def _post(self, req: dict[str, Any]) -> dict[str, Any]:
        import httpx

        attempts = self.retries + 1
        failed = "transport"  # how the last attempt failed: "transport" (no answer) or "server" (a 5xx)
        for attempt in range(attempts):
            last = attempt == attempts - 1
            self.sent.append(req)
            try:
                got = self._stream_once(req) if self.stream else self._post_once(req)
            except httpx.TransportError:
                failed = "transport"
                if not last:  # nothing is re-sent after the last attempt: say nothing, wait for nothing
                    self.on_progress(
                        "retry", {"type": req["type"], "why": "transport", "attempt": attempt + 2, "attempts": attempts}
                    )
                    time.sleep(self.retry_delay_s)
                continue
            except _StreamUnavailable as why:
                # The same request again, as plain request/response: a re-send of one request_id is safe.
                self.stream = False
                self.on_progress("retry", {"type": req["type"], "why": str(why)})
                continue
            if got is None:  # a 5xx: the router (or a proxy) failed; the same request again
                failed = "server"
                if not last:
                    time.sleep(self.retry_delay_s)
                continue
            resp = got
            P.check_response(resp)
            code = resp["data"].get("code") if resp["status"] == "error" else None
            # Every answer the protocol marks retryable (busy, interrupted, an internal error the router says may
            # be re-sent, such as its store failing mid-request): the same request again.
            again = code is not None and resp["data"].get("retryable") is True
            if again and attempt < self.retries:
                time.sleep(
                    min(
                        2.0,
                        max(
                            self.retry_delay_s,
                            resp["data"].get("retry_after_ms", 0) / 1000,
                        ),
                    )
                )
                continue
            return resp
        if failed == "server":
            raise ClientError(
                f"the router at {self.router_shown} answered HTTP 5xx (a server error) to all {attempts} attempts"
            )
        raise ClientError(
            f"no router answers at {self.router_shown} ({attempts} attempts); start one with "
            "`loopfsm router serve --store sqlite:///runs.db`, or give the address of the one you run"
        )

    def _post_once(self, req: dict[str, Any]) -> dict[str, Any] | None:
        path = "execute" if req["type"] == "execute" else "continue"
        r = self.http.post(f"/v1/sessions/{self.session_id}/{path}", json=req)
        if r.status_code >= 500:
            return None
        return _json_of(r.read(), r.status_code)

    def _stream_once(self, req: dict[str, Any]) -> dict[str, Any] | None:
        """One request through the router's server-sent-events stream: ``trace`` progress, then ``response``."""
        with self.http.stream("POST", f"/v1/sessions/{self.session_id}/stream", json=req) as r:
            kind = r.headers.get("content-type", "").split(";")[0].strip()
            if r.status_code in (404, 405, 501) or (r.status_code < 300 and kind != "text/event-stream"):
                raise _StreamUnavailable(f"no event stream (HTTP {r.status_code})")
            if r.status_code >= 500:
                return None
            if kind != "text/event-stream":  # a refusal before the turn started (400, 413): an error envelope
                return _json_of(r.read(), r.status_code)
            for event, data in sse_events(r.iter_lines()):
                if event == "trace":
                    self.on_trace(data)
                elif event == "response":
                    return _json_of(data.encode("utf-8", "replace"), r.status_code)
        raise _StreamUnavailable("the event stream ended before the response")

    def _exchange(self, req: dict[str, Any]) -> dict[str, Any]:
        self.machine.send(req["type"], req["request_id"])
        resp = self._post(req)
        allowed = [a for a in resp["allowed_continuations"] if a != "execute"]
        self.machine.response(
            req["request_id"],
            resp["status"],
            allowed,
            bool(resp["data"].get("to_encrypt")),
            False,
        )
        if resp["status"] == "completed":
            self.last_message = resp["data"].get("message")
        self.on_progress(resp["status"], resp["data"])
        return resp

    # -- sealing ----------------------------------------------------------------------------
    def _seal(self, ref: str, text: str) -> dict[str, Any]:
        assert self.keyring is not None
        return self.keyring.seal(text, session_id=self.session_id, ref=ref).to_json()

    def _seal_all(self, to_encrypt: dict[str, str]) -> dict[str, Any]:
        return {ref: self._seal(ref, text) for ref, text in to_encrypt.items()}

    @staticmethod
    def _rid() -> str:
        return uuid.uuid4().hex

    # -- a run ------------------------------------------------------------------------------
    def run(
        self,
        prompt: str,
        *,
        permissions: dict[str, str] | None = None,
        gates: dict[str, Any] | None = None,
        break_live: bool = False,
    ) -> dict[str, Any]:
        """Carry one prompt to the end of its run; returns the last response.

        ``gates`` is the session's own approval rule for the run (``disclosure``:
        ``off`` / ``first_call`` / ``every_call``, ``cost_ceiling_tokens``); the
        router's policy applies as well, so these can only make it stricter.
        ``break_live``: when the session still has a live run (an earlier client
        stopped at a pause), break it first, then run the prompt.  Interrupted
        (ctrl-C) at a pause, the client breaks its own run before it stops, so
        the session is not left waiting for an answer nobody will send.
        """
        self.rejected = []
        execute = self._execute_request(prompt, permissions, gates)
        resp = self._exchange(execute)
        if break_live and resp["status"] == "error" and resp["data"].get("code") == "run_live":
            self._exchange({"type": "break", "request_id": self._rid()})
            resp = self._exchange(self._execute_request(prompt, permissions, gates))
        try:
            for _ in range(10_000):
                state = self.machine.state
                if state == "Idle":
                    return resp
                nxt = self._answer(state, resp)
                resp = self._exchange(nxt)
        except KeyboardInterrupt:
            self._break_quietly()
            raise
        raise ClientError("run did not end")  # pragma: no cover

    def _break_quietly(self) -> None:
        """Best effort on the way out: break this client's run if the router allows it now; never raise."""
        try:
            if self.machine.state in ("RunningTools", "Approving", "Decrypting", "Sealing") and self.machine.can(
                "send", "break", "interrupted"
            ):
                self.retries = 0
                self._exchange({"type": "break", "request_id": self._rid()})
        except Exception:  # noqa: BLE001 - the user asked to stop; the sweep ends what this could not
            pass

    def _execute_request(
        self, prompt: str, permissions: dict[str, str] | None, gates: dict[str, Any] | None
    ) -> dict[str, Any]:
        rid = self._rid()
        data: dict[str, Any] = {"prompt": prompt}
        if self.keyring is not None:
            data["mode"] = "encrypted"
            ref = P.prompt_ref(rid)
            data["encrypted"] = {ref: self._seal(ref, P.message_text({"role": "user", "text": prompt}))}
        if permissions is not None:
            data["permissions"] = permissions
        if gates:
            data["gates"] = dict(gates)
        return {"type": "execute", "request_id": rid, "data": data}

    def _escape(self, answer: Any) -> dict[str, Any] | None:
        if answer == "break":
            return {"type": "break", "request_id": self._rid()}
        if isinstance(answer, tuple) and answer and answer[0] == "inject":
            rid = self._rid()
            data: dict[str, Any] = {"message": answer[1]}
            if self.keyring is not None:
                ref = P.prompt_ref(rid)
                data["encrypted"] = {ref: self._seal(ref, P.message_text({"role": "user", "text": answer[1]}))}
            return {"type": "inject", "request_id": rid, "data": data}
        return None

    def _answer(self, state: str, resp: dict[str, Any]) -> dict[str, Any]:
        esc = self._escape(self.interrupt(state, resp))
        if esc is not None:
            return esc
        data = resp["data"]
        to_encrypt = data.get("to_encrypt") or {}
        if state == "Sealing":
            return {
                "type": "sealed",
                "request_id": self._rid(),
                "data": {"encrypted": self._seal_all(to_encrypt)},
            }
        if state == "Decrypting":
            assert self.keyring is not None
            plain = {
                ref: self.keyring.open(env, session_id=self.session_id, ref=ref).decode()
                for ref, env in data["to_decrypt"].items()
            }
            out: dict[str, Any] = {"plaintext": plain}
            if to_encrypt:
                out["encrypted"] = self._seal_all(to_encrypt)
            return {"type": "decrypted", "request_id": self._rid(), "data": out}
        if state == "Approving":
            decisions = []
            for a in data["approvals"]:
                info = dict(a)
                if a.get("ref") in to_encrypt:
                    info["summary"] = to_encrypt[a["ref"]]
                answer = self.approver(a["kind"], info)
                esc = self._escape(answer)
                if esc is not None:
                    return esc
                decisions.append(
                    {
                        "approval_id": a["approval_id"],
                        "decision": "approved" if answer == "approved" else "rejected",
                        "approver": self.approver_name,
                        "args_hash": a["args_hash"],
                    }
                )
            out = {"decisions": decisions}
            if to_encrypt:
                out["encrypted"] = self._seal_all(to_encrypt)
            return {
                "type": "approval_decisions",
                "request_id": self._rid(),
                "data": out,
            }
        if state == "RunningTools":
            results, sealed = [], {}
            for call in data["tool_requests"]:
                r: dict[str, Any] = {"call_id": call["call_id"]}
                if call["requires_approval"] == "ask":
                    answer = self.approver("tool", dict(call))
                    esc = self._escape(answer)
                    if esc is not None:
                        return esc
                    r.update(
                        decision="approved" if answer == "approved" else "rejected",
                        approver=self.approver_name,
                        args_hash=call["args_hash"],
                    )
                if r.get("decision") == "rejected":
                    self.rejected.append(call["name"])
                    content, is_error = "the user rejected this call", True
                else:
                    self.on_progress("tool", {"name": call["name"]})
                    content, is_error = self.workspace.run(call["name"], call["arguments"])
                r.update(content=content, is_error=is_error)
                results.append(r)
                if self.keyring is not None:
                    sealed[call["ref"]] = self._seal(
                        call["ref"],
                        P.message_text(P.tool_result_message(call["call_id"], content, is_error)),
                    )
            out = {"results": results}
            if self.keyring is not None:
                sealed.update(self._seal_all(to_encrypt))
                out["encrypted"] = sealed
            return {"type": "tool_results", "request_id": self._rid(), "data": out}
        raise ClientError(f"client in unexpected state {state}")  # pragma: no cover


class _StreamUnavailable(Exception):
    """The router answered without an event stream, or the stream broke: fall back to request/response."""


def _json_of(body: bytes, status: int) -> dict[str, Any]:
    """A router's answer as JSON, or a ClientError: a proxy's HTML page is not a protocol envelope."""
    try:
        got = json.loads(body)
    except (ValueError, RecursionError):
        raise ClientError(f"the router answered HTTP {status} with something that is not JSON") from None
    if not isinstance(got, dict):
        raise ClientError(f"the router answered HTTP {status} with JSON that is not an envelope")
    return got


def sse_events(lines: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(event, data) of each server-sent event in ``lines``; comments (keep-alives) and ids are skipped."""
    event: str = "message"
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
    if data:
        yield event, "\n".join(data)


def shown_url(url: str) -> str:
    """``url`` as an error may show it: scheme, host and port (what a connection needs); a user name,
    password, path or query could carry a token, and is left out."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "the router's address"
    host = f"[{host}]" if ":" in host else host
    text = f"{parts.scheme}://{host}{port}"[:200]
    return "".join(c if c.isprintable() else "?" for c in text)  # no terminal escape from a typo


def dumps(resp: dict[str, Any]) -> str:
    return json.dumps(resp, indent=2, sort_keys=True)


__all__ = ["Client", "ClientError", "Workspace"]
