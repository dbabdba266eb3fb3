"""The command line: exit codes, build and its staleness check, renders and the schema."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from loopfsm.cli.main import main
from unittest.mock import patch
from loopfsm.rendering.dot import svg_stamp

ROOT = Path(__file__).resolve().parents[2]


def test_committed_diagrams_are_fresh(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert main(["build", "--check"]) == 0, capsys.readouterr().err


def test_build_then_check_then_edit_makes_it_stale(project, capsys):
    assert main(["build"]) == 0
    for ext in ("svg", "dot", "mmd", "md"):
        assert (project / "diagrams" / f"turnstile.{ext}").exists()
    assert main(["build", "--check"]) == 0
    yaml_file = project / "machines" / "turnstile.yaml"
    yaml_file.write_text(yaml_file.read_text().replace("default: 1\n", "default: 2\n", 1))
    capsys.readouterr()
    assert main(["build", "--check"]) == 1
    err = capsys.readouterr().err
    # Policy numbers live in the review sheet, not on the overview's edges.
    assert "stale: diagrams/turnstile.md" in err and "turnstile.svg" not in err
    assert main(["build"]) == 0
    assert "| `fare` | integer | 2 |" in (project / "diagrams" / "turnstile.md").read_text()
    yaml_file.write_text(yaml_file.read_text().replace("it clicks open", "the arm is released"))
    assert main(["build", "--check"]) == 1
    assert "stale: diagrams/turnstile.svg" in capsys.readouterr().err
    assert main(["build"]) == 0
    assert ">the arm is released \u2192 <I>unlocked</I>" in (project / "diagrams" / "turnstile.dot").read_text()
    assert main(["build", "--check"]) == 0


def test_build_removes_only_what_an_earlier_build_wrote(project, capsys):
    assert main(["build"]) == 0
    (project / "diagrams" / "README.md").write_text("# ours")
    (project / "diagrams" / "logo.svg").write_text("<svg/>")
    (project / "machines" / "turnstile.yaml").unlink()
    assert main(["build", "--check"]) == 1
    err = capsys.readouterr().err
    assert "left over from an earlier build: diagrams/turnstile.svg" in err and "README" not in err
    assert main(["build"]) == 0
    assert not (project / "diagrams" / "turnstile.svg").exists()
    assert (project / "diagrams" / "README.md").read_text() == "# ours"
    assert (project / "diagrams" / "logo.svg").read_text() == "<svg/>"
    assert main(["build", "--check"]) == 0


def test_svg_carries_the_stamp_of_its_dot_source(project):
    assert main(["build"]) == 0
    svg = (project / "diagrams" / "turnstile.svg").read_text()
    assert svg_stamp(svg) and "<svg" in svg and "locked" in svg


def test_exit_codes(project, capsys):
    bad = project / "bad.yaml"
    bad.write_text("machine: x\ndescription: d\nstates: {}\n")
    assert main(["validate", str(bad)]) == 1
    assert "bad.yaml:3:9: states: {} should be non-empty" in capsys.readouterr().err
    assert main(["check", str(bad)]) == 1
    assert main(["check"]) == 0
    assert main(["validate", "missing.yaml"]) == 2
    assert main(["render", "--format", "png"]) == 2
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2


@pytest.mark.parametrize("command", ["validate", "check", "render", "build", "schema", "run", "new"])
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    assert "usage: loopfsm " + command in capsys.readouterr().out


def test_schema_command_prints_the_schema(capsys):
    assert main(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((ROOT / "spec" / "machine.schema.json").read_text())


def test_render_selected_formats(project):
    out = project / "out"
    assert main(["render", "machines/turnstile.yaml", "-o", str(out), "--format", "mermaid,md"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["turnstile.md", "turnstile.mmd"]
    md = (out / "turnstile.md").read_text()
    assert "| `locked` |" in md and "illegal" not in md.split("## Was in x Feed")[1].split("###")[0]


@pytest.fixture
def no_graphviz(tmp_path, monkeypatch):
    """A PATH on which no ``dot`` program is found, as on a machine without Graphviz."""
    empty = tmp_path / "no-graphviz-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_missing_graphviz_is_a_clear_error(project, no_graphviz, capsys):
    assert main(["render", "--format", "svg,md", "-o", "out"]) == 1
    err = capsys.readouterr().err
    assert "install it (e.g. 'apt-get install -y graphviz'), or leave SVG out: --format md" in err
    assert not (project / "out").exists()  # drawn before written: nothing half done
    assert main(["render", "--format", "dot,mermaid,md", "-o", "out"]) == 0


def _advice(err: str) -> list[str]:
    return [c for c in re.findall(r"`([^`]+)`", err) if c.startswith("loopfsm ")]


def test_build_check_needs_no_graphviz(project, monkeypatch, capsys):
    assert main(["build"]) == 0
    empty = project / "no-graphviz-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    capsys.readouterr()
    assert main(["build", "--check"]) == 0, capsys.readouterr().err
    yaml_file = project / "machines" / "turnstile.yaml"
    yaml_file.write_text(yaml_file.read_text().replace("it clicks open", "the arm is released"))
    assert main(["build", "--check"]) == 1
    assert "stale: diagrams/turnstile.svg" in capsys.readouterr().err


def test_build_without_graphviz_writes_nothing_and_gives_advice_that_works(project, monkeypatch, capsys):
    assert main(["build"]) == 0
    before = {p.name: p.read_bytes() for p in (project / "diagrams").iterdir()}
    empty = project / "no-graphviz-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    yaml_file = project / "machines" / "turnstile.yaml"
    yaml_file.write_text(yaml_file.read_text().replace("it clicks open", "the arm is released"))
    capsys.readouterr()
    assert main(["build"]) == 1
    err = capsys.readouterr().err
    assert "'dot' program is not installed" in err and "diagrams/turnstile.svg" in err
    assert {p.name: p.read_bytes() for p in (project / "diagrams").iterdir()} == before
    advice = _advice(err)
    assert advice == ["loopfsm build --check", "loopfsm render --format dot,mermaid,md"]
    for command in advice:  # each one runs, without Graphviz, as written (no usage error)
        assert main(shlex.split(command)[1:]) in (0, 1), command
        assert "not installed" not in capsys.readouterr().err, command


def test_build_without_graphviz_writes_what_needs_no_drawing(project, monkeypatch, capsys):
    """A policy number is in the review sheet only: the SVGs stay current, so build needs no Graphviz."""
    assert main(["build"]) == 0
    empty = project / "no-graphviz-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    yaml_file = project / "machines" / "turnstile.yaml"
    yaml_file.write_text(yaml_file.read_text().replace("default: 1\n", "default: 2\n", 1))
    capsys.readouterr()
    assert main(["build"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "wrote diagrams/turnstile.md"
    assert main(["build", "--check"]) == 0


def test_check_counts_in_words_that_agree_with_the_number(capsys):
    brain = Path(__file__).resolve().parents[2] / "machines" / "engine_brain.yaml"
    assert main(["check", str(brain)]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert summary.endswith("feeds, 1 decision)"), summary


@pytest.mark.parametrize("argv", [["schema"], ["validate", "machines/turnstile.yaml"]])
def test_a_reader_that_goes_away_ends_the_command_quietly(argv):
    """``loopfsm schema | head -c 200`` printed a BrokenPipeError traceback; now it stops with SIGPIPE's status."""
    import os  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write: every write fails, deterministically
    try:
        done = subprocess.run(
            [sys.executable, "-m", "loopfsm", *argv], cwd=ROOT, stdout=write_end, stderr=subprocess.PIPE, timeout=60
        )
    finally:
        os.close(write_end)
    assert done.returncode == 141 and done.stderr == b"", done.stderr.decode()


