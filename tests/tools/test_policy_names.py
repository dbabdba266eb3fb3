"""A policy number named wrong, from a library call or verify's and paths' --set and --variant, is said plainly:
the name refused, a did-you-mean, no Python signature."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopfsm.core.compiler import compile_file
from loopfsm.core.errors import PolicyError

MACHINE = str(Path(__file__).parents[2] / "machines" / "tool_breaker.yaml")


def test_a_library_call_names_the_unknown_policy_number():
    with pytest.raises(PolicyError) as err:
        compile_file(MACHINE).policy({"max_probe": 2})
    assert str(err.value) == "tool_breaker: no policy number 'max_probe'; did you mean 'max_probes'?"
