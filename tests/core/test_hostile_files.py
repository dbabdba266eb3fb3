"""Hostile or careless machine files: refused at the line that crossed a limit, in bounded time and memory.

No test here is timed.  The budgets are what bound time and memory, so the tests
assert that each hostile shape is refused by its budget (and where), and one
subprocess measures the peak memory of loading the whole hostile corpus.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from loopfsm import Registry, SpecError, compile_file, compile_spec, parse
from loopfsm.cli.main import main
from loopfsm.core.errors import LoopFsmError
from loopfsm.core.source import MAX_BYTES, MAX_DEPTH, MAX_VALUES, SourceProblems, read_file, read_source

from tests.support.specs import make_registry, marked_line

GOOD = """\
machine: demo
description: a small machine for tests
data:
  count: {type: integer, default: 0}
  done_flag: {type: boolean, default: false}
states:
  idle: {initial: true, description: waiting}
  done: {terminal: true, description: finished}
events:
  go:
    description: start
    from:
      idle:
        - to: done
"""


def refusal(text: str) -> SourceProblems:
    with pytest.raises(SourceProblems) as info:
        read_source(text, "m.yaml")
    assert len(info.value.problems) == 1, info.value.problems
    return info.value


def one_problem(text: str):
    with pytest.raises(SpecError) as info:
        parse(text, "m.yaml", make_registry())
    errors = [p for p in info.value.problems if p.severity == "error"]
    assert len(errors) == 1, "\n".join(map(str, errors))
    return errors[0]


def laughs(levels: int) -> str:
    out = GOOD + "x_bomb:\n  a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
    prev = "a"
    for c in "bcdefghijklmnop"[:levels]:
        out += f"  {c}: &{c} [" + ", ".join([f"*{prev}"] * 9) + "]\n"
        prev = c
    return out


# -- budgets -------------------------------------------------------------------


def _values(text: str) -> int:
    return sum(isinstance(e, (yaml.ScalarEvent, yaml.CollectionStartEvent)) for e in yaml.parse(text))


def test_billion_laughs_is_refused_at_the_alias_that_crossed_the_budget():
    text = laughs(8)
    problem = refusal(text).problems[0]
    assert f"aliases expand the file to more than {MAX_VALUES:,} values" in problem.message
    # Each level is a key, a list and nine aliases of the level before: find the first that crosses.
    total, size, crossing = _values(laughs(0)), 10, None
    for level in "bcdefghi":
        size = 1 + 9 * size
        total += 1 + size
        if total > MAX_VALUES:
            crossing = level
            break
    assert crossing is not None
    assert text.splitlines()[problem.line - 1].startswith(f"  {crossing}: &{crossing}")


def test_aliases_within_budget_still_load():
    doc = read_source(laughs(2)).doc
    assert len(doc["x_bomb"]["c"]) == 9 and doc["x_bomb"]["c"][0][0] == [1, 2, 3, 4, 5, 6, 7, 8, 9]


@pytest.mark.parametrize("text", ["x: &r [*r]\n", "x: &r {a: *r}\n", "x: &r [1, [2, [*r]]]\n"])
def test_recursive_alias_is_refused(text):
    text = GOOD + text
    problem = refusal(text).problems[0]
    assert "recursive" in problem.message and problem.line == len(text.splitlines())


@pytest.mark.parametrize("open_, close", [("[", "]"), ("{a: ", "}")])
def test_deep_nesting_is_refused_without_recursion(open_, close):
    text = GOOD + "x: " + open_ * 5000 + close * 5000 + "\n"
    problem = refusal(text).problems[0]
    assert f"deeper than {MAX_DEPTH} levels" in problem.message and problem.line == len(text.splitlines())


def test_an_alias_cannot_nest_past_the_depth_limit():
    deep = "[" * (MAX_DEPTH - 5) + "]" * (MAX_DEPTH - 5)
    text = GOOD + f"a: &d {deep}\nb: " + "[" * 10 + "*d" + "]" * 10 + "\n"
    problem = refusal(text).problems[0]
    assert "nests values deeper" in problem.message and problem.line == len(text.splitlines())


@pytest.mark.slow
def test_value_budget_is_refused_at_its_line():
    """A dense list within the size limit: refused where its values cross the budget."""
    text = GOOD + "x:\n" + "- 0\n" * (MAX_VALUES + 10)
    assert len(text.encode()) < MAX_BYTES
    problem = refusal(text).problems[0]
    assert f"the file holds more than {MAX_VALUES:,} values" in problem.message
    before = _values(GOOD + "x: []\n") - 1  # every value above the list's first item
    assert problem.line == len(GOOD.splitlines()) + 1 + (MAX_VALUES - before)


def test_file_size_limit_at_its_line(tmp_path):
    line = "# " + "x" * 98 + "\n"
    text = GOOD + line * (MAX_BYTES // len(line) + 5)
    path = tmp_path / "big.yaml"
    path.write_text(text)
    problem = refusal(text).problems[0]
    assert "larger than 1,024 KiB" in problem.message
    assert problem.line == text.count("\n", 0, MAX_BYTES) + 1
    with pytest.raises(SourceProblems) as info:
        read_file(path)
    assert info.value.problems[0].line == problem.line


def test_a_character_cut_by_the_size_limit_is_still_a_size_refusal(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_bytes(b"a: " + b"x" * (MAX_BYTES - 4) + "é".encode() * 10)
    with pytest.raises(SourceProblems) as info:
        read_file(path)
    assert "larger than" in info.value.problems[0].message


@pytest.mark.parametrize("where", ["/dev/zero", "/dev/null", "fifo", "dir"])
def test_non_regular_files_are_refused_before_reading(tmp_path, where):
    if where == "fifo":
        where = str(tmp_path / "pipe.yaml")
        os.mkfifo(where)  # nobody writes: opening it must not wait
    elif where == "dir":
        where = str(tmp_path)
    elif not os.path.exists(where):
        pytest.skip(f"{where} missing")
    with pytest.raises(SourceProblems) as info:
        read_file(where)
    assert "regular file" in info.value.problems[0].message or "cannot read" in info.value.problems[0].message


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\ufffe"])
def test_control_characters_are_reported_at_their_own_line(char):
    text = GOOD + "# fine\nextra: a" + char + "b   # <-\n"
    problem = refusal(text).problems[0]
    assert (problem.line, problem.column) == (marked_line(text), len("extra: a") + 1)
    assert f"U+{ord(char):04X}" in problem.message


def test_undecodable_bytes_are_reported_at_their_line(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_bytes(GOOD.encode() + b"x: \xff\n")
    with pytest.raises(SourceProblems) as info:
        read_file(path)
    assert info.value.problems[0].line == len(GOOD.splitlines()) + 1
    assert "not UTF-8" in info.value.problems[0].message


def test_boolean_top_level_key_is_reported_at_its_line():
    text = GOOD + "false: 1   # <-\n"
    problem = one_problem(text)
    assert problem.line == marked_line(text) and "boolean" in problem.message


def test_mixed_boolean_and_text_unknown_keys_do_not_crash():
    text = GOOD + "false: 1\nzzz: 2\ntrue: 3\n"
    with pytest.raises(SpecError) as info:
        parse(text, "m.yaml", make_registry())
    assert info.value.problems


def test_duplicate_anchor_is_refused():
    text = GOOD + "a: &x 1\nb: &x 2   # <-\n"
    problem = refusal(text).problems[0]
    assert "duplicate anchor" in problem.message and problem.line == marked_line(text)


@pytest.mark.parametrize(
    "digits",
    ["9" * 5000, "!!int " + "1" * 101, "0x" + "f" * 4999, "-" + "1_0" * 2000],
    ids=["decimal", "tagged", "hex", "underscored"],
)
def test_an_integer_too_long_for_python_to_read_is_refused_at_its_line(digits):
    """Python will not read an integer of more than 4,300 digits: a located refusal, not a traceback."""
    text = GOOD.replace("default: 0}", "default: 0}\n  big: {type: integer, default: " + digits + "}   # <-", 1)
    problem = refusal(text).problems[0]
    assert "an integer written with" in problem.message and problem.line == marked_line(text)


def test_second_document_is_refused():
    problem = refusal(GOOD + "---\nmachine: other\n").problems[0]
    assert "single document" in problem.message


# -- a large machine is not a hostile one ----------------------------------------------


def chain_machine(n: int) -> str:
    """``n`` states in a chain, each with a description, one ``next`` feed; the last state is terminal."""
    lines = [f"machine: chain_{n}", "description: A generated chain.", "states:"]
    lines.append("  s0: {initial: true, description: first}")
    lines += [f"  s{i}: {{description: link {i}}}" for i in range(1, n - 1)]
    lines += [f"  s{n - 1}: {{terminal: true, description: last}}", "events:", "  next:", "    description: advance"]
    lines += ["    from:"] + [f"      s{i}: [{{to: s{i + 1}, description: step {i}}}]" for i in range(n - 1)]
    return "\n".join(lines) + "\n"


@pytest.mark.slow
def test_a_5000_state_machine_loads_checks_compiles_and_renders_by_default(tmp_path, capsys, monkeypatch):
    """Within the default budgets: about 410 KiB and 55,000 values (SVG left out: Graphviz takes
    about 20 seconds to lay out 5,000 states, and it is Graphviz's time, not ours)."""
    text = chain_machine(5000)
    assert 50_000 < _values(text) < MAX_VALUES and 400 << 10 < len(text.encode()) < MAX_BYTES
    path = tmp_path / "chain.yaml"
    path.write_text(text)
    monkeypatch.setenv("LOOPFSM_CACHE_DIR", "")  # read and checked from the text, not a cached result
    assert main(["check", str(path)]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out == f"{path}: ok (5000 states, 1 feed, 0 decisions)\n"
    out = tmp_path / "out"
    assert main(["render", str(path), "-o", str(out), "--format", "dot,mermaid,md"]) == 0
    assert "s4999" in (out / "chain_5000.dot").read_text() and "s4999" in (out / "chain_5000.mmd").read_text()
    assert "| `s4998` | → `s4999` |" in (out / "chain_5000.md").read_text()
    registry = Registry("chain")
    machine = compile_spec(parse(text, str(path), registry), registry)
    instance = machine.new()
    for _ in range(4999):
        instance.feed("next")
    assert instance.state == "s4999" and instance.is_terminal()


# -- errors inside anchors: once, at the anchor -----------------------------------

ANCHORED = (
    GOOD.replace(
        "events:\n",
        """\
events:
  a0: &common
    description: shared
    from:
      idle:
        - to: nowhere   # <-
""",
    )
    + "".join(f"  a{i}: *common\n" for i in range(1, 6))
    + "".join(f"  m{i}: {{<<: *common, description: merged {i}}}\n" for i in range(5))
)


def test_error_in_anchor_is_reported_once_at_the_anchor():
    problem = one_problem(ANCHORED)
    assert problem.line == marked_line(ANCHORED)
    assert problem.path == "events.a0.from.idle[0].to"
    assert "unknown state 'nowhere'" in problem.message


def test_schema_error_in_anchor_is_reported_once():
    text = ANCHORED.replace("to: nowhere", "to: done\n          unknown_key: 1")
    with pytest.raises(SpecError) as info:
        parse(text, "m.yaml", make_registry())
    assert [p.message for p in info.value.problems].count(info.value.problems[0].message) == 1
    assert len(info.value.problems) == 1 and info.value.problems[0].path.startswith("events.a0.")


def test_a_merged_key_of_its_own_is_located_where_written():
    text = (
        GOOD.replace("events:\n", "events:\n  base: &b {description: d, from: {idle: [{to: done}]}}\n")
        + "  other: {<<: *b, from: {idle: [{to: gone}]}}   # <-\n"
    )
    problem = one_problem(text)
    assert problem.line == marked_line(text) and problem.path == "events.other.from.idle[0].to"


# -- values are never echoed whole ------------------------------------------------


def test_a_key_file_is_not_echoed(tmp_path):
    secret = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW" * 3
    key = tmp_path / "id_key"
    key.write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{secret}\n-----END OPENSSH PRIVATE KEY-----\n")
    link = tmp_path / "m.yaml"
    link.symlink_to(key)
    with pytest.raises(SpecError) as info:
        compile_file(link, make_registry())
    text = str(info.value)
    assert secret[:30] not in text and "characters" in text


# -- memory: the hostile corpus in a subprocess -------------------------------------

HOSTILE = {
    "laughs": laughs(12),
    "recursive": GOOD + "x: &r [*r]\n",
    "deep": GOOD + "x: " + "[" * 100_000 + "]" * 100_000 + "\n",
    "long list": GOOD + "x: [" + "0," * 2_600_000 + "0]\n",
    "long block list": GOOD + "x:\n" + "- 0\n" * 1_300_000,
    "many keys": GOOD + "x:\n" + "".join(f" k{i}: 0\n" for i in range(400_000)),
    "one long string": GOOD + "x: " + "y" * (5 << 20) + "\n",
    "dense list at the size limit": GOOD + "x: [" + "0," * ((MAX_BYTES - len(GOOD)) // 2 - 8) + "0]\n",
    "dense block list": GOOD + "x:\n" + "- 0\n" * ((MAX_BYTES - len(GOOD)) // 4 - 4),
}


@pytest.mark.slow
def test_hostile_corpus_stays_within_memory(tmp_path):
    """Each input up to 5 MiB; the whole corpus loads in one process within 200 MB peak."""
    for i, (name, text) in enumerate(HOSTILE.items()):
        assert len(text.encode()) <= 5 << 20 or name == "one long string", name
        assert not name.startswith("dense") or len(text.encode()) <= MAX_BYTES, name
        (tmp_path / f"h{i}.yaml").write_text(text)
    script = textwrap.dedent(f"""
        import glob, json, resource
        from loopfsm import SpecError, load
        from loopfsm.machines.turnstile import REGISTRY
        out = {{}}
        for path in sorted(glob.glob({str(tmp_path)!r} + "/h*.yaml")):
            try:
                load(path, REGISTRY)
                out[path] = "loaded"
            except SpecError as err:
                out[path] = err.problems[0].message
        # VmHWM is this process image's own peak; ru_maxrss would also count the pages of the
        # (large) pytest process this one was forked from, which Linux carries across exec.
        try:
            status = open("/proc/self/status").read()
            out["maxrss_kb"] = int(status.split("VmHWM:")[1].split()[0])
        except (OSError, IndexError):
            out["maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps(out))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout)
    assert out.pop("maxrss_kb") < 200 * 1024
    assert all(v != "loaded" for v in out.values()), out


# -- fuzz: random anchors, aliases and nesting ------------------------------------


def _fragment(draw, depth: int, anchors: list[str], counter: list[int]) -> str:
    kind = draw(st.sampled_from(["scalar", "alias", "list", "map"] if depth < 6 else ["scalar", "alias"]))
    prefix = ""
    if kind in ("list", "map") and draw(st.booleans()):
        counter[0] += 1
        prefix = f"&n{counter[0]} "
        anchors.append(f"n{counter[0]}")  # visible inside too: recursive aliases get drawn
    if kind == "alias" and anchors:
        return "*" + draw(st.sampled_from(anchors))
    if kind in ("scalar", "alias"):
        return draw(st.sampled_from(["1", "x", "idle", "done", "true", "no", "null", "'a b'", "{}", "[]"]))
    n = draw(st.integers(0, 5))
    items = [_fragment(draw, depth + 1, anchors, counter) for _ in range(n)]
    if kind == "list":
        return prefix + "[" + ", ".join(items) + "]"
    return prefix + "{" + ", ".join(f"k{i}: {v}" for i, v in enumerate(items)) + "}"


@st.composite
def anchored_files(draw):
    anchors: list[str] = []
    counter = [0]
    extra = [
        f"{k}: {_fragment(draw, 0, anchors, counter)}"
        for k in draw(
            st.lists(
                st.sampled_from(["x", "y", "z", "data", "policy", "events", "states"]),
                min_size=1,
                max_size=4,
                unique=True,
            )
        )
    ]
    base = GOOD
    for line in extra:
        key = line.split(":")[0]
        if key + ":" in base:
            base = base.replace(key + ":", f"{key}_old:", 1)
    return base + "\n".join(extra) + "\n"


@settings(max_examples=int(os.environ.get("LOOPFSM_FUZZ", 60)), deadline=None)
@given(text=anchored_files())
def test_anchor_and_alias_fuzz(text):
    lines = len(text.splitlines())
    try:
        parse(text, "m.yaml", make_registry())
    except SpecError as err:
        assert err.problems and len(set(err.problems)) == len(err.problems)
        assert all(1 <= p.line <= lines + 1 and p.message for p in err.problems)
    except LoopFsmError as err:  # pragma: no cover - any other refusal must still be ours
        raise AssertionError(f"unexpected {type(err).__name__}: {err}") from None


@pytest.mark.parametrize("escape", ["\\x01", "\\0", "\\e", "\\x85\\x9f", "\\uFFFE"])
def test_a_control_character_written_as_an_escape_is_refused_where_written(escape):
    """A double-quoted escape must not smuggle in what the file may not hold: the SCXML export (XML 1.0)
    of a description holding U+0001 would not even parse."""
    text = GOOD.replace("description: a small machine for tests", f'description: "a small {escape} machine"  # <-')
    problem = refusal(text).problems[0]
    assert (problem.line, problem.column, problem.path) == (marked_line(text), len("description: ") + 1, "description")
    assert "U+" in problem.message and "remove it" in problem.message


def test_tabs_and_line_breaks_written_as_escapes_still_load():
    parse(
        GOOD.replace("description: a small machine for tests", 'description: "a\\tsmall\\nmachine\\r"'),
        "m.yaml",
        make_registry(),
    )
