"""The router key: what seals an encrypted session's run state at rest, and what happens when it is wrong."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from loopfsm.router.crypto import Keyring
from loopfsm.core.errors import ConfigError
from loopfsm.router.errors import SealError
from loopfsm.router.atrest import create_key_file, load_router_key
from loopfsm.router.store import open_store

from tests.support.router_support import TOOLS_SCRIPT, client, make
from tests.support.store_support import store_url  # noqa: F401  (fixture)


class _Walk(Exception):
    """The user walks away from the run at its first pause."""


def _pause_encrypted_run(url, prefix, key, session, tmp_path):
    """Start an encrypted run under router key ``key``, leave it paused at its first tool call.

    Returns the client's keyring, the execute request it sent and the response it walked away from.
    """
    router, tc = make(url, prefix, TOOLS_SCRIPT, key=key)
    kr = Keyring.generate()
    paused = []

    def walk_away(state, resp):
        paused.append(resp)
        raise _Walk

    c = client(tc, session, tmp_path, keyring=kr, interrupt=walk_away)
    with pytest.raises(_Walk):
        c.run("p", permissions={"shell": "ask"})
    router.close()
    return kr, c.sent[0], paused[0]


def _bundle(url, prefix, session):
    with open_store(url, prefix=prefix) as s:
        return [r for r in s.rows(session, "input") if r.row_id.startswith("b-")]


def test_a_run_sealed_under_another_key_is_refused_until_its_key_or_a_break(store_url, tmp_path):  # noqa: F811
    url, prefix = store_url
    old_file = tmp_path / "old.key"
    Keyring.generate().save(old_file)
    old = Keyring.load(old_file)
    kr, execute, paused = _pause_encrypted_run(url, prefix, old, "s1", tmp_path)
    [before] = _bundle(url, prefix, "s1")
    assert before.sealed["key_id"] == old.current and before.body is None

    # A router with another key: the continuation is refused, saying which key, and nothing changes.
    other, tc = make(url, prefix, TOOLS_SCRIPT, key=Keyring.generate())
    with open_store(url, prefix=prefix) as s:
        phase_before = s.load("s1")
    answer = tc.post(
        "/v1/sessions/s1/continue", json={"type": "tool_results", "request_id": "t1", "data": {"results": []}}
    ).json()
    assert answer["status"] == "error" and answer["data"]["code"] == "internal"
    assert old.current in answer["data"]["error"] and "break the run" in answer["data"]["error"]
    assert answer["allowed_continuations"] == ["tool_results", "inject", "break"]
    inject = {"type": "inject", "request_id": "i1", "data": {"message": "x", "encrypted": {}}}
    assert tc.post("/v1/sessions/s1/continue", json=inject).json()["data"]["code"] == "internal"
    replayed = tc.post("/v1/sessions/s1/execute", json=execute).json()  # a re-send is answered from the bundle
    assert replayed["data"]["code"] == "internal" and old.current in replayed["data"]["error"]
    with open_store(url, prefix=prefix) as s:
        after = s.load("s1")
        assert (after.phase, after.version, after.holder) == (phase_before.phase, phase_before.version, None)
    assert _bundle(url, prefix, "s1") == [before]

    # A router whose key file holds the old key (rotated: a new current key) carries the run on.
    rotated = Keyring.load(old_file)
    new_kid = rotated.rotate()
    router, tc2 = make(url, prefix, TOOLS_SCRIPT, key=rotated)
    assert tc2.post("/v1/sessions/s1/execute", json=execute).json() == paused
    answer = client(tc2, "s1", tmp_path, keyring=kr)._answer("RunningTools", paused)  # the client's own answer
    step = tc2.post("/v1/sessions/s1/continue", json=answer).json()
    assert step["status"] == "awaiting_tool" and step["data"]["tool_requests"][0]["name"] == "write_file"
    [now] = _bundle(url, prefix, "s1")
    assert now.sealed is not None and now.sealed["key_id"] == new_kid
    router.close()

    # Break needs no bundle: under a router without the key it still ends the run and empties the row.
    _pause_encrypted_run(url, prefix, old, "s2", tmp_path)
    broke = tc.post("/v1/sessions/s2/continue", json={"type": "break", "request_id": "b1"}).json()
    assert broke["status"] == "idle" and broke["data"]["ended"] == "user"
    [emptied] = _bundle(url, prefix, "s2")
    assert emptied.sealed is None and emptied.body is None
    again = client(tc, "s2", tmp_path, keyring=Keyring.generate()).run("q", permissions={"shell": "allow"})
    assert again["data"]["ended"] == "completed"
    other.close()


def test_a_clear_bundle_of_an_older_loopfsm_is_read_then_sealed(store_url, tmp_path):  # noqa: F811
    url, prefix = store_url
    key = Keyring.generate()
    router, tc = make(url, prefix, TOOLS_SCRIPT, key=key)
    states = []

    def unseal_first(state, resp):
        [row] = _bundle(url, prefix, "s1")
        states.append((state, row.sealed is not None, row.body is not None))
        if len(states) == 1:  # what an older router wrote: the same bundle, in clear
            body = json.loads(key.open_at_rest(row.sealed, session_id="s1", row=f"input:{row.row_id}"))
            with open_store(url, prefix=prefix) as s:
                s.backend.run(
                    f"UPDATE {prefix}rows SET body = ?, sealed = NULL WHERE session_id = 's1' AND row_id = ?",
                    (json.dumps(body), row.row_id),
                )

    kr = Keyring.generate()
    c = client(tc, "s1", tmp_path, keyring=kr, interrupt=unseal_first)
    resp = c.run("p", permissions={"shell": "allow", "write_file": "allow"})
    assert resp["data"]["ended"] == "completed" and c.last_message == "all done"
    assert states[0] == ("RunningTools", True, False)
    assert states[1:] and all(sealed and not clear for _, sealed, clear in states[1:])
    router.close()


def test_the_default_router_key_is_made_owner_only_when_an_encrypted_run_first_needs_it(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    url = f"sqlite:///{tmp_path / 'r.db'}"
    router, tc = make(url, "loopfsm_", TOOLS_SCRIPT, create=True)
    key_file = tmp_path / "state" / "loopfsm" / "router.key"
    plain = client(tc, "plain", tmp_path).run("p", permissions={"shell": "allow", "write_file": "allow"})
    assert plain["status"] == "completed" and not key_file.exists()
    sealed = client(tc, "enc", tmp_path, keyring=Keyring.generate()).run("p", permissions={"shell": "allow"})
    assert sealed["data"]["ended"] == "completed"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    kid = Keyring.load(key_file).current
    router.close()
    # A second router on the same machine uses the same default key.
    assert load_router_key(None).current == kid


def test_an_unreadable_default_key_is_an_error_envelope_without_the_path(monkeypatch, tmp_path):
    blocker = tmp_path / "state"
    blocker.write_text("a file where the state directory should be")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))
    router, tc = make(f"sqlite:///{tmp_path / 'r.db'}", "loopfsm_", TOOLS_SCRIPT, create=True)
    resp = client(tc, "enc", tmp_path, keyring=Keyring.generate()).run("p", permissions={"shell": "allow"})
    assert resp["status"] == "error" and resp["data"]["code"] == "internal"
    assert "--key-file" in resp["data"]["error"] and str(tmp_path) not in resp["data"]["error"]
    router.close()


def test_key_file_refusals(tmp_path, capsys):
    from loopfsm.cli.main import main

    missing = tmp_path / "nope.key"
    with pytest.raises(ConfigError, match="does not exist.*router keygen"):
        load_router_key(missing)
    assert main(["router", "keygen", str(missing)]) == 0
    assert stat.S_IMODE(missing.stat().st_mode) == 0o600
    kid = load_router_key(missing).current
    assert main(["router", "keygen", str(missing)]) == 1
    assert "never overwritten" in capsys.readouterr().err
    assert load_router_key(missing).current == kid
    os.chmod(missing, 0o640)
    with pytest.raises(ConfigError, match="readable by others"):
        load_router_key(missing)
    assert not create_key_file(missing)
    not_a_key = tmp_path / "junk.key"
    not_a_key.write_text("hello")
    os.chmod(not_a_key, 0o600)
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert main(["router", "serve", "--store", url, "--key-file", str(not_a_key), "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert "router key file" in err and "not JSON" in err and "Traceback" not in err


def test_keygen_rotate_adds_a_current_key_and_keeps_the_old_ones(tmp_path, capsys):
    from loopfsm.cli.main import main

    path = tmp_path / "router.key"
    assert main(["router", "keygen", "--rotate", str(path)]) == 1  # nothing to rotate: said, nothing made
    assert "router key file" in capsys.readouterr().err and not path.exists()
    assert main(["router", "keygen", str(path)]) == 0
    old = load_router_key(path)
    sealed = old.seal_at_rest("state", session_id="s", row="input:b-r").to_json()
    assert main(["router", "keygen", "--rotate", str(path)]) == 0
    assert "restart the routers" in capsys.readouterr().out
    new = load_router_key(path)
    assert new.current != old.current and set(new.key_ids) == {old.current, new.current}
    assert new.open_at_rest(sealed, session_id="s", row="input:b-r") == b"state"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert main(["router", "keygen", str(path)]) == 1
    assert "--rotate" in capsys.readouterr().err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_key_file_that_is_a_fifo_a_folder_or_a_link_to_an_open_file_is_refused_at_start(tmp_path):
    """Never a hang: a FIFO with no writer is refused as not a regular file (it used to block the start)."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    fifo, folder, real, link = (tmp_path / n for n in ("k.fifo", "k.dir", "real.key", "link.key"))
    os.mkfifo(fifo, 0o600)
    folder.mkdir(mode=0o700)
    assert create_key_file(real)
    real.chmod(0o644)
    link.symlink_to(real)
    url = f"sqlite:///{tmp_path / 'r.db'}"
    said = {}
    for name, path in (("fifo", fifo), ("folder", folder), ("link", link)):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "loopfsm",
                "router",
                "serve",
                "--store",
                url,
                "--key-file",
                str(path),
                "--port",
                "0",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,  # a guard only: the old code waited here forever for a writer to open the FIFO
        )
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        said[name] = done.stderr
    assert "must be a regular file" in said["fifo"] and "must be a regular file" in said["folder"]
    assert "is readable by others" in said["link"]  # a link is followed; its target (mode 0644 here) is judged


