"""A refused feed raises a LoopFsmError and changes nothing; a failed brain resumes exactly."""

from __future__ import annotations

import json
import math
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopfsm import LoopFsmError, SnapshotError
from loopfsm.core.errors import FeedArgumentError
from loopfsm.machines import FallbackBreaker, ToolHealth
from loopfsm.machines.breaker_values import Allow, Route
from loopfsm.machines.engine_brain import LoopError, LoopMachine, Message, ToolCall, register_loop_error
from loopfsm.machines.engine_values import ModelError
from loopfsm.machines.messages import Thinking
from loopfsm.machines.tool_breaker import ToolBreaker

from tests.support.brain_helpers import brain_in, reply_with_tools

JUNK = st.one_of(
    st.sampled_from(
        [
            None,
            -1,
            0,
            1,
            -(10**20),
            1.5,
            math.nan,
            True,
            "",
            "x",
            "c1",
            [],
            {},
            ["x"],
            ("x",),
            [None],
            {"a": object()},
            object(),
            b"x",
            Allow("c1", 0),
            Route("primary", 0),
            LoopError("e"),
            ["shell"],
            [1],
        ]
    ),
    st.integers(-5, 5),
    st.text(max_size=3),
)


def messages(draw):
    return draw(
        st.one_of(
            JUNK,
            st.just(Message.assistant("hi")),
            st.just(reply_with_tools("shell")),
            st.just(Message.tool_result("c1", "ok")),
            st.just(Message.user("u")),
            st.lists(
                st.one_of(JUNK, st.just(Message.tool_result("c1", "ok")), st.just(Message.user("no id"))), max_size=3
            ),
        )
    )


def snap_of(m):
    return json.dumps(m.snapshot(), sort_keys=True)


def without_refusal_counts(m) -> str:
    """A breaker counts refused permits in its stats: the one change a refused record makes."""
    snap = m.snapshot()
    for b in snap.get("breakers", {"": snap}).values():
        b["data"]["stats"].pop("refused_permits", None)
    return json.dumps(snap, sort_keys=True)


BRAIN_STATES = ("Start", "AwaitingModel", "AwaitingTools", "AwaitingCompaction", "Terminal")


@settings(max_examples=int(os.environ.get("LOOPFSM_FUZZ", 200)), deadline=None)
@given(
    data=st.data(),
    state=st.sampled_from(BRAIN_STATES),
    feed=st.sampled_from(
        [
            "model_response",
            "tool_results",
            "compaction_result",
            "compaction_noop",
            "fail",
            "begin",
            "inject",
            "inject_many",
            "set_context_tokens",
            "accept_input",
        ]
    ),
)
def test_bad_brain_feeds_change_nothing(data, state, feed):
    m = brain_in(state)
    before = snap_of(m)
    draw = data.draw
    args = {
        "model_response": lambda: (messages(draw), draw(JUNK), draw(st.one_of(JUNK, st.just(["shell"])))),
        "tool_results": lambda: (messages(draw),),
        "compaction_result": lambda: (messages(draw), draw(JUNK), draw(JUNK)),
        "compaction_noop": lambda: (draw(JUNK), draw(JUNK)),
        "fail": lambda: (draw(JUNK),),
        "begin": lambda: (draw(JUNK),),
        "inject": lambda: (messages(draw),),
        "inject_many": lambda: (messages(draw),),
        "set_context_tokens": lambda: (draw(JUNK),),
        "accept_input": lambda: (draw(JUNK),),
    }[feed]()
    try:
        m.feed(feed, *args)
    except LoopFsmError:
        assert snap_of(m) == before
        return
    except TypeError as err:  # only the Python call itself (wrong arity) may be a TypeError
        raise AssertionError(f"{feed}{args!r} raised {err!r}") from None
    LoopMachine.restore(json.loads(json.dumps(m.snapshot())))  # whatever was accepted can be saved


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("LOOPFSM_FUZZ", 200)), deadline=None)
@given(data=st.data(), which=st.sampled_from(["tool", "fallback", "health"]), n=st.integers(1, 4))
def test_bad_breaker_feeds_change_nothing(data, which, n):
    m = {"tool": ToolBreaker, "fallback": FallbackBreaker, "health": ToolHealth}[which]()
    for _ in range(n):
        before = without_refusal_counts(m)
        call = data.draw(
            st.sampled_from(["acquire", "record", "tick"] if which != "fallback" else ["route", "record", "tick"])
        )
        if which == "health" and call != "tick":
            args = [data.draw(st.one_of(JUNK, st.just("ls")))]
        else:
            args = []
        args += [
            data.draw(st.one_of(JUNK, st.integers(0, 10**6)))
            for _ in range({"acquire": 2, "route": 1, "record": 3, "tick": 1}[call])
        ]
        try:
            getattr(m, call)(*args)
        except LoopFsmError:
            assert without_refusal_counts(m) == before
        except TypeError as err:
            raise AssertionError(f"{call}{args!r} raised {err!r}") from None


