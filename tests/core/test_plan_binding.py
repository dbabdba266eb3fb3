"""A branch plan binds each guard's and action's YAML parameters once, per policy object."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from loopfsm import compile_spec, parse
from loopfsm.core.registry import Registry

from tests.support.specs import dedent

GATE = dedent("""
    machine: gate
    description: opens once enough coins are in, counts in steps the YAML sets
    policy:
      fare: {type: integer, default: 2, minimum: 1, description: coins to open}
    data:
      coins: {type: integer, default: 0}
    states:
      shut: {initial: true, description: shut}
      open: {description: open}
    events:
      coin:
        description: a coin
        otherwise: stay
        from:
          shut:
            - guard: {name: paid, params: {fare: {policy: fare}}}
              to: open
            - guard: {name: wrapped_paid, params: {fare: {policy: fare}}, negate: true}
              stay: true
              actions: [{name: add, params: {by: 1}}]
          open:
            - stay: true
              actions: [{name: wrapped_add, params: {by: 10}}]
      push:
        description: someone passes
        from:
          open:
            - to: shut
""")


def registry() -> Registry:
    reg = Registry("gate")

    @reg.guard
    def paid(m: Any, ctx: Any, *, fare: int) -> bool:
        return bool(m.data.coins + 1 >= fare)

    def logged(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        return wrapper

    @reg.guard
    @logged
    def wrapped_paid(m: Any, ctx: Any, *, fare: int) -> bool:
        return bool(m.data.coins + 1 >= fare)

    @reg.action
    def add(m: Any, ctx: Any, *, by: int, unused: str = "kept") -> None:
        assert unused == "kept"
        m.data.coins += by

    @reg.action
    @logged
    def wrapped_add(m: Any, ctx: Any, *, by: int) -> None:
        m.data.coins += by

    return reg


def test_plain_functions_and_wrappers_get_their_params_and_the_registered_functions_are_untouched() -> None:
    reg = registry()
    c = compile_spec(parse(GATE, "gate.yaml", reg), reg)
    g = c.new()
    g.feed("coin")
    assert (g.state, g.data.coins) == ("shut", 1)
    g.feed("coin")
    g.feed("coin")
    assert (g.state, g.data.coins) == ("open", 11)
    three = c.new()
    for _ in range(3):
        three.feed("coin", policy={"fare": 3})
    assert (three.state, three.data.coins) == ("open", 2)
    assert reg.get("guard", "paid").fn.__kwdefaults__ is None
    assert reg.get("action", "add").fn.__kwdefaults__ == {"unused": "kept"}


def test_bound_guards_and_actions_run_the_registered_code_with_the_yaml_parameters() -> None:
    """What binding gives for each shape of function, called as the engine calls it: ``fn(machine, ctx)``."""
    from loopfsm.core.binding import Call, PolicyParam, bind

    reg = registry()
    c = compile_spec(parse(GATE, "gate.yaml", reg), reg)
    policy = c.policy({"fare": 5})
    m = c.new()
    paid = bind(Call("paid", reg.get("guard", "paid").fn, {}, (PolicyParam("fare", "fare"),)), policy)
    wrapped = bind(
        Call("wrapped_paid", reg.get("guard", "wrapped_paid").fn, {}, (PolicyParam("fare", "fare"),), True), policy
    )
    m.data.coins = 3
    assert (paid(m, None), wrapped(m, None)) == (False, True)  # 3 + 1 < 5; the negated one holds
    m.data.coins = 4
    assert (paid(m, None), wrapped(m, None)) == (True, False)
    add = bind(Call("add", reg.get("action", "add").fn, {"by": 2}), policy)
    add(m, None)  # its own default for 'unused' kept
    assert m.data.coins == 6
    assert paid.__name__ == "paid" and paid.__doc__ == reg.get("guard", "paid").fn.__doc__


def test_a_function_with_positional_defaults_keeps_its_parameters_keyword_only() -> None:
    def counted(m: Any, ctx: Any = None, *, by: int) -> int:
        return int(by)

    from loopfsm.core.fastparams import with_params

    bound = with_params(counted, {"by": 3})
    assert bound(None) == 3 and bound(None, None) == 3
    assert counted.__kwdefaults__ is None
    with pytest.raises(TypeError):
        counted(None)  # the registered function itself is untouched


def arity_machine() -> str:
    """One feed per arity 1..8 (integers, the last nullable), each stored into the data by its action."""
    lines = [
        "machine: arity",
        "description: feeds of every arity a typed method binds quickly, and beyond",
        "data:",
        "  got: {type: integer, list: true}",
        "states:",
        "  s: {initial: true, description: where every feed stays}",
        "  t: {terminal: true, description: stopped}",
        "events:",
        "  stop: {description: stop, from: {s: [{to: t}]}}",
    ]
    for n in range(1, 9):
        lines += [f"  f{n}:", f"    description: {n} arguments", "    args:"]
        lines += [f"      a{i}: {{type: integer{', nullable: true' if i == n - 1 else ''}}}" for i in range(n)]
        lines += ["    from:", "      s:", "        - stay: true", "          actions: [keep]"]
    return "\n".join(lines) + "\n"


def test_binding_of_every_arity_checks_each_argument_positionally_and_by_keyword() -> None:
    from loopfsm import FeedArgumentError

    reg = Registry("arity")

    @reg.action
    def keep(m: Any, ctx: Any) -> None:
        m.data.got = list(ctx.args.values())

    c = compile_spec(parse(arity_machine(), "arity.yaml", reg), reg)
    m = c.new()
    for n in range(1, 9):
        event = f"f{n}"
        binder = c.feed_table[event][1]
        assert binder is c.binders[event]
        good = tuple(range(n))
        by_name = {f"a{i}": i for i in range(n)}
        assert binder(good, {}) == binder((), by_name) == by_name
        m.feed(event, *good)
        assert m.data.got == list(good)
        m.feed(event, *good[:-1], None)
        assert m.data.got == [*good[:-1], None]
        for bad in (good[:-1], (*good, 0), (True, *good[1:]), ("0", *good[1:]), (*good[:-1], 1.0)):
            with pytest.raises(FeedArgumentError):
                binder(bad, {})
            with pytest.raises(FeedArgumentError):
                m.feed(event, *bad)
            assert m.data.got == [*good[:-1], None]  # a refused feed changed nothing


def test_bound_parameters_reach_closures_and_keep_other_defaults() -> None:
    """Parameters a nested function captures, and ones left to their defaults, bind as when called by keyword."""
    from loopfsm.core.fastparams import with_params

    def captured(m: Any, ctx: Any, *, n: int, k: int = 1) -> int:
        return (lambda: n + k)()

    assert with_params(captured, {"n": 4})(None, None) == captured(None, None, n=4) == 5
    assert with_params(captured, {"n": 4, "k": 10})(None, None) == captured(None, None, n=4, k=10) == 14
    outer = 7

    def closes_over(m: Any, ctx: Any, *, n: int) -> int:
        return n + outer

    assert with_params(closes_over, {"n": 1})(None, None) == 8
