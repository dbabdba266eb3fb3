"""Whatever a user does to a machine file, loading it ends in a Spec or a located SpecError, never a crash."""

from __future__ import annotations

import copy
import os

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from loopfsm import SpecError, parse
from loopfsm.machines.engine_brain import REGISTRY as BRAIN
from loopfsm.machines.tool_breaker import REGISTRY as BREAKER
from loopfsm.core.resources import machine_path

pytestmark = pytest.mark.slow  # fuzzes machine files and snapshots

DOCS = {
    name: (yaml.safe_load(machine_path(name).read_text()), reg)
    for name, reg in (("engine_brain", BRAIN), ("tool_breaker", BREAKER))
}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 300),
    st.text(max_size=8),
    st.sampled_from(["Start", "Terminal", "Closed", "stay", "*", "flag", "policy"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6,
)


def paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, prefix + (i,))


def mutate(doc, path, how, value):
    doc = copy.deepcopy(doc)
    if not path:
        return value if how == "replace" else doc
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    last = path[-1]
    if how == "delete":
        del parent[last]
    elif how == "replace":
        parent[last] = value
    elif how == "rename" and isinstance(parent, dict):
        parent[str(value)[:12] or "x"] = parent.pop(last)
    return doc


@settings(max_examples=int(os.environ.get("LOOPFSM_FUZZ", 150)), deadline=None)
@given(data=st.data(), which=st.sampled_from(sorted(DOCS)), n=st.integers(1, 3))
def test_mutated_machine_files_fail_cleanly(data, which, n):
    doc, reg = DOCS[which]
    for _ in range(n):
        all_paths = list(paths(doc))
        path = data.draw(st.sampled_from(all_paths))
        doc = mutate(doc, path, data.draw(st.sampled_from(["delete", "replace", "rename"])), data.draw(values))
    text = yaml.safe_dump(doc, sort_keys=False)
    try:
        parse(text, "fuzz.yaml", reg)
    except SpecError as err:
        assert err.problems and all(p.file == "fuzz.yaml" and p.line >= 1 and p.message for p in err.problems)


def brain_snapshots():
    from tests.support.brain_helpers import brain_in

    return [
        brain_in(s).snapshot() for s in ("Start", "AwaitingModel", "AwaitingTools", "AwaitingCompaction", "Terminal")
    ]


SNAPS = None


@settings(max_examples=int(os.environ.get("LOOPFSM_FUZZ", 200)), deadline=None)
@given(data=st.data(), which=st.integers(0, 4), n=st.integers(1, 3))
def test_corrupted_snapshots_restore_or_are_refused(data, which, n):
    """A restored machine is whole, or restore raises SnapshotError: never another exception."""
    import json

    from loopfsm import SnapshotError
    from loopfsm.machines.engine_brain import LoopMachine, MachinePolicy

    global SNAPS
    SNAPS = SNAPS or brain_snapshots()
    snap = SNAPS[which]
    for _ in range(n):
        path = data.draw(st.sampled_from(list(paths(snap))))
        snap = mutate(snap, path, data.draw(st.sampled_from(["delete", "replace", "rename"])), data.draw(values))
    try:
        m = LoopMachine.restore(snap)
    except SnapshotError:
        return
    m.next_step(policy=MachinePolicy())  # a restored machine can be asked
    assert LoopMachine.restore(json.loads(json.dumps(m.snapshot()))).snapshot() == m.snapshot()
