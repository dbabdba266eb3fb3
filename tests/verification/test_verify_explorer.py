"""The explorer's shortcuts give the answers of the plain way: fingerprints, kept bindings, untried copies."""

from __future__ import annotations

from pathlib import Path

from loopfsm.core.compiler import compile_file
from loopfsm.verification.verify import _args_key, _Fingerprints, _key

ROOT = Path(__file__).resolve().parents[2]


def test_a_binding_is_kept_apart_for_values_a_dict_would_take_as_equal():
    keys = {_args_key("f", (("n", v),)) for v in (1, True, 1.0)}
    assert len(keys) == 3
    assert _args_key("f", (("x", 0.0),)) != _args_key("f", (("x", -0.0),))
    assert _args_key("f", (("n", 1),)) != _args_key("g", (("n", 1),))
    assert _args_key("f", (("n", [1]),)) is None  # a list: not kept


def test_the_raw_shortcut_gives_the_canonical_fingerprint():
    compiled = compile_file(ROOT / "machines" / "tool_breaker.yaml")
    prints = _Fingerprints(frozenset())
    inst = compiled.new()
    canonical = _key(inst.snapshot(), 3)
    assert prints.of(inst, 3) == canonical == _key(inst._encoded(), 3)
    assert prints.of(inst, 3) == canonical  # found by its raw values this time
    assert prints.of(inst, 4) != canonical  # the largest time fed is part of it
    inst.feed("acquire", now=0, call_id="c")
    assert prints.of(inst, 3) == _key(inst.snapshot(), 3) != canonical


def test_values_that_pickle_differently_but_encode_alike_share_a_fingerprint():
    compiled = compile_file(ROOT / "machines" / "stream_assembly.yaml")
    prints = _Fingerprints(frozenset())
    prints._direct = 0  # past the first fingerprints, which are taken the canonical way
    a, b = compiled.new(), compiled.new()
    a.data.usage = {"input_tokens": 1, "output_tokens": 2}
    b.data.usage = {"output_tokens": 2, "input_tokens": 1}  # the same, kept in another order: pickled differently
    assert prints.of(a, 0) == prints.of(b, 0) == _key(a._encoded(), 0)
    assert len(prints._by_raw) == 2


def test_the_first_fingerprints_skip_the_shortcut_and_agree_with_it():
    compiled = compile_file(ROOT / "machines" / "turnstile.yaml")
    direct, shortcut = _Fingerprints(frozenset()), _Fingerprints(frozenset())
    shortcut._direct = 0
    inst = compiled.new()
    assert direct.of(inst, 3) == shortcut.of(inst, 3) == _key(inst.snapshot(), 3)
    assert direct._by_raw == {} and len(shortcut._by_raw) == 1
    assert direct._direct == _Fingerprints.DIRECT - 1


def test_a_value_pickle_refuses_is_fingerprinted_the_canonical_way(monkeypatch):
    compiled = compile_file(ROOT / "machines" / "turnstile.yaml")
    prints = _Fingerprints(frozenset())
    prints._direct = 0
    inst = compiled.new()
    import loopfsm.verification.verify as verify

    def refuse(*_args, **_kw):
        raise TypeError("cannot pickle 'generator' object")

    monkeypatch.setattr(verify.pickle, "dumps", refuse)
    assert prints.of(inst, 0) == _key(inst.snapshot(), 0)
