"""Standalone approvals (disclosure, cost ceiling, plan) and session memory, through the real router.

Each kind is answered approved, rejected and too late, in plaintext and
encrypted sessions, on SQLite and PostgreSQL, through the ASGI app and the
reference client; the clock is the router's, fed in by the test.
"""

from __future__ import annotations

import json

import pytest

from loopfsm.router.crypto import Keyring
from loopfsm.router.providers.scripted import ScriptedProvider

from tests.support.router_support import PLAN_SCRIPT, client, make
from tests.support.store_support import store_url  # noqa: F401 - fixture


@pytest.fixture
def store_at(store_url):  # noqa: F811
    return store_url


TTL = 1000
#: One tool round, then an answer; the second call passes a 150-token ceiling (120 spent + about 120 more).
COST_SCRIPT = [
    {
        "text": "secret-looking",
        "tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "echo secret-cmd"}}],
        "input_tokens": 100,
        "output_tokens": 20,
    },
    {"text": "secret-final", "input_tokens": 150, "output_tokens": 10},
]
ONE_REPLY = [{"text": "secret-final", "input_tokens": 10, "output_tokens": 5}]
ALLOW = {"shell": "allow"}


def setup_kind(kind, url, prefix, clock):
    """(router, test client, execute kwargs, the final text) for a run that raises one approval of ``kind``."""
    if kind == "disclosure":
        provider = ScriptedProvider(ONE_REPLY, remote=True)
        gates = {"disclosure": "first_call"}
    elif kind == "cost_ceiling":
        provider = ScriptedProvider(COST_SCRIPT)
        gates = {"cost_ceiling_tokens": 150}
    else:
        provider = ScriptedProvider(PLAN_SCRIPT)
        gates = {}
    router, tc = make(url, prefix, provider=provider, policy={"approval_ttl_ms": TTL}, clock=lambda: clock[0])
    final = "plan carried out" if kind == "plan" else "secret-final"
    return router, tc, gates, final


def trace(router, session):
    return [r.meta for r in router.store().rows(session, "trace")]


def records(router, session):
    return [m for m in trace(router, session) if m.get("event") == "approval.record"]


def scan(router, needles):
    store = router.store()
    hits = []
    for table in (f"{store.prefix}run_state", f"{store.prefix}rows"):
        _, rows = store.backend.run(f"SELECT * FROM {table}")
        text = json.dumps([[str(v) for v in row] for row in rows])
        hits += [(table, n) for n in needles if n in text]
    return hits


@pytest.mark.parametrize("encrypted", [False, True], ids=["plaintext", "encrypted"])
@pytest.mark.parametrize("answer", ["approved", "rejected", "expired"])
@pytest.mark.parametrize("kind", ["disclosure", "cost_ceiling", "plan"])
def test_every_kind_approved_rejected_expired(store_at, tmp_path, kind, answer, encrypted):
    url, prefix = store_at
    clock = [1_000_000]
    router, tc, gates, final = setup_kind(kind, url, prefix, clock)
    asked = []

    def approver(k, info):
        asked.append((k, info))
        if answer == "expired":
            clock[0] += TTL  # answered exactly at expires_at: too late
            return "approved"
        return answer

    kr = Keyring.generate() if encrypted else None
    c = client(tc, "s", tmp_path, approver=approver, keyring=kr)
    resp = c.run("secret-prompt", permissions=ALLOW, gates=gates)
    assert [k for k, _ in asked] == [kind]
    info = asked[0][1]
    assert info["args_hash"].startswith("sha256:") and info["expires_at"] == 1_000_000 + TTL
    assert info["summary"]
    ended = {"approved": "completed", "rejected": "aborted", "expired": "expired"}[answer]
    if ended == "completed" and not encrypted:
        assert resp["status"] == "completed" and resp["data"]["message"] == final
    else:
        assert resp["status"] == "idle" and resp["data"]["ended"] == ended
    if ended == "completed":
        assert c.last_message == final
    # the approval's record: written once, with its outcome and who answered
    (rec,) = records(router, "s")
    assert rec["kind"] == kind and rec["status"] == answer and rec["approver"] == "user"
    assert rec["args_hash"] == info["args_hash"] and rec["expires_at"] == info["expires_at"]
    events = [m["event"] for m in trace(router, "s")]
    calls = events.count("model.called")
    if kind == "disclosure":  # nothing reached the model unless the user consented in time
        assert calls == (1 if answer == "approved" else 0)
    elif kind == "cost_ceiling":  # the gated second call runs only when approved
        assert calls == (2 if answer == "approved" else 1)
    if answer == "expired":
        assert "approval.expired" in events and "run.broken" in events
    # the run is over: no lock, Idle, every bundle emptied, each message row once
    rec_state = router.store().load("s")
    assert rec_state.phase == "Idle" and rec_state.holder is None
    rows = router.store().rows("s")
    assert all(r.body is None for r in rows if r.kind == "input" and r.row_id.startswith("b-"))
    keys = [(r.kind, r.row_id) for r in rows]
    assert len(keys) == len(set(keys))
    users = [r for r in rows if r.kind == "message" and r.meta["role"] == "user"]
    assert len(users) == 1
    if encrypted:
        assert scan(router, ["secret-prompt", "secret-looking", "secret-cmd", "secret-final", "step one"]) == []
    router.close()


