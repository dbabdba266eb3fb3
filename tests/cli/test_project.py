"""Users' own machines on the command line: [tool.loopfsm], --registry, and checking without a registry."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.docs_pages import page
from loopfsm.cli.main import main
from loopfsm.cli.project import find_project
from loopfsm.core.registries import Registries

DOOR_YAML = """\
machine: door
description: A door that opens for the right code.
registry: door
policy:
  code: {type: string, default: "1234", description: The code that opens it.}
data:
  wrong_tries: {type: integer, default: 0, description: Wrong codes since the last opening.}
states:
  locked: {initial: true, description: Locked.}
  unlocked: {description: Open for one person.}
events:
  enter_code:
    description: Someone types a code.
    args:
      typed: {type: string, description: What was typed.}
    from:
      locked:
        - guard: {name: code_ok, params: {code: {policy: code}}}
          to: unlocked
        - stay: true
          actions: [count_wrong]
  close:
    description: The door swings shut.
    from:
      unlocked:
        - to: locked
"""

DOOR_PY = """\
from loopfsm import Registry

REG = Registry("door")


@REG.guard
def code_ok(m, ctx, *, code: str) -> bool:
    return ctx.args["typed"] == code


@REG.action
def count_wrong(m, ctx) -> None:
    m.data.wrong_tries += 1
