"""Checks of a machine file's ``verify:`` section (:class:`~loopfsm.core.spec.VerifyModel`): the bound
``loopfsm verify`` explores it to, declared with the table.

A model checker needs a finite model: how deep to look, which small policy
numbers make the interesting things happen within that depth, which values
to feed each argument, which counters to count as one, and where runs start.
Kept in test files, such a bound is invisible to a user who runs ``loopfsm
verify`` bare, who then sees either minutes of search or a "holds" about runs
never explored.  Declared with the table (as TLC keeps a ``.cfg`` beside its
spec), it is checked with the table at file:line:col and used whenever the
command line does not say otherwise.  It never changes behaviour, so it is
outside the fingerprint.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import did_you_mean
from .fieldtypes import policy_value_problem, python_checker
from .registry import BUILTIN_CODECS
from .spec import FieldDef, Spec

if TYPE_CHECKING:  # pragma: no cover
    from .source import PathT


def argument_fields(spec: Spec) -> dict[str, list[FieldDef]]:
    """Every name a ``values`` key may take: ``ARG`` (every feed's or decision's argument of that name) and
    ``FEED.ARG``, each with the argument definitions it covers."""
    out: dict[str, list[FieldDef]] = {}
    owners = [*((e.name, e.args) for e in spec.events.values()), *((d.name, d.args) for d in spec.decisions.values())]
    for owner, args in owners:
        for name, f in args.items():
            out.setdefault(name, []).append(f)
            out[f"{owner}.{name}"] = [f]
    return out


def value_misfit(f: FieldDef, value: Any) -> str | None:
    """What argument (or field) ``f`` takes, in words (``an integer (at least 0)``), when a JSON value given
    for it is not one of its values; None when it is (or when ``f`` is of a registry's type: its values are
    decoded when verify runs).

    It asks what a feed asks of its arguments (the type, each item of a list, an ``enum``, the bounds,
    ``null``), so a value that could only be refused when fed (and the feed then never explored) is refused
    where it is given: in the ``verify:`` section and an argument's ``verify: values`` by ``check``, on the
    command line by ``--values``.
    """
    codec = BUILTIN_CODECS.get(f.type)
    low, high = f.minimum, f.maximum
    if f.type not in ("integer", "number") and (low is not None or high is not None):
        return None  # bounds on another type are the checker's error (and compare with nothing)
    if codec is None or python_checker(f, codec)(value):  # what a feed checks its arguments with
        return None
    limits = ([f"one of {', '.join(map(repr, f.enum))}"] if f.enum else []) + [
        f"{word} {bound}" for word, bound in (("at least", low), ("at most", high)) if bound is not None
    ]
    article = "an" if f.type[0] in "aeiou" else "a"
    return f"{article} {f.type}{' list' if f.list else ''}" + (f" ({', '.join(limits)})" if limits else "")


def check_verify_model(
    spec: Spec, error: Callable[[PathT, str], None], state_ref: Callable[[str, PathT], bool]
) -> None:
    """Report each name the ``verify:`` section gives that the table does not have, and each value that does
    not fit, at its own place."""
    model = spec.verify_model
    if model is None:
        return
    p = model.path
    for name, value in model.policy.items():
        param = spec.policy.get(name)
        if param is None:
            error(p + ("policy", name), f"no policy number '{name}'{did_you_mean(name, spec.policy)}")
            continue
        problem = policy_value_problem(param, value)
        if problem:
            error(p + ("policy", name), f"policy '{name}' = {value!r} {problem}")
    arguments = argument_fields(spec)
    for name, values in model.values.items():
        fields = arguments.get(name)
        if fields is None:
            error(p + ("values", name), f"no argument '{name}'{did_you_mean(name, arguments)}")
            continue
        for i, value in enumerate(values):
            kind = next((k for k in (value_misfit(f, value) for f in fields) if k is not None), None)
            if kind is not None:
                error(p + ("values", name, i), f"value {value!r} is not {kind}: argument '{name}' takes it")
    for i, name in enumerate(model.forget):
        if name not in spec.data:
            error(p + ("forget", i), f"unknown data field '{name}'{did_you_mean(name, spec.data)}")
    for start in model.starts:
        state = start.state if start.state is not None else spec.initial
        if start.state is not None and not state_ref(start.state, start.path + ("state",)):
            continue
        for section, fields_ in (("data", spec.data), ("state_data", spec.states[state].data)):
            for name, value in getattr(start, section).items():
                f = fields_.get(name)
                where = start.path + (section, name)
                if f is None:
                    owner = "the machine" if section == "data" else f"state '{state}'"
                    error(where, f"{owner} has no data field '{name}'{did_you_mean(name, fields_)}")
                elif (kind := value_misfit(f, value)) is not None:
                    error(where, f"value {value!r} is not {kind}: field '{name}'")
    for name in model.unexercised:
        if name not in spec.invariants:
            error(p + ("unexercised", name), f"no invariant '{name}'{did_you_mean(name, spec.invariants)}")