def _pause_at_gate(router, tc, session, gates, **extra):
    body = {"type": "execute", "request_id": "r1", "data": {"prompt": "go", "permissions": ALLOW, "gates": gates}}
    body["data"].update(extra)
    resp = tc.post(f"/v1/sessions/{session}/execute", json=body).json()
    return resp


def _same(router, session, before):
    after = router.store().load(session)
    assert (after.phase, after.version, after.snapshot, after.holder) == (
        before.phase,
        before.version,
        before.snapshot,
        before.holder,
    )


@pytest.mark.parametrize("kind", ["disclosure", "cost_ceiling", "plan"])
def test_bad_and_unallowed_answers_are_refused_and_change_nothing(store_at, tmp_path, kind):
    url, prefix = store_at
    clock = [1_000_000]
    router, tc, gates, _ = setup_kind(kind, url, prefix, clock)
    resp = _pause_at_gate(router, tc, "b", gates)
    if kind == "cost_ceiling":  # the ceiling is passed by the second call: answer the tool round first
        resp = tc.post(
            "/v1/sessions/b/continue",
            json={
                "type": "tool_results",
                "request_id": "r-tools",
                "data": {"results": [{"call_id": "c1", "content": "ok", "is_error": False}]},
            },
        ).json()
    assert resp["status"] == "awaiting_approval", resp
    (a,) = resp["data"]["approvals"]
    assert a["kind"] == kind
    before = router.store().load("b")
    rows_before = sorted((r.kind, r.row_id, json.dumps(r.meta, sort_keys=True)) for r in router.store().rows("b"))

    def decision(**kw):
        d = {"approval_id": a["approval_id"], "decision": "approved", "approver": "u"}
        d.update(kw)
        return d

    bad = [
        {"decisions": []},
        {"decisions": [decision(approval_id="someone-else")]},
        {"decisions": [decision(), decision()]},
        {"decisions": [decision(args_hash="sha256:" + "0" * 64)]},
        {"decisions": [decision(decision="maybe")]},
        {"decisions": [decision()], "encrypted": {}},  # fine shape, but nothing to seal in a plaintext session
    ]
    for i, data in enumerate(bad):
        if data.get("encrypted") == {}:
            data["encrypted"] = {
                "plan:x": {
                    "version": 1,
                    "algorithm": "xchacha20poly1305",
                    "key_id": "k",
                    "nonce": "n",
                    "ciphertext": "c",
                }
            }
        r = tc.post(
            "/v1/sessions/b/continue", json={"type": "approval_decisions", "request_id": f"bad{i}", "data": data}
        ).json()
        assert r["status"] == "error" and r["data"]["code"] == "invalid", (i, r)
        assert r["allowed_continuations"] == ["approval_decisions", "inject", "break"]
    for body in (
        {"type": "tool_results", "request_id": "t1", "data": {"results": []}},
        {"type": "sealed", "request_id": "t2", "data": {"encrypted": {}}},
        {"type": "decrypted", "request_id": "t3", "data": {"plaintext": {}}},
    ):
        r = tc.post("/v1/sessions/b/continue", json=body).json()
        assert r["status"] == "error" and r["data"]["code"] == "not_allowed"
    r = tc.post("/v1/sessions/b/execute", json={"type": "execute", "request_id": "x9", "data": {"prompt": "y"}}).json()
    assert r["data"]["code"] == "run_live"
    _same(router, "b", before)
    rows_after = sorted((r.kind, r.row_id, json.dumps(r.meta, sort_keys=True)) for r in router.store().rows("b"))
    assert rows_after == rows_before
    # the good answer still works afterwards, and a re-send of it is replayed, not re-processed
    good = {"type": "approval_decisions", "request_id": "ok", "data": {"decisions": [decision()]}}
    done = tc.post("/v1/sessions/b/continue", json=good).json()
    assert done["status"] == "completed"
    n = len(router.store().rows("b"))
    assert tc.post("/v1/sessions/b/continue", json=good).json() == done
    assert len(router.store().rows("b")) == n
    router.close()


