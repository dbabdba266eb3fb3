"""Session settings and fixtures every test folder shares (see tests/README.md for the layout)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

from loopfsm import Registry

from tests.support.specs import make_registry

# In CI the property and fuzz tests replay the same examples every run, so a
# landing never depends on luck; locally they keep exploring new ones.
# No per-example deadline: on a loaded machine a slow example is not a bug, and a
# flaky "deadline exceeded" would make a landing depend on what else is running.
settings.register_profile("default", deadline=None)
settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "default")


# The spec cache of this test session is its own, fresh directory (inherited by the CLI
# subprocesses tests start), so no run reads or leaves entries in the user's cache.
_CACHE = tempfile.mkdtemp(prefix="loopfsm-test-cache-")
os.environ["LOOPFSM_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)

# Likewise the router's default key file (``$XDG_STATE_HOME/loopfsm/router.key``): one of this test session's
# own, shared by the routers a test restarts, never the user's.
_STATE = tempfile.mkdtemp(prefix="loopfsm-test-state-")
os.environ["XDG_STATE_HOME"] = _STATE
atexit.register(shutil.rmtree, _STATE, ignore_errors=True)


@pytest.fixture
def registry() -> Registry:
    return make_registry()


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A scratch project holding a copy of the shipped machines, made the working directory."""
    shutil.copytree(Path(__file__).resolve().parent.parent / "machines", tmp_path / "machines")
    monkeypatch.chdir(tmp_path)
    return tmp_path
