"""A guard's declared parameters read off its code object are what inspect and get_type_hints say."""

from __future__ import annotations

import functools
from typing import Any, Literal

import pytest

from loopfsm.core import registry as registry_module
from loopfsm.core.errors import RegistryError
from loopfsm.core.registry import DataField, Registry
from loopfsm.core.registries import Registries


def general(fn: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The parameters by ``inspect.signature`` and ``typing.get_type_hints`` alone."""
    with monkeypatch.context() as m:
        m.setattr(registry_module, "_plain_params", lambda *a: None)
        return registry_module._params_of(fn, "guard", "g")


def test_every_shipped_guard_action_and_result_reads_the_same_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    registries = Registries()
    fast = 0
    for name in registries.names():
        reg = registries.get(name)
        for kind, entries in reg.entries.items():
            for key, entry in entries.items():
                if registry_module._plain_params(entry.fn, kind, key) is not None:
                    fast += 1
                assert registry_module._params_of(entry.fn, kind, key) == general(entry.fn, monkeypatch), key
    assert fast > 50  # most of them take the quick reading


def unresolvable(m: Any, ctx: Any, *, n: int, field: NotDefinedAnywhere) -> bool:  # type: ignore[name-defined]  # noqa: F821
    return True


def plain(m: Any, ctx: Any, *, n: int, label: str = "x", field: DataField, free=None) -> None:  # type: ignore[no-untyped-def]
    pass


def literal(m: Any, ctx: Any, *, mode: Literal["a", "b"] = "a", n: None = None) -> bool:
    return True


def test_edge_cases_match_the_general_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    for fn in (unresolvable, plain, literal, functools.partial(plain)):
        assert registry_module._params_of(fn, "guard", "g") == general(fn, monkeypatch)
    assert registry_module._plain_params(plain, "guard", "g") is not None
    assert registry_module._plain_params(literal, "guard", "g") is None  # Literal: the general path decides
    # the annotation that does not resolve is unknown; its neighbour is still checked
    assert {k: p.type for k, p in registry_module._params_of(unresolvable, "guard", "g").items()} == {
        "n": int,
        "field": Any,
    }
    p = registry_module._params_of(plain, "guard", "g")
    assert (p["n"].type, p["n"].required, p["label"].required, p["field"].type, p["free"].type) == (
        int,
        True,
        False,
        DataField,
        Any,
    )


def test_wrong_shapes_are_refused_with_the_same_words() -> None:
    reg = Registry("shapes")

    def one(m: Any) -> bool:
        return True

    def star(m: Any, ctx: Any, *rest: Any) -> bool:
        return True

    def kwargs(m: Any, ctx: Any, **rest: Any) -> bool:
        return True

    with pytest.raises(RegistryError, match="exactly two positional arguments .* it takes 1 positional"):
        reg.guard(one)
    for fn in (star, kwargs):
        with pytest.raises(RegistryError, match=r"may not take \*args or \*\*kwargs"):
            reg.guard(fn)


class _Callable:
    def __call__(self, m: Any, ctx: Any) -> bool:
        return True


def _guard_with_y(m: Any, ctx: Any, *, y: int) -> bool:
    return True


@pytest.mark.parametrize(
    "register, words",
    [
        (lambda r: r.guard(functools.partial(_guard_with_y, y=1)), "and a partial has none: register it with name="),
        (lambda r: r.guard(_Callable()), "and a _Callable has none: register it with name="),
        (lambda r: r.guard(lambda m, ctx: True), "and a lambda has none: register it with name="),
        (lambda r: r.guard(42, name="n"), "a guard is a callable, got int"),
        (lambda r: r.action(_guard_with_y, name="not valid!"), "action name 'not valid!' is not a Python identifier"),
        (lambda r: r.guard(_guard_with_y, reads="y"), "reads= takes a tuple of argument names, got 'y'"),
    ],
    ids=["partial", "callable object", "lambda", "not callable", "bad name", "reads as a string"],
)
def test_what_cannot_be_named_in_yaml_is_refused_at_registration(register, words):
    with pytest.raises(RegistryError, match=words.replace("(", "\\(")):
        register(Registry("t"))


def test_a_callable_object_registered_with_a_name_is_kept():
    r = Registry("t")
    r.guard(_Callable(), name="always")
    assert "always" in r.entries["guard"]


def test_one_unresolvable_annotation_leaves_the_other_parameters_checked():
    namespace: dict[str, Any] = {}
    exec(  # noqa: S102 - a module whose annotations name a class imported only for type checkers
        "from __future__ import annotations\n"
        "def plain(m, ctx, *, limit: int, price: Decimal) -> bool:\n    return True\n"
        "def general(m, ctx, *, limit: int | None, price: Decimal) -> bool:\n    return True\n",
        namespace,
    )
    r = Registry("t")
    r.guard(namespace["plain"])
    r.guard(namespace["general"])
    for name, want in (("plain", int), ("general", int | None)):
        params = r.entries["guard"][name].params
        assert params["limit"].type == want and params["price"].type is Any, name


@pytest.mark.parametrize(
    "register, words",
    [
        (lambda r: r.codec("money", "int", str, int), "codec 'money' needs a Python type"),
        (lambda r: r.codec("My Codec!", int, str, int), "a codec is named in YAML by an identifier"),
        (lambda r: r.codec("money", int, str, int, ["not a schema"]), "schema is a JSON Schema object"),
        (lambda r: r.error(42), "an error class is an exception class, got 42"),
        (
            lambda r: (r.error(KeyError, name="Lookup"), r.error(ValueError, name="Lookup")),
            "'Lookup' is registered twice",
        ),
    ],
    ids=["type as text", "codec name", "schema shape", "error not a class", "error name twice"],
)
def test_codecs_and_error_classes_are_checked_when_registered(register, words):
    with pytest.raises(RegistryError, match=words):
        register(Registry("t"))


def test_a_codec_whose_schema_is_not_json_schema_is_a_registry_error_at_the_first_restore():
    from loopfsm import compile_spec, parse

    r = Registry("codecs")
    r.codec("cents", int, lambda v: v, lambda v: v, {"type": "nonsense"})
    text = """\
machine: wallet
description: a codec with a broken schema
data:
  total: {type: cents, default: 0}
states:
  open: {initial: true, description: taking payments}
  closed: {terminal: true, description: done}
events:
  close:
    description: close the wallet
    from:
      open:
        - to: closed
"""
    machine = compile_spec(parse(text, "wallet.yaml", r), r)
    snap = machine.new().snapshot()
    with pytest.raises(RegistryError, match="the schema of codec 'cents' is not a valid JSON Schema"):
        machine.Instance.restore(snap)


def test_a_parameter_listing_a_feed_arguments_values_is_held_to_its_enum_where_used(tmp_path):
    """stream_assembly's header_fits_lane takes the lanes that carry a header; a misspelt lane in the table is an error
    at its own line, with the near name, not a header silently refused at run time."""
    from pathlib import Path

    from loopfsm import SpecError, load

    shipped = (Path(__file__).resolve().parents[2] / "machines" / "stream_assembly.yaml").read_text()
    good = "headed: [tool, server_tool, server_result]"
    assert shipped.count(good) == 1
    (tmp_path / "stream_assembly.yaml").write_text(shipped.replace(good, "headed: [tool, server_tol, server_result]"))
    with pytest.raises(SpecError) as err:
        load(tmp_path / "stream_assembly.yaml")
    (problem,) = err.value.problems
    line = next(i for i, t in enumerate(shipped.splitlines(), 1) if good in t)
    assert problem.line == line and problem.path.endswith("params.headed[1]")
    assert "lists values of argument 'lane'" in problem.message and "did you mean 'server_tool'" in problem.message


def test_values_of_an_argument_the_feed_does_not_take_is_an_error_at_the_parameter(tmp_path):
    from pathlib import Path

    from loopfsm import SpecError, load

    shipped = (Path(__file__).resolve().parents[2] / "machines" / "stream_assembly.yaml").read_text()
    lane = "      lane: {type: string, enum:"
    assert shipped.count(lane) == 1
    (tmp_path / "stream_assembly.yaml").write_text(shipped.replace(lane, "      kind: {type: string, enum:"))
    with pytest.raises(SpecError) as err:
        load(tmp_path / "stream_assembly.yaml")
    said = [p.message for p in err.value.problems if "values of argument 'lane'" in p.message]
    assert said == [
        "parameter 'headed' of guard 'header_fits_lane' names values of argument 'lane', which this feed does not take"
    ]
