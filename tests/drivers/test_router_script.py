"""``loopfsm run router_run --script``: the example's trace, pinned row by row, and bad scripts."""

from __future__ import annotations

from pathlib import Path

from loopfsm.cli.main import main

ROOT = Path(__file__).resolve().parents[2]

# (phase, request, admission, new phase, response) per step of examples/router_run.yaml
EXPECTED = [
    ("Idle", "execute q1", "admitted [new_prompt]", "AwaitingTool", "awaiting_tool"),
    ("AwaitingTool", "tool_results r2", "admitted [tool_answer]", "AwaitingTool", "(still processing"),
    ("AwaitingTool", "tool_results r2", "refused retry in 900ms [wait_your_turn]", "AwaitingTool", "error busy"),
    ("AwaitingTool", "tool_results r2", "admitted (took over) [tool_answer]", "AwaitingApproval", "awaiting_approval"),
    ("AwaitingApproval", "tool_results r2", "replayed [replay]", "AwaitingApproval", "awaiting_approval"),
    ("AwaitingApproval", "approval_decisions q6", "admitted [approval_answer]", "AwaitingApproval", "(still"),
    ("AwaitingApproval", "break q7", "admitted (preempted) [escape_preempts]", "Idle", "idle []"),
    ("Idle", "execute q8", "admitted [new_prompt]", "AwaitingDecrypt", "awaiting_decrypt"),
    (
        "AwaitingDecrypt",
        "decrypted q9",
        "admitted [decrypt_answer]",
        "AwaitingEncrypt",
        "completed ['sealed', 'break']",
    ),
    ("AwaitingEncrypt", "inject q10", "refused [no_inject_while_sealing]", "AwaitingEncrypt", "error not_allowed"),
    ("AwaitingEncrypt", "sealed q11", "admitted [seal_answer]", "Idle", "completed []"),
    ("Idle", "execute q12", "admitted [new_prompt]", "Idle", "(still processing"),
    ("Idle", "restart router-1", "recovered 1 lock(s)", "Idle", "-"),
    ("Idle", "execute q12", "admitted [new_prompt]", "Idle", "completed []"),
]


def test_example_trace(capsys):
    assert main(["run", "router_run", "--script", str(ROOT / "examples" / "router_run.yaml")]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out[1:] if line[:1].isdigit()]
    assert len(rows) == len(EXPECTED)
    for line, (phase, req, adm, new, resp) in zip(rows, EXPECTED, strict=True):
        cols = [c.strip() for c in line.split("  ") if c.strip()]
        assert cols[2] == phase and cols[3].startswith(req) and cols[4] == adm and cols[5] == new, line
        assert cols[7].startswith(resp), line
    assert "    events: lock.acquired, run.started, lock.released  mediated: shell:ask, rm_rf:deny" in out
    assert "    events: lock.preempted, run.broken, lock.released" in out


def test_bad_scripts_are_reported_without_a_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps:\n  - {request: teleport}\n")
    assert main(["run", "router_run", "--script", str(bad)]) == 1
    assert "steps.0.request" in capsys.readouterr().err
    bad.write_text("steps:\n  - {request: execute, outcome: tools, calls: [{tool: rm, permission: deny}]}\n")
    assert main(["run", "router_run", "--script", str(bad)]) == 1
    assert "every tool call was denied" in capsys.readouterr().err
    assert main(["run", "router_run", "--script", str(tmp_path / "missing.yaml")]) == 2


def test_a_script_number_past_64_bits_is_refused_before_it_reaches_the_store(tmp_path, capsys):
    scripts = [
        "session: s\nlease_ms: 99999999999999999999999999\nsteps: [{request: execute, at: 0}]\n",
        "session: s\nsteps: [{request: execute, at: 99999999999999999999}]\n",
    ]
    for text in scripts:
        script = tmp_path / "big.yaml"
        script.write_text(text)
        assert main(["run", "router_run", "--script", str(script)]) == 1
        err = capsys.readouterr().err
        assert "is greater than the maximum of 9223372036854775807" in err and "Traceback" not in err


def test_a_script_is_named_a_script_in_its_refusals_and_a_refused_one_prints_no_table(tmp_path, capsys):
    cases = {
        "": "the script is empty",
        "x: &a [*a]\n": "not a usable script: alias 'a' refers to a collection that contains it",
        "replies: 5\n": "'input' is a required property",
    }
    for text, words in cases.items():
        script = tmp_path / "s.yaml"
        script.write_text(text)
        assert main(["run", "engine_brain", "--script", str(script)]) == 1
        out = capsys.readouterr()
        assert words in out.err and "machine" not in out.err, out.err
        assert out.out == ""  # no legend above a script refused whole
