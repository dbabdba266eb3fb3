"""``loopfsm run MACHINE --script FILE``: the driver each scriptable machine has."""

from __future__ import annotations

import sys
from pathlib import Path

from .agent_script import run_agent_script
from .router_script import run_router_script
from .script import run_brain_script

DRIVERS = {"engine_brain": run_brain_script, "agent_loop": run_agent_script, "router_run": run_router_script}


def run_script(machine: str, path: Path) -> int:
    """Run ``path`` with ``machine``'s driver: its exit code, or 2 for a machine no driver drives."""
    driver = DRIVERS.get(machine)
    if driver is None:
        print(
            f"loopfsm run: only engine_brain, agent_loop and router_run can be driven by a script (got {machine!r})",
            file=sys.stderr,
        )
        return 2
    return driver(path)
