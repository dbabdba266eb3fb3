"""A W3C SCXML document of a table: ``<state>``, ``<final>`` and ``<transition event cond target>``.

SCXML takes the first enabled transition of a state in document order, and a
transition without a target changes no state, so the table maps onto it
branch for branch (see :mod:`.export`).  ``cond`` names the branch's guards,
combined with ``and``, ``or`` and ``not`` (``fare_paid``, ``transient and
idempotent_call``): a platform evaluates it in its own data model, where each
name is the guard's verdict.  What SCXML has no attribute for (guard and
action parameters, the branch's stable name, descriptions, refusals, state
tags) is kept in attributes of the ``urn:loopfsm:scxml`` namespace, which
SCXML processors ignore; parameters are JSON.
"""

from __future__ import annotations

import json
from typing import Any
from xml.etree import ElementTree as ET

from loopfsm.core.spec import Condition, Ref, Spec
from loopfsm.rendering.export import NO_BRANCH_MATCHED, Move, exported_states

SCXML_NS = "http://www.w3.org/2005/07/scxml"
LOOPFSM_NS = "urn:loopfsm:scxml"


def _q(name: str) -> str:
    return f"{{{LOOPFSM_NS}}}{name}"


def cond_of(guards: tuple[Ref, ...]) -> str:
    """Guards that must all hold as one boolean expression of guard names."""
    return " and ".join(_cond(g, len(guards) > 1) for g in guards)


def when_cond(c: Condition) -> str:
    """A ``when:`` condition as comparisons a data model can read: ``outcome == 'gate'``, or several
    joined by ``or`` in brackets (python-statemachine's reader, for one, has no ``in``)."""
    tests = [f"{c.arg} == {v!r}" for v in c.values]
    return f"({' or '.join(tests)})" if len(tests) > 1 else tests[0]


def _cond(g: Ref, inside_and: bool) -> str:
    if g.options:
        text = " or ".join(f"({cond_of(opt)})" if len(opt) > 1 else cond_of(opt) for opt in g.options)
        return f"({text})" if inside_and or len(g.options) > 1 else text
    return f"not {g.name}" if g.negate else g.name


def _ref_json(r: Ref) -> dict[str, Any]:
    if r.options:
        return {"any": [[_ref_json(g) for g in opt] for opt in r.options]}
    out: dict[str, Any] = {"name": r.name}
    if r.params:
        out["params"] = r.params
    if r.negate:
        out["negate"] = True
    return out


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _transition(parent: ET.Element, m: Move) -> None:
    t = ET.SubElement(parent, f"{{{SCXML_NS}}}transition", {"event": m.event})
    conds = [when_cond(c) for c in m.when] + ([cond_of(m.guards)] if m.guards else [])
    if conds:
        t.set("cond", " and ".join(conds))
    if m.when:
        t.set(_q("when"), _json([{"arg": c.arg, "values": list(c.values)} for c in m.when]))
    if m.target is not None:
        t.set("target", m.target)
    t.set(_q("branch"), m.name)
    if m.guards and any(g.params or g.options for g in m.guards):
        t.set(_q("guards"), _json([_ref_json(g) for g in m.guards]))
    if m.actions:
        t.set(_q("actions"), _json([_ref_json(a) for a in m.actions]))
    if m.refusal is not None:
        t.set(_q("refuse"), m.refusal)
    if m.branch is None:
        t.set(_q("raise"), NO_BRANCH_MATCHED)
    if m.description:
        t.set(_q("description"), m.description)


def document(spec: Spec) -> str:
    """The SCXML text of ``spec`` (UTF-8, with an XML declaration)."""
    ET.register_namespace("", SCXML_NS)
    ET.register_namespace("loopfsm", LOOPFSM_NS)
    root = ET.Element(f"{{{SCXML_NS}}}scxml", {"version": "1.0", "name": spec.name, "initial": spec.initial})
    if spec.description.strip():
        root.set(_q("description"), spec.description.strip())
    if spec.policy:
        root.set(_q("policy"), _json({p.name: p.default for p in spec.policy.values()}))
    for st in exported_states(spec):
        el = ET.SubElement(root, f"{{{SCXML_NS}}}{'final' if st.terminal else 'state'}", {"id": st.name})
        if st.description:
            el.set(_q("description"), st.description)
        if st.tags:
            el.set(_q("tags"), " ".join(st.tags))
        if st.terminal_feeds:
            el.set(_q("terminal_feeds"), " ".join(st.terminal_feeds))
        for m in st.moves:
            _transition(el, m)
    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="unicode", xml_declaration=False).join(
        ('<?xml version="1.0" encoding="UTF-8"?>\n', "\n")
    )