def _big_machine(path, states: int = 300) -> None:
    """A table Graphviz takes minutes to draw: a ring of states, each with three more arrows across it."""
    lines = ["machine: big", "description: big", "states:"]
    lines += [f"  s{i}: {{description: s{i}{', initial: true' if i == 0 else ''}}}" for i in range(states)]
    lines.append("events:")
    for e in range(4):
        lines += [f"  e{e}:", f"    description: e{e}", "    otherwise: raise", "    from:"]
        lines += [f"      s{i}: [{{to: s{(i + 1 + e * 97) % states}, description: go {e}}}]" for i in range(states)]
    path.write_text("\n".join(lines) + "\n")


def test_a_drawing_graphviz_cannot_finish_is_stopped_and_said(project, capsys):
    """A 300-state table kept dot busy for minutes with nothing said.  It is stopped after --dot-timeout, nothing
    is written, and the message says what else to do; the advice's --format runs as written."""
    _big_machine(project / "big.yaml")
    assert main(["render", "big.yaml", "-o", "out", "--dot-timeout", "0.3"]) == 1
    err = capsys.readouterr().err
    assert "dot was stopped after 0.3 s without finishing the drawing of big; nothing was written" in err
    assert "--dot-timeout SECONDS" in err and "`dot -Tsvg out/big.dot -o out/big.svg`" in err
    assert not (project / "out").exists()
    assert main(["render", "big.yaml", "-o", "out", "--format", "dot,mermaid,md"]) == 0  # the advice, as written
    assert (project / "out" / "big.dot").is_file()
    with pytest.raises(SystemExit):
        main(["render", "big.yaml", "--dot-timeout", "0"])
    assert "seconds must be more than 0" in capsys.readouterr().err


