"""Helpers for the planted-fault and generated-path tests of `loopfsm verify` and `loopfsm paths`.

Each shipped machine's invariants are shown to catch a fault planted in a copy of its YAML, and
`paths` output is run as the tests it writes; these are the shared steps of both.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from loopfsm.core import tracing
from loopfsm.verification.coverage import Collector


def planted_copy(source: Path, directory: Path, old: str, new: str) -> Path:
    """A copy of ``source`` in ``directory`` with ``old`` replaced by ``new`` (which must be there)."""
    text = source.read_text(encoding="utf-8")
    assert old in text, f"the fault's anchor is no longer in {source.name}: {old!r}"
    faulty = directory / source.name
    faulty.write_text(text.replace(old, new), encoding="utf-8")
    return faulty


def run_generated_module(path: Path) -> tuple[int, set[tuple[str, str]]]:
    """Run every test function of a module `loopfsm paths` wrote; how many, and the rows they took."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    collector = Collector()
    tests = [fn for name, fn in vars(module).items() if name.startswith("test_")]
    with tracing.global_sink(collector):
        for fn in tests:
            fn()
    return len(tests), set().union(*collector.taken.values())
