"""Benchmark: stream assembly against the SDKs' own accumulators and against json.loads.

Run ``python benchmarks/stream.py`` (``--quick`` for one round and smaller SDK sizes).

Workloads: a tool call whose JSON arguments are 1 MB, streamed in 1-, 8- and
64-character fragments; and a 100k-token text answer (about 400,000
characters) in typical deltas (16 characters for Anthropic, 4 for OpenAI's
one-token chunks).  Events are generated lazily by ``loopfsm.router.streams.synthetic``
as the decoded dicts a client would hand over, for every contender alike.

How it measures: CPU time (``time.process_time``), contenders alternating
within every round, each keeping its best round.  Each baseline is first shown
to produce the same result as stream assembly.  The baselines:

* ``json.loads`` of the final argument text: the parse no assembler can skip;
* ``feeding``: the same events through the same adapter into the same
  machine, except that its ``delta`` feed does nothing (the YAML edited: no
  guard, no action): what delivering these events costs before any assembly;
* ``pings``: as many ``ping`` events, the cheapest event there is;
* the Anthropic SDK's ``accumulate_event`` (what ``MessageStream`` runs per
  event) and the OpenAI SDK's ``ChatCompletionStreamState.handle_chunk``.

The goal: assembly within 2x of json.loads plus feeding.  The SDKs re-parse or
re-copy the whole message per event, so at 1 MB in small fragments they take
minutes; they are timed at smaller sizes (the time per megabyte growing with
the size is the quadratic cost), and the 1 MB figure is extrapolated from the
two largest sizes timed (a linear plus a quadratic term), marked as such.

A script to read, never a test.
"""

from __future__ import annotations

import gc
import json
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

from loopfsm import parse
from loopfsm.core.compiler import compile_spec
from loopfsm.machines.stream_assembly import REGISTRY, StreamAssembly
from loopfsm.core.resources import machine_path
from loopfsm.router.streams import AnthropicStream, OpenAIChatStream
from loopfsm.router.streams.synthetic import Block, Reply, anthropic_events, every, openai_chunks

QUICK = "--quick" in sys.argv
ROUNDS = 1 if QUICK else 3


def cpu(fn: Callable[[], object]) -> float:
    gc_was = gc.isenabled()
    gc.disable()
    try:
        t0 = time.process_time()
        fn()
        return time.process_time() - t0
    finally:
        if gc_was:
            gc.enable()


def best(*fns: Callable[[], object]) -> list[float]:
    """Best-of-ROUNDS CPU seconds of each function, all alternating within every round."""
    times = [float("inf")] * len(fns)
    for _ in range(ROUNDS):
        for i, fn in enumerate(fns):
            times[i] = min(times[i], cpu(fn))
    return times


def fmt(seconds: float) -> str:
    return f"{seconds * 1e3:9.1f} ms" if seconds < 10 else f"{seconds:9.1f} s "


# -- payloads ---------------------------------------------------------------------------------


def arguments_of_size(size: int) -> str:
    """Tool arguments of about ``size`` characters: files with quotes, escapes, non-ASCII and emoji."""
    line = 'print("héllo, wörld") \\ tab\there 😀 → done\n'
    files, total, i = [], 0, 0
    while total < size:
        content = line * (1 + i % 7)
        files.append({"path": f"src/módulo_{i}.py", "content": content, "size": len(content), "ok": i % 3 == 0})
        total += len(content) + 60
        i += 1
    return json.dumps({"files": files}, ensure_ascii=False)


def answer_text(tokens: int) -> str:
    words = "the machine assembles each delta into its slot and joins the text once at the end".split()
    return " ".join(words[i % len(words)] for i in range(tokens))  # about 4.4 characters a token


def tool_reply(args: str) -> Reply:
    return Reply((Block("tool", args, "toolu_1", "write_files"),), "tool_use", {"input_tokens": 10})


def text_reply(text: str) -> Reply:
    return Reply((Block("text", text),), "end_turn", {"input_tokens": 10})


# -- contenders -----------------------------------------------------------------------------------


def ours_anthropic(events: Callable[[], Iterator[dict[str, Any]]]) -> Callable[[], Any]:
    def run() -> Any:
        s = AnthropicStream()
        for e in events():
            s.feed(e)
        return s.result()

    return run