def test_router_state_seals_live_in_a_domain_of_their_own():
    kr = Keyring.generate()
    env = kr.seal_at_rest(b"state", session_id="s1", row="input:b-1")
    assert kr.open_at_rest(env, session_id="s1", row="input:b-1") == b"state"
    for session, row in (("s2", "input:b-1"), ("s1", "input:b-2")):
        with pytest.raises(SealError, match="does not open here"):
            kr.open_at_rest(env, session_id=session, row=row)
    with pytest.raises(SealError):  # not a client content envelope either way round
        kr.open(env, session_id="s1", ref="message:b-1")
    content = kr.seal(b"content", session_id="s1", ref="message:b-1")
    with pytest.raises(SealError):
        kr.open_at_rest(content, session_id="s1", row="input:b-1")


def _start_lines(env: dict[str, str], url: str) -> str:
    """What `router serve` prints up to its listening line, then it is stopped."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "loopfsm", "router", "serve", "--store", url, "--port", "0"],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    lines = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "encrypted sessions' run state is sealed" in line:
                break
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return "".join(lines)


def test_router_serve_says_when_it_writes_the_default_key_file_outside_the_folder(tmp_path):
    """The README's demo starts a router with no --key-file: the key it creates lies outside the clone, so the
    start names the file it wrote; a later start only names the key it uses."""
    state = tmp_path / "state"
    env = dict(os.environ, XDG_STATE_HOME=str(state), PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    first = _start_lines(env, url)
    key = state / "loopfsm" / "router.key"
    assert f"wrote a new router key file {key} (owner-only)" in first, first
    assert key.is_file() and (key.stat().st_mode & 0o077) == 0
    again = _start_lines(env, url)
    assert "wrote a new router key" not in again and f"sealed under the router key in {key}" in again, again
