"""The router service end to end in-process: its ASGI app, the real client, SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest

from loopfsm.router import protocol as P
from loopfsm.router.crypto import Keyring
from loopfsm.router.errors import SealError

from tests.support.router_support import PLAN_SCRIPT, TOOLS_SCRIPT, client, make
from tests.support.store_support import store_url  # noqa: F401 - fixture


@pytest.fixture
def store_at(store_url):  # noqa: F811
    return store_url


ALLOW_ALL = {"shell": "allow", "write_file": "allow", "read_file": "allow", "edit_file": "allow"}


def kinds(router, session):
    out: dict[str, int] = {}
    for r in router.store().rows(session):
        out[r.kind] = out.get(r.kind, 0) + 1
    return out


def test_plaintext_run_with_ask_calls_writes_file_and_rows_once(store_at, tmp_path):
    url, prefix = store_at
    router, tc = make(url, prefix, TOOLS_SCRIPT)
    seen = []
    c = client(tc, "s1", tmp_path, approver=lambda kind, info: seen.append((kind, info["name"])) or "approved")
    resp = c.run("do it")
    assert resp["status"] == "completed" and resp["data"]["message"] == "all done"
    assert resp["allowed_continuations"] == []
    assert seen == [("tool", "shell"), ("tool", "write_file")]
    assert (tmp_path / "out.txt").read_text() == "written by the model\n"
    rows = router.store().rows("s1")
    diff = [r for r in rows if r.kind == "diff"]
    assert len(diff) == 1 and diff[0].meta["status"] == "applied" and diff[0].body["new"] == "written by the model\n"
    calls = [r for r in rows if r.kind == "tool_call"]
    assert sorted(r.meta["name"] for r in calls) == ["shell", "write_file"]
    assert {r.meta["decision"] for r in calls} == {"approved"} and all(
        r.meta["args_hash"].startswith("sha256:") for r in calls
    )
    msgs = [r for r in rows if r.kind == "message"]
    assert [m.meta["role"] for m in msgs] == ["user", "assistant", "assistant", "assistant"]
    rec = router.store().load("s1")
    assert rec.phase == "Idle" and rec.holder is None
    router.close()


def test_deny_never_reaches_client_and_rejected_ask_rejects_diff(store_at, tmp_path):
    url, prefix = store_at
    router, tc = make(url, prefix, TOOLS_SCRIPT)
    asked = []
    c = client(tc, "s2", tmp_path, approver=lambda kind, info: asked.append(info["name"]) or "rejected")
    resp = c.run("go", permissions={"shell": "deny"})
    assert resp["status"] == "completed"
    assert asked == ["write_file"]  # shell was denied by the router, never asked
    assert not (tmp_path / "out.txt").exists()
    rows = router.store().rows("s2")
    shell = [r for r in rows if r.kind == "tool_call" and r.meta["name"] == "shell"][0]
    assert shell.meta["permission"] == "deny" and shell.body["is_error"] and "denied" in shell.body["result"]
    diff = [r for r in rows if r.kind == "diff"][0]
    assert diff.meta["status"] == "rejected"
    assert not any(
        r["type"] == "tool_results" and any(x["call_id"] == "c1" for x in r["data"]["results"]) for r in c.sent
    )
    router.close()


@pytest.mark.parametrize("answer,ended", [("approved", "completed"), ("rejected", "aborted")])
def test_plan_approval(store_at, tmp_path, answer, ended):
    url, prefix = store_at
    router, tc = make(url, prefix, PLAN_SCRIPT)
    infos = []
    c = client(tc, "p", tmp_path, approver=lambda kind, info: infos.append((kind, info)) or answer)
    resp = c.run("plan first")
    assert infos[0][0] == "plan" and infos[0][1]["summary"] == "step one"
    assert infos[0][1]["args_hash"].startswith("sha256:") and infos[0][1]["expires_at"] > 0
    if ended == "completed":
        assert resp["status"] == "completed" and resp["data"]["message"] == "plan carried out"
    else:
        assert resp["status"] == "idle" and resp["data"]["ended"] == "aborted"
    plan = router.store().rows("p", "plan")[0]
    assert plan.meta["status"] == answer and plan.meta["approver"] == "user"
    router.close()


def test_expired_plan_approval_ends_run(store_at, tmp_path):
    url, prefix = store_at
    clock = [1_000_000]
    router, tc = make(url, prefix, PLAN_SCRIPT, approval_ttl_ms=1000, clock=lambda: clock[0])

    def late(kind, info):
        clock[0] += 5000
        return "approved"

    resp = client(tc, "e", tmp_path, approver=late).run("plan")
    assert resp["status"] == "idle" and resp["data"]["ended"] == "expired"
    assert router.store().rows("e", "plan")[0].meta["status"] == "expired"
    router.close()


def test_bad_input_and_wrong_continuation_change_nothing(store_at, tmp_path):
    from loopfsm.router.protocol import check_response

    url, prefix = store_at
    router, tc = make(url, prefix, TOOLS_SCRIPT, permissions=ALLOW_ALL)
    first = tc.post(
        "/v1/sessions/b/execute", json={"type": "execute", "request_id": "r1", "data": {"prompt": "x"}}
    ).json()
    assert first["status"] == "awaiting_tool"
    before = router.store().load("b")
    for body in (
        {"type": "tool_results", "request_id": "r2", "data": {"results": "nope"}},
        {"type": "tool_results", "request_id": "r2", "data": {"results": []}},
        {
            "type": "tool_results",
            "request_id": "r2",
            "data": {"results": [{"call_id": "c1", "content": "x", "is_error": True, "decision": "rejected"}]},
        },
        {"type": "sealed", "request_id": "r3", "data": {"encrypted": {}}},
        {"type": "nonsense"},
        [1, 2],
    ):
        resp = tc.post("/v1/sessions/b/continue", json=body).json()
        check_response(resp)
        assert resp["status"] == "error"
        assert resp["allowed_continuations"] == ["tool_results", "inject", "break"]
    assert tc.post("/v1/sessions/b/continue", content=b"{not json").status_code == 400
    run_live = tc.post(
        "/v1/sessions/b/execute", json={"type": "execute", "request_id": "r9", "data": {"prompt": "y"}}
    ).json()
    assert run_live["data"]["code"] == "run_live"
    after = router.store().load("b")
    assert (after.phase, after.version, after.snapshot) == (before.phase, before.version, before.snapshot)
    router.close()


def test_resent_request_id_is_replayed_not_reprocessed(store_at, tmp_path):
    url, prefix = store_at
    router, tc = make(url, prefix, TOOLS_SCRIPT, permissions=ALLOW_ALL)
    body = {"type": "execute", "request_id": "same", "data": {"prompt": "x"}}
    a = tc.post("/v1/sessions/rp/execute", json=body).json()
    rows = kinds(router, "rp")
    b = tc.post("/v1/sessions/rp/execute", json=body).json()
    assert a == b and kinds(router, "rp") == rows
    router.close()


@pytest.mark.parametrize("where", ["tool", "plan"])
@pytest.mark.parametrize("how", ["break", "inject"])
def test_break_and_inject_from_live_states(store_at, tmp_path, where, how):
    url, prefix = store_at
    script = TOOLS_SCRIPT if where == "tool" else PLAN_SCRIPT
    router, tc = make(url, prefix, script + [{"text": "fresh answer"}] * 0)
    first = {"n": 0}

    def approver(kind, info):
        first["n"] += 1
        if first["n"] == 1:
            return "break" if how == "break" else ("inject", "do something else")
        return "approved"

    resp = client(tc, "x", tmp_path, approver=approver).run("start")
    if how == "break":
        assert resp["status"] == "idle" and resp["data"]["ended"] == "user"
    else:  # the fresh run starts the script over from its first reply and completes
        assert resp["status"] == "completed"
    rec = router.store().load("x")
    assert rec.phase == "Idle" and rec.holder is None
    bundles = router.store().rows("x", "input")
    assert all(b.body is None for b in bundles if b.row_id.startswith("b-"))
    router.close()


def _scan(router, needles):
    """Every column of every table of the store, searched for each needle."""
    store = router.store()
    hits = []
    for table in (f"{store.prefix}run_state", f"{store.prefix}rows", f"{store.prefix}meta"):
        _, rows = store.backend.run(f"SELECT * FROM {table}")
        for row in rows:
            text = json.dumps([str(v) for v in row])
            hits += [(table, n) for n in needles if n in text]
    return hits


SECRET_SCRIPT = [
    {
        "text": "secret-assistant-one",
        "tool_calls": [
            {"id": "c1", "name": "shell", "arguments": {"command": "echo secret-arg-shell"}},
            {"id": "c2", "name": "write_file", "arguments": {"path": "f.txt", "content": "secret-diff-body"}},
            {
                "id": "c3",
                "name": "edit_file",
                "arguments": {"path": "g.txt", "old_text": "a", "new_text": "secret-denied"},
            },
            {"id": "c4", "name": "remember", "arguments": {"key": "secret-memory-key", "value": "secret-memory"}},
        ],
    },
    {"text": "secret-final-answer"},
]


def test_encrypted_sessions_leave_no_plaintext_at_rest(store_at, tmp_path):
    url, prefix = store_at
    router, tc = make(url, prefix, SECRET_SCRIPT)
    kr = Keyring.generate()
    c = client(tc, "enc", tmp_path, keyring=kr)
    resp = c.run("secret-prompt-one", permissions={"shell": "allow", "write_file": "ask", "edit_file": "deny"})
    assert resp["status"] == "idle" and resp["data"]["ended"] == "completed"
    assert c.last_message == "secret-final-answer"
    # a second run opens the sealed history first (awaiting_decrypt), then completes
    statuses = []
    c2 = client(tc, "enc", tmp_path, keyring=kr, on_progress=lambda s, d: statuses.append(s))
    c2.run("secret-prompt-two", permissions={"shell": "allow", "write_file": "allow", "edit_file": "deny"})
    assert statuses[0] == "awaiting_decrypt"
    needles = [
        "secret-prompt-one",
        "secret-prompt-two",
        "secret-assistant-one",
        "secret-arg-shell",
        "secret-diff-body",
        "secret-denied",
        "secret-final-answer",
        "secret-memory",
    ]
    assert _scan(router, needles) == []
    rows = router.store().rows("enc")
    content = [r for r in rows if r.kind in ("message", "tool_call", "diff", "memory")]
    assert content and all(r.body is None for r in content)
    assert [r.sealed is not None for r in rows if r.kind == "memory"] == [True]
    assert all(r.sealed is not None for r in content if r.kind == "message")
    # tampered, moved and wrong-key ciphertexts are refused
    msg = next(r for r in rows if r.kind == "message")
    ref = f"message:{msg.row_id}"
    assert json.loads(kr.open(msg.sealed, session_id="enc", ref=ref))["role"] == "user"
    other = next(r for r in rows if r.kind == "message" and r.row_id != msg.row_id)
    with pytest.raises(SealError):
        kr.open(msg.sealed, session_id="enc", ref=f"message:{other.row_id}")
    with pytest.raises(SealError):
        kr.open(msg.sealed, session_id="other-session", ref=ref)
    ct = msg.sealed["ciphertext"]
    bad = dict(msg.sealed, ciphertext=("A" if ct[0] != "A" else "B") + ct[1:])
    with pytest.raises(SealError):
        kr.open(bad, session_id="enc", ref=ref)
    with pytest.raises(SealError):
        Keyring.generate().open(msg.sealed, session_id="enc", ref=ref)
    router.close()


def test_encrypted_execute_without_sealed_prompt_is_refused(store_at):
    url, prefix = store_at
    router, tc = make(url, prefix, TOOLS_SCRIPT)
    resp = tc.post(
        "/v1/sessions/q/execute",
        json={"type": "execute", "request_id": "r1", "data": {"prompt": "x", "mode": "encrypted"}},
    ).json()
    assert resp["status"] == "error" and resp["data"]["code"] == "invalid"
    assert router.store().load("q").phase == "Idle" and router.store().rows("q") == []
    router.close()


def test_store_gone_is_an_error_envelope_not_an_exception(store_at, tmp_path):
    from loopfsm.router.store import open_store

    url, prefix = store_at
    router, tc = make(url, prefix, TOOLS_SCRIPT)
    with open_store(url, prefix=prefix) as s:
        s.drop()
    for body in ({"type": "execute", "request_id": "r1", "data": {"prompt": "x"}}, {"type": "nonsense"}):
        resp = router.handle("gone", body)
        assert resp["status"] == "error" and resp["data"]["code"] == "internal"
    with open_store(url, prefix=prefix, create=True):
        pass
    assert router.handle("gone", {"type": "execute", "request_id": "r2", "data": {"prompt": "x"}})["status"] == (
        "awaiting_tool"
    )
    router.close()


def _sealed_execute(kr, request_id, prompt, session="enc"):
    """An encrypted session's execute as the reference client sends it: the prompt sealed under its ref."""
    ref = P.prompt_ref(request_id)
    sealed = kr.seal(prompt, session_id=session, ref=ref).to_json()
    return {
        "type": "execute",
        "request_id": request_id,
        "data": {"prompt": prompt, "mode": "encrypted", "encrypted": {ref: sealed}},
    }


