"""A client facing a router (or a proxy) that answers garbage, and a user who mistypes: one line, never a traceback."""

from __future__ import annotations

import httpx
import pytest

from loopfsm.cli.main import main
from loopfsm.router.client import Client
from loopfsm.router.errors import ClientError
from loopfsm.core.errors import ConfigError


def _client(tmp_path, handler, stream):
    http = httpx.Client(transport=httpx.MockTransport(handler), base_url="http://router.test")
    return Client("http://router.test", "s1", workspace=tmp_path, http=http, stream=stream, retries=1, retry_delay_s=0)


@pytest.mark.parametrize(
    "content_type, body",
    [
        ("text/html", b"<html>proxy error page</html>"),
        ("application/json", b"[1, 2]"),
        ("application/json", b"[" * 5000),
        ("text/event-stream", b"event: response\ndata: {garbage\n\n"),
    ],
    ids=["html", "not an envelope", "deep", "sse garbage"],
)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])
def test_a_router_answering_garbage_is_a_client_error(tmp_path, content_type, body, stream):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": content_type})

    client = _client(tmp_path, handler, stream)
    with pytest.raises(ClientError, match="the router answered HTTP 200 with"):
        client.run("hi")


def test_an_address_that_is_not_a_url_and_a_workspace_that_is_not_a_folder_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="is not a URL"):
        Client("http://[::1", "s1", workspace=tmp_path)
    with pytest.raises(ConfigError, match="is not a directory"):
        Client("http://router.test", "s1", workspace=tmp_path / "nowhere")


def test_the_command_line_reports_a_keyring_it_cannot_create_in_one_line(tmp_path, capsys):
    code = main(["client", "run", "--session", "s1", "--keyring", str(tmp_path / "no" / "kr.json"), "hi"])
    assert code == 1
    err = capsys.readouterr().err
    assert "cannot create keyring" in err and "Traceback" not in err


def test_ctrl_c_ends_any_command_with_one_line_and_130(monkeypatch, capsys):
    import loopfsm.cli.main as cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_schema", interrupted)
    assert main(["schema"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "loopfsm schema: interrupted"


def _interrupted_at_the_first_question(kind, info):
    raise KeyboardInterrupt


def test_ctrl_c_at_a_question_breaks_the_run_so_the_session_is_free(tmp_path):
    from tests.support.router_support import PLAN_SCRIPT, client, make

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    _, tc = make(url, "t_", PLAN_SCRIPT * 3, create=True)
    first = client(tc, "s1", tmp_path, approver=_interrupted_at_the_first_question, stream=False)
    with pytest.raises(KeyboardInterrupt):
        first.run("do it")
    assert [r["type"] for r in first.sent][-1] == "break"  # broken on the way out
    again = client(tc, "s1", tmp_path, stream=False)
    assert again.run("do it")["status"] == "completed"  # nothing left live: a new run starts


def test_break_live_breaks_a_run_an_earlier_client_left_at_a_question(tmp_path):
    from tests.support.router_support import PLAN_SCRIPT, client, make

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    _, tc = make(url, "t_", PLAN_SCRIPT * 3, create=True)
    gone = client(tc, "s1", tmp_path, stream=False)
    resp = gone._exchange(gone._execute_request("do it", None, None))  # paused at the plan, then the client went away
    assert resp["status"] == "awaiting_approval"
    stuck = client(tc, "s1", tmp_path, stream=False)
    assert stuck.run("do it")["data"]["code"] == "run_live"
    freed = client(tc, "s1", tmp_path, stream=False)
    assert freed.run("do it", break_live=True)["status"] == "completed"
    assert [r["type"] for r in freed.sent][:3] == ["execute", "break", "execute"]


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--session", "bad sid"], "a session id is 1-64 letters"),
        (["--session", "s1", "--cost-ceiling", "-5"], "a number of tokens is 0 or more"),
        (["--session", "s1", "--router", "not-a-url"], "is an http:// or https:// URL"),
        (["--session", "s1", "--router", "http://[::1"], "the router's address is not a URL"),
        (["--session", "s1", "--router", "http://127.0.0.1:99999"], "the router's address is not a URL"),
        (["--session", "s1", "--router", "http://:8787"], "the router's address names no host"),
    ],
)
def test_a_mistyped_client_option_is_a_usage_error_before_anything_is_sent(argv, words, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["client", "run", *argv, "hi"])
    assert exit_.value.code == 2 and words in capsys.readouterr().err


def test_break_live_is_an_option_of_client_run():
    from loopfsm.cli.main import build_parser

    args = build_parser().parse_args(["client", "run", "--session", "s1", "--break-live", "hi"])
    assert args.break_live is True
    assert build_parser().parse_args(["client", "run", "--session", "s1", "hi"]).break_live is False
