"""Where the bundled schema and machine files are, installed or in a checkout, and an operator's edited tables.

A wheel carries ``spec/`` and ``machines/`` inside the package (``_bundled``);
an editable install or a plain checkout reads them from the project root, so
the YAML a user edits in ``machines/`` is the YAML the package runs.  A
deployment that must not edit the installed package names a directory of
edited machine files in ``LOOPFSM_MACHINES``: ``DIR/NAME.yaml``, where it
exists, is what the machine ``NAME`` runs (a router and its sweep alike).
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ConfigError

_PKG = Path(__file__).resolve().parent.parent  # the loopfsm package (this module is in loopfsm/core)

#: The environment variable naming a directory of edited machine files that replace the shipped ones.
MACHINES_VARIABLE = "LOOPFSM_MACHINES"


def _find(*parts: str) -> Path:
    checkout = _PKG.parent.joinpath(*parts)
    if checkout.exists():
        return checkout
    return _PKG.joinpath("_bundled", *parts)


def schema_path() -> Path:
    return _find("spec", "machine.schema.json")


def edited_machines_dir() -> Path | None:
    """The directory ``LOOPFSM_MACHINES`` names (None when unset or empty); ConfigError when it is not one.

    A mistyped directory must stop the process that was told to run edited
    tables, not leave it running the shipped ones without a word.
    """
    value = os.environ.get(MACHINES_VARIABLE)
    if not value:
        return None
    where = Path(value)
    if not where.is_dir():
        raise ConfigError(f"{MACHINES_VARIABLE} names {value!r}, which is not a directory of machine files")
    return where


def machine_path(name: str) -> Path:
    """The YAML file machine ``name`` runs (``machine_path("engine_brain")``): the edited one, else the shipped one."""
    edited = edited_machines_dir()
    if edited is not None and (edited / f"{name}.yaml").is_file():
        return edited / f"{name}.yaml"
    return _find("machines", f"{name}.yaml")
