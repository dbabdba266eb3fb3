"""Benchmark: loopfsm's cost as ratios against baselines measured in the same run.

Run ``python benchmarks/bench.py``.  Every number is the best of several
repeats (the least disturbed), and every ratio divides by a baseline timed
moments before, so the machine's own speed cancels out.  This is a script to
read, never a test: timing assertions are flaky by nature.
"""

from __future__ import annotations

import gc
import sys
import time
import timeit
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from transitions import Machine  # noqa: E402

from handwritten import Brain, Breaker, Gate  # noqa: E402
from loopfsm import compile_file  # noqa: E402
from loopfsm.machines import engine_brain as eb  # noqa: E402
from loopfsm.machines import tool_breaker as tb  # noqa: E402
from loopfsm.machines import turnstile as ts  # noqa: E402
from loopfsm.resources import machine_path  # noqa: E402

REPEAT = 5


def best(fn, number: int) -> float:
    """Seconds per call: the best of REPEAT runs of ``number`` calls."""
    return min(timeit.repeat(fn, number=number, repeat=REPEAT)) / number


def fmt(seconds: float) -> str:
    for unit, scale in (("s", 1), ("ms", 1e3), ("us", 1e6), ("ns", 1e9)):
        if seconds * scale >= 1:
            return f"{seconds * scale:8.2f} {unit}"
    return f"{seconds * 1e9:8.2f} ns"


def row(name: str, ours: float, baselines: dict[str, float]) -> None:
    ratios = "  ".join(f"{k}: {ours / v:5.2f}x" for k, v in baselines.items())
    print(f"  {name:<40} {fmt(ours)}   {ratios}")


# -- raw transitions: one Machine per instance, as its README teaches --------------------------

TS_STATES = ["locked", "unlocked"]
TS_TRANSITIONS = [
    {"trigger": "coin", "source": "locked", "dest": "unlocked"},
    {"trigger": "coin", "source": "unlocked", "dest": None},
    {"trigger": "push", "source": "unlocked", "dest": "locked"},
    {"trigger": "push", "source": "locked", "dest": None},
]


class RawGate:
    def __init__(self, state="locked"):
        self.credit = self.passages = 0
        Machine(model=self, states=TS_STATES, transitions=TS_TRANSITIONS, initial=state, auto_transitions=False)


def memory_per_instance(factory, n: int = 5000) -> float:
    gc.collect()
    tracemalloc.start()
    keep = [factory() for _ in range(n)]
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del keep
    return size / n


def turnstile_section() -> None:
    print("turnstile (seed 000): per feed, per instance")
    T, G, R = ts.Turnstile, Gate(), RawGate()
    t = T()

    def ours_feed():
        t.coin()
        t.push()

    def hand_feed():
        G.coin()
        G.push()

    def raw_feed():
        R.coin()
        R.push()

    n = 20000
    hand, raw, ours = best(hand_feed, n) / 2, best(raw_feed, n) / 2, best(ours_feed, n) / 2
    row("feed (coin or push)", ours, {"vs hand-written": hand, "vs raw transitions": raw})

    hand, raw, ours = best(Gate, n), best(RawGate, 2000), best(T, n)
    row("create an instance", ours, {"vs hand-written": hand, "vs raw transitions": raw})

    snap, gsnap = t.snapshot(), G.snapshot()
    hand = best(lambda: Gate.restore(gsnap), n)
    raw = best(lambda: RawGate(gsnap["state"]), 2000)
    ours = best(lambda: T.restore(snap), n)
    row("restore from a snapshot", ours, {"vs hand-written": hand, "vs raw transitions": raw})
    row("snapshot", best(t.snapshot, n), {"vs hand-written": best(G.snapshot, n)})

    mh, mr, mo = memory_per_instance(Gate), memory_per_instance(RawGate, 1000), memory_per_instance(T)
    print(f"  {'memory per instance':<40} {mo:8.0f} B    vs hand-written: {mo / mh:5.2f}x  "
          f"vs raw transitions: {mo / mr:5.2f}x")


