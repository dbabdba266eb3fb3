"""pre-commit hooks, editor modelines, schema help text, and `check --format json|github`."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from tests.support.docs_pages import page
from loopfsm.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
MODELINE = "# yaml-language-server: $schema=../spec/machine.schema.json"


@pytest.mark.parametrize("path", sorted((ROOT / "machines").glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_machine_starts_with_the_schema_modeline(path):
    first = path.read_text().splitlines()[0]
    assert first == MODELINE, f"{path.name}: make its first line `{MODELINE}` so editors validate and complete it"
    assert (path.parent / first.split("=", 1)[1]).resolve() == (ROOT / "spec" / "machine.schema.json")


def test_the_pages_pre_commit_config_and_modeline_are_the_shipped_ones():
    """docs/cli.md's pre-commit config names the hooks this repository ships; its modeline is the machines'."""
    text = page("docs/cli.md").split("## pre-commit, editors and CI\n")[1]
    config_block, modeline_block = (b.split("```")[0] for b in text.split("```yaml\n")[1:3])
    shipped = {h["id"] for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    (repo,) = yaml.safe_load(config_block)["repos"]
    named = {h["id"] for h in repo["hooks"]} | set(re.findall(r"# - id: (\S+)", config_block))
    assert named == shipped
    assert modeline_block.splitlines() == [MODELINE, "machine: turnstile"]
    assert (ROOT / "machines" / "turnstile.yaml").read_text().splitlines()[:2] == [MODELINE, "machine: turnstile"]


def test_schema_explains_what_an_editor_completes():
    schema = json.loads((ROOT / "spec" / "machine.schema.json").read_text())
    defs = schema["$defs"]
    for name in ("state", "event", "branch", "rule", "decision", "outcome", "field", "policyParam"):
        assert defs[name].get("title"), name
    for name in ("state", "event", "branch", "field", "policyParam", "rule"):
        props = defs[name]["properties"]
        missing = [k for k, v in props.items() if not v.get("description")]
        assert not missing, f"{name}: properties without a description: {missing}"
    labels = [s["label"] for s in defs["branch"]["defaultSnippets"]]
    assert labels == ["move", "guarded move", "stay"]


def test_pre_commit_hooks_run_the_commands_they_name(tmp_path, monkeypatch, capsys):
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"loopfsm-validate", "loopfsm-check", "loopfsm-build-check"}
    assert all(h["language"] == "python" and h["entry"].startswith("loopfsm ") for h in hooks.values())
    assert hooks["loopfsm-build-check"]["pass_filenames"] is False
    monkeypatch.chdir(tmp_path)
    (tmp_path / "machines").mkdir()
    machine = tmp_path / "machines" / "turnstile.yaml"
    machine.write_text((ROOT / "machines" / "turnstile.yaml").read_text())
    files = ["machines/turnstile.yaml"]

    def run(hook: str) -> int:
        argv = shlex.split(hooks[hook]["entry"])[1:]
        return main(argv + ([] if hooks[hook].get("pass_filenames") is False else files))

    assert run("loopfsm-validate") == 0 and run("loopfsm-check") == 0
    assert run("loopfsm-build-check") == 1  # nothing rendered yet
    assert main(["build"]) == 0 and run("loopfsm-build-check") == 0
    machine.write_text(machine.read_text().replace("to: unlocked", "to: unlockd"))
    capsys.readouterr()
    assert run("loopfsm-check") == 1
    assert "unknown state 'unlockd'" in capsys.readouterr().err
    import re

    pattern = re.compile(hooks["loopfsm-check"]["files"])
    assert pattern.search("machines/turnstile.yaml") and pattern.search("sub/machines/x.yml")
    assert not pattern.search(".github/workflows/ci.yaml")


#: The identify tags pre-commit gives a file, for the suffixes the hooks care about.
TAGS = {".py": {"file", "text", "python"}, ".yaml": {"file", "text", "yaml"}, ".toml": {"file", "text", "toml"}}


def _selects(hook: dict, path: str) -> bool:
    """Whether pre-commit hands ``path`` to ``hook`` (its ``files``, ``exclude``, ``types`` and ``types_or``)."""
    import re

    tags = TAGS[Path(path).suffix]
    return (
        re.search(str(hook.get("files", "")), path) is not None
        and re.search(str(hook.get("exclude", "^$")), path) is None
        and set(hook.get("types", ["file"])) <= tags
        and bool(set(hook.get("types_or", tags)) & tags)
    )


def test_check_hook_runs_when_a_registry_module_changes(tmp_path):
    """Renaming a guard in the declared registry module breaks the machine file: the commit must not land."""
    import subprocess
    import sys

    from tests.cli.test_project import DOOR_PY, DOOR_YAML

    hook = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}["loopfsm-check"]
    (tmp_path / "machines").mkdir()
    (tmp_path / "machines" / "door.yaml").write_text(DOOR_YAML)
    (tmp_path / "pyproject.toml").write_text('[tool.loopfsm]\nregistries = {door = "door:REG"}\n')
    (tmp_path / "door.py").write_text(DOOR_PY)

    def commit(*staged: str) -> subprocess.CompletedProcess[str] | None:
        """What pre-commit does with this hook for a commit of ``staged``: None when it skips the hook."""
        chosen = [f for f in staged if _selects(hook, f)]
        if not chosen:
            return None
        argv = shlex.split(hook["entry"])[1:] + ([] if hook.get("pass_filenames") is False else chosen)
        return subprocess.run(
            [sys.executable, "-m", "loopfsm", *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )

    ran = commit("door.py")
    assert ran is not None and ran.returncode == 0, ran and ran.stderr
    (tmp_path / "door.py").write_text(DOOR_PY.replace("def code_ok(", "def code_matches("))
    for staged in ("door.py", "src/pkg/door.py", "pyproject.toml", "machines/door.yaml"):
        ran = commit(staged)
        assert ran is not None, f"{staged}: the hook was skipped"
        assert ran.returncode == 1, (staged, ran.stdout, ran.stderr)
        assert "machines/door.yaml" in ran.stderr and "code_ok" in ran.stderr and "Traceback" not in ran.stderr
    assert commit("docs/notes.yaml", ".github/workflows/ci.yaml") is None


def _broken(tmp_path: Path) -> Path:
    path = tmp_path / "t,urn.yaml"
    path.write_text((ROOT / "machines" / "turnstile.yaml").read_text().replace("to: unlocked", "to: unlockd"))
    return path


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_check_format_json(tmp_path, capsys):
    bad = _broken(tmp_path)
    good = ROOT / "machines" / "turnstile.yaml"
    assert main(["check", "--format", "json", str(bad), str(good)]) == 1
    out = capsys.readouterr()
    assert out.err == ""
    report = json.loads(out.out)
    line = _line_of(bad, "to: unlockd")
    assert report["ok"] is False
    assert report["problems"] == [
        {
            "file": str(bad),
            "line": line,
            "column": 15,
            "path": "events.coin.from.locked[0].to",
            "severity": "error",
            "message": "unknown state 'unlockd'; did you mean 'unlocked'?",
        }
    ]
    # Every file has its entry, the failing one first as it was given, with its count of errors.
    assert report["files"] == [
        {"file": str(bad), "ok": False, "errors": 1, "summary": f"{bad}: 1 error"},
        {
            "file": str(good),
            "ok": True,
            "states": 2,
            "feeds": 2,
            "decisions": 0,
            "summary": f"{good}: ok (2 states, 2 feeds, 0 decisions)",
        },
    ]
    assert main(["check", "--format", "json", str(good)]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def test_check_format_json_lists_a_file_refused_for_its_missing_registry(tmp_path, capsys, monkeypatch):
    """Loaded but refused (--require-registry and no registry declared): not ok, with its counts."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "door.yaml"
    path.write_text((ROOT / "machines" / "turnstile.yaml").read_text().replace("registry: turnstile", "registry: door"))
    assert main(["check", "--format", "json", "--require-registry", str(path)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [(f["file"], f["ok"], f["errors"], f["states"]) for f in report["files"]] == [(str(path), False, 1, 2)]
    assert [p["severity"] for p in report["problems"]] == ["error"]


def test_check_format_github_annotations(tmp_path, capsys):
    bad = _broken(tmp_path)
    assert main(["check", "--format", "github", str(bad)]) == 1
    annotation = capsys.readouterr().out.splitlines()[0]
    # Properties escape ',' and ':' so a comma in a file name cannot end the file= property.
    assert annotation == (
        f"::error file={str(bad).replace(',', '%2C')},line={_line_of(bad, 'to: unlockd')},col=15,"
        "title=loopfsm check events.coin.from.locked[0].to::"
        "unknown state 'unlockd'; did you mean 'unlocked'?"
    )


def test_check_format_is_checked(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["check", "--format", "xml"])
    assert exc.value.code == 2
