"""Every shipped machine that declares invariants is verified to its documented bound, and together they take
under two minutes of CPU time (the bounds are what CI proves on every change)."""

from __future__ import annotations

import time

import pytest

from loopfsm.review.cli import main

from . import test_verify_engine as engine
from . import test_verify_router as router
from . import test_verify_shipped as shipped

pytestmark = pytest.mark.slow  # runs every bound once, for about a minute


def test_the_shipped_machines_verify_together_within_two_minutes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    bounds = [
        [str(shipped.BREAKER), *shipped.BOUND],
        [str(shipped.FALLBACK), *shipped.FALLBACK_BOUND],
        [str(shipped.AGENT_LOOP), *shipped.AGENT_BOUND, *shipped.agent_start(shipped.AGENT_LOOP)],
        [str(shipped.RUN_LOCK), *shipped.LOCK_BOUND],
        [str(engine.BRAIN), *engine.BRAIN_BOUND],
        [str(router.ROUTER_RUN), *router.ROUTER_BOUND],
    ]
    spent = {}
    for args in bounds:
        start = time.process_time()
        assert main(["verify", *args]) == 0, capsys.readouterr().out
        spent[args[0].rsplit("/", 1)[-1]] = time.process_time() - start
    assert sum(spent.values()) < 120, spent