def ours_openai(chunks: Callable[[], Iterator[dict[str, Any]]]) -> Callable[[], Any]:
    def run() -> Any:
        s = OpenAIChatStream()
        for c in chunks():
            s.feed(c)
        s.finish()
        return s.result()

    return run


def _idle_delta_machine() -> Any:
    """The shipped machine with its delta branch emptied: fragments are delivered, checked and dropped."""
    text = machine_path("stream_assembly").read_text(encoding="utf-8")
    branch = text.split("  delta:\n", 1)[1].split("        - guard: {name: slot_takes", 1)
    rest = branch[1].split("description: fragment kept\n", 1)[1]
    edited = text.split("  delta:\n", 1)[0] + "  delta:\n" + branch[0] + "        - stay: true\n" + rest
    return compile_spec(parse(edited, "idle-delta.yaml", REGISTRY), REGISTRY, base=StreamAssembly).Instance


IDLE = _idle_delta_machine()


def feeding(events: Callable[[], Iterator[dict[str, Any]]], adapter: Any = AnthropicStream) -> Callable[[], Any]:
    """The same events through the same adapter; the machine keeps no fragment."""

    def run() -> Any:
        s = adapter(IDLE())
        for e in events():
            s.feed(e)
        return s

    return run


def pings(count: int) -> Callable[[], Any]:
    """``count`` events through the same adapter and machine, each carrying nothing."""
    start = next(anthropic_events(text_reply("")))
    ping = {"type": "ping"}

    def run() -> Any:
        s = AnthropicStream()
        s.feed(start)
        for _ in range(count):
            s.feed(ping)
        return s

    return run


def sdk_anthropic(events: Callable[[], Iterator[dict[str, Any]]]) -> Callable[[], Any]:
    from anthropic.lib.streaming._messages import accumulate_event

    def run() -> Any:
        snapshot, bufs = None, {}
        for e in events():
            snapshot = accumulate_event(event=e, current_snapshot=snapshot, json_bufs=bufs)  # type: ignore[arg-type]
        return snapshot

    return run


def sdk_openai(chunks: Callable[[], Iterator[dict[str, Any]]]) -> Callable[[], Any]:
    from openai._models import construct_type
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    def run() -> Any:
        state = ChatCompletionStreamState()
        for c in chunks():  # built as the SDK's own stream builds each chunk
            state.handle_chunk(construct_type(type_=ChatCompletionChunk, value=c))
        return state.current_completion_snapshot

    return run


def count(events: Callable[[], Iterator[Any]]) -> int:
    return sum(1 for _ in events())


# -- the runs ---------------------------------------------------------------------------------------


def json_arguments() -> None:
    args = arguments_of_size(1 << 20)
    want = json.loads(args)
    print(f"\n1 MB of JSON tool arguments ({len(args):,} characters), Anthropic events")
    print(
        f"{'fragment':>9} {'events':>10} {'assembly':>12} {'json.loads':>12} {'feeding':>12} "
        f"{'ratio':>6} {'goal':>6} {'pings':>12}"
    )
    for size in (1, 8, 64):

        def events(size: int = size) -> Iterator[dict[str, Any]]:
            return anthropic_events(tool_reply(args), every(size))

        n = count(events)
        ours, loads, floor, ping = ours_anthropic(events), (lambda: json.loads(args)), feeding(events), pings(n)
        assert ours().message.tool_calls[0].arguments == want == loads()
        assert floor().machine.data.slots[0].current_text() == ""  # delivered, nothing kept
        t_loads, t_floor, t_ours, t_ping = best(loads, floor, ours, ping)
        ratio = t_ours / (t_loads + t_floor)
        print(
            f"{size:>9} {n:>10,} {fmt(t_ours)} {fmt(t_loads)} {fmt(t_floor)} {ratio:6.2f} "
            f"{'met' if ratio <= 2 else 'MISSED':>6} {fmt(t_ping)}"
        )


def extrapolate(points: list[tuple[int, float]], to: int = 1 << 20) -> float:
    """Time at ``to`` from t = a*s + b*s*s fitted to the two largest sizes timed (b >= 0, a >= 0)."""
    (s1, t1), (s2, t2) = points[-2:]
    b = max(0.0, (t2 * s1 - t1 * s2) / (s1 * s2 * (s2 - s1)))
    a = max(0.0, (t1 - b * s1 * s1) / s1)
    return a * to + b * to * to


