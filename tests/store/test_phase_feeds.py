"""A session's router_run feeds are kept in the store and read back as a trace file that replays.

The router, its sweep and the store's ``serve`` keep every feed they give a
session's phase machine as a ``phase.fed`` trace row; ``loopfsm store trace``
reads them back, checks them against the saved run state, and writes a trace
file that ``loopfsm replay`` and the review site take.  Driven through the
real router and reference client on both stores, plaintext and encrypted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loopfsm.cli.main import main
from loopfsm.cli.store_commands import session_trace
from loopfsm.machines.router_run import ROUTER_RUN
from loopfsm.router.crypto import Keyring
from loopfsm.router.store import open_store, sweep
from loopfsm.router.errors import SessionTraceError
from loopfsm.router.store.phase_feeds import FED, session_run
from loopfsm.router.store.serve import Outcome, serve
from loopfsm.verification import tracefile

from tests.support.router_support import TOOLS_SCRIPT, client, make
from tests.support.store_support import store_url  # noqa: F401 - fixture

ROUTER_RUN_FILE = Path(__file__).resolve().parents[2] / "machines" / "router_run.yaml"


def read_back(store: Any, session: str) -> tracefile.Trace:
    trace: tracefile.Trace = session_trace(store, session)
    return trace


def replays(trace: tracefile.Trace) -> bool:
    return tracefile.replay(ROUTER_RUN, trace, out=None)


def test_a_plaintext_session_with_tools_reads_back_as_a_trace_that_replays(store_url, tmp_path):  # noqa: F811
    url, prefix = store_url
    router, tc = make(url, prefix, TOOLS_SCRIPT * 2)
    for prompt in ("first", "second"):  # two runs of one session: the second starts where the first left the phase
        got = client(tc, "t", tmp_path).run(prompt)
        assert got["status"] == "completed", got
    trace = read_back(router.store(), "t")
    router.close()
    feeds = [s.step.feed for s in trace.steps]
    assert feeds[0] == "execute" and "tool_results" in feeds and feeds.count("execute") == 2
    assert trace.steps[-1].state == "Idle" and any(s.state == "AwaitingTool" for s in trace.steps)
    assert replays(trace)


def test_an_encrypted_session_reads_back_and_its_feed_rows_hold_no_content(store_url, tmp_path):  # noqa: F811
    url, prefix = store_url
    router, tc = make(url, prefix, [{"text": "SEALED-ANSWER-TEXT"}])
    kr = Keyring.generate()
    for prompt in ("FIRST-PROMPT-TEXT", "SECOND-PROMPT-TEXT"):
        assert client(tc, "enc", tmp_path, keyring=kr).run(prompt)["data"]["ended"] == "completed"
    store = router.store()
    trace = read_back(store, "enc")
    kept = json.dumps([r.meta for r in store.rows("enc", "trace") if r.meta["event"] == FED])
    router.close()
    assert [s.step.feed for s in trace.steps] == ["execute", "sealed", "execute", "decrypted", "sealed"]
    assert replays(trace)
    for secret in ("SEALED-ANSWER-TEXT", "FIRST-PROMPT-TEXT", "SECOND-PROMPT-TEXT"):
        assert secret not in kept
    assert "message:" in kept  # refs are kept: the test looks at the rows that hold the pauses


def test_a_run_the_sweep_expired_reads_back_with_the_sweeps_feed(store_url):  # noqa: F811
    url, prefix = store_url
    with open_store(url, prefix=prefix, create=True) as store:
        tools = Outcome("tools", pause={"assistant_ref": "message:m", "calls": [], "pending_seal": []})
        serve(store, "s", "execute", "q1", holder="A", process=tools, now_ms=1_000)
        ttl = int(ROUTER_RUN.default_policy.pause_ttl_ms)
        assert sweep(store, now_ms=1_000 + ttl + 1).runs_expired == ["s"]
        trace = read_back(store, "s")
    assert [(s.step.feed, s.state) for s in trace.steps] == [("execute", "AwaitingTool"), ("break_run", "Idle")]
    assert dict(trace.steps[1].step.args)["reason"] == "expired"
    assert replays(trace)


def test_a_session_missing_its_first_feeds_is_refused_not_written_short(store_url):  # noqa: F811
    url, prefix = store_url
    with open_store(url, prefix=prefix, create=True) as store:
        tools = Outcome("tools", pause={"assistant_ref": "message:m", "calls": [], "pending_seal": []})
        serve(store, "s", "execute", "q1", holder="A", process=tools, now_ms=1_000)
        serve(store, "s", "tool_results", "q2", holder="A", process=Outcome("completed"), now_ms=2_000)
        assert len(read_back(store, "s").steps) == 2
        first = [r for r in store.rows("s", "trace") if r.meta["event"] == FED][0]
        with store.backend.transaction():  # as a store written before feeds were kept holds it
            store.backend.run(
                f"DELETE FROM {store.rows_table} WHERE session_id = ? AND kind = 'trace' AND row_id = ?",
                ("s", first.row_id),
            )
        with pytest.raises(SessionTraceError, match=r"step 1 moved the run \(run.started\) but kept no feed"):
            read_back(store, "s")


def test_kept_feeds_that_end_elsewhere_than_the_saved_state_are_refused(store_url):  # noqa: F811
    url, prefix = store_url
    with open_store(url, prefix=prefix, create=True) as store:
        serve(store, "s", "execute", "q1", holder="A", process=Outcome("completed"), now_ms=1_000)
        rec = store.load("s")
        other = dict(rec.snapshot, data=dict(rec.snapshot["data"], last_run_id="not-this-run"))
        with pytest.raises(SessionTraceError, match="not where the store has it"):
            session_run("s", other, store.rows("s", "trace"))


def test_store_trace_writes_a_file_replay_accepts_and_refuses_in_one_line(store_url, tmp_path, capsys):  # noqa: F811
    url, prefix = store_url
    router, tc = make(url, prefix, TOOLS_SCRIPT)
    assert client(tc, "cli", tmp_path).run("go")["status"] == "completed"
    router.close()
    out = tmp_path / "cli.trace.yaml"
    assert main(["store", "trace", url, "cli", "--prefix", prefix, "-o", str(out)]) == 0
    assert "router_run feeds of session 'cli'" in capsys.readouterr().err
    assert main(["replay", str(ROUTER_RUN_FILE), str(out)]) == 0
    assert "as the trace expects" in capsys.readouterr().out
    assert main(["store", "trace", url, "nobody", "--prefix", prefix]) == 1
    assert "no run state for session 'nobody'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "meta",
    [
        {"event": FED, "feed": ["execute"], "args": {}, "state": "Idle"},
        {"event": FED, "feed": "execute", "args": "now=1", "state": "Idle"},
        {"event": FED, "feed": "break_run", "args": {"now": 1, "policy": {"lease_ms": 1}}, "state": "Idle"},
    ],
)
def test_a_kept_feed_edited_by_hand_is_refused_in_one_line(store_url, meta):  # noqa: F811
    url, prefix = store_url
    with open_store(url, prefix=prefix, create=True) as store:
        serve(store, "s", "execute", "q1", holder="A", process=Outcome("completed"), now_ms=1_000)
        kept = [r for r in store.rows("s", "trace") if r.meta["event"] == FED][0]
        with store.backend.transaction():
            store.backend.run(
                f"UPDATE {store.rows_table} SET meta = ? WHERE session_id = ? AND kind = 'trace' AND row_id = ?",
                (json.dumps(meta), "s", kept.row_id),
            )
        with pytest.raises(SessionTraceError, match="is not a feed as the router keeps it"):
            read_back(store, "s")


def test_a_session_whose_first_run_kept_no_feeds_is_refused_though_it_ends_where_saved(store_url):  # noqa: F811
    """As loopfsm 0.1.0 left it: the first run's events are there, its feeds are not; each run starts from
    Idle, so the feeds of the second run alone end where the store has the session."""
    url, prefix = store_url
    with open_store(url, prefix=prefix, create=True) as store:
        for n, now in ((1, 1_000), (2, 5_000)):
            serve(store, "s", "execute", f"q{n}", holder="A", process=Outcome("completed"), now_ms=now)
        assert len(read_back(store, "s").steps) == 2
        first = [r for r in store.rows("s", "trace") if r.meta["event"] == FED][0]
        with store.backend.transaction():
            store.backend.run(
                f"DELETE FROM {store.rows_table} WHERE session_id = ? AND kind = 'trace' AND row_id = ?",
                ("s", first.row_id),
            )
        with pytest.raises(SessionTraceError, match=r"step 1 moved the run \(run.started\) but kept no feed"):
            read_back(store, "s")


@pytest.mark.parametrize("meta", ["[1, 2, 3]", '"text"', "null"])
def test_a_trace_row_that_is_not_an_object_is_refused_in_one_line(store_url, meta):  # noqa: F811
    url, prefix = store_url
    with open_store(url, prefix=prefix, create=True) as store:
        serve(store, "s", "execute", "q1", holder="A", process=Outcome("completed"), now_ms=1_000)
        row = store.rows("s", "trace")[0]
        with store.backend.transaction():
            store.backend.run(
                f"UPDATE {store.rows_table} SET meta = ? WHERE session_id = ? AND kind = 'trace' AND row_id = ?",
                (meta, "s", row.row_id),
            )
        with pytest.raises(SessionTraceError, match="is not as the router writes it"):
            read_back(store, "s")
        with pytest.raises(SessionTraceError, match="saved run state is not a snapshot"):
            session_run("s", [1], store.rows("s", "trace"))


def test_store_trace_and_show_say_a_row_loopfsm_did_not_write_in_one_line(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with open_store(url, create=True) as store:
        serve(store, "s", "execute", "q1", holder="A", process=Outcome("completed"), now_ms=1_000)
        with store.backend.transaction():
            store.backend.run(f"UPDATE {store.rows_table} SET meta = '{{not json' WHERE session_id = 's'")
    for action in ("trace", "show"):
        assert main(["store", action, url, "s"]) != 0
        err = capsys.readouterr().err
        assert "holds a row loopfsm did not write: stored row 'trace':" in err and "Traceback" not in err
        assert "does not read back as JSON" in err
    with open_store(url) as store, store.backend.transaction():
        store.backend.run(f"DROP TABLE {store.rows_table}")
    assert main(["store", "trace", url, "s"]) != 0
    assert "the database refused a read (OperationalError)" in capsys.readouterr().err


def test_a_session_id_is_said_quoted_in_the_trace_file_and_the_line(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    odd = "s\nmachine: turnstile\x1b[31m"
    with open_store(url, create=True) as store:
        serve(store, odd, "execute", "q1", holder="A", process=Outcome("completed"), now_ms=1_000)
    out = tmp_path / "odd.trace.yaml"
    assert main(["store", "trace", url, odd, "-o", str(out)]) == 0
    assert "\x1b" not in capsys.readouterr().err
    text = out.read_text()
    assert "\x1b" not in text and tracefile.loads(text.encode(), out).machine == "router_run"


def test_a_trace_over_what_replay_reads_is_refused_and_nothing_written(tmp_path, capsys, monkeypatch):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with open_store(url, create=True) as store:
        serve(store, "s", "execute", "q1", holder="A", process=Outcome("completed"), now_ms=1_000)
    monkeypatch.setattr(tracefile, "MAX_TRACE_BYTES", 100)  # the session's trace is a few hundred bytes
    out = tmp_path / "s.trace.yaml"
    assert main(["store", "trace", url, "s", "-o", str(out)]) == 1
    assert "over the 0 MiB replay and the review site read; nothing written" in capsys.readouterr().err
    assert not out.exists()