@pytest.mark.parametrize(
    "make",
    [
        lambda: Message("assistant", 3),
        lambda: Message("assistant", "x", ("x",)),
        lambda: Message("bot", "x"),
        lambda: Message("tool", "x"),
        lambda: Message("assistant", "x", is_error=1),
        lambda: ToolCall(1, "ls"),
        lambda: ToolCall("c", "ls", {"a": math.nan}),
        lambda: ToolCall("c", "ls", []),
        lambda: ToolCall("c", "ls", {1: "x"}),
        lambda: Thinking(text=None),
        lambda: Message("user", "x", tool_call_id=5),
        lambda: Message("assistant", "x", thinking=["t"]),
    ],
)
def test_messages_refuse_wrong_field_types(make):
    with pytest.raises(FeedArgumentError):
        make()


def test_tool_results_with_a_message_without_call_id_is_a_feed_argument_error():
    m = brain_in("AwaitingTools")
    before = snap_of(m)
    with pytest.raises(FeedArgumentError, match="not tool messages: user"):
        m.tool_results([Message.tool_result("c1", "ok"), Message.user("stray")])
    assert snap_of(m) == before


@pytest.mark.parametrize(
    "feed,args",
    [
        ("model_response", (Message.assistant("x"), -1, [])),
        ("compaction_noop", (-1, 5)),
        ("compaction_noop", (5, -1)),
        ("set_context_tokens", (-10,)),
    ],
)
def test_token_counts_are_unsigned(feed, args):
    m = brain_in("AwaitingCompaction" if feed == "compaction_noop" else "AwaitingModel")
    before = snap_of(m)
    with pytest.raises(FeedArgumentError, match="at least 0|must be"):
        m.feed(feed, *args)
    assert snap_of(m) == before


# -- exact resume of a failed brain ---------------------------------------------------


class DriverError(LoopError):
    kind = "DriverError"

    def __init__(self, code: int):
        super().__init__(f"driver failed with {code}")


register_loop_error(DriverError)


class UnregisteredError(LoopError):
    kind = "Unregistered"


@pytest.mark.parametrize(
    "error",
    [
        LoopError("boom", kind="ModelError"),
        ModelError("boom"),
        ModelError("boom", kind="Other"),
        LoopError("custom kind", kind="Quota"),
        LoopError("plain"),
        DriverError(7),
    ],
)
def test_a_failed_brain_resumes_exactly(error):
    m = brain_in("AwaitingModel")
    m.fail(error)
    again = LoopMachine.restore(json.loads(json.dumps(m.snapshot())))
    assert again.snapshot() == m.snapshot()
    restored = again.to_loop_error()
    assert type(restored) is type(error) and restored == error and restored.kind == error.kind
    assert again.data == m.data and again.state_data == m.state_data


def test_an_unregistered_loop_error_class_is_refused_when_fed():
    m = brain_in("AwaitingModel")
    before = snap_of(m)
    with pytest.raises(FeedArgumentError, match="register_loop_error"):
        m.fail(UnregisteredError("x"))
    assert snap_of(m) == before


def test_a_snapshot_naming_an_unknown_error_class_is_refused():
    m = brain_in("AwaitingModel")
    m.fail(DriverError(1))
    snap = m.snapshot()
    snap["state_data"]["outcome"]["error"]["class"] = "NoSuchError"
    with pytest.raises(SnapshotError):
        LoopMachine.restore(snap)


# -- permits name their breaker ---------------------------------------------------------


def test_a_permit_recorded_on_another_tools_breaker_is_refused_and_counted():
    health = ToolHealth()
    permit = health.acquire("ls", 0, "c1")
    assert isinstance(permit, Allow) and permit.tool == "ls"
    health.acquire("cat", 0, "c2")
    before = health.snapshot()["breakers"]["cat"]
    for _ in range(5):
        with pytest.raises(FeedArgumentError, match="issued by the breaker of tool 'ls'"):
            health.record("cat", 1, permit, "failure")
    after = health.snapshot()["breakers"]["cat"]
    assert after["data"]["stats"].pop("refused_permits") == 5
    assert after == before and health.states["cat"] == "Closed"
    health.record("ls", 1, permit, "success")
    assert health.snapshot()["breakers"]["ls"]["data"]["stats"]["success"] == 1


