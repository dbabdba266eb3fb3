"""One reviewer's run of a compiled machine: feeds in, what each did, step back, and the run as files.

The page drives the real compiled machine (its registry's guards and actions),
server side, one :class:`Simulation` per machine per browser session, so what
a reviewer sees is what the code does.  Every value crossing to the page is
JSON: arguments arrive as JSON and pass their codecs as a trace file's do, and
the run downloads as a snapshot and as a trace file ``loopfsm replay`` accepts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from loopfsm.core import tracing
from loopfsm.core.errors import FeedArgumentError, LoopFsmError
from loopfsm.core.spec import MISSING, FieldDef, Ref, policy_ref
from loopfsm.core.tracing import TransitionRecord
from loopfsm.core.binding import bind_guard
from loopfsm.core.interpreter import feed_data
from loopfsm.core.invariants import compile_invariants
from loopfsm.verification import tracefile
from loopfsm.verification.verify import Judge
from loopfsm.verification.tracefile import Trace, TraceStep
from loopfsm.verification.verify_inputs import Step

from loopfsm.review_site.errors import ReviewSiteError

#: Steps kept per run; a page that feeds past it is told so (memory is bounded per session).
MAX_STEPS = 2000
#: What the snapshots kept for stepping back may take per run, as JSON text; past it a feed is refused.
MAX_RUN_BYTES = 64 * 1024 * 1024
#: Steps a view carries (the latest); the run keeps them all, and its trace file has every one.
SHOWN_STEPS = 100


@dataclass(frozen=True)
class Asked:
    """One branch tried for a feed: its name, whether it was taken, and each condition and guard asked with its
    answer, in order, up to the first that did not hold."""

    branch: str
    held: bool
    guards: tuple[tuple[str, bool], ...]


@dataclass(frozen=True)
class Outcome:
    """What one feed did, in the words the page shows."""

    feed: str
    args: dict[str, Any]
    from_state: str
    to_state: str
    branch: str | None  # the branch taken (None: refused, or no branch ran)
    error: str | None  # the error the API raised, as it reads (None: accepted)
    returned: str | None  # what the feed method returned, when it returns something
    record: dict[str, Any] | None  # the trace record, as ``TransitionRecord.as_dict`` writes it
    broken: tuple[str, ...] = ()  # the invariants this step violates, each with why (as ``verify`` words it)
    asked: tuple[Asked, ...] = ()  # each branch tried, in order, and what its guards answered

    def as_json(self) -> dict[str, Any]:
        return {
            "broken": list(self.broken),
            "asked": [
                {"branch": a.branch, "held": a.held, "guards": [{"guard": g, "held": v} for g, v in a.guards]}
                for a in self.asked
            ],
            "feed": self.feed,
            "args": self.args,
            "from": self.from_state,
            "to": self.to_state,
            "branch": self.branch,
            "error": self.error,
            "returned": self.returned,
            "record": self.record,
        }


@dataclass
class _Taken:
    outcome: Outcome
    before: dict[str, Any]  # the snapshot before the feed, for stepping back
    size: int = 0  # its size as JSON text: what it costs to keep


def field_json(f: FieldDef) -> dict[str, Any]:
    """An argument as the page's form needs it: its type, choices, default and words."""
    return {
        "name": f.name,
        "type": f.type,
        "list": f.list,
        "nullable": f.nullable,
        "enum": list(f.enum) if f.enum is not None else None,
        "default": None if f.default is MISSING else f.default,
        "required": f.default is MISSING,
        "minimum": f.minimum,
        "maximum": f.maximum,
        "description": f.description,
    }


def _shown(value: Any) -> str | None:
    if value is None or value is True or value is False:
        return None
    text = repr(value)
    return text if len(text) <= 400 else text[:400] + "..."