def ten_turn_run(brain_cls, policy):
    """A 10-turn run: each turn one tool call, then a final answer; next_step before every move."""
    from loopfsm.machines.engine_brain import CallLLM, CallTools, Done, Message, ToolCall
    b = brain_cls()
    b.accept_input("go")
    replies = [Message.assistant("", [ToolCall(f"c{i}", "shell")]) for i in range(9)] + [Message.assistant("done")]
    i = 0
    while True:
        s = b.next_step(policy)
        b.begin(s)
        if isinstance(s, CallLLM):
            b.model_response(replies[i], 1000 + i, ["shell"])
            i += 1
        elif isinstance(s, CallTools):
            b.tool_results([Message.tool_result(p.call.id, "ok") for p in s.calls])
        elif isinstance(s, Done):
            return b


def brain_section() -> None:
    print("engine brain (seeds 000/001)")
    P = eb.MachinePolicy()
    assert ten_turn_run(eb.LoopMachine, P).turns_taken() == ten_turn_run(Brain, P).turns_taken == 10
    hand = best(lambda: ten_turn_run(Brain, P), 300)
    ours = best(lambda: ten_turn_run(eb.LoopMachine, P), 300)
    row("full 10-turn run (feeds + next_step)", ours, {"vs hand-written": hand})

    from loopfsm.machines.engine_brain import Message
    m, h = eb.LoopMachine(), Brain()
    for x in (m, h):
        x.accept_input("go")
    m.data.history = [Message.user(f"message {i} " * 10) for i in range(100)]
    h.history = list(m.data.history)
    snap, hsnap = m.snapshot(), h.snapshot()
    hand = best(lambda: Brain.restore(h.snapshot()), 500)
    ours = best(lambda: eb.LoopMachine.restore(m.snapshot()), 500)
    row("snapshot + restore, 100 messages", ours, {"vs hand-written": hand})
    row("  of which restore (validated)", best(lambda: eb.LoopMachine.restore(snap), 500),
        {"vs hand-written": best(lambda: Brain.restore(hsnap), 500)})
    q = eb.LoopMachine()
    q.accept_input("x")
    hand_q = Brain()
    hand_q.accept_input("x")
    row("next_step (one decision)", best(lambda: q.next_step(P), 20000),
        {"vs hand-written": best(lambda: hand_q.next_step(P), 20000)})


def breaker_section() -> None:
    print("per-tool circuit breaker: one decision = acquire + record (success)")
    import pybreaker

    from loopfsm.machines.tool_breaker import ToolBreaker, ToolBreakerPolicy

    P = ToolBreakerPolicy()
    ours, hand, cb = ToolBreaker(), Breaker(), pybreaker.CircuitBreaker(fail_max=5, reset_timeout=30)
    clock = [0]

    def ours_decision():
        clock[0] += 1
        permit = ours.acquire(clock[0], "c", P)
        ours.record(clock[0], permit, "success", policy=P)

    def hand_decision():
        clock[0] += 1
        g = hand.acquire(clock[0])
        hand.record(clock[0], g, True)

    def pybreaker_decision():
        cb.call(int)

    n = 20000
    h, pb, o = best(hand_decision, n), best(pybreaker_decision, n), best(ours_decision, n)
    row("acquire + record", o, {"vs hand-written": h, "vs pybreaker": pb})


def compile_section() -> None:
    print("compile once, per spec")
    for name, reg, base in (("turnstile", ts.REGISTRY, None), ("engine_brain", eb.REGISTRY, eb.LoopMachineAPI),
                            ("tool_breaker", tb.REGISTRY, tb.ToolBreakerAPI)):
        path = machine_path(name)
        t = best(lambda path=path, reg=reg, base=base: compile_file(path, reg, base=base), 5)
        raw = best(lambda: Machine(model=None, states=TS_STATES, transitions=TS_TRANSITIONS, initial="locked"), 200)
        print(f"  {name + ' (load + check + compile)':<40} {fmt(t)}   (a bare transitions.Machine: {fmt(raw).strip()})")


def main() -> None:
    start = time.perf_counter()
    print(f"python {sys.version.split()[0]}; best of {REPEAT} repeats; ratios > 1 mean loopfsm is slower\n")
    turnstile_section()
    print()
    brain_section()
    print()
    breaker_section()
    print()
    compile_section()
    print(f"\n(ran in {time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