@pytest.mark.parametrize(
    "opened",
    [
        '{"role": "bogus"}',
        '{"role": "tool"}',
        '{"role": "user", "text": 5}',
        '{"role": "user", "thinking": [5]}',
        "[1]",
        "[" * 5000 + "]" * 5000,
        "not json",
    ],
    ids=["role", "tool-without-id", "text-not-string", "thinking-not-object", "not-an-object", "deep", "not-json"],
)
def test_decrypted_content_that_is_not_a_message_is_refused_and_the_run_goes_on(store_at, tmp_path, opened):
    """What the client says it opened must be a conversation message: anything else is `invalid`, never `internal`,
    and the run still takes the right plaintext afterwards."""
    url, prefix = store_at
    router, tc = make(url, prefix, [{"text": "first"}, {"text": "second"}])
    kr = Keyring.generate()
    assert client(tc, "enc", tmp_path, keyring=kr).run("one")["data"]["ended"] == "completed"
    paused = tc.post("/v1/sessions/enc/execute", json=_sealed_execute(kr, "r2", "two")).json()
    assert paused["status"] == "awaiting_decrypt"
    to_decrypt = paused["data"]["to_decrypt"]
    bad = dict.fromkeys(to_decrypt, opened)
    r = tc.post("/v1/sessions/enc/continue", json={"type": "decrypted", "request_id": "d1", "data": {"plaintext": bad}})
    assert r.json()["status"] == "error" and r.json()["data"]["code"] == "invalid", r.json()
    assert "is not a conversation message" in r.json()["data"]["error"]
    good = {k: kr.open(v, session_id="enc", ref=k).decode() for k, v in to_decrypt.items()}
    done = tc.post(
        "/v1/sessions/enc/continue", json={"type": "decrypted", "request_id": "d2", "data": {"plaintext": good}}
    )
    assert done.json()["status"] == "completed", done.json()
    assert done.json()["allowed_continuations"] == ["sealed", "break"]  # the answer waits for its seal
    router.close()


