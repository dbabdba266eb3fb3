"""The command line never deletes what it did not write, never writes through a symlink, never crashes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from loopfsm.cli.main import MANIFEST, main

ROOT = Path(__file__).resolve().parents[2]


def test_build_into_a_folder_of_other_files_deletes_none_of_them(project, capsys):
    keep = {"README.md": "# readme", "logo.svg": "<svg/>", "notes.dot": "digraph {}", "x.mmd": "graph"}
    for name, text in keep.items():
        (project / name).write_text(text)
    assert main(["build", "-o", "."]) == 0
    assert main(["build", "-o", "."]) == 0
    for name, text in keep.items():
        assert (project / name).read_text() == text
    assert "removed" not in capsys.readouterr().out


def test_an_edited_manifest_cannot_make_build_delete_other_files(project):
    assert main(["build"]) == 0
    (project / "diagrams" / "README.md").write_text("# ours")
    (project / "secret.md").write_text("keep")
    with open(project / "diagrams" / MANIFEST, "a") as fh:
        fh.write("README.md\n../secret.md\n/etc/passwd\n.hidden.md\n")
    assert main(["build"]) == 0
    # README.md was listed, so build believes it wrote it; the paths outside or hidden are ignored
    assert (project / "secret.md").read_text() == "keep"


def test_build_refuses_to_write_through_a_symlink(project, capsys):
    assert main(["build"]) == 0
    target = project / "victim.txt"
    target.write_text("precious")
    link = project / "diagrams" / "turnstile.dot"
    link.unlink()
    link.symlink_to(target)
    assert main(["build"]) == 1
    assert "symlink" in capsys.readouterr().err
    assert target.read_text() == "precious" and link.is_symlink()


def test_render_refuses_to_write_through_a_symlink(project, capsys):
    out = project / "out"
    out.mkdir()
    target = project / "victim.txt"
    target.write_text("precious")
    (out / "turnstile.dot").symlink_to(target)
    assert main(["render", "machines/turnstile.yaml", "-o", str(out), "--format", "dot"]) == 1
    assert "symlink" in capsys.readouterr().err and target.read_text() == "precious"


def test_two_files_with_one_machine_name_are_refused(project, capsys):
    shutil.copy(project / "machines" / "turnstile.yaml", project / "machines" / "turnstile_copy.yaml")
    assert main(["build"]) == 1
    err = capsys.readouterr().err
    assert "turnstile_copy.yaml:2:10: machine: machine 'turnstile' is also declared by" in err  # line 1: modeline
    assert not (project / "diagrams").exists()
    assert main(["render", "machines", "-o", "out", "--format", "dot"]) == 1
    assert "overwrite each other" in capsys.readouterr().err


@pytest.mark.parametrize("setup", ["file", "under_file"])
def test_render_output_that_cannot_be_a_directory(project, capsys, setup):
    (project / "afile").write_text("x")
    out = "afile" if setup == "file" else "afile/sub"
    assert main(["render", "machines/turnstile.yaml", "-o", out, "--format", "dot"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("loopfsm render: cannot") and "Traceback" not in err
    assert (project / "afile").read_text() == "x"


def test_a_directory_without_machines_is_a_usage_error(project, capsys):
    (project / "empty").mkdir()
    assert main(["check", "empty"]) == 2
    assert "no *.yaml files in directory empty" in capsys.readouterr().err
    assert main(["build", "--machines", "empty"]) == 2
    assert "no *.yaml files in empty" in capsys.readouterr().err


def test_an_inaccessible_path_is_a_usage_error(project, capsys):
    assert main(["check", "x" * 5000]) == 2  # ENAMETOOLONG: stat itself fails
    assert "cannot access" in capsys.readouterr().err


def test_a_symlink_loop_is_named_as_one_and_a_missing_file_as_missing(project, capsys):
    os.symlink("loop2.yaml", project / "loop1.yaml")
    os.symlink("loop1.yaml", project / "loop2.yaml")
    assert main(["check", "loop1.yaml"]) == 2
    assert "cannot access loop1.yaml: Too many levels of symbolic links" in capsys.readouterr().err
    os.symlink("nowhere.yaml", project / "dangling.yaml")
    assert main(["check", "dangling.yaml"]) == 2
    assert "no such file or directory: dangling.yaml" in capsys.readouterr().err


def test_json_output_is_one_object_even_for_a_usage_error(project, capsys):
    assert main(["check", "--format", "json", "missing.yaml"]) == 2
    out = capsys.readouterr()
    answer = json.loads(out.out)
    assert answer["ok"] is False and answer["files"] == []
    assert answer["problems"][0]["message"] == "no such file or directory: missing.yaml"
    assert "missing.yaml" in out.err


@pytest.mark.skipif(os.geteuid() == 0, reason="root can enter any directory")
def test_a_file_in_a_directory_that_cannot_be_entered(project, capsys):  # pragma: no cover - not as root
    locked = project / "locked"
    locked.mkdir()
    (locked / "m.yaml").write_text("machine: x\n")
    locked.chmod(0)
    try:
        assert main(["check", "locked/m.yaml"]) in (1, 2)
        assert "Traceback" not in capsys.readouterr().err
    finally:
        locked.chmod(0o755)


def test_a_machine_file_linked_to_a_key_is_not_echoed(project, capsys):
    secret = "QyNTUxOQAAACBtkWdWSLN1c38M2lsFc8LLl0cNEqG6bF1R4OWYm5iZ3QAAAJgGQbKeBkGy" * 2
    (project / "id_key").write_text(
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{secret}\n-----END OPENSSH PRIVATE KEY-----\n"
    )
    (project / "machines" / "evil.yaml").symlink_to(project / "id_key")
    for command in (["validate"], ["check"], ["build"], ["render", "-o", "out"]):
        main(command)
        captured = capsys.readouterr()
        assert secret[:20] not in captured.err + captured.out, command


@pytest.mark.parametrize("fmt", ["text", "json", "github"])
def test_a_long_key_is_cut_in_the_path_and_the_message(project, capsys, fmt):
    """A file of `TOKEN: value` lines (an env file, a log) is a mapping of long keys: not echoed whole."""
    secret = "sk_live_" + "A1b2C3d4" * 40
    (project / "machines" / "env.yaml").write_text(f"machine: env\ndescription: d\n{secret}: 1\n")
    assert main(["check", "--format", fmt, "machines/env.yaml"]) == 1
    captured = capsys.readouterr()
    shown = captured.err + captured.out
    assert secret[:24] in shown and secret[:40] not in shown
    assert f"{len(secret):,} characters" in shown


def test_run_script_with_an_unknown_policy_key(project, capsys, tmp_path):
    script = tmp_path / "s.yaml"
    script.write_text("input: hi\npolicy: {max_turnz: 3}\nmodel: [{text: done, context_tokens: 5}]\n")
    assert main(["run", "engine_brain", "--script", str(script)]) == 1
    err = capsys.readouterr().err
    assert "unknown key 'max_turnz'" in err and "max_turns" in err


def test_run_script_that_is_hostile_yaml(project, capsys, tmp_path):
    script = tmp_path / "s.yaml"
    script.write_text(
        "a: &a ["
        + ",".join(["1"] * 9)
        + "]\n"
        + "".join(f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    )
    assert main(["run", "engine_brain", "--script", str(script)]) == 1
    assert "aliases expand" in capsys.readouterr().err
    assert main(["run", "engine_brain", "--script", "/dev/zero"]) == 1
    assert main(["run", "engine_brain", "--script", str(tmp_path / "missing.yaml")]) == 2


def test_render_leaves_no_output_folder_when_nothing_could_be_drawn(project, capsys):
    (project / "broken.yaml").write_text("machine: broken\n")
    assert main(["render", "-o", "out", "broken.yaml"]) == 1
    assert not (project / "out").exists()
    assert "broken.yaml" in capsys.readouterr().err
