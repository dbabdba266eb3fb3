"""Each fact is traced once: the trace rows of scripted runs, counted against the rebuilt trace-event table.

The table is "Trace events" in docs/machines/router_run.md (seed 002's lost table of where each event
is written): router_run writes the run's moves, the router each item of a
step.  Each test derives the counts the table promises from the script and the
requests and responses of the run, and compares them with the stored rows.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from loopfsm.router.crypto import Keyring

from tests.support.router_support import PLAN_SCRIPT, client, make
from tests.support.store_support import store_url  # noqa: F401 - fixture

PERMISSIONS = {"shell": "allow", "write_file": "ask", "edit_file": "deny", "read_file": "allow"}
FILE_CHANGING = ("write_file", "edit_file")
TOOLS_SCRIPT = [
    {
        "text": "three at once",
        "tool_calls": [
            {"id": "c1", "name": "shell", "arguments": {"command": "ls"}},
            {"id": "c2", "name": "write_file", "arguments": {"path": "a.txt", "content": "a\n"}},
            {"id": "c3", "name": "edit_file", "arguments": {"path": "b.txt", "old": "x", "new": "y"}},
        ],
    },
    {"text": "one more", "tool_calls": [{"id": "c4", "name": "read_file", "arguments": {"path": "a.txt"}}]},
    {"text": "done"},
]


def traced(router: Any, session: str) -> Counter[str]:
    return Counter(
        r.meta["event"]
        for r in router.store().rows(session, "trace")
        if r.meta["event"] not in ("approval.record", "phase.fed")  # records, not facts: pinned elsewhere
    )


def expected(script: list[dict[str, Any]], log: list[tuple[dict[str, Any], dict[str, Any]]]) -> Counter[str]:
    """What the table promises for a run of ``script`` whose (request, response) pairs are ``log``."""
    calls = [c for turn in script for c in turn.get("tool_calls", [])]
    requested = [t for _, resp in log for t in resp["data"].get("tool_requests", [])]
    results = [r for req, _ in log if req["type"] == "tool_results" for r in req["data"]["results"]]
    decisions = [d for req, _ in log if req["type"] == "approval_decisions" for d in req["data"]["decisions"]]
    by_id = {t["call_id"]: t for t in requested}
    ended = [resp for _, resp in log if resp["status"] in ("completed", "idle") and not resp["allowed_continuations"]]
    want = Counter(
        {
            "lock.acquired": len(log),
            "lock.released": len(log),
            "run.started": sum(req["type"] in ("execute", "inject") for req, _ in log),
            "run.completed": sum(r["status"] == "completed" or r["data"].get("ended") == "completed" for r in ended),
            "model.called": len(script),
            "model.responded": len(script),
            "tool.requested": len(calls),
            "tool.mediated": len(requested),
            "tool.denied": sum(PERMISSIONS.get(c["name"]) == "deny" for c in calls),
            "tool.result": len(results),
            "diff.proposed": sum("diff_ref" in t for t in requested),
            "diff.applied": sum("diff_ref" in by_id[r["call_id"]] and not r["is_error"] for r in results),
            "approval.requested": sum(len(resp["data"].get("approvals", [])) for _, resp in log),
            "approval.decided": sum("decision" in r for r in results) + len(decisions),
            "decrypt.requested": sum(resp["status"] == "awaiting_decrypt" for _, resp in log),
            "context.resolved": sum(req["type"] == "decrypted" for req, _ in log),
            "seal.requested": sum("sealed" in resp["allowed_continuations"] for _, resp in log),
            "seal.persisted": sum(
                bool(req.get("data", {}).get("encrypted")) for req, _ in log if req["type"] not in ("execute", "inject")
            ),
        }
    )
    return +want  # drop the zeros


def drive(router: Any, session: str, prompt: str, perms: dict[str, str]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """A plaintext run, every ask approved; its (request, response) pairs."""
    log = []
    req: dict[str, Any] = {"type": "execute", "request_id": "e", "data": {"prompt": prompt, "permissions": perms}}
    while True:
        resp = router.handle(session, req)
        log.append((req, resp))
        n = f"r{len(log)}"
        if resp["status"] == "awaiting_tool":
            results = [
                {"call_id": t["call_id"], "content": "ok", "is_error": False}
                | ({"decision": "approved"} if t["requires_approval"] == "ask" else {})
                for t in resp["data"]["tool_requests"]
            ]
            req = {"type": "tool_results", "request_id": n, "data": {"results": results}}
        elif resp["status"] == "awaiting_approval":
            decisions = [
                {"approval_id": a["approval_id"], "decision": "approved", "approver": "u"}
                for a in resp["data"]["approvals"]
            ]
            req = {"type": "approval_decisions", "request_id": n, "data": {"decisions": decisions}}
        else:
            return log


def test_a_run_with_parallel_allow_ask_and_denied_calls_traces_each_fact_once(store_url):  # noqa: F811
    url, prefix = store_url
    router, _ = make(url, prefix, TOOLS_SCRIPT)
    log = drive(router, "t", "go", PERMISSIONS)
    assert log[-1][1]["status"] == "completed"
    got = traced(router, "t")
    assert got == expected(TOOLS_SCRIPT, log)
    assert got["tool.requested"] == 4 and got["tool.result"] == 3  # c3 was denied: no result came back for it
    router.close()


def test_a_plan_approval_traces_each_fact_once(store_url):  # noqa: F811
    url, prefix = store_url
    router, _ = make(url, prefix, PLAN_SCRIPT)
    log = drive(router, "p", "plan first", PERMISSIONS)
    assert [resp["status"] for _, resp in log] == ["awaiting_approval", "completed"]
    assert traced(router, "p") == expected(PLAN_SCRIPT, log)
    router.close()


def test_encrypted_runs_trace_decrypt_and_seal_once(store_url, tmp_path):  # noqa: F811
    url, prefix = store_url
    script = [{"text": "sealed answer"}]
    router, tc = make(url, prefix, script)
    kr = Keyring.generate()
    log: list[tuple[dict[str, Any], dict[str, Any]]] = []
    handle = router.handle

    def logged(session: str, request: Any, **kw: Any) -> dict[str, Any]:
        resp = handle(session, request, **kw)
        log.append((request, resp))
        return resp

    router.handle = logged  # what the HTTP app was asked and answered
    for prompt in ("first", "second"):  # the second opens the first's sealed history
        assert client(tc, "enc", tmp_path, keyring=kr).run(prompt)["data"]["ended"] == "completed"
    assert [req["type"] for req, _ in log] == ["execute", "sealed", "execute", "decrypted", "sealed"]
    assert traced(router, "enc") == expected(script * 2, log)
    router.close()


def test_a_remembered_value_and_a_failed_run_trace_each_fact_once(store_url):  # noqa: F811
    """The router answers remember itself; the script then runs out, so the run fails in its first request."""
    url, prefix = store_url
    call = {"id": "m1", "name": "remember", "arguments": {"key": "k", "value": "v"}}
    script = [{"text": "noting", "tool_calls": [call]}]
    router, _ = make(url, prefix, script)
    log = drive(router, "m", "remember this", PERMISSIONS)
    assert [resp["data"].get("ended") for _, resp in log] == ["failed"]
    want = Counter(
        {
            "lock.acquired": len(log),
            "lock.released": len(log),
            "model.called": len(script) + 1,  # the call past the script's end fails
            "model.responded": len(script),
            "model.failed": 1,
            "tool.requested": 1,
            "memory.written": 1,
            "run.failed": 1,
        }
    )
    assert traced(router, "m") == want
    router.close()