#: How a hand-edited store damages an encrypted session's history, and the words the refusal says.
#: (what is done, to which row: the last ref's row, or the history row's body)
ENCRYPTED_DAMAGE = {
    "row-deleted": ("DELETE FROM {t} WHERE session_id = ? AND kind = ? AND row_id = ?", "does not hold sealed"),
    "seal-cleared": (
        "UPDATE {t} SET sealed = NULL WHERE session_id = ? AND kind = ? AND row_id = ?",
        "does not hold sealed",
    ),
    "seal-garbage": (
        "UPDATE {t} SET sealed = '\"garbage\"' WHERE session_id = ? AND kind = ? AND row_id = ?",
        "does not hold sealed",
    ),
    "seal-empty-object": (
        "UPDATE {t} SET sealed = '{{}}' WHERE session_id = ? AND kind = ? AND row_id = ?",
        "does not hold sealed",
    ),
    "ref-garbled": (
        lambda body, refs: dict(body, refs=refs[:-1] + ["nonsense"]),
        "references the router did not write",
    ),
    "refs-not-a-list": (lambda body, refs: dict(body, refs={"not": "a list"}), "references the router did not write"),
    "ref-repeated": (lambda body, refs: dict(body, refs=refs + refs[:1]), "references the router did not write"),
    "ref-huge": (
        lambda body, refs: dict(body, refs=refs[:-1] + ["message:" + "x" * 1_000_000]),
        "does not hold sealed",
    ),
    "mode-not-a-mode": (lambda body, refs: dict(body, mode={"k": "SECRET-ZEBRA"}), "names a mode neither"),
    "body-a-list": (lambda body, refs: [body], "not a JSON object"),
    "body-null": (lambda body, refs: None, "not a JSON object"),
    # past json.loads where the recursion limit is the default (DamagedRow); where a test runner raised it, the
    # row parses and is a list (DamagedHistory): refused either way
    "body-nested-past-the-parser": ("[" * 5000 + "]" * 5000, ("does not read back as JSON", "not a JSON object")),
}


