"""Request ids and row ids across runs: an older request_id is refused, and no committed row is ever rewritten.

The bug these pin: ``execute A``, ``execute B``, then ``A`` again with another
prompt ran A a second time under the same run id and overwrote A's rows in
place (its prompt, assistant turns, tool calls), growing the history.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopfsm.router.crypto import Keyring
from loopfsm.router.errors import StoreError
from loopfsm.router.store import SCHEMA_VERSION, open_store

from tests.support.router_support import TOOLS_SCRIPT, client, make
from tests.support.store_support import store_url  # noqa: F401 - fixture

ALLOW_ALL = {"shell": "allow", "write_file": "allow", "read_file": "allow", "edit_file": "allow"}
#: Rows a later step replaces by design: the run-input bundle and the session history (kind input), and a
#: memory a later `remember` of the same key overwrites.  Everything else is the run's record.
WORKING_STATE = ("input", "memory")


def snapshot(router: Any, session: str) -> dict[tuple[str, str], tuple[Any, ...]]:
    """Every stored row of a session, all columns."""
    return {
        (r.kind, r.row_id): (r.run_id, r.step, r.ord, json.dumps(r.meta, sort_keys=True), r.body, r.sealed)
        for r in router.store().rows(session)
    }


def execute(router: Any, session: str, request_id: str, prompt: str, **data: Any) -> dict[str, Any]:
    return router.handle(session, {"type": "execute", "request_id": request_id, "data": dict(data, prompt=prompt)})


def answer_tools(resp: dict[str, Any]) -> dict[str, Any]:
    results = [
        {"call_id": t["call_id"], "content": "ok", "is_error": False}
        | ({"decision": "approved"} if t["requires_approval"] == "ask" else {})
        for t in resp["data"]["tool_requests"]
    ]
    return {"results": results}


def _other_body(req: dict[str, Any]) -> dict[str, Any]:
    """The same request_id with another well-formed body of its type."""
    if req["type"] == "execute":
        return dict(req, data={"prompt": "another prompt"})
    if req["type"] == "inject":
        return dict(req, data={"message": "another message"})
    if req["type"] == "tool_results":
        results = [dict(r, content="another result") for r in req["data"]["results"]]
        return dict(req, data={"results": results})
    return dict(req)  # break carries no data


def run_to_end(router: Any, session: str, request_id: str, prompt: str) -> list[dict[str, Any]]:
    """An execute and every tool_results it needs; the requests sent, in order."""
    sent = [{"type": "execute", "request_id": request_id, "data": {"prompt": prompt}}]
    resp = router.handle(session, sent[0])
    while resp["status"] == "awaiting_tool":
        sent.append({"type": "tool_results", "request_id": f"{request_id}-t{len(sent)}", "data": answer_tools(resp)})
        resp = router.handle(session, sent[-1])
    assert resp["status"] == "completed", resp
    return sent


def test_an_older_request_id_re_sent_is_refused_and_changes_nothing(store_url):  # noqa: F811
    url, prefix = store_url
    router, _ = make(url, prefix, TOOLS_SCRIPT, permissions=ALLOW_ALL)
    first = run_to_end(router, "s", "A", "the first prompt")
    second = run_to_end(router, "s", "B", "the second prompt")
    before, version = snapshot(router, "s"), router.store().load("s").version
    history = router.store().row("s", "input", "history").body["messages"]
    for old in first + second[:-1]:  # every request of both runs but the last one
        for body in (old, _other_body(old)):
            resp = router.handle("s", body)
            assert resp["status"] == "error" and resp["data"]["code"] == "request_id_reused", resp
            assert resp["data"]["retryable"] is False and resp["allowed_continuations"] == ["execute", "inject"]
    assert snapshot(router, "s") == before and router.store().load("s").version == version
    assert router.store().row("s", "input", "history").body["messages"] == history
    assert router.store().row("s", "message", "u-A").body["text"] == "the first prompt"
    # the last one is still replayed, and a new request_id starts a new run
    replayed = router.handle("s", second[-1])
    assert replayed["status"] == "completed" and snapshot(router, "s") == before
    assert execute(router, "s", "C", "a third prompt")["status"] == "awaiting_tool"
    router.close()


def test_an_old_continuation_or_break_re_sent_into_a_later_run_is_refused(store_url):  # noqa: F811
    """Run B pauses for the same call ids run A did: A's old tool_results must not be taken as B's answer."""
    url, prefix = store_url
    router, _ = make(url, prefix, TOOLS_SCRIPT, permissions=ALLOW_ALL)
    first = run_to_end(router, "s", "A", "one")
    old_break = {"type": "break", "request_id": "X"}
    assert execute(router, "s", "B", "two")["status"] == "awaiting_tool"
    assert router.handle("s", old_break)["status"] == "idle"  # breaks B
    assert execute(router, "s", "D", "three")["status"] == "awaiting_tool"
    before, version = snapshot(router, "s"), router.store().load("s").version
    for old in (first[1], old_break):
        resp = router.handle("s", old)
        assert resp["data"]["code"] == "request_id_reused", resp
        assert resp["allowed_continuations"] == ["tool_results", "inject", "break"]
    rec = router.store().load("s")
    assert rec.phase == "AwaitingTool" and rec.version == version and snapshot(router, "s") == before
    router.close()


def test_an_encrypted_session_refuses_an_older_execute_and_keeps_its_sealed_rows(store_url, tmp_path):  # noqa: F811
    url, prefix = store_url
    router, tc = make(url, prefix, TOOLS_SCRIPT)
    kr = Keyring.generate()
    c = client(tc, "enc", tmp_path, keyring=kr)
    assert c.run("first secret", permissions=ALLOW_ALL)["data"]["ended"] == "completed"
    old = next(r for r in c.sent if r["type"] == "execute")
    c2 = client(tc, "enc", tmp_path, keyring=kr)
    assert c2.run("second secret", permissions=ALLOW_ALL)["data"]["ended"] == "completed"
    before = snapshot(router, "enc")
    resp = tc.post("/v1/sessions/enc/execute", json=old).json()
    assert resp["data"]["code"] == "request_id_reused" and snapshot(router, "enc") == before
    router.close()


def test_a_run_started_again_under_its_run_id_writes_new_row_ids(store_url):  # noqa: F811
    """Row ids derive from the step too: even with the record of used request ids gone, a run that comes
    again under an old run id cannot overwrite the first run's assistant turns, tool calls or diffs.

    (Only the prompt row is named by its request_id, so the client can seal under it before sending;
    the requests table is what keeps that one.)
    """
    url, prefix = store_url
    router, _ = make(url, prefix, TOOLS_SCRIPT, permissions=ALLOW_ALL)
    run_to_end(router, "s", "A", "one")
    before = snapshot(router, "s")
    store = router.store()
    with store.backend.transaction():
        store.backend.run(f"DELETE FROM {prefix}requests WHERE session_id = ?", ("s",))
    run_to_end(router, "s", "A", "one, again")
    after = snapshot(router, "s")
    changed = {k for k in before if after[k] != before[k] and k[0] not in WORKING_STATE}
    assert changed == {("message", "u-A")}
    router.close()


def test_store_init_upgrades_a_version_1_store(store_url):  # noqa: F811
    url, prefix = store_url
    with open_store(url, prefix=prefix) as s:
        with s.backend.transaction():
            s.backend.run(f"DROP TABLE {prefix}requests")
            s.backend.run(f"DROP TABLE {prefix}holders")
            s.backend.run(f"UPDATE {prefix}meta SET value = '1' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 1") as refused:
        open_store(url, prefix=prefix)
    assert "upgrade it in place with `loopfsm store init URL`" in str(refused.value)
    with open_store(url, prefix=prefix, create=True) as s:
        assert s.check_schema() == SCHEMA_VERSION == 4
        assert s.request_used("s", "A") is False


def test_an_upgraded_version_1_store_still_refuses_its_old_prompts_request_ids(store_url):  # noqa: F811
    """The upgrade fills the requests table from what version 1 kept: every prompt row and each last id."""
    url, prefix = store_url
    router, _ = make(url, prefix, TOOLS_SCRIPT, permissions=ALLOW_ALL)
    run_to_end(router, "s", "A", "one")
    run_to_end(router, "s", "B", "two")
    run_to_end(router, "t", "C", "three")
    router.close()
    with open_store(url, prefix=prefix) as s:  # as a version-1 store holds these runs
        with s.backend.transaction():
            s.backend.run(f"DROP TABLE {prefix}requests")
            s.backend.run(f"DROP TABLE {prefix}holders")
            s.backend.run(f"UPDATE {prefix}meta SET value = '1' WHERE key = 'schema_version'")
    with open_store(url, prefix=prefix, create=True) as s:
        assert [s.request_used(*k) for k in (("s", "A"), ("s", "B"), ("t", "C"), ("t", "A"))] == [
            True,
            True,
            True,
            False,
        ]
        last = s.load("s")
        assert last is not None and s.request_used("s", last.last_request_id)
    router, _ = make(url, prefix, TOOLS_SCRIPT, permissions=ALLOW_ALL)
    before = snapshot(router, "s")
    again = router.handle("s", {"type": "execute", "request_id": "A", "data": {"prompt": "one, overwritten"}})
    assert again["data"]["code"] == "request_id_reused" and snapshot(router, "s") == before
    router.close()


def _as_version_2(url: str, prefix: str) -> None:
    """Make the store hold its runs as a version-2 store did: a requests table without ``used_at``."""
    with open_store(url, prefix=prefix) as s:
        with s.backend.transaction():
            s.backend.run(
                f"CREATE TABLE {prefix}old_requests AS SELECT session_id, request_id, step FROM {prefix}requests"
            )
            s.backend.run(f"DROP TABLE {prefix}requests")
            s.backend.run(f"ALTER TABLE {prefix}old_requests RENAME TO {prefix}requests")
            s.backend.run(f"DROP TABLE {prefix}holders")
            s.backend.run(f"UPDATE {prefix}meta SET value = '2' WHERE key = 'schema_version'")


def test_a_version_2_store_is_upgraded_and_keeps_its_request_ids_a_whole_retention(store_url):  # noqa: F811
    """Version 3 records when each id was used; ids a version-2 store kept count as used at the upgrade."""
    from loopfsm.router.store import REQUEST_RETENTION_MS, sweep

    url, prefix = store_url
    router, _ = make(url, prefix, TOOLS_SCRIPT, permissions=ALLOW_ALL)
    run_to_end(router, "s", "A", "one")
    run_to_end(router, "s", "B", "two")
    router.close()
    _as_version_2(url, prefix)  # as a version-2 store holds these runs: no used_at column
    with pytest.raises(StoreError, match="schema version 2; this loopfsm reads version 4: upgrade it in place"):
        open_store(url, prefix=prefix)
    upgraded_at = 10**12
    with open_store(url, prefix=prefix, create=True, clock=lambda: upgraded_at) as s:
        assert s.check_schema() == SCHEMA_VERSION and s.request_used("s", "A")
        day = 86_400_000
        assert sweep(s, now_ms=upgraded_at + REQUEST_RETENTION_MS - day).requests_forgotten == 0
        assert s.request_used("s", "A")
        kept = s.backend.run(f"SELECT COUNT(*) FROM {prefix}requests")[1][0][0]
        swept = sweep(s, now_ms=upgraded_at + REQUEST_RETENTION_MS + day)
        assert kept >= 2 and swept.requests_forgotten == kept
        assert f"{kept} request id(s) past the retention forgotten" in swept.summary()
        assert not s.request_used("s", "A") and not s.request_used("s", "B")


def test_router_serve_upgrades_an_older_store_as_store_init_does(store_url):  # noqa: F811
    """docs/router.md: starting `router serve` upgrades the store (it builds its Router with create=True)."""
    from loopfsm.router import Router

    url, prefix = store_url
    router, _ = make(url, prefix, TOOLS_SCRIPT, permissions=ALLOW_ALL)
    run_to_end(router, "s", "A", "one")
    router.close()
    _as_version_2(url, prefix)
    Router(url, prefix=prefix, create=True).close()
    with open_store(url, prefix=prefix) as s:
        assert s.check_schema() == SCHEMA_VERSION and s.request_used("s", "A")


def test_a_request_id_is_refused_inside_the_retention_and_forgotten_after_it(store_url):  # noqa: F811
    from loopfsm.router.store import sweep

    url, prefix = store_url
    router, _ = make(url, prefix, TOOLS_SCRIPT, permissions=ALLOW_ALL)
    run_to_end(router, "s", "A", "one")
    run_to_end(router, "s", "B", "two")
    store = router.store()
    now = store.now()
    hour = 3_600_000
    assert sweep(store, now_ms=now + hour, request_retention_ms=2 * hour).requests_forgotten == 0
    again = router.handle("s", {"type": "execute", "request_id": "A", "data": {"prompt": "one, again"}})
    assert again["data"]["code"] == "request_id_reused"  # inside the retention: refused, never run twice
    kept = store.backend.run(f"SELECT COUNT(*) FROM {prefix}requests")[1][0][0]
    assert kept >= 2 and sweep(store, now_ms=now + 3 * hour, request_retention_ms=2 * hour).requests_forgotten == kept
    assert not store.request_used("s", "A")
    last = store.load("s")
    assert last is not None and last.last_request_id.startswith("B")  # kept in the state row: still answered
    with pytest.raises(ValueError, match="retention must be at least 0 ms"):
        sweep(store, request_retention_ms=-1)
    router.close()


# -- the property: random interleavings, both backends -------------------------------------------

#: One client action: answer the pause (or start a run when Idle), re-send the request sent ``k`` steps
#: ago (``k`` = 1 is the last one) with its body or another one, break, or inject.
ACTIONS = st.lists(
    st.one_of(
        st.just(("next",)),
        st.tuples(st.just("resend"), st.integers(1, 12), st.booleans()),
        st.just(("break",)),
        st.just(("inject",)),
    ),
    min_size=1,
    max_size=14,
)
EXAMPLES = int(os.environ.get("LOOPFSM_REQUEST_ID_EXAMPLES", "20"))


@pytest.fixture
def store_and_workspace(store_url, tmp_path):  # noqa: F811
    return store_url, tmp_path


def _request(c: Any, action: tuple[Any, ...], n: int) -> dict[str, Any] | None:
    """The request the client would send for ``action`` now, or None when its machine does not allow it."""
    if action[0] == "break":
        req = {"type": "break", "request_id": f"b{n}"}
    elif action[0] == "inject":
        req = c._escape(("inject", f"redirect {n}"))
    elif c.machine.state == "Idle":
        perms = ALLOW_ALL if n % 2 else dict(ALLOW_ALL, shell="deny", write_file="ask")
        req = c._execute_request(f"prompt {n}", perms, None)
    else:
        req = c._answer(c.machine.state, c.last_response)
    return req if c.machine.can("send", req["type"], req["request_id"]) else None


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=ACTIONS)
@pytest.mark.parametrize("mode", ["plaintext", "encrypted"])
def test_no_committed_row_ever_changes_its_content(store_and_workspace, mode, actions):
    """Random execute / continue / break / inject / re-sends of old and last request ids, through the client.

    After every request: a row of the run's record (everything but WORKING_STATE) keeps its run, and its
    content is only ever completed, never replaced (a tool call's result joins its arguments; a row written
    with metadata only gets its seal later); an older request_id is refused with request_id_reused and
    changes nothing; the last one replays its response and changes nothing.
    """
    (url, prefix), workspace = store_and_workspace
    # a router per example: each in-process request may run on a new thread, and every thread keeps a connection
    router, tc = make(url, prefix, TOOLS_SCRIPT)
    try:
        _drive(router, tc, workspace, mode, actions)
    finally:
        router.close()


def _drive(router: Any, tc: Any, workspace: Any, mode: str, actions: list[tuple[Any, ...]]) -> None:
    session = f"p{uuid.uuid4().hex[:12]}"
    c = client(tc, session, workspace, keyring=Keyring.generate() if mode == "encrypted" else None)
    sent: list[tuple[dict[str, Any], dict[str, Any]]] = []  # (request, response) of committed requests
    seen: dict[tuple[str, str], tuple[Any, ...]] = {}
    for n, action in enumerate(actions):
        before = snapshot(router, session)
        if action[0] == "resend" and sent:
            resent = sent[-min(action[1], len(sent))]
            req = resent[0] if action[2] else _other_body(resent[0])
            path = "execute" if req["type"] == "execute" else "continue"
            got = tc.post(f"/v1/sessions/{session}/{path}", json=req).json()  # beside the client's machine
            if resent is sent[-1]:
                assert got == resent[1], (req, got)  # the last request_id: its response, replayed
            else:
                assert got["status"] == "error" and got["data"]["code"] == "request_id_reused", (req, got)
            assert snapshot(router, session) == before
            continue
        req = _request(c, action, n)
        if req is None:
            continue
        got = c._exchange(req)
        c.last_response = got
        after = snapshot(router, session)
        rec = router.store().load(session)
        if rec is not None and rec.last_request_id == req["request_id"]:  # committed
            sent.append((req, got))
        else:
            assert after == before, (req, got)  # refused or invalid: nothing changed
        for key, (run_id, _, _, _, body, sealed) in after.items():
            if key[0] in WORKING_STATE:
                continue
            if key in seen:
                run0, body0, sealed0 = seen[key]
                assert run_id == run0, key
                assert sealed0 is None or sealed == sealed0, key
                if isinstance(body0, dict):
                    assert isinstance(body, dict) and {k: body[k] for k in body0 if k in body} == body0, key
                else:
                    assert body0 is None or body == body0, key
            seen[key] = (run_id, body, sealed)