def sdk_json_arguments() -> None:
    sizes = (8 << 10, 16 << 10) if QUICK else (16 << 10, 32 << 10, 64 << 10)
    print("\nThe SDK accumulators on the same arguments at smaller sizes (both fed the same dicts)")
    print(f"{'fragment':>9} {'size':>7} {'assembly':>12} {'Anthropic':>12} {'ratio':>7} {'OpenAI':>12} {'ratio':>7}")
    for frag in (1, 8, 64):
        timed: dict[str, list[tuple[int, float]]] = {"a": [], "o": []}
        for size in sizes:
            args = arguments_of_size(size)
            want = json.loads(args)

            def events(args: str = args, frag: int = frag) -> Iterator[dict[str, Any]]:
                return anthropic_events(tool_reply(args), every(frag))

            def chunks(args: str = args, frag: int = frag) -> Iterator[dict[str, Any]]:
                return openai_chunks(tool_reply(args), every(frag))

            ours, sdk_a, sdk_o = ours_anthropic(events), sdk_anthropic(events), sdk_openai(chunks)
            assert ours().message.tool_calls[0].arguments == want == sdk_a().content[0].input
            assert json.loads(sdk_o().choices[0].message.tool_calls[0].function.arguments) == want
            assert ours_openai(chunks)().message.tool_calls[0].arguments == want
            t_ours, t_a, t_o = best(ours, sdk_a, sdk_o)
            print(
                f"{frag:>9} {size >> 10:>5}KB {fmt(t_ours)} {fmt(t_a)} {t_a / t_ours:6.0f}x {fmt(t_o)} "
                f"{t_o / t_ours:6.0f}x"
            )
            timed["a"].append((size, t_a))
            timed["o"].append((size, t_o))
        print(
            f"{frag:>9}    1 MB  extrapolated: Anthropic SDK ~{fmt(extrapolate(timed['a'])).strip()}, "
            f"OpenAI SDK ~{fmt(extrapolate(timed['o'])).strip()}"
        )


def text_answer() -> None:
    text = answer_text(100_000)
    print(f"\n100k-token text answer ({len(text):,} characters)")
    print(f"{'stream':>18} {'events':>8} {'assembly':>12} {'feeding':>12} {'ratio':>6} {'SDK':>12} {'ratio':>7}")
    for name, frag in (("Anthropic 16-char", 16), ("OpenAI 4-char", 4)):
        if name.startswith("Anthropic"):

            def events(frag: int = frag) -> Iterator[dict[str, Any]]:
                return anthropic_events(text_reply(text), every(frag))

            ours, sdk, floor = ours_anthropic(events), sdk_anthropic(events), feeding(events)
            assert ours().message.text == text == sdk().content[0].text
        else:

            def events(frag: int = frag) -> Iterator[dict[str, Any]]:
                return openai_chunks(text_reply(text), every(frag))

            ours, sdk, floor = ours_openai(events), sdk_openai(events), feeding(events, OpenAIChatStream)
            assert ours().message.text == text == sdk().choices[0].message.content
        n = count(events)
        t_ours, t_floor, t_sdk = best(ours, floor, sdk)
        print(
            f"{name:>18} {n:>8,} {fmt(t_ours)} {fmt(t_floor)} {t_ours / t_floor:6.2f} {fmt(t_sdk)} "
            f"{t_sdk / t_ours:6.1f}x"
        )


def memory() -> None:
    args = arguments_of_size(1 << 20)
    print("\nMemory, 1 MB of arguments in 8-character fragments (tracemalloc peak)")
    tracemalloc.start()
    json.loads(args)
    _, loads_peak = tracemalloc.get_traced_memory()
    for name, fn in (
        ("assembly", ours_anthropic(lambda: anthropic_events(tool_reply(args), every(8)))),
        ("events only", lambda: count(lambda: anthropic_events(tool_reply(args), every(8)))),
    ):
        tracemalloc.reset_peak()
        fn()
        _, peak = tracemalloc.get_traced_memory()
        print(
            f"{name:>12}: {peak / 1e6:6.1f} MB (json.loads alone: {loads_peak / 1e6:.1f} MB, "
            f"the text as one str: {sys.getsizeof(args) / 1e6:.1f} MB)"
        )
    tracemalloc.stop()


if __name__ == "__main__":
    print(f"stream assembly benchmark, best of {ROUNDS} round(s), CPU time")
    json_arguments()
    text_answer()
    sdk_json_arguments()
    memory()