@pytest.mark.parametrize("how", list(ENCRYPTED_DAMAGE))
def test_an_encrypted_history_with_a_hole_is_refused_not_shortened(store_at, tmp_path, how):
    """A message row the history names, gone or no longer sealed, or a history row edited into something the
    router never writes, fails the next run loudly and changes nothing: the model is never sent a conversation
    with a message missing, and the answer names the row, bounded, never its content."""
    url, prefix = store_at
    router, tc = make(url, prefix, [{"text": "first"}, {"text": "second"}])
    kr = Keyring.generate()
    assert client(tc, "enc", tmp_path, keyring=kr).run("one")["data"]["ended"] == "completed"
    store = router.store()
    body = store.row("enc", "input", "history").body
    refs = body["refs"]
    kind, row_id = refs[-1].split(":", 1)
    damage, said = ENCRYPTED_DAMAGE[how]
    set_body = f"UPDATE {store.rows_table} SET body = ? WHERE session_id = ? AND kind = 'input' AND row_id = 'history'"
    if callable(damage):
        store.backend.run(set_body, (json.dumps(damage(body, refs)), "enc"))
    elif damage.startswith("["):
        store.backend.run(set_body, (damage, "enc"))
    else:
        store.backend.run(damage.format(t=store.rows_table), ("enc", kind, row_id))
    before = store.load("enc")
    rows_before = store.backend.run(f"SELECT COUNT(*) FROM {store.rows_table} WHERE session_id = ?", ("enc",))[1]
    r = tc.post("/v1/sessions/enc/execute", json=_sealed_execute(kr, "r2", "two")).json()
    assert r["status"] == "error" and r["data"]["code"] == "internal" and not r["data"]["retryable"], r
    assert any(words in r["data"]["error"] for words in ((said,) if isinstance(said, str) else said)), r
    assert len(r["data"]["error"]) < 400 and "SECRET" not in r["data"]["error"]
    if said == "does not hold sealed" and how != "ref-huge":
        assert refs[-1] in r["data"]["error"]
    after = store.load("enc")
    assert (after.phase, after.version, after.holder) == (before.phase, before.version, None)
    assert (
        store.backend.run(f"SELECT COUNT(*) FROM {store.rows_table} WHERE session_id = ?", ("enc",))[1] == rows_before
    )
    # the user goes on in a new session
    assert client(tc, "fresh", tmp_path, keyring=kr).run("three")["data"]["ended"] == "completed"
    router.close()