"""


@pytest.fixture
def door(tmp_path, monkeypatch):
    """An empty-ish user project: machines/door.yaml and door.py, nothing declared yet."""
    saved_path, saved_modules = list(sys.path), set(sys.modules)
    (tmp_path / "machines").mkdir()
    (tmp_path / "machines" / "door.yaml").write_text(DOOR_YAML)
    (tmp_path / "door.py").write_text(DOOR_PY)
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.path[:] = saved_path
    for name in set(sys.modules) - saved_modules:
        # Forget only the project's own modules: a library imported for the first time here (YAML
        # and its C extension) must stay, or its next import makes classes the extension never sees.
        if str(getattr(sys.modules[name], "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


def declare(root: Path, body: str) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'door'\n\n" + textwrap.dedent(body))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_registry_name_close_to_a_known_one_is_a_warning_with_the_likely_name(door, capsys):
    (door / "machines" / "door.yaml").write_text(DOOR_YAML.replace("registry: door", "registry: turnstlie"))
    code, out, err = run(capsys, "check")
    assert code == 0 and "machines/door.yaml: ok" in out
    assert "registry: [warning] registry 'turnstlie' is not declared (did you mean 'turnstile'? or add" in err
    code, _, err = run(capsys, "check", "--require-registry")
    assert code == 1 and "did you mean 'turnstile'?" in err


def test_render_and_build_need_no_registry(door, capsys):
    code, out, err = run(capsys, "render", "--format", "dot,mermaid,md")
    assert code == 0, err
    assert "diagrams/door.dot" in out
    assert 'code_ok(code="1234" (policy.code))' in (door / "diagrams" / "door.md").read_text()
    code, out, err = run(capsys, "build")
    assert code == 0, err
    assert "not declared" in err and "not checked: guards code_ok; actions count_wrong" in err
    assert run(capsys, "build", "--check")[0] == 0


def test_check_without_registry_says_what_it_could_not_check(door, capsys):
    code, out, err = run(capsys, "check")
    assert code == 0
    assert "machines/door.yaml: ok" in out
    assert (
        "machines/door.yaml:3:11: registry: [note] registry 'door' is not declared "
        '(add door = "MODULE:ATTR" to [tool.loopfsm] registries in pyproject.toml, '
        "or pass --registry door=MODULE:ATTR); not checked: guards code_ok; actions count_wrong"
    ) in err
    pasted = next(
        line
        for line in page("docs/cli.md").splitlines()
        if line.startswith("machines/door.yaml:3:11: registry: [note]")
    )
    assert pasted in err.splitlines()
    code, out, err = run(capsys, "check", "--require-registry")
    assert code == 1 and "[note]" not in err and "registry 'door' is not declared" in err
    assert "ok" not in out


def test_structural_problems_are_found_without_the_registry(door, capsys):
    yaml_file = door / "machines" / "door.yaml"
    yaml_file.write_text(DOOR_YAML.replace("        - to: locked\n", "        - to: lockd\n"))
    for command in ("check", "render", "build"):
        code, _, err = run(capsys, command)
        assert code == 1, command
        assert "unknown state 'lockd'; did you mean 'locked'?" in err


def test_pyproject_declares_registry_and_folders_found_from_a_subfolder(door, capsys, monkeypatch):
    declare(
        door,
        """\
        [tool.loopfsm]
        machines = "machines"
        diagrams = "docs/diagrams"
        registries = {door = "door:REG"}
        """,
    )
    (door / "src").mkdir()
    monkeypatch.chdir(door / "src")
    code, out, err = run(capsys, "check", "--require-registry")
    assert code == 0, err
    assert out.startswith("../machines/door.yaml: ok") and err == ""
    assert run(capsys, "build")[0] == 0
    assert (door / "docs" / "diagrams" / "door.svg").exists() and not (door / "diagrams").exists()
    code, out, _ = run(capsys, "build", "--check")
    assert code == 0 and out.strip() == "../docs/diagrams: 4 files up to date"


def test_the_declared_registry_is_really_checked_against(door, capsys):
    declare(door, '[tool.loopfsm]\nregistries = {door = "door:REG"}\n')
    (door / "machines" / "door.yaml").write_text(DOOR_YAML.replace("params: {code:", "params: {cod:"))
    code, _, err = run(capsys, "check")
    assert code == 1
    assert "guard 'code_ok' has no parameter 'cod'; did you mean 'code'?" in err


def test_command_line_registry_overrides_and_repeats(door, capsys):
    declare(door, '[tool.loopfsm]\nregistries = {door = "nowhere:REG"}\n')
    code, _, err = run(capsys, "check")
    assert code == 1
    assert "registry 'door' (nowhere:REG, from pyproject.toml [tool.loopfsm]): no module named 'nowhere'" in err
    (door / "other.py").write_text("from loopfsm import Registry\nOTHER = Registry('other')\n")
    code, _, err = run(
        capsys, "check", "--registry", "other=other:OTHER", "--registry", "door=door:REG", "--require-registry"
    )
    assert code == 0, err


def test_a_machine_file_cannot_import_a_module_nobody_declared(door, capsys):
    (door / "evil.py").write_text("import pathlib\npathlib.Path('imported').write_text('yes')\n")
    (door / "machines" / "door.yaml").write_text(DOOR_YAML.replace("registry: door", "registry: evil"))
    assert "evil" not in Registries().names()
    for command in (["check"], ["render", "--format", "dot"], ["build"]):
        code, _, err = run(capsys, *command)
        assert code == 0, err
    assert "registry 'evil' is not declared" in run(capsys, "check")[2]
    assert not (door / "imported").exists()


def test_broken_declared_registry_fails_check_but_not_render(door, capsys):
    (door / "door.py").write_text("raise RuntimeError('no database here')\n")
    declare(door, '[tool.loopfsm]\nregistries = {door = "door:REG"}\n')
    code, _, err = run(capsys, "check")
    assert code == 1
    assert "importing 'door' failed: RuntimeError: no database here" in err and "Traceback" not in err
    code, _, err = run(capsys, "render", "--format", "dot")
    assert code == 0 and err == ""
    code, _, err = run(capsys, "build")
    assert code == 0 and "no database here; checked without it; not checked: guards code_ok" in err
    (door / "door.py").write_text("REG = 42\n")
    assert "(door:REG, from pyproject.toml [tool.loopfsm]) is a int, not a loopfsm Registry" in run(capsys, "check")[2]


@pytest.mark.parametrize(
    "config, message",
    [
        ('[tool.loopfsm]\nmachine = "m"\n', "[tool.loopfsm] has no setting 'machine'; did you mean 'machines'?"),
        ("[tool.loopfsm\n", "pyproject.toml: not valid TOML: Expected ']'"),
        (
            '[tool.loopfsm]\nregistries = {door = "door"}\n',
            "registries.door: expected 'module:attribute' (e.g. 'door:REGISTRY'), got 'door'",
        ),
        (
            '[tool.loopfsm]\nregistries = {door = "door:REG\\n"}\n',
            "registries.door: expected 'module:attribute' (e.g. 'door:REGISTRY'), got 'door:REG\\n'",
        ),
        ('[tool.loopfsm]\nregistries = {Door = "door:REG"}\n', "registry name 'Door' is not a snake_case identifier"),
        (
            '[tool.loopfsm]\nregistries = {"door\\n" = "door:REG"}\n',
            "registry name 'door\\n' is not a snake_case identifier",
        ),
        ('[tool.loopfsm]\nregistries = ["door:REG"]\n', "registries must be a table"),
        ("[tool.loopfsm]\ndiagrams = 3\n", "diagrams must be a folder name (a string), got 3"),
        ('[tool.loopfsm]\ndiagrams = "/"\n', "diagrams must be a folder inside the project"),
        ('[tool.loopfsm]\ndiagrams = "../elsewhere"\n', "diagrams must be a folder inside the project"),
        ('[tool.loopfsm]\nmachines = "../other/machines"\n', "machines must be a folder inside the project"),
        ("tool = {loopfsm = 3}\n", "[tool.loopfsm] must be a table"),
        (
            '[tool.loopfsm]\nengine = "fast"\n',
            "[tool.loopfsm]: engine must be one of transitions, interpreter, got 'fast'",
        ),
    ],
)
def test_bad_settings_are_usage_errors(door, capsys, config, message):
    (door / "pyproject.toml").write_text(config)
    code, _, err = run(capsys, "check")
    assert code == 2
    assert message in err and err.startswith("loopfsm check: pyproject.toml")


def test_a_diagrams_folder_that_is_a_link_out_of_the_project_is_refused(door, tmp_path_factory, capsys):
    outside = tmp_path_factory.mktemp("outside")
    (door / "dlink").symlink_to(outside, target_is_directory=True)
    (door / "pyproject.toml").write_text('[tool.loopfsm]\ndiagrams = "dlink"\n')
    code, _, err = run(capsys, "build")
    assert code == 2 and "diagrams must be a folder inside the project" in err
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize(
    "option, message",
    [
        ("door", "expected NAME=MODULE:ATTR"),
        ("door=door", "expected 'module:attribute'"),
        ("door=door:REG;rm", "expected 'module:attribute'"),
        ("Door=door:REG", "is not a snake_case identifier"),
    ],
)
def test_bad_registry_options_are_usage_errors(door, capsys, option, message):
    code, _, err = run(capsys, "check", "--registry", option)
    assert code == 2 and message in err


def test_nearest_pyproject_with_the_table_wins(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.loopfsm]\nmachines = "tables"\n')
    inner = tmp_path / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text("[project]\nname = 'pkg'\n")  # no table: keep walking up
    project = find_project(inner)
    assert project.root == tmp_path.resolve() and project.machines == tmp_path.resolve() / "tables"
    assert project.diagrams == tmp_path.resolve() / "diagrams"
    bare = find_project(Path("/"))
    assert bare.config is None and bare.declared == ()


def test_a_registry_module_that_compiles_a_bad_machine_on_import_is_reported(door, capsys):
    (door / "door.py").write_text(
        DOOR_PY + "\nfrom loopfsm import compile_file\nDOOR = compile_file('machines/broken.yaml', REG)\n"
    )
    (door / "machines" / "broken.yaml").write_text("machine: broken\ndescription: d\nstates: {}\n")
    declare(door, '[tool.loopfsm]\nregistries = {door = "door:REG"}\n')
    code, _, err = run(capsys, "check", "machines/door.yaml")
    assert code == 1 and "states: {} should be non-empty" in err and "Traceback" not in err
    code, _, err = run(capsys, "build", "--machines", "machines", "-o", "out")
    assert code == 1  # broken.yaml itself is in machines/: build refuses it
    (door / "other").mkdir()
    (door / "machines" / "door.yaml").rename(door / "other" / "door.yaml")
    code, _, err = run(capsys, "build", "--machines", "other", "-o", "out")
    assert code == 0 and "checked without it" in err


def test_validate_reads_the_project_machines_folder(door, capsys, monkeypatch):
    declare(door, '[tool.loopfsm]\nmachines = "tables"\n')
    (door / "machines").rename(door / "tables")
    monkeypatch.chdir(door / "tables")
    code, out, _ = run(capsys, "validate")
    assert code == 0 and out == "door.yaml: valid\n"


def test_an_oversized_or_binary_pyproject_is_refused_quickly(door, capsys):
    (door / "pyproject.toml").write_text("[tool.loopfsm]\n" + "# padding\n" * 200_000)
    code, _, err = run(capsys, "check")
    assert code == 2 and "pyproject.toml: larger than 1024 KiB; not read" in err
    (door / "pyproject.toml").write_bytes(b"[tool.loopfsm]\nmachines = '\xff'\n")
    code, _, err = run(capsys, "check")
    assert code == 2 and "pyproject.toml: not UTF-8 text" in err


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"[tool.loopfsm\n", "pyproject.toml: not valid TOML: Expected ']'"),
        (b"\xff\xfe[tool.loopfsm]\n", "pyproject.toml: not UTF-8 text"),
        (b"tool = {loopfsm = 3}\n", "pyproject.toml: [tool.loopfsm] must be a table"),
    ],
)
def test_the_library_refuses_a_broken_project_file_as_the_command_line_does(tmp_path, raw, message):
    """The process's default engine is read from the same file: an instance must not quietly run on the
    default the command line would refuse to read."""
    (tmp_path / "pyproject.toml").write_bytes(raw)
    code = "from loopfsm.machines import Turnstile\nTurnstile().coin()"
    env = {k: v for k, v in os.environ.items() if k != "LOOPFSM_ENGINE"}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 1 and f"loopfsm.core.errors.ConfigError: {message}" in done.stderr
