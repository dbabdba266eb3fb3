"""An XState v5 machine config (JSON) of a table, for Stately's editor and ``@xstate/graph``.

XState v5 names guards and actions by ``type`` with ``params``, picks the first
enabled transition of an event's array and treats a transition without a
target as "stay" (no exit, no entry), so the table maps onto it branch for
branch (see :mod:`.export` for what is carried and what is not).  Guards XState
can only combine in code (``and``, ``or``, ``not``) are written as guard
objects of type ``loopfsm.and``, ``loopfsm.or`` and ``loopfsm.not`` whose params
hold the guards they combine; a loopfsm name has no dot, so these never clash
with a registered guard.  A ``{policy: name}`` parameter is kept as written,
and the policy's defaults are in the machine's ``meta.policy``.
"""

from __future__ import annotations

import json
from typing import Any

from loopfsm.core.spec import Condition, Ref, Spec
from loopfsm.rendering.export import NO_BRANCH_MATCHED, Move, exported_states

AND, OR, NOT = "loopfsm.and", "loopfsm.or", "loopfsm.not"
WHEN = "loopfsm.when"
REFUSE = "loopfsm.refuse"
RAISE = "loopfsm.raise"


def _object(name: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"type": name, "params": params} if params else {"type": name}


def guard_object(g: Ref) -> dict[str, Any]:
    """One guard of the table as an XState guard object."""
    if g.options:
        return {"type": OR, "params": {"guards": [all_of(opt) for opt in g.options]}}
    plain = _object(g.name, dict(g.params))
    return {"type": NOT, "params": {"guard": plain}} if g.negate else plain


def all_of(guards: tuple[Ref, ...]) -> dict[str, Any]:
    """Guards that must all hold (a branch's list) as one guard object."""
    if len(guards) == 1:
        return guard_object(guards[0])
    return {"type": AND, "params": {"guards": [guard_object(g) for g in guards]}}


def when_object(c: Condition) -> dict[str, Any]:
    """A ``when:`` condition as an XState guard object: the argument holds one of the values."""
    return {"type": WHEN, "params": {"arg": c.arg, "values": list(c.values)}}


def transition(move: Move) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if move.target is not None:
        out["target"] = move.target
    conditions = [when_object(c) for c in move.when] + ([all_of(move.guards)] if move.guards else [])
    if len(conditions) == 1:
        out["guard"] = conditions[0]
    elif conditions:
        out["guard"] = {"type": AND, "params": {"guards": conditions}}
    if move.branch is None:
        actions = [{"type": RAISE, "params": {"error": NO_BRANCH_MATCHED}}]
    elif move.refusal is not None:
        actions = [{"type": REFUSE, "params": {"message": move.refusal}}]
    else:
        actions = [_object(a.name, dict(a.params)) for a in move.actions]
    if actions:
        out["actions"] = actions
    if move.description:
        out["description"] = move.description
    out["meta"] = {"branch": move.name}
    return out


def machine_config(spec: Spec) -> dict[str, Any]:
    """The XState v5 config of ``spec`` as a JSON-ready dict."""
    states: dict[str, Any] = {}
    for st in exported_states(spec):
        node: dict[str, Any] = {}
        if st.terminal:
            node["type"] = "final"
        if st.description:
            node["description"] = st.description
        if st.tags:
            node["tags"] = list(st.tags)
        on: dict[str, list[dict[str, Any]]] = {}
        for m in st.moves:
            on.setdefault(m.event, []).append(transition(m))
        if on:
            node["on"] = on
        if st.terminal_feeds:
            node["meta"] = {"terminal_feeds": list(st.terminal_feeds)}
        states[st.name] = node
    config: dict[str, Any] = {"id": spec.name, "initial": spec.initial}
    if spec.description.strip():
        config["description"] = spec.description.strip()
    if spec.policy:
        config["meta"] = {"policy": {p.name: p.default for p in spec.policy.values()}}
    config["states"] = states
    return config


def machine_json(spec: Spec) -> str:
    return json.dumps(machine_config(spec), indent=2, ensure_ascii=False) + "\n"
