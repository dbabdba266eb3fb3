"""Trace files: a run written down as feeds, the state expected after each, and what should be refused.

``loopfsm verify`` writes its counterexamples as trace files; a user can write
one by hand.  ``loopfsm replay`` feeds one to a machine and says where the
machine and the trace part ways.  The format (YAML)::

    machine: tool_breaker        # checked against the machine replayed
    policy: {max_probes: 1}      # policy numbers that differ from the YAML's defaults
    start: null                  # or a snapshot to start from (default: a new instance)
    steps:
      - feed: acquire
        args: {now: 0, call_id: a}
        state: Closed            # expected state after the feed (optional)
      - feed: record
        args: {now: 0, call_id: a, outcome: success, generation: 0}
        refused: true            # the machine must refuse this feed (and so change nothing)
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from loopfsm.core.errors import ActionError, LoopFsmError, shown

from loopfsm.verification.errors import ReviewError
from loopfsm.verification.verify_inputs import Step

MAX_TRACE_BYTES = 16 * 1024 * 1024
#: YAML events a trace file may hold (a step is about seven), and how deep its values may nest: read before the
#: document is built, so a file of deep brackets or millions of steps is refused in about a second.
MAX_TRACE_EVENTS = 1_000_000
MAX_TRACE_DEPTH = 64


@dataclass(frozen=True)
class TraceStep:
    step: Step
    state: str | None  # expected state after it, if the trace says
    refused: bool


@dataclass(frozen=True)
class Trace:
    machine: str
    policy: dict[str, Any]
    start: dict[str, Any] | None
    steps: tuple[TraceStep, ...]
    note: str = ""  # what the trace shows (a counterexample names its invariant); a comment in the file


def converted(compiled: Any, step: Step, way: str) -> dict[str, Any]:
    """``step``'s arguments through their codecs (``to_json`` or ``from_json``): a registry's types as JSON."""
    ev = compiled.spec.events.get(step.feed)
    out = {}
    for name, value in step.args:
        f = ev.args.get(name) if ev is not None else None
        codec = compiled.registry.codecs.get(f.type) if f is not None else None
        if f is None or codec is None or value is None:
            out[name] = value
            continue
        convert = getattr(codec, way)
        try:
            out[name] = [convert(v) for v in value] if f.list and isinstance(value, list) else convert(value)
        except Exception as err:  # noqa: BLE001 - a codec's own refusal: bad input, said without the value
            raise ReviewError(
                f"argument '{name}' of {step.feed} is not a valid {f.type}: {type(err).__name__}"
            ) from None
    return out


def dump(trace: Trace, compiled: Any = None) -> str:
    """The trace as YAML text, ``note`` as leading comments; a registry's types as their JSON (given ``compiled``)."""
    import yaml  # noqa: PLC0415

    doc: dict[str, Any] = {"machine": trace.machine, "policy": trace.policy, "start": trace.start, "steps": []}
    for ts in trace.steps:
        args = converted(compiled, ts.step, "to_json") if compiled is not None else ts.step.kwargs()
        item: dict[str, Any] = {"feed": ts.step.feed, "args": args}
        if ts.refused:
            item["refused"] = True
        if ts.state is not None:
            item["state"] = ts.state
        doc["steps"].append(item)
    head = "".join(f"# {line}\n" for line in trace.note.splitlines())
    return head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=120)


def _bad(path: Path | str, why: str) -> ReviewError:
    return ReviewError(f"{path}: not a trace file: {why}")