@dataclass
class Simulation:
    """A run of ``compiled`` from ``start`` (a snapshot; None: a new instance) under ``policy`` (numbers by name)."""

    compiled: Any
    start: dict[str, Any] | None = None
    policy: dict[str, Any] = field(default_factory=dict)
    steps: list[_Taken] = field(default_factory=list)

    def __post_init__(self) -> None:
        try:
            self._policy = self.compiled.policy(self.policy)
            self.instance = self.compiled.restore(self.start) if self.start is not None else self.compiled.new()
        except LoopFsmError as err:
            raise ReviewSiteError(str(err)) from None
        spec, registry = self.compiled.spec, self.compiled.registry
        self._judge = Judge(compile_invariants(spec, registry, self._policy), self._policy)
        self.pending: list[Step] = []  # a trace's steps not fed yet, fed one at a time by `next`
        self._pending_bytes = 0

    def feed(self, feed: str, args: Any) -> Outcome:
        """Feed ``feed`` with ``args`` (JSON, by name); a feed the API refuses is an outcome too, changing nothing."""
        if feed not in self.compiled.spec.events:
            raise ReviewSiteError(f"{self.compiled.name} has no feed {feed!r}"[:200])
        if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
            raise ReviewSiteError("args must map argument names to values")
        if len(self.steps) >= MAX_STEPS:
            raise ReviewSiteError(f"a run here keeps at most {MAX_STEPS} steps: download it, or start again")
        step = Step(feed, tuple(args.items()))
        try:
            converted = tracefile.converted(self.compiled, step, "from_json")
        except LoopFsmError as err:
            raise ReviewSiteError(str(err)) from None
        before, from_state = self.instance.snapshot(), self.instance.state
        size = len(json.dumps(before)) + len(json.dumps(args))  # what keeping this step costs
        if self.bytes + size > MAX_RUN_BYTES:
            raise ReviewSiteError(
                f"this run keeps {MAX_RUN_BYTES // 2**20} MiB of snapshots for stepping back: download it, or start "
                "again",
                413,
            )
        armed = self._judge.armed(self.instance, Step(feed, tuple(converted.items())))
        asked = self._asked(feed, converted)
        was = self.compiled.restore(before) if armed else None
        records: list[TransitionRecord] = []
        error = returned = None
        with tracing.attached(self.instance, records.append):
            try:
                returned = _shown(self.instance.feed(feed, policy=self._policy, **converted))
            except FeedArgumentError as err:  # the form's mistake, not the machine's answer: no step
                raise ReviewSiteError(str(err), 422) from None
            except LoopFsmError as err:
                error = f"{type(err).__name__}: {err}"
            except Exception as err:  # noqa: BLE001 - a guard or action crashed: the reviewer sees which
                error = f"{type(err).__name__} raised by the machine's code: {err}"
        record = records[-1] if records else None
        broken: tuple[str, ...] = ()
        if error is None:  # a refused feed changes nothing, so breaks nothing; replay judges the same way
            found = self._judge.configuration(self.instance) + (
                self._judge.step(armed, was, self.instance) if armed else []
            )
            broken = tuple(f"{b.invariant}: {b.why}" for b in found)
        outcome = Outcome(
            feed,
            dict(args),
            from_state,
            self.instance.state,
            record.branch if record is not None and error is None else None,
            error,
            returned,
            record.as_dict() if record is not None and error is None else None,
            broken,
            asked if error is None or error.startswith("FeedRefused") else (),
        )
        self.steps.append(_Taken(outcome, before, size))
        return outcome

    @property
    def bytes(self) -> int:
        """What this run keeps (its steps' snapshots and arguments, a loaded trace's waiting steps), as JSON text."""
        return sum(t.size for t in self.steps) + (self._pending_bytes if self.pending else 0)

    def _asked(self, feed: str, args: dict[str, Any]) -> tuple[Asked, ...]:
        """Each branch's conditions and guards, asked in order on a copy before feeding (guards are pure), as the
        machine asks them: up to the first that does not hold, and no branch after the first that holds."""
        try:
            bound = self.compiled.binders[feed]((), args)
            copy = self.compiled.restore(self.instance.snapshot(), engine="interpreter")
            event = self.compiled.events[feed]
            state = copy.state
            compiled_branches = event.branches.get(state, ())
            spec = self.compiled.spec
            written = spec.expanded_sources(spec.events[feed]).get(state, ())
            ctx = feed_data(event, copy, bound, self._policy, state)
            out: list[Asked] = []
            for made, said in zip(compiled_branches, written, strict=True):
                ctx.transition = made
                labels = [c.label() for c in said.when] + [self._words(g) for g in said.guards]
                answers: list[tuple[str, bool]] = []
                for guard, label in zip(made.guards, labels, strict=True):
                    ask = bind_guard(guard, self._policy)
                    answer = ask if isinstance(ask, bool) else bool(ask(copy, ctx))
                    answers.append((label, answer))
                    if not answer:
                        break
                held = all(a for _, a in answers)
                out.append(Asked(made.name, held, tuple(answers)))
                if held:
                    break
            return tuple(out)
        except Exception:  # noqa: BLE001 - the feed itself then reports what is wrong, in the API's words
            return ()

    def _words(self, guard: Ref) -> str:
        """A guard as the table names it, its policy numbers the run's own (``fare_paid(fare=2 (policy.fare))``)."""
        if guard.options:
            return "(" + " or ".join(" and ".join(self._words(g) for g in option) for option in guard.options) + ")"
        params = []
        for key, value in guard.params.items():
            name = policy_ref(value)
            shown = json.dumps(value) if name is None else f"{getattr(self._policy, name)!r} (policy.{name})"
            params.append(f"{key}={shown}")
        return ("not " if guard.negate else "") + guard.name + (f"({', '.join(params)})" if params else "")

    def back(self) -> None:
        """Undo the last step: the instance is restored from the snapshot taken before it."""
        if not self.steps:
            raise ReviewSiteError("nothing to step back from: the run is at its start")
        taken = self.steps.pop()
        self.instance = self.compiled.restore(taken.before)

    def view(self) -> dict[str, Any]:
        """The run as the page shows it: the state, its data, the feeds on offer and the steps so far."""
        snap = self.instance.snapshot()
        spec = self.compiled.spec
        allowed = set(self.instance.allowed_feeds())
        return {
            "machine": self.compiled.name,
            "state": snap["state"],
            "terminal": self.instance.is_terminal(),
            "state_data": snap["state_data"],
            "data": snap["data"],
            "policy": {name: getattr(self._policy, name) for name in spec.policy},
            "feeds": [
                {
                    "name": name,
                    "description": ev.description,
                    "allowed": name in allowed,
                    "args": [field_json(f) for f in ev.args.values()],
                }
                for name, ev in spec.events.items()
            ],
            # the latest steps only: a page refreshed after each feed must not grow with the square of the run
            "steps": [t.outcome.as_json() for t in self.steps[-SHOWN_STEPS:]],
            "earlier": max(0, len(self.steps) - SHOWN_STEPS),
            "pending": [{"feed": p.feed} for p in self.pending[:1]],
            "pending_count": len(self.pending),
        }

    def snapshot(self) -> dict[str, Any]:
        return dict(self.instance.snapshot())

    def trace(self) -> str:
        """The run as a trace file: each feed with its arguments, the state after it, and the refused ones marked."""
        steps = tuple(
            TraceStep(
                Step(t.outcome.feed, tuple(t.outcome.args.items())), t.outcome.to_state, t.outcome.error is not None
            )
            for t in self.steps
        )
        note = f"a run of {self.compiled.name} made on the review page"
        return tracefile.dump(Trace(self.compiled.name, dict(self.policy), self.start, steps, note))

    def load(self, trace: Trace) -> None:
        """Start again from ``trace``'s start under its policy, its steps waiting to be fed one by one (`next`)."""
        if trace.machine != self.compiled.name:
            raise ReviewSiteError(f"the trace is of machine {trace.machine!r}, not {self.compiled.name}"[:200])
        if len(trace.steps) > MAX_STEPS:
            raise ReviewSiteError(f"a run here keeps at most {MAX_STEPS} steps; the trace has {len(trace.steps)}")
        for i, ts in enumerate(trace.steps, 1):  # every step must be one the machine can be fed, before any is
            if ts.step.feed not in self.compiled.spec.events:
                raise ReviewSiteError(f"step {i} feeds {ts.step.feed!r}, which {self.compiled.name} has not"[:200])
            try:
                tracefile.converted(self.compiled, ts.step, "from_json")
            except LoopFsmError as err:
                raise ReviewSiteError(f"step {i}: {err}") from None
        fresh = Simulation(self.compiled, trace.start, dict(trace.policy))
        self.start, self.policy, self.steps = fresh.start, fresh.policy, []
        self._policy, self.instance, self._judge = fresh._policy, fresh.instance, fresh._judge
        self.pending = [ts.step for ts in trace.steps]
        self._pending_bytes = sum(len(json.dumps(ts.step.kwargs())) for ts in trace.steps)

    def next(self) -> Outcome:
        """Feed the loaded trace's next step."""
        if not self.pending:
            raise ReviewSiteError("no step of a trace is waiting: load a trace file first")
        step = self.pending.pop(0)  # fed or refused, it is done: a step the API refuses is not asked again
        return self.feed(step.feed, step.kwargs())