@pytest.mark.parametrize("bad", [None, Route("primary", 0), "c1", Allow("c1", 0, tool="other")])
def test_record_refuses_what_is_not_this_breakers_permit(bad):
    b = ToolBreaker()
    b.acquire(0, "c1")
    with pytest.raises(FeedArgumentError):
        b.record(1, bad, "failure")
    assert b.data.stats["refused_permits"] == 1 and b.data.consecutive_failures == 0
    if type(bad) is not Route:
        f = FallbackBreaker()
        before = without_refusal_counts(f)
        with pytest.raises(FeedArgumentError):
            f.record(1, bad, "transient")
        assert without_refusal_counts(f) == before and f.data.stats["refused_permits"] == 1


def test_a_route_of_another_fallback_breaker_is_refused_and_counted():
    chat, embed = FallbackBreaker("chat"), FallbackBreaker("embed")
    theirs = embed.route(0)
    mine = chat.route(0)
    assert (theirs.breaker, theirs.number) == ("embed", 1) and (mine.breaker, mine.number) == ("chat", 1)
    before = without_refusal_counts(chat)
    for _ in range(3):  # same generation, same number: only the name tells them apart
        with pytest.raises(FeedArgumentError, match="issued by the breaker named 'embed'"):
            chat.record(1, theirs, "auth")
    assert without_refusal_counts(chat) == before and chat.data.stats["refused_permits"] == 3
    assert chat.state == "Primary"
    chat.record(1, mine, "success")
    assert chat.data.stats["primary_success"] == 1 and chat.data.outstanding == []
    with pytest.raises(FeedArgumentError, match="a name is a string"):
        FallbackBreaker(7)  # type: ignore[arg-type]


def test_a_route_is_recorded_at_most_once_even_when_stale():
    from loopfsm.core.errors import FeedRefused

    b = FallbackBreaker()
    routes = [b.route(0) for _ in range(4)]
    for r in routes[:3]:
        b.record(0, r, "transient")
    assert b.state == "Fallback"
    b.record(1, routes[3], "transient")  # stale: counted once
    with pytest.raises(FeedRefused):
        b.record(1, routes[3], "transient")
    assert b.data.stats["stale"] == 1 and b.data.stats["refused_permits"] == 1


def test_outstanding_routes_are_bounded():
    from loopfsm.machines.fallback_breaker import FallbackBreakerPolicy

    policy = FallbackBreakerPolicy(max_outstanding=3)
    b = FallbackBreaker()
    routes = [b.route(i, policy=policy) for i in range(5)]
    assert b.data.outstanding == [3, 4, 5] and b.data.stats["abandoned"] == 2
    b.record(9, routes[4], "success", policy=policy)
    assert b.data.outstanding == [3, 4]
    with pytest.raises(LoopFsmError, match="forgotten"):
        b.record(9, routes[0], "success", policy=policy)
    restored = FallbackBreaker.restore(json.loads(json.dumps(b.snapshot())))
    assert restored.snapshot() == b.snapshot() and restored.route(10, policy=policy).number == 6


def test_a_permit_is_recorded_at_most_once_and_a_never_issued_one_is_refused():
    from loopfsm.core.errors import FeedRefused

    b = ToolBreaker()
    p = b.acquire(0, "c1")
    b.record(1, p, "failure")
    before = without_refusal_counts(b)
    for _ in range(3):  # the same failure three times must not open the breaker
        with pytest.raises(FeedRefused, match="recorded already, or never issued"):
            b.record(2, p, "failure")
    with pytest.raises(FeedRefused):
        b.record(2, Allow("never", b.data.generation), "failure")
    assert without_refusal_counts(b) == before and b.data.stats["refused_permits"] == 4
    assert b.state == "Closed" and b.data.consecutive_failures == 1


def test_outstanding_permits_are_bounded():
    from loopfsm.machines.tool_breaker import ToolBreakerPolicy

    policy = ToolBreakerPolicy(max_outstanding=3)
    b = ToolBreaker()
    permits = [b.acquire(i, f"c{i}", policy=policy) for i in range(5)]
    assert b.data.permits == ["c2", "c3", "c4"] and b.data.stats["abandoned"] == 2
    b.record(9, permits[4], "success", policy=policy)
    assert b.data.permits == ["c2", "c3"]
    with pytest.raises(LoopFsmError):
        b.record(9, permits[0], "success", policy=policy)  # forgotten: no longer outstanding
