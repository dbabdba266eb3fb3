"""``loopfsm run engine_brain --script FILE``: drive the brain with a scripted model and canned tools.

A newcomer can watch the machine work without writing a driver: every row of
the printed trace is one step or feed, with the state before and after and, for
decisions, the name of the rule that answered.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterator

from jsonschema import Draft202012Validator

from . import schemas
from .scriptfile import read_script, wrong_script_hint
from loopfsm.core.errors import LoopFsmError, ScriptError

SCRIPT_SCHEMA = schemas.ENGINE_BRAIN
_VALIDATOR = Draft202012Validator(SCRIPT_SCHEMA)


def _show_state(m: Any) -> str:
    name, data = m.state, m.state_data
    if not data:
        return str(name)
    inner = ", ".join(
        f"{k}={getattr(v, 'value', None) or (type(v).__name__ if k == 'outcome' else v)}" for k, v in data.items()
    )
    return f"{name}({inner})"


def _show_step(s: Any) -> str:
    kind = type(s).__name__
    if kind == "CallLLM":
        return f"CallLLM({s.turn})"
    if kind == "CallTools":
        names = ", ".join(p.call.name + ("*" if p.pre_answered else "") for p in s.calls)
        return f"CallTools({s.turn}: {names})"
    if kind == "Compact":
        return f"Compact({s.reason.value})"
    return f"Done({type(s.outcome).__name__})"


def drive(script: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """Run the brain through ``script``; yield (state before, what happened, state after) per row."""
    from loopfsm.machines.engine_brain import (
        CallLLM,
        CallTools,
        Compact,
        Done,
        LoopMachine,
        MachinePolicy,
        Message,
        ToolCall,
    )

    errors = sorted(_VALIDATOR.iter_errors(script), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        hint = wrong_script_hint(script)
        raise ScriptError(f"script {'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}{hint}")
    given = script.get("policy", {})
    known = [f.name for f in dataclasses.fields(MachinePolicy)]
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ScriptError(
            f"script policy: unknown key '{_short(unknown[0])}' (the brain's policy has: {', '.join(known)})"
        )
    policy = MachinePolicy(**given)
    tools = script.get("tools", [])
    replies = list(script["model"])
    compactions = list(script.get("compactions", []))
    outputs = script.get("tool_outputs", {})
    m = LoopMachine()

    def row(what: str, action: Callable[[], Any]) -> Iterator[tuple[str, str, str]]:
        before = _show_state(m)
        action()
        yield before, what, _show_state(m)

    yield from row(f"accept_input({script['input']!r})", lambda: m.accept_input(script["input"]))
    if "context_tokens" in script:
        yield from row(
            f"set_context_tokens({script['context_tokens']})", lambda: m.set_context_tokens(script["context_tokens"])
        )
    while True:
        rule, s = m.explain("next_step", policy=policy)
        yield from row(f"next_step -> {_show_step(s)} [{rule}]; begin", lambda: m.begin(s))
        if isinstance(s, Done):
            return
        if isinstance(s, CallLLM):
            if not replies:
                raise ScriptError(f"the script has no model reply left for turn {s.turn}")
            r = replies.pop(0)
            number = len(script["model"]) - len(replies)
            try:  # a reply the brain's Message cannot hold is the script's mistake: say which reply
                calls = [ToolCall(c["id"], c["name"], c.get("arguments", {})) for c in r.get("tool_calls", [])]
                msg = Message.assistant(r.get("text", ""), calls)
            except LoopFsmError as err:
                raise ScriptError(f"model reply {number}: {err}") from None
            what = (
                f"model_response({len(calls)} tool call(s){': ' if calls else ''}"
                f"{', '.join(c.name for c in calls)}, {r['context_tokens']} tokens)"
            )
            yield from row(what, lambda: m.model_response(msg, r["context_tokens"], tools))
            if script.get("cancel_after_turn") == m.turns_taken() and not m.is_terminal():
                yield from row("cancel()", m.cancel)
        elif isinstance(s, CallTools):
            results = [
                p.answer or Message.tool_result(p.call.id, outputs.get(p.call.name, f"ran {p.call.name}"))
                for p in s.calls
            ]
            pre = sum(p.pre_answered for p in s.calls)
            yield from row(
                f"tool_results({len(results)} result(s), {pre} pre-answered)", lambda: m.tool_results(results)
            )
        elif isinstance(s, Compact):
            before = m.data.context_tokens
            if compactions:
                c = compactions.pop(0)
                summary = [Message.user(c.get("summary", "summary of the conversation so far"))]
                yield from row(
                    f"compaction_result(before={before}, after={c['after']})",
                    lambda: m.compaction_result(summary, before, c["after"]),
                )
            else:
                yield from row(
                    f"compaction_noop(before={before}, after={before})", lambda: m.compaction_noop(before, before)
                )
        if m.is_terminal():
            rule, s = m.explain("next_step", policy=policy)
            yield _show_state(m), f"next_step -> {_show_step(s)} [{rule}]", _show_state(m)
            return


def _short(value: object, limit: int = 40) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "..."


def run_brain_script(path: Path) -> int:
    """``loopfsm run engine_brain --script FILE``: 0, or 1 after saying what is wrong with the file."""
    script, code = read_script(path)
    if code:
        return code
    rows = []
    try:
        for r in drive(script if isinstance(script, dict) else {"": script}):
            rows.append(r)
    except (ScriptError, LoopFsmError) as err:
        if rows:  # the steps that ran before the script went wrong; a script refused whole prints no table
            _print(rows)
        print(f"loopfsm run: {path}: {err}", file=sys.stderr)
        return 1
    _print(rows)
    return 0


def _print(rows: list[tuple[str, str, str]]) -> None:
    w1 = max([len("state")] + [len(r[0]) for r in rows])
    w2 = max([len("step / feed")] + [len(r[1]) for r in rows])
    print(f"{'#':>2}  {'state':<{w1}}  {'step / feed':<{w2}}  new state")
    for i, (a, b, c) in enumerate(rows, 1):
        print(f"{i:>2}  {a:<{w1}}  {b:<{w2}}  {c}")
    print("[rule] names the next_step rule that answered; * marks a tool call the brain pre-answered")
