"""Break and inject from every live state of a run, through the real client (in-process ASGI)."""

from __future__ import annotations

import pytest

from loopfsm.router.crypto import Keyring

from tests.support.router_support import PLAN_SCRIPT, TOOLS_SCRIPT, client, make
from tests.support.store_support import store_url  # noqa: F401  (fixture)


@pytest.fixture
def store_at(store_url):  # noqa: F811
    return store_url


def _settled(router, session):
    rec = router.store().load(session)
    assert rec.phase == "Idle" and rec.holder is None
    assert all(b.body is None for b in router.store().rows(session, "input") if b.row_id.startswith("b-"))


# (client state to interrupt in, script, encrypted, needs a previous run)
LIVE = {
    "RunningTools": (TOOLS_SCRIPT, False, False),
    "Approving": (PLAN_SCRIPT, False, False),
    "Sealing": ([{"text": "sealed answer"}], True, False),
    "Decrypting": ([{"text": "answer"}], True, True),
}


@pytest.mark.parametrize("state", list(LIVE))
@pytest.mark.parametrize("how", ["break", "inject"])
def test_escape_hatch_from_every_live_state(store_at, tmp_path, state, how):
    url, prefix = store_at
    script, encrypted, previous = LIVE[state]
    router, tc = make(url, prefix, script)
    kr = Keyring.generate() if encrypted else None
    if previous:
        assert client(tc, "x", tmp_path, keyring=kr).run("earlier")["data"]["ended"] == "completed"
    seen = []

    def interrupt(st, resp):
        if st == state and not seen:
            seen.append(resp["allowed_continuations"])
            return "break" if how == "break" else ("inject", "do this instead")
        return None

    c = client(tc, "x", tmp_path, keyring=kr, interrupt=interrupt)
    if state == "Sealing" and how == "inject":
        # an encrypted completion allows [sealed, break]: the client machine refuses to lead
        from loopfsm.core.errors import IllegalFeed

        with pytest.raises(IllegalFeed):
            c.run("go")
        assert seen == [["sealed", "break"]]
        router.close()
        return
    resp = c.run("go")
    assert seen and how in seen[0]
    if how == "break":
        assert resp["status"] == "idle" and resp["data"]["ended"] == "user"
    else:
        assert resp["status"] == "completed" or resp["data"].get("ended") == "completed"
    _settled(router, "x")
    router.close()


def test_ask_decision_after_the_pause_expired_ends_the_run(store_at, tmp_path):
    url, prefix = store_at
    clock = [10_000]
    router, tc = make(url, prefix, TOOLS_SCRIPT, clock=lambda: clock[0])
    ttl = router.policy.pause_ttl_ms

    def late(kind, info):
        clock[0] += ttl + 1
        return "approved"

    resp = client(tc, "late", tmp_path, approver=late).run("go")
    assert resp["status"] == "idle" and resp["data"]["ended"] == "expired"
    _settled(router, "late")
    router.close()


def test_stream_sends_trace_events_then_the_response(store_at):
    import json

    url, prefix = store_at
    router, tc = make(url, prefix, [{"text": "streamed"}])
    with tc.stream(
        "POST", "/v1/sessions/st/stream", json={"type": "execute", "request_id": "r1", "data": {"prompt": "hi"}}
    ) as r:
        text = "".join(r.iter_text())
    events = [block.split("\n") for block in text.strip().split("\n\n")]
    kinds = [e[0].removeprefix("event: ") for e in events]
    assert kinds[-1] == "response" and kinds[:-1] and set(kinds[:-1]) == {"trace"}
    names = [e[1].removeprefix("data: ") for e in events[:-1]]
    assert names[0] == "lock.acquired" and "model.called" in names
    final = json.loads(events[-1][1].removeprefix("data: "))
    assert final["status"] == "completed" and final["data"]["message"] == "streamed"
    router.close()