def load(path: Path) -> Trace:
    """Read a trace file, or raise :class:`ReviewError` saying what is wrong with it (no content echoed)."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_TRACE_BYTES + 1)
    except OSError as err:
        raise ReviewError(f"{path}: cannot read it: {err.strerror or type(err).__name__}") from None
    return loads(raw, path)


def loads(raw: bytes, path: Path | str) -> Trace:
    """A trace file's bytes (named ``path`` in errors) as a :class:`Trace`, or :class:`ReviewError`."""
    import yaml  # noqa: PLC0415

    if len(raw) > MAX_TRACE_BYTES:
        raise _bad(path, f"larger than {MAX_TRACE_BYTES // (1024 * 1024)} MiB")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, where built: fifteen times faster
    try:
        text = raw.decode("utf-8")
        _within_budget(path, yaml.parse(text, Loader=loader))
        doc = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader (libyaml's or PyYAML's SafeLoader)
    except UnicodeDecodeError:
        raise _bad(path, "not UTF-8 text") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise _bad(path, f"not valid YAML{where}") from None
    except (ValueError, RecursionError) as err:  # an integer too long to read, nesting too deep
        raise _bad(path, f"not readable YAML ({type(err).__name__})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list):
        raise _bad(path, "expected a mapping with a 'steps' list")
    problem = not_json(doc)
    if problem is not None:
        raise _bad(path, problem)
    unknown = set(doc) - {"machine", "policy", "start", "steps"}
    if unknown:
        raise _bad(path, f"unknown key {shown(sorted(map(str, unknown))[0])} (allowed: machine, policy, start, steps)")
    machine = doc.get("machine")
    policy = doc.get("policy") or {}
    start = doc.get("start")
    if not isinstance(machine, str):
        raise _bad(path, "'machine' must name the machine (a string)")
    if not isinstance(policy, dict) or not all(isinstance(k, str) for k in policy):
        raise _bad(path, "'policy' must map policy names to values")
    if start is not None and not isinstance(start, dict):
        raise _bad(path, "'start' must be a snapshot (a mapping) or null")
    steps = []
    for i, item in enumerate(doc["steps"], 1):
        if not isinstance(item, dict) or not isinstance(item.get("feed"), str):
            raise _bad(path, f"step {i} must be a mapping with 'feed' (a feed name)")
        extra = set(item) - {"feed", "args", "state", "refused"}
        if extra:
            raise _bad(path, f"step {i} has unknown key {shown(sorted(map(str, extra))[0])}")
        args = item.get("args") or {}
        state = item.get("state")
        refused = item.get("refused", False)
        if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
            raise _bad(path, f"step {i}: 'args' must map argument names to values")
        if state is not None and not isinstance(state, str):
            raise _bad(path, f"step {i}: 'state' must be a state name")
        if type(refused) is not bool:
            raise _bad(path, f"step {i}: 'refused' must be true or false")
        steps.append(TraceStep(Step(item["feed"], tuple(args.items())), state, refused))
    return Trace(machine, policy, start, tuple(steps))


def _within_budget(path: Path | str, events: Any) -> None:
    """The file's YAML events, read once: no alias (a trace is plain data; an alias could make a small file expand
    without bound when shown), nesting at most MAX_TRACE_DEPTH deep, at most MAX_TRACE_EVENTS of them."""
    import yaml  # noqa: PLC0415

    depth = 0
    for count, event in enumerate(events):
        if count > MAX_TRACE_EVENTS:
            raise _bad(path, f"more than {MAX_TRACE_EVENTS:,} YAML values")
        if isinstance(event, yaml.AliasEvent):
            raise _bad(path, "anchors and aliases (*name) are not allowed in a trace file")
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_TRACE_DEPTH:
                raise _bad(path, f"values nested more than {MAX_TRACE_DEPTH} deep")
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1


def not_json(value: Any, where: str = "the trace") -> str | None:
    """Where ``value`` holds something JSON cannot carry (a YAML date, binary, a set, NaN, a key that is not a
    string, half a surrogate pair), said without the value; None when it is all JSON."""
    if value is None or isinstance(value, bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where} holds {value!r}, which JSON cannot carry"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{where} holds half a surrogate pair"
        return None
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = not_json(v, f"{where}[{i}]")
            if found is not None:
                return found
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return f"{where} has a key that is not a string ({type(k).__name__})"
            found = not_json(v, (k if where == "the trace" else f"{where}.{k}")[:200])
            if found is not None:
                return found
        return None
    kind = {"bytes": "binary data", "date": "a date", "datetime": "a date and time", "set": "a set"}
    return f"{where} holds {kind.get(type(value).__name__, 'a ' + type(value).__name__)}, which JSON cannot carry"


def _broken(found: list[Any], where: str, out: TextIO) -> bool:
    for b in found:
        print(f"     invariant {b.invariant} violated {where}: {b.why}", file=out)
    return bool(found)


def replay(compiled: Any, trace: Trace, out: TextIO | None = None, judge: Any = None) -> bool:
    """Feed ``trace`` to a new (or the trace's start) instance of ``compiled``, printing each step.

    Returns whether the machine did what the trace expects and, given a
    ``judge`` (:class:`loopfsm.verification.verify.Judge`), broke none of its
    invariants on the way (so a counterexample replayed shows its violation).  Raises
    :class:`~loopfsm.core.errors.LoopFsmError` when the trace cannot be
    replayed at all (another machine, a policy or start snapshot it refuses).
    """
    out = out or sys.stdout
    if trace.machine != compiled.name:
        raise ReviewError(f"the trace is of machine {shown(trace.machine)}, not {compiled.name}")
    policy = compiled.policy(trace.policy)
    inst = compiled.restore(trace.start) if trace.start is not None else compiled.new()
    print(f"start: {inst.state}", file=out)
    ok = not (judge is not None and _broken(judge.configuration(inst), "at the start", out))
    for i, ts in enumerate(trace.steps, 1):
        before = inst.state
        if judge is not None:
            armed = judge.armed(inst, ts.step)
            was = compiled.restore(inst.snapshot()) if armed else None
        args = converted(compiled, ts.step, "from_json")  # a value its codec refuses: a bad trace
        try:
            inst.feed(ts.step.feed, policy=policy, **args)
            refusal = None
        except ActionError as err:  # a guard or action raised (the runtime wrapped it): the finding
            print(f"{i:>3}  {ts.step.shown()}  CRASHED: {err}", file=out)
            return False
        except LoopFsmError as err:
            refusal = err
        except Exception as err:  # noqa: BLE001 - a guard or action crashed: that is the finding
            print(f"{i:>3}  {ts.step.shown()}  CRASHED: {type(err).__name__}: {err}", file=out)
            return False
        if refusal is not None:
            print(f"{i:>3}  {ts.step.shown()}  refused: {refusal}", file=out)
            if not ts.refused:
                print(f"     the trace expects it accepted (state {ts.state or '?'}): replay differs here", file=out)
                return False
        else:
            print(f"{i:>3}  {ts.step.shown()}  {before} -> {inst.state}", file=out)
            if ts.refused:
                print("     the trace expects it refused: replay differs here", file=out)
                return False
        if ts.state is not None and inst.state != ts.state:
            print(
                f"     the trace expects state {ts.state}, the machine is in {inst.state}: replay differs here",
                file=out,
            )
            return False
        if judge is not None and refusal is None:
            found = judge.configuration(inst) + (judge.step(armed, was, inst) if armed else [])
            ok = not _broken(found, f"after step {i}", out) and ok
    steps = f"{len(trace.steps)} step{'s' * (len(trace.steps) != 1)}"
    if not ok:
        print(f"replayed {steps}: as the trace expects, and an invariant is violated", file=out)
        return False
    print(f"replayed {steps}: as the trace expects", file=out)
    return True
