"""``loopfsm run agent_loop --script FILE``: drive the agent loop from a YAML script and print its trace.

A script names the run and lists timed steps; each step is one feed (with its
arguments, ``now`` given by ``at``) or a ``resume`` question.  Tool arguments
are given as ``arguments`` and turned into their sha256 hash here, so the
machine, and the trace, only ever see the hash.  The printed trace is the
tracing hook's records, the same ones an OpenTelemetry sink would export.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from . import schemas
from .scriptfile import read_script, wrong_script_hint
from loopfsm.core.errors import FeedArgumentError, LoopFsmError, ScriptError, did_you_mean, shown
from loopfsm.core.tracing import TransitionRecord, attached

_HASHED = {"tool_proposed", "approval_required", "approval_decided"}

SCRIPT_SCHEMA = schemas.AGENT_LOOP
_VALIDATOR = Draft202012Validator(SCRIPT_SCHEMA)


@dataclass
class Progress:
    """The step being run (0 before the first), so an error the machine raises can be placed in the script."""

    step: int = 0


def drive(script: Any, progress: Progress | None = None) -> Iterator[tuple[int, int, TransitionRecord, str | None]]:
    """Run the script; yield (step number, time, record, resume answer or None) per trace record."""
    from loopfsm.machines.agent_loop import AgentLoop, arguments_hash

    errors = sorted(_VALIDATOR.iter_errors(script), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        hint = wrong_script_hint(script)
        raise ScriptError(f"script {'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}{hint}")
    run = script["run"]
    policy = script.get("policy")
    m = AgentLoop.new_run(run["run_id"], run["owner"], run.get("deadline_at"))
    records: list[TransitionRecord] = []
    with attached(m, records.append):
        for number, step in enumerate(script["steps"], 1):
            if progress is not None:
                progress.step = number
            args = {k: v for k, v in step.items() if k not in ("at", "feed", "resume", "arguments")}
            answer = None
            if step.get("resume"):
                if args:
                    raise ScriptError(f"step {number}: resume takes no arguments")
                answer = m.resume(step["at"], policy=policy)
            else:
                feed = step["feed"]
                _check_step(number, feed, args, AgentLoop.compiled.spec.events)
                if "arguments" in step:
                    if feed not in _HASHED:
                        raise ScriptError(f"step {number}: feed '{feed}' takes no tool arguments")
                    if "arguments_hash" in args:
                        raise ScriptError(f"step {number}: give the tool's arguments or its arguments_hash, not both")
                    try:
                        args["arguments_hash"] = arguments_hash(step["arguments"])
                    except FeedArgumentError as err:
                        raise ScriptError(f"step {number}: {err}") from None
                elif feed == "approval_decided" and "arguments_hash" not in args:
                    args["arguments_hash"] = m.data.arguments_hash or ""  # about what was proposed
                m.feed(feed, policy=policy, now=step["at"], **args)
            for r in records:
                yield number, step["at"], r, answer
            records.clear()


def _check_step(number: int, feed: str, args: dict[Any, Any], events: Mapping[str, Any]) -> None:
    """Refuse what a step names that its feed does not take, in the script's own words.

    ``now`` comes from ``at``; a key the feed does not declare is named with the
    ones it does; ``feed: resume`` is pointed at ``resume: true``; an unknown feed is
    named with the ones there are.  Nothing a step names reaches ``feed()`` unchecked,
    so a key like ``policy`` or ``event`` cannot collide with its own parameters.
    """
    if feed == "resume":
        raise ScriptError(
            f"step {number}: resume is a question, not a feed: write 'resume: true' instead of 'feed: resume'"
        )
    if feed not in events:
        raise ScriptError(
            f"step {number}: agent_loop has no feed named {shown(feed)}{did_you_mean(feed, events)} "
            f"(feeds: {', '.join(events)})"
        )
    if "now" in args:
        raise ScriptError(f"step {number}: a step's time is its 'at'; drop 'now'")
    declared = [name for name in events[feed].args if name != "now"]
    for key in args:
        if key not in declared:
            raise ScriptError(
                f"step {number}: feed '{feed}' has no argument {shown(key)}{did_you_mean(key, declared)} "
                f"({_takes(feed, declared)})"
            )


def _takes(feed: str, declared: list[str]) -> str:
    names = declared + ["arguments"] if feed in _HASHED else declared
    return f"it takes: {', '.join(names)}" if names else "it takes nothing but 'at'"


def format_trace(rows: list[tuple[int, int, TransitionRecord, str | None]]) -> list[str]:
    """One line per record; attributes are shown when they first appear or change."""
    table = []
    seen: dict[str, Any] = {}
    for number, at, r, answer in rows:
        what = f"{r.feed}? [{r.branch}] = {answer}" if answer is not None else f"{r.feed} [{r.branch or '-'}]"
        move = f"{r.from_state} -> {r.to_state}" if r.moved else f"{r.from_state}"
        changed = {k: v for k, v in r.attributes.items() if seen.get(k, object()) != v}
        gone = [k for k in seen if k not in r.attributes]
        seen = dict(r.attributes)
        attrs = " ".join([f"{k}={v!r}" for k, v in changed.items()] + [f"-{k}" for k in gone])
        table.append((str(number), str(at), what, move, attrs))
    widths = [max([len(h)] + [len(row[i]) for row in table]) for i, h in enumerate(("#", "at", "feed", "state"))]
    out = [
        f"{'#':>{widths[0]}}  {'at':>{widths[1]}}  {'feed [branch]':<{widths[2]}}  "
        f"{'state':<{widths[3]}}  attributes (new or changed; -name: gone)"
    ]
    for row in table:
        out.append(
            f"{row[0]:>{widths[0]}}  {row[1]:>{widths[1]}}  {row[2]:<{widths[2]}}  "
            f"{row[3]:<{widths[3]}}  {row[4]}".rstrip()
        )
    return out


def run_agent_script(path: Path) -> int:
    script, code = read_script(path)
    if code:
        return code
    rows: list[tuple[int, int, TransitionRecord, str | None]] = []
    progress = Progress()
    try:
        for row in drive(script, progress):
            rows.append(row)
    except (ScriptError, LoopFsmError) as err:
        if rows:
            print("\n".join(format_trace(rows)))
        # a ScriptError names its step itself; the machine's own refusals do not know the script
        where = f"step {progress.step}: " if progress.step and not isinstance(err, ScriptError) else ""
        kind = "" if isinstance(err, ScriptError) else f"{type(err).__name__}: "  # as the other drivers say it
        print(f"loopfsm run: {path}: {where}{kind}{err}", file=sys.stderr)
        return 1
    print("\n".join(format_trace(rows)))
    return 0
