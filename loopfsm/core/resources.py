"""Where the bundled schema and machine files are, installed or in a checkout.

A wheel carries ``spec/`` and ``machines/`` inside the package (``_bundled``);
an editable install or a plain checkout reads them from the project root, so
the YAML a user edits in ``machines/`` is the YAML the package runs.
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent.parent  # the loopfsm package (this module is in loopfsm/core)


def _find(*parts: str) -> Path:
    checkout = _PKG.parent.joinpath(*parts)
    if checkout.exists():
        return checkout
    return _PKG.joinpath("_bundled", *parts)


def schema_path() -> Path:
    return _find("spec", "machine.schema.json")


def machine_path(name: str) -> Path:
    """The YAML file of a machine that ships with loopfsm, e.g. ``machine_path("engine_brain")``."""
    return _find("machines", f"{name}.yaml")