@pytest.mark.parametrize("entry", [{"role": "bogus"}, "text", None], ids=["bad-role", "string", "null"])
def test_a_plaintext_history_entry_that_is_not_a_message_is_refused_by_name(store_at, tmp_path, entry):
    url, prefix = store_at
    router, tc = make(url, prefix, [{"text": "first"}, {"text": "second"}])
    first = router.handle("s", {"type": "execute", "request_id": "r1", "data": {"prompt": "one"}})
    assert first["status"] == "completed", first
    store = router.store()
    history = store.row("s", "input", "history").body
    history["messages"][1] = entry
    store.backend.run(
        f"UPDATE {store.rows_table} SET body = ? WHERE session_id = ? AND kind = 'input' AND row_id = 'history'",
        (json.dumps(history), "s"),
    )
    r = router.handle("s", {"type": "execute", "request_id": "r2", "data": {"prompt": "two"}})
    assert r["status"] == "error" and r["data"]["code"] == "internal" and not r["data"]["retryable"], r
    assert r["data"]["error"].startswith("entry 1 of this session's history row is not a conversation message")
    assert store.load("s").phase == "Idle" and store.load("s").holder is None
    router.close()


def test_a_history_row_deleted_whole_reads_as_a_session_no_run_completed_in(store_at):
    """What docs/router.md says the router cannot tell: the sweep ending an expired first run leaves no history
    row either, so a deleted one is not refused; the next run goes on as a session's first."""
    url, prefix = store_at
    router, tc = make(url, prefix, [{"text": "first"}, {"text": "second"}])
    assert router.handle("s", {"type": "execute", "request_id": "r1", "data": {"prompt": "one"}})["status"] == (
        "completed"
    )
    store = router.store()
    store.backend.run(
        f"DELETE FROM {store.rows_table} WHERE session_id = ? AND kind = 'input' AND row_id = 'history'", ("s",)
    )
    again = router.handle("s", {"type": "execute", "request_id": "r2", "data": {"prompt": "two"}})
    assert again["status"] == "completed", again
    texts = [m["text"] for m in store.row("s", "input", "history").body["messages"]]
    assert len(texts) == 2 and texts[0] == "two"  # the first run's conversation is gone, unsaid
    router.close()