def test_the_advice_names_the_picture_that_timed_out_and_a_format_that_writes_its_dot_file(project, capsys):
    """The advice named the overview (big.dot) when the detailed picture had timed out, and with --format svg,md
    it told the user to leave SVG out with --format md, which writes no .dot file to draw from."""
    _big_machine(project / "big.yaml", states=12)  # dot is stopped by the stand-in below, not by size
    args = ["render", "big.yaml", "-o", "my pics", "--format", "svg,md", "--detailed", "--dot-timeout", "0.3"]
    with patch("loopfsm.rendering.dot.to_svg", side_effect=_slow_after_first):
        assert main(args) == 1
    err = capsys.readouterr().err
    assert "drawing of big.detailed; nothing was written" in err
    # quoted: `dot -Tsvg my pics/...` read "my" as the file (a folder with a space; a hostile user's finding);
    # every picture: nothing was written, and the advice drew only the detailed one (the overview went missing)
    command = """for f in 'my pics/big' 'my pics/big.detailed'; do dot -Tsvg "$f.dot" -o "$f.svg"; done"""
    assert "(--format dot,md)" in err and f"`{command}`" in err
    assert not (project / "my pics").exists()
    assert main(["render", "big.yaml", "-o", "my pics", "--format", "dot,md", "--detailed"]) == 0  # as advised
    subprocess.run(["sh", "-c", command], cwd=project, check=True, timeout=120, capture_output=True)
    assert (project / "my pics" / "big.detailed.svg").stat().st_size > 0
    assert (project / "my pics" / "big.svg").stat().st_size > 0


def _slow_after_first(g, timeout=None):
    """dot.to_svg that draws the first picture and times out on the next (the detailed one)."""
    from loopfsm.rendering.errors import DrawingTooSlow

    if "(detailed)" in g.source:
        raise DrawingTooSlow(timeout or 30)
    return "<svg/>"


def test_build_stops_a_drawing_graphviz_cannot_finish_and_writes_nothing(project, capsys):
    assert main(["build"]) == 0
    before = {p.name: p.read_bytes() for p in (project / "diagrams").iterdir()}
    _big_machine(project / "machines" / "big.yaml")
    capsys.readouterr()
    assert main(["build", "--dot-timeout", "0.3"]) == 1
    err = capsys.readouterr().err
    assert "stopped after 0.3 s without finishing the drawing of diagrams/big.svg; nothing was written" in err
    assert {p.name: p.read_bytes() for p in (project / "diagrams").iterdir()} == before
