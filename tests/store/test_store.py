"""The run-state store on SQLite and PostgreSQL: schema, admission, fence, recovery, idempotent steps."""

from __future__ import annotations

import pytest

from loopfsm import FencedOut, StoreError
from loopfsm.router.store import SCHEMA_VERSION, Row, ids, open_store
from loopfsm.router.store.serve import Outcome, serve

from tests.support.router_helpers import OUTCOME_OF, pause_for
from tests.support.store_support import store_url  # noqa: F401  (fixture)

LIVE = ["AwaitingDecrypt", "AwaitingApproval", "AwaitingTool", "AwaitingEncrypt"]


@pytest.fixture
def store(store_url):  # noqa: F811
    url, prefix = store_url
    with open_store(url, prefix=prefix) as s:
        yield s


def to_phase(store, sid, phase, *, now=1000):
    """Walk session ``sid`` to ``phase`` through the store."""
    if phase == "Idle":
        store.ensure(sid)
        return
    out = Outcome(OUTCOME_OF[phase], encrypted=True, pause=pause_for(phase))
    r = serve(store, sid, "execute", f"{sid}-start", holder="A", process=out, now_ms=now)
    assert store.load(sid).phase == phase, r.response


def test_schema_version_is_recorded_and_checked(store_url):  # noqa: F811
    url, prefix = store_url
    with open_store(url, prefix=prefix) as s:
        assert s.check_schema() == SCHEMA_VERSION
        s.backend.run(f"UPDATE {prefix}meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 99, written by a newer loopfsm"):
        open_store(url, prefix=prefix)
    with _raw(url, prefix) as s:
        s.backend.run(f"UPDATE {prefix}meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="loopfsm store init"):
        open_store(url, prefix=prefix + "x_")


def _raw(url, prefix):
    from loopfsm.router.store.backends import connect
    from loopfsm.router.store.runstore import RunStore

    return RunStore(connect(url), prefix=prefix)


def test_bad_urls_are_store_errors():
    with pytest.raises(StoreError, match="unknown store URL scheme 'mysql'"):
        open_store("mysql://x")
    with pytest.raises(StoreError, match="no SQLite database"):
        open_store("sqlite:///no/such/dir/runs.db")


def test_admission_replay_and_refusals(store):
    r = serve(
        store, "s", "execute", "q1", holder="A", process=Outcome("tools", pause=pause_for("AwaitingTool")), now_ms=1000
    )
    assert r.response["status"] == "awaiting_tool"
    assert r.response["allowed_continuations"] == ["tool_results", "inject", "break"]
    assert r.events == ["lock.acquired", "run.started", "lock.released"]
    again = serve(store, "s", "execute", "q1", holder="B", now_ms=1001)
    assert again.admission.outcome == "replayed" and again.response == r.response
    assert serve(store, "s", "execute", "q2", holder="B", now_ms=1002).response["data"]["code"] == "run_live"
    assert serve(store, "s", "sealed", "q3", holder="B", now_ms=1002).response["data"]["code"] == "not_allowed"
    rec = store.load("s")
    assert (rec.phase, rec.version, rec.fence, rec.holder) == ("AwaitingTool", 1, 1, None)


def test_busy_while_held_then_takeover_after_the_lease(store):
    store.ensure("s")
    a = store.admit("s", "execute", "q1", holder="A", now_ms=1000, lease_ms=100)
    b = store.admit("s", "execute", "q2", holder="B", now_ms=1050)
    assert (b.outcome, b.answer, b.retry_after_ms) == ("refused", "busy", 50)
    c = store.admit("s", "execute", "q2", holder="B", now_ms=1100)  # the boundary instant is expired
    assert c.outcome == "admitted" and c.took_over and c.lease.fence == a.lease.fence + 1
    phase = a.record.phase_machine()
    phase.execute("r", "completed", False, 1101, {})
    with pytest.raises(FencedOut):
        store.checkpoint(a.lease, phase, request_id="q1", response={}, rows=[Row("message", "m", {})])
    with pytest.raises(FencedOut):
        store.renew(a.lease, now_ms=1102)
    with pytest.raises(FencedOut):
        store.release(a.lease, now_ms=1102)
    assert store.rows("s") == []
    store.checkpoint(c.lease, phase, request_id="q2", response={"ok": 1}, now_ms=1103)
    assert store.load("s").last_request_id == "q2"


def test_renew_shows_a_cancel_request(store):
    store.ensure("s")
    a = store.admit("s", "execute", "q1", holder="A", now_ms=1000)
    assert store.request_cancel("s", "break")
    assert store.renew(a.lease, now_ms=1001).cancel_requested == "break"
    store.release(a.lease)
    assert not store.request_cancel("s", "break")


def test_recover_clears_own_locks_only_and_recover_all_every_lock(store):
    for sid, who in (("s1", "A"), ("s2", "B"), ("s3", "A")):
        store.ensure(sid)
        store.admit(sid, "execute", "q", holder=who, now_ms=1000)
    assert store.recover("A") == ["s1", "s3"]
    assert store.load("s2").holder == "B" and store.load("s1").holder is None
    assert store.load("s1").fence == 1  # the fence never goes back
    assert store.recover_all() == ["s2"]


def test_a_failing_step_writes_nothing_and_keeps_the_lock(store_url):  # noqa: F811
    url, prefix = store_url

    def fault(point):
        if point == "between_rows":
            raise RuntimeError("disk on fire")

    with open_store(url, prefix=prefix, fault=fault) as s:
        s.ensure("s")
        a = s.admit("s", "execute", "q1", holder="A", now_ms=1000)
        phase = a.record.phase_machine()
        phase.execute("r", "completed", False, 1001, {})
        with pytest.raises(RuntimeError):
            s.checkpoint(
                a.lease, phase, request_id="q1", response={}, rows=[Row("message", "a", {}), Row("message", "b", {})]
            )
        rec = s.load("s")
        assert (rec.phase, rec.version, rec.holder, s.rows("s")) == ("Idle", 0, "A", [])


def test_rerun_of_a_step_overwrites_rows_under_deterministic_ids(store):
    store.ensure("s")
    rows = [Row("message", "assistant", {"role": "assistant"}, body="v1"), Row("tool_call", "tool_call/0", {})]
    a = store.admit("s", "execute", "q1", holder="A", now_ms=1000)
    assert store.recover("A") == ["s"]  # as if A crashed after admission
    b = store.admit("s", "execute", "q1", holder="A", now_ms=1001)
    assert b.lease.step == a.lease.step
    phase = b.record.phase_machine()
    phase.execute(ids.run_id("s", "q1"), "completed", False, 1002, {})
    store.checkpoint(b.lease, phase, request_id="q1", response={}, rows=rows, trace=["x.y"])
    stored = store.rows("s")
    assert [(r.kind, r.row_id) for r in stored] == [
        ("message", ids.row_id("s", ids.run_id("s", "q1"), 1, "assistant")),
        ("tool_call", ids.row_id("s", ids.run_id("s", "q1"), 1, "tool_call/0")),
        ("trace", ids.row_id("s", ids.run_id("s", "q1"), 1, "trace/0")),
    ]
    assert ids.run_id("s", "q1") == ids.run_id("s", "q1") != ids.run_id("s", "q2")


def test_break_in_idle_is_an_idempotent_idle(store):
    store.ensure("s")
    r = serve(store, "s", "break", "b1", holder="A")
    assert r.response["status"] == "idle" and store.load("s").fence == 0


@pytest.mark.parametrize("phase", LIVE)
@pytest.mark.parametrize("hatch", ["break", "inject"])
def test_escape_hatches_from_every_live_phase_without_a_running_turn(store, phase, hatch):
    if hatch == "inject" and phase == "AwaitingEncrypt":
        to_phase(store, "s", phase)
        assert serve(store, "s", "inject", "h", holder="B", now_ms=2000).response["data"]["code"] == "not_allowed"
        return
    to_phase(store, "s", phase)
    out = Outcome("tools", pause=pause_for("AwaitingTool"))
    r = serve(store, "s", hatch, "h", holder="B", process=out, now_ms=2000)
    want = "Idle" if hatch == "break" else "AwaitingTool"
    assert store.load("s").phase == want
    assert r.response["status"] == ("idle" if hatch == "break" else "awaiting_tool")
    assert ("run.broken" if hatch == "break" else "run.injected") in r.events


@pytest.mark.parametrize("phase", ["Idle"] + LIVE)
@pytest.mark.parametrize("hatch", ["break", "inject"])
def test_escape_hatches_preempt_a_running_turn(store, phase, hatch):
    to_phase(store, "s", phase)
    running = store.admit(
        "s",
        "execute"
        if phase == "Idle"
        else {
            "AwaitingDecrypt": "decrypted",
            "AwaitingApproval": "approval_decisions",
            "AwaitingTool": "tool_results",
            "AwaitingEncrypt": "sealed",
        }[phase],
        "busy-one",
        holder="A",
        now_ms=2000,
    )
    assert running.outcome == "admitted"
    out = Outcome("tools", pause=pause_for("AwaitingTool"))
    r = serve(store, "s", hatch, "h", holder="B", process=out, now_ms=2001)
    if hatch == "inject" and phase == "AwaitingEncrypt":
        assert r.response["data"]["code"] == "not_allowed" and store.load("s").holder == "A"
        store.release(running.lease)  # the running turn was left alone and still holds its lock
        return
    assert r.admission.preempted and "lock.preempted" in r.events
    if hatch == "break":
        assert store.load("s").phase == "Idle" and r.response["status"] == "idle"
    else:
        assert store.load("s").phase == "AwaitingTool"
    with pytest.raises(FencedOut):  # the preempted turn's writes are refused
        store.checkpoint(running.lease, running.record.phase_machine(), request_id="busy-one", response={})


def test_every_continuation_moves_the_phase_through_serve(store):
    steps = [
        ("execute", Outcome("needs_decrypt", encrypted=True, pause=pause_for("AwaitingDecrypt")), "AwaitingDecrypt"),
        ("decrypted", Outcome("gate", pause=pause_for("AwaitingApproval")), "AwaitingApproval"),
        ("approval_decisions", Outcome("tools", pause=pause_for("AwaitingTool")), "AwaitingTool"),
        ("tool_results", Outcome("completed", pause=pause_for("AwaitingEncrypt")), "AwaitingEncrypt"),
        ("sealed", Outcome(), "Idle"),
    ]
    for i, (request, out, phase) in enumerate(steps):
        r = serve(store, "s", request, f"q{i}", holder="A", process=out, now_ms=1000 + i)
        assert store.load("s").phase == phase, r.response
    assert store.load("s").version == len(steps)
    assert (
        serve(
            store, "s", "execute", "bad", holder="A", process=Outcome("tools", pause={"calls": "x"}), now_ms=2000
        ).response["data"]["code"]
        == "invalid"
    )
    assert store.load("s").holder is None  # a refused payload gives the lock back


def test_a_pause_past_its_ttl_is_expired_by_the_next_request(store):
    to_phase(store, "s", "AwaitingTool", now=1000)
    ttl = 86_400_000
    early = serve(
        store,
        "s",
        "tool_results",
        "q1",
        holder="A",
        process=Outcome("completed", pause=pause_for("AwaitingEncrypt")),
        now_ms=1000 + ttl - 1,
    )
    assert early.admission.answer == "admit"
    to_phase(store, "t", "AwaitingApproval", now=1000)
    late = serve(store, "t", "approval_decisions", "q2", holder="A", process=Outcome("tools"), now_ms=1000 + ttl)
    assert (late.admission.answer, late.response["status"], late.response["data"]["ended"]) == (
        "expire",
        "idle",
        "expired",
    )
    assert store.load("t").phase == "Idle" and "run.broken" in late.events


def test_an_encrypted_sessions_response_is_never_stored(store):
    out = Outcome(
        "completed",
        encrypted=True,
        pause=pause_for("AwaitingEncrypt"),
        data={"to_encrypt": {"message:m3": "the secret answer"}},
    )
    first = serve(store, "e", "execute", "q1", holder="A", process=out, now_ms=1000)
    assert first.response["data"]["to_encrypt"]
    rec = store.load("e")
    assert rec.last_request_id == "q1" and rec.last_response is None
    again = serve(store, "e", "execute", "q1", holder="A", now_ms=1001)  # the response got lost on the wire
    assert again.admission.outcome == "replayed"
    assert again.response["data"]["code"] == "response_lost"
    assert again.response["allowed_continuations"] == ["sealed", "break"]
    assert store.load("e").version == 1  # nothing ran twice


@pytest.mark.parametrize(
    "url, words",
    [
        ("postgresql://u:pw123@[::1", "at an address that does not parse"),
        ("postgresql://u:pw123@h:notaport/db", "at an address that does not parse"),
        ("postgresql://nosuchrole:pw123@127.0.0.1:5432/test", 'role "nosuchrole" does not exist'),
    ],
    ids=["bad ipv6", "bad port", "unknown role"],
)
def test_a_store_url_postgresql_refuses_says_why_in_one_line_without_the_password(url, words):
    with pytest.raises(StoreError) as err:
        open_store(url)
    message = str(err.value)
    assert message.startswith("cannot connect to PostgreSQL at ") and words in message
    assert "pw123" not in message


def test_rows_by_ref_reads_exactly_the_refs_that_exist_past_one_querys_batch(store):
    """An encrypted run's sealed history is read in batches of 500 ids a kind: every ref found, nothing else."""
    store.ensure("s")
    lease = store.admit("s", "execute", "q1", holder="A", now_ms=1000).lease
    phase = store.load("s").phase_machine()
    phase.execute(ids.run_id("s", "q1"), "completed", False, 1002, {})
    rows = [Row("message", f"m{i}", {"i": i}, row_id=f"m{i}") for i in range(1203)]
    rows.append(Row("tool_call", "c", {"i": -1}, row_id="c0"))
    store.checkpoint(lease, phase, request_id="q1", response={}, rows=rows, trace=[])
    refs = [f"message:m{i}" for i in range(1203)] + ["tool_call:c0", "message:absent", "plan:absent"]
    found = store.rows_by_ref("s", refs)
    assert set(found) == {*(f"message:m{i}" for i in range(1203)), "tool_call:c0"}
    assert found["message:m1202"].meta == {"i": 1202} and found["tool_call:c0"].meta == {"i": -1}
    assert store.rows_by_ref("other-session", refs) == {} and store.rows_by_ref("s", []) == {}