def test_disclosure_rules_local_first_call_every_call_and_stricter_wins(store_at, tmp_path):
    url, prefix = store_at
    tools = [
        {"text": "a", "tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "true"}}]},
        {"text": "b", "tool_calls": [{"id": "c2", "name": "shell", "arguments": {"command": "true"}}]},
        {"text": "done"},
    ]

    def kinds_asked(provider, gates, policy=None, session="d"):
        router, tc = make(url, prefix, provider=provider, policy=policy or {})
        asked = []
        resp = client(tc, session, tmp_path, approver=lambda k, i: asked.append((k, i)) or "approved").run(
            "x", permissions=ALLOW, gates=gates
        )
        assert resp["status"] == "completed"
        router.close()
        return asked

    # a local model discloses nothing: never asked
    assert kinds_asked(ScriptedProvider(tools), {"disclosure": "every_call"}, session="l") == []
    # first_call: once per run, before its first call
    asked = kinds_asked(ScriptedProvider(tools, remote=True), {"disclosure": "first_call"}, session="f")
    assert [(k, i["details"]["turn"]) for k, i in asked] == [("disclosure", 0)]
    assert asked[0][1]["details"]["providers"] == ["scripted"]
    # every_call: before each of the three calls (the later ones carry the tool results)
    asked = kinds_asked(ScriptedProvider(tools, remote=True), {"disclosure": "every_call"}, session="e")
    assert [i["details"]["turn"] for _, i in asked] == [0, 1, 2]
    assert len({i["approval_id"] for _, i in asked}) == 3
    # the router's policy applies whatever the session says: a session can only make it stricter
    asked = kinds_asked(
        ScriptedProvider(tools, remote=True), {"disclosure": "off"}, policy={"disclosure": "first_call"}, session="p"
    )
    assert [i["details"]["turn"] for _, i in asked] == [0]
    asked = kinds_asked(
        ScriptedProvider(tools, remote=True),
        {"disclosure": "every_call"},
        policy={"disclosure": "first_call"},
        session="q",
    )
    assert [i["details"]["turn"] for _, i in asked] == [0, 1, 2]
    asked = kinds_asked(ScriptedProvider(tools, remote=True), {}, policy={"disclosure": "every_call"}, session="r")
    assert [i["details"]["turn"] for _, i in asked] == [0, 1, 2]


def test_cost_ceiling_asks_again_one_ceiling_later(store_at, tmp_path):
    url, prefix = store_at
    script = [
        {
            "text": f"t{i}",
            "tool_calls": [{"id": f"c{i}", "name": "shell", "arguments": {"command": "true"}}],
            "input_tokens": 600,
            "output_tokens": 0,
        }
        for i in range(5)
    ] + [{"text": "done", "input_tokens": 600}]

    def run(session, policy, gates=None):
        router, tc = make(url, prefix, provider=ScriptedProvider(script), policy=policy)
        asked = []
        resp = client(tc, session, tmp_path, approver=lambda k, i: asked.append(i["details"]) or "approved").run(
            "x", permissions=ALLOW, gates=gates
        )
        assert resp["status"] == "completed"
        assert [m["event"] for m in trace(router, session)].count("model.called") == 6
        router.close()
        return [(d["spent_tokens"], d["next_tokens"], d["ceiling_tokens"]) for d in asked]

    # before call k the run has spent 600 (k-1) and estimates 600 more (from the second call on);
    # ceiling 2000: asked before call 4 (2400 > 2000), which grants 2400: 3600 never passes 4400
    assert run("c1", {"cost_ceiling_tokens": 2000}) == [(1800, 600, 2000)]
    # a lower session ceiling wins over the router's: asked at 1200 > 1000, 2400 > 2200, 3600 > 3400
    assert run("c2", {"cost_ceiling_tokens": 2000}, {"cost_ceiling_tokens": 1000}) == [
        (600, 600, 1000),
        (1800, 600, 1000),
        (3000, 600, 1000),
    ]
    # the session cannot loosen the router's ceiling: its higher one is not the one that asks
    assert run("c3", {"cost_ceiling_tokens": 2000}, {"cost_ceiling_tokens": 100_000}) == [(1800, 600, 2000)]


def test_a_plan_right_after_a_disclosure_pauses_again(store_at, tmp_path):
    url, prefix = store_at
    router, tc = make(url, prefix, provider=ScriptedProvider(PLAN_SCRIPT, remote=True))
    statuses, kinds = [], []
    c = client(
        tc,
        "dp",
        tmp_path,
        approver=lambda k, i: kinds.append(k) or "approved",
        on_progress=lambda s, d: statuses.append(s),
    )
    resp = c.run("x", gates={"disclosure": "first_call"})
    assert resp["status"] == "completed" and resp["data"]["message"] == "plan carried out"
    assert kinds == ["disclosure", "plan"] and statuses == ["awaiting_approval", "awaiting_approval", "completed"]
    assert [r["status"] for r in records(router, "dp")] == ["approved", "approved"]
    router.close()


def test_break_and_inject_from_a_disclosure_pause(store_at, tmp_path):
    url, prefix = store_at
    router, tc = make(url, prefix, provider=ScriptedProvider(ONE_REPLY + ONE_REPLY, remote=True))
    resp = client(tc, "bk", tmp_path, approver=lambda k, i: "break").run("x", gates={"disclosure": "first_call"})
    assert resp["status"] == "idle" and resp["data"]["ended"] == "user"
    events = [m["event"] for m in trace(router, "bk")]
    assert "model.called" not in events and "run.broken" in events
    n = {"n": 0}

    def inject_once(k, i):
        n["n"] += 1
        return ("inject", "other") if n["n"] == 1 else "approved"

    resp = client(tc, "in", tmp_path, approver=inject_once).run("x", gates={"disclosure": "first_call"})
    assert resp["status"] == "completed" and n["n"] == 2  # the fresh run asks again, then completes
    router.close()


MEMORY_SCRIPT = [
    {
        "text": "noting",
        "tool_calls": [
            {"id": "m1", "name": "remember", "arguments": {"key": "colour", "value": "secret-blue"}},
            {"id": "m2", "name": "remember", "arguments": {"key": "", "value": "x"}},
        ],
    },
    {"text": "secret-noted"},
]


@pytest.mark.parametrize("encrypted", [False, True], ids=["plaintext", "encrypted"])
def test_remember_writes_one_memory_row_per_key(store_at, tmp_path, encrypted):
    url, prefix = store_at
    second = [
        {
            "text": "again",
            "tool_calls": [{"id": "m3", "name": "remember", "arguments": {"key": "colour", "value": "secret-red"}}],
        },
        {"text": "secret-noted"},
    ]
    router, tc = make(url, prefix, provider=ScriptedProvider(MEMORY_SCRIPT))
    kr = Keyring.generate() if encrypted else None
    c = client(tc, "m", tmp_path, keyring=kr)
    resp = c.run("secret-prompt")
    assert c.last_message == "secret-noted" and resp["status"] in ("completed", "idle")
    mem = router.store().rows("m", "memory")
    assert len(mem) == 1 and mem[0].meta["status"] == "remembered"
    if encrypted:
        assert mem[0].body is None and mem[0].sealed is not None
        opened = json.loads(kr.open(mem[0].sealed, session_id="m", ref=f"memory:{mem[0].row_id}"))
        assert opened == {"key": "colour", "value": "secret-blue"}
    else:
        assert mem[0].body == {"key": "colour", "value": "secret-blue"} and mem[0].sealed is None
    calls = {r.meta["call_id"]: r for r in router.store().rows("m", "tool_call")}
    assert calls["m1"].meta["permission"] == "memory" and not calls["m1"].meta["is_error"]
    assert calls["m2"].meta["is_error"]  # an empty key is refused, the model is told
    # a later run remembering the same key replaces the row (same id), never adds one
    # a scripted model answers by position within a run: the second run gets its own script
    router.provider = ScriptedProvider(second)
    router.fallback = router.provider
    client(tc, "m", tmp_path, keyring=kr).run("secret-prompt-2")
    mem2 = router.store().rows("m", "memory")
    assert [r.row_id for r in mem2] == [mem[0].row_id]
    if encrypted:
        assert json.loads(kr.open(mem2[0].sealed, session_id="m", ref=f"memory:{mem2[0].row_id}"))["value"] == (
            "secret-red"
        )
        assert scan(router, ["secret-blue", "secret-red", "secret-prompt", "secret-noted", "colour"]) == []
    else:
        assert mem2[0].body["value"] == "secret-red"
    router.close()


def test_remember_denied_by_the_session_writes_nothing(store_at, tmp_path):
    url, prefix = store_at
    router, tc = make(url, prefix, provider=ScriptedProvider(MEMORY_SCRIPT))
    c = client(tc, "nd", tmp_path)
    resp = c.run("x", permissions={"remember": "deny"})
    assert resp["status"] == "completed"
    assert router.store().rows("nd", "memory") == []
    m1 = next(r for r in router.store().rows("nd", "tool_call") if r.meta["call_id"] == "m1")
    assert m1.meta["permission"] == "deny" and "denied" in m1.body["result"]
    router.close()


@pytest.mark.slow
def test_cli_through_uvicorn_asks_for_every_kind_and_seals_memory(store_at, tmp_path):
    """`loopfsm router serve --script examples/approvals.yaml` and `loopfsm client run` as separate processes."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from loopfsm.router.store import open_store

    from tests.support.router_support import free_port, wait_until_up

    url, prefix = store_at
    script = Path(__file__).resolve().parents[2] / "examples" / "approvals.yaml"
    port = free_port()
    log = open(tmp_path / "serve.log", "wb")
    cli = [sys.executable, "-m", "loopfsm"]
    server = subprocess.Popen(
        cli + ["router", "serve", "--store", url, "--prefix", prefix, "--port", str(port), "--script", str(script)],
        stdout=log,
        stderr=log,
    )

    def client_run(session, *extra):
        ws = tmp_path / session
        ws.mkdir()
        base = ["client", "run", "--router", f"http://127.0.0.1:{port}", "--session", session, "--workspace", str(ws)]
        run = subprocess.run(
            cli + base + list(extra) + ["make a todo list"],
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
            env=dict(os.environ),
        )
        return run, ws

    try:
        wait_until_up(f"http://127.0.0.1:{port}", server, (tmp_path / "serve.log").read_text)
        gates = ["--disclosure", "first_call", "--cost-ceiling", "800", "--yes"]
        plain, ws = client_run("plain", *gates)
        assert plain.returncode == 0, plain.stderr
        assert plain.stdout == "Done: TODO.md holds the list, and I will remember where it is.\n"
        for kind in ("disclosure", "plan", "cost_ceiling"):
            assert f"approved: {kind}: " in plain.stderr
        assert (ws / "TODO.md").read_text() == "- water the plants\n"
        keyring = tmp_path / "keys.json"
        sealed, _ = client_run("sealed", *gates, "--keyring", str(keyring))
        assert sealed.returncode == 0, sealed.stderr
        refused, ws3 = client_run("refused", "--disclosure", "first_call")
        assert refused.returncode == 1 and refused.stdout.strip() == "run ended: idle aborted"
        assert "rejected (no terminal to ask; use --yes): disclosure: " in refused.stderr
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()
    assert "Traceback" not in (tmp_path / "serve.log").read_text()
    with open_store(url, prefix=prefix) as s:
        for session in ("plain", "sealed"):
            recs = [r.meta for r in s.rows(session, "trace") if r.meta.get("event") == "approval.record"]
            assert sorted((m["kind"], m["status"]) for m in recs) == [
                ("cost_ceiling", "approved"),
                ("disclosure", "approved"),
                ("plan", "approved"),
            ]
            (mem,) = s.rows(session, "memory")
            assert (mem.body is None) == (session == "sealed")
        assert s.rows("plain", "memory")[0].body == {"key": "todo_file", "value": "TODO.md"}
        assert [r.meta["status"] for r in s.rows("refused", "trace") if r.meta.get("event") == "approval.record"] == [
            "rejected"
        ]
        assert s.rows("refused", "memory") == [] and not (ws3 / "TODO.md").exists()
        _, rows = s.backend.run(f"SELECT * FROM {prefix}rows WHERE session_id = 'sealed'")
        _, state = s.backend.run(f"SELECT * FROM {prefix}run_state WHERE session_id = 'sealed'")
        dump = json.dumps([[str(v) for v in row] for row in rows + state])
        for secret in ("make a todo list", "water the plants", "remember where it is", "todo_file", "Writing it"):
            assert secret not in dump


def test_a_crash_while_committing_a_decision_then_the_resend_writes_every_row_once(store_at, tmp_path):
    url, prefix = store_at
    armed = {"on": False}

    def fault(point):
        if armed["on"] and point == "before_commit":
            armed["on"] = False
            raise RuntimeError("the database went away before commit")

    router, tc = make(url, prefix, provider=ScriptedProvider(COST_SCRIPT), store_fault=fault)
    _pause_at_gate(router, tc, "k", {"cost_ceiling_tokens": 150})
    tools = {"results": [{"call_id": "c1", "content": "ok", "is_error": False}]}
    resp = tc.post("/v1/sessions/k/continue", json={"type": "tool_results", "request_id": "t", "data": tools}).json()
    (a,) = resp["data"]["approvals"]
    good = {
        "type": "approval_decisions",
        "request_id": "d",
        "data": {"decisions": [{"approval_id": a["approval_id"], "decision": "approved", "approver": "u"}]},
    }
    armed["on"] = True
    lost = tc.post("/v1/sessions/k/continue", json=good).json()
    assert lost["status"] == "error" and lost["data"]["code"] == "internal"
    assert router.store().load("k").phase == "AwaitingApproval" and router.store().load("k").holder is None
    assert [r["status"] for r in records(router, "k")] == ["requested"]
    done = tc.post("/v1/sessions/k/continue", json=good).json()
    assert done["status"] == "completed" and done["data"]["message"] == "secret-final"
    rows = router.store().rows("k")
    keys = [(r.kind, r.row_id) for r in rows]
    assert len(keys) == len(set(keys))
    assert [r["status"] for r in records(router, "k")] == ["approved"]
    assert [m["event"] for m in trace(router, "k")].count("model.called") == 2
    assert [r.meta["role"] for r in rows if r.kind == "message"] == ["user", "assistant", "assistant"]
    router.close()


def test_encrypted_second_run_opens_its_history_then_asks_for_disclosure(store_at, tmp_path):
    url, prefix = store_at
    router, tc = make(url, prefix, provider=ScriptedProvider(ONE_REPLY, remote=True))
    kr = Keyring.generate()
    statuses: list[str] = []
    for i in range(2):
        c = client(tc, "ed", tmp_path, keyring=kr, on_progress=lambda s, d: statuses.append(s))
        c.run(f"secret-prompt-{i}", gates={"disclosure": "first_call"})
        assert c.last_message == "secret-final"
    assert statuses == [
        "awaiting_approval",
        "completed",
        "idle",
        "awaiting_decrypt",
        "awaiting_approval",
        "completed",
        "idle",
    ]
    assert scan(router, ["secret-prompt-0", "secret-prompt-1", "secret-final"]) == []
    router.close()
