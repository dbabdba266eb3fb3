"""The two-minute demo (README.md, docs/router.md), as commands: `loopfsm router serve`, then `loopfsm client run`."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.docs_pages import all_pages, page
from loopfsm.cli.main import build_parser, main

from tests.support.router_support import free_port, wait_until_up

LOOPFSM = [sys.executable, "-m", "loopfsm"]
ROOT = Path(__file__).resolve().parents[2]
DOCS = "\n".join(page(p) for p in all_pages())


@pytest.mark.slow
def test_serve_then_client_run_is_the_demo(tmp_path):

    port = free_port()
    log = open(tmp_path / "serve.log", "wb")
    server = subprocess.Popen(
        LOOPFSM + ["router", "serve", "--store", f"sqlite:///{tmp_path / 'runs.db'}", "--port", str(port)],
        stdout=log,
        stderr=log,
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}", server, (tmp_path / "serve.log").read_text)
        ws = tmp_path / "demo"
        ws.mkdir()

        def client_args(session: str, workspace: Path) -> list[str]:
            return ["client", "run", "--router", f"http://127.0.0.1:{port}", "--session", session] + [
                "--workspace",
                str(workspace),
            ]

        def client_run(session: str, workspace: Path, *extra: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                LOOPFSM + client_args(session, workspace) + [*extra, "tidy up"],
                capture_output=True,
                text=True,
                timeout=120,
                stdin=subprocess.DEVNULL,
            )

        run = client_run("s1", ws, "--yes")
        assert run.returncode == 0, run.stderr
        assert run.stdout == "Done: I listed the workspace and wrote NOTES.md.\n"
        assert "running shell" in run.stderr and "running write_file" in run.stderr
        assert (ws / "NOTES.md").read_text() == "Visited by the loopfsm demo router.\n"
        # without --yes and without a terminal, ask calls are rejected: nothing is written
        other = tmp_path / "other"
        other.mkdir()
        keyring = tmp_path / "keys.json"
        run = client_run("s2", other, "--keyring", str(keyring))
        assert "rejected (no terminal to ask; use --yes)" in run.stderr and not (other / "NOTES.md").exists()
        assert oct(os.stat(keyring).st_mode & 0o777) == "0o600"
        # the scripted model still says it wrote NOTES.md: the client says what really happened, and exits 1
        assert run.stdout == "Done: I listed the workspace and wrote NOTES.md.\n"
        assert run.stderr.splitlines()[-1] == (
            "loopfsm client: 2 tool calls were rejected and did not run: shell, write_file "
            "(no terminal to ask: --yes allows them); the answer above may say otherwise"
        )
        assert run.returncode == 1
        # on a terminal, the user answering n: the same verdict, without the hint
        run_tty = on_a_terminal(client_args("s4", other) + ["tidy up"], answers="n\nn\n")
        assert run_tty.code == 1 and not (other / "NOTES.md").exists()
        assert "loopfsm client: 2 tool calls were rejected and did not run: shell, write_file; the answer" in (
            run_tty.output
        )
        run_tty = on_a_terminal(client_args("s5", other) + ["tidy up"], answers="y\ny\n")
        assert run_tty.code == 0 and (other / "NOTES.md").exists() and "rejected" not in run_tty.output
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()
    assert "Traceback" not in (tmp_path / "serve.log").read_text()


@dataclass
class TerminalRun:
    code: int
    output: str  # what the terminal showed: stdout and stderr, the typed answers echoed


def on_a_terminal(args: list[str], answers: str) -> TerminalRun:
    """``loopfsm ARGS`` with a pseudo-terminal as stdin, stdout and stderr, the user typing ``answers``."""
    import pty

    main_fd, side_fd = pty.openpty()
    try:
        proc = subprocess.Popen(LOOPFSM + args, stdin=side_fd, stdout=side_fd, stderr=side_fd)
        os.close(side_fd)
        os.write(main_fd, answers.encode())  # the terminal holds the typed lines until input() reads them
        chunks = []
        while True:
            try:
                chunk = os.read(main_fd, 4096)
            except OSError:  # EIO: every holder of the other side has closed it
                break
            if not chunk:
                break
            chunks.append(chunk)
        code = proc.wait(timeout=120)
    finally:
        os.close(main_fd)
    return TerminalRun(code, b"".join(chunks).decode(errors="replace").replace("\r\n", "\n"))


def test_real_provider_without_model_is_a_usage_error(tmp_path, capsys):
    code = main(["router", "serve", "--store", f"sqlite:///{tmp_path / 'r.db'}", "--provider", "anthropic"])
    assert code != 0
    assert "--provider anthropic needs --model" in capsys.readouterr().err


def test_bad_permissions_are_refused(tmp_path, capsys):
    code = main(["router", "serve", "--store", f"sqlite:///{tmp_path / 'r.db'}", "--permissions", '{"shell": "yes"}'])
    assert code != 0 and "--permissions" in capsys.readouterr().err
    assert Path(tmp_path).exists()


@pytest.mark.parametrize("workers", ["0", "65", "two"])
def test_workers_outside_1_to_64_are_a_usage_error(tmp_path, capsys, workers):
    with pytest.raises(SystemExit) as stopped:  # argparse's usage error
        main(["router", "serve", "--store", f"sqlite:///{tmp_path / 'r.db'}", "--workers", workers])
    assert stopped.value.code == 2 and "--workers" in capsys.readouterr().err
    assert not (tmp_path / "r.db").exists()  # refused before anything is opened


def _subcommand(*names: str) -> argparse.ArgumentParser:
    """The parser of ``loopfsm NAMES...`` (e.g. ``router serve``)."""
    parser = build_parser()
    for name in names:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def _default_text(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@pytest.mark.parametrize("command", [("router", "serve"), ("client", "run")], ids=" ".join)
def test_every_option_says_what_it_is_and_its_default(command, capsys):
    parser = _subcommand(*command)
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = action.option_strings[-1] if action.option_strings else action.dest
        assert action.help and len(action.help) > 10, f"loopfsm {' '.join(command)} {name}: no help text"
        if action.default not in (None, False) and not action.required:
            assert f"default: {_default_text(action.default)}" in action.help, f"{name}: default not shown"
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    shown = capsys.readouterr().out
    assert "(default: 127.0.0.1" in shown or "(default: http://127.0.0.1:8787" in shown


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_what_the_readme_demo_leaves_in_the_clone_is_ignored(tmp_path, monkeypatch):
    """The demo's store (with SQLite's WAL files) and workspace, made where the README makes them: git ignores them."""
    from loopfsm.router.store import open_store
    from loopfsm.router.store.serve import Outcome, serve

    commands = [line[2:] for line in DOCS.splitlines() if line.startswith("$ loopfsm ") or line.startswith("$ mkdir")]
    stores = {m for c in commands for m in re.findall(r"--store sqlite:///(\S+)", c)}
    workspaces = {m for c in commands for m in re.findall(r"--workspace (\S+)", c)}
    assert stores == {"runs.db"} and workspaces == {"demo"}  # what the rest of this test makes
    shutil.copy(ROOT / ".gitignore", tmp_path / ".gitignore")
    monkeypatch.chdir(tmp_path)
    subprocess.run(["git", "init", "-q"], check=True)
    store = open_store("sqlite:///runs.db", create=True)
    try:
        serve(store, "s1", "execute", "r1", holder="router-1", process=Outcome("completed"))
        (tmp_path / "demo").mkdir()
        (tmp_path / "demo" / "NOTES.md").write_text("Visited by the loopfsm demo router.\n")
        made = sorted(p.name for p in tmp_path.iterdir() if p.name not in (".git", ".gitignore"))
        assert "runs.db" in made and "runs.db-wal" in made, made  # the store is open: its WAL files are there
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"], capture_output=True, text=True, check=True
        ).stdout
    finally:
        store.close()
    assert status.splitlines() == ["?? .gitignore"], status


def test_the_responses_api_provider_needs_a_model_and_its_key_before_serving(tmp_path, capsys, monkeypatch):
    store = f"sqlite:///{tmp_path / 'r.db'}"
    assert main(["router", "serve", "--store", store, "--provider", "openai-responses"]) != 0
    assert "--provider openai-responses needs --model" in capsys.readouterr().err
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["router", "serve", "--store", store, "--provider", "openai-responses", "--model", "m"]) != 0
    assert "--provider openai-responses needs OPENAI_API_KEY" in capsys.readouterr().err
