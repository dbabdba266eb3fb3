"""Deterministic ids: a retried step writes the same ids, so a retry overwrites instead of duplicating."""

from __future__ import annotations

import uuid

NAMESPACE = uuid.UUID("5d0c8f7e-2b7a-4c55-9a39-6c1f4e1b7a10")  # loopfsm's own; never change it
_SEP = "\x1f"


def run_id(session_id: str, request_id: str) -> str:
    """The id of the run an execute or inject starts: the same request always starts the same run."""
    return str(uuid.uuid5(NAMESPACE, _SEP.join(("run", session_id, request_id))))


def row_id(session_id: str, run_id: str, step: int, slot: str) -> str:
    """The id of a row a step writes in ``slot`` (``assistant``, ``tool_call/0``, ``trace/2`` ...)."""
    return str(uuid.uuid5(NAMESPACE, _SEP.join(("row", session_id, run_id, str(step), slot))))
