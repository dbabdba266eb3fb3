"""What the run-state store reads and writes: a session's saved row, a lease, an admission, a step's rows.

Plain values, and their decoding from the columns the store selects, kept
apart from :mod:`loopfsm.router.store.runstore` (the statements that admit, lease,
checkpoint and recover) so a caller that only holds or inspects these values
(the router, the sweep) need not read the protocol to find them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from loopfsm.core.errors import shown
from loopfsm.router.errors import DamagedRow
from loopfsm.machines.router_run import ROUTER_RUN
from loopfsm.machines.run_lock import RUN_LOCK


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class RunRecord:
    """The saved row of one session, as read."""

    session_id: str
    phase: str
    snapshot: dict[str, Any]
    version: int
    fence: int
    holder: str | None
    started_at: int | None
    lease_expires_at: int | None
    cancel_requested: str | None
    last_request_id: str | None
    last_response: Any
    updated_at: int

    def lock_state(self, now_ms: int) -> Literal["free", "held", "expired"]:
        """The lock as of ``now_ms``, as run_lock decides it: its sweeper feed ``expire`` frees a lease that ran out.

        The machine is asked rather than the rule restated here; the store's
        conditional UPDATEs repeat the comparison in SQL only so that deciding
        and taking the lock stay one atomic statement.
        """
        if self.holder is None or self.lease_expires_at is None:
            return "free"
        return "expired" if self.lock_machine().expire(now_ms) else "held"

    def phase_machine(self) -> Any:
        """The router_run instance this row holds (restored from its snapshot)."""
        return ROUTER_RUN.restore(self.snapshot)

    def lock_machine(self) -> Any:
        """The run_lock instance equivalent to this row's lock columns (for checking against the model)."""
        snap: dict[str, Any] = {
            "format": 1,
            "machine": "run_lock",
            "fingerprint": RUN_LOCK.fingerprint,
            "data": {"fence": self.fence, "last_now": self.updated_at},
        }
        if self.holder is None:
            snap.update(state="Free", state_data={})
        else:
            snap.update(
                state="Held",
                state_data={
                    "holder": self.holder,
                    "started_at": self.started_at,
                    "lease_expires_at": self.lease_expires_at,
                    "cancel_requested": self.cancel_requested,
                },
            )
        return RUN_LOCK.restore(snap)


@dataclass(frozen=True)
class Lease:
    """Proof of holding a run's lock: every later write names this fence."""

    session_id: str
    holder: str
    fence: int
    version: int  # the run_state version the holder read; its checkpoint commits version + 1
    started_at: int
    lease_expires_at: int
    cancel_requested: str | None = None

    @property
    def step(self) -> int:
        """The step number this lease's checkpoint commits (rows are written under it)."""
        return self.version + 1


@dataclass(frozen=True)
class Admission:
    """What ``admit`` decided.

    ``outcome`` is ``admitted`` (``lease`` set; ``took_over``/``preempted`` say
    how; ``answer`` ``expire`` when the request only ends a pause that waited
    too long), ``replayed`` (``response`` is the stored response of this
    request_id, None when it was not stored)
    or ``refused`` (``answer`` is busy, run_live, not_allowed or idle;
    ``allowed_continuations`` what the phase accepts; ``retry_after_ms`` for busy).
    ``rule`` names the admission rule that answered.  ``phase`` is the
    router_run instance the decision was asked of (restored from ``record``'s
    snapshot once): an admitted request's processing takes it over rather
    than restoring the same snapshot again; it is the caller's to feed.
    """

    outcome: Literal["admitted", "replayed", "refused"]
    answer: str
    rule: str
    record: RunRecord
    lease: Lease | None = None
    response: Any = None
    took_over: bool = False
    preempted: bool = False
    retry_after_ms: int | None = None
    allowed_continuations: list[str] = field(default_factory=list)
    phase: Any = None


@dataclass(frozen=True)
class Row:
    """A row a step writes.  ``slot`` names its place in the step (its id is derived from it).

    ``body`` is clear JSON (plaintext sessions, and the short-lived clear kinds);
    ``sealed`` a ciphertext envelope; never both.  ``meta`` is non-secret.
    """

    kind: str
    slot: str
    meta: dict[str, Any]
    body: Any = None
    sealed: Any = None
    row_id: str | None = None  # a ref minted earlier (message:<id> handed to the client) keeps its id


@dataclass(frozen=True)
class StoredRow:
    session_id: str
    kind: str
    row_id: str
    run_id: str
    step: int
    ord: int
    meta: dict[str, Any]
    body: Any
    sealed: Any
    written_fence: int


ROW_COLS = "session_id, kind, row_id, run_id, step, ord, meta, body, sealed, written_fence"


def stored_row(r: tuple[Any, ...]) -> StoredRow:
    """A row as selected with ``ROW_COLS``: meta always JSON, body and sealed JSON or NULL.

    A column that does not parse (changed by hand: not JSON, or nested past the parser) raises
    :class:`DamagedRow` naming the row, not the parser's ValueError or RecursionError.
    """
    try:
        return StoredRow(
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            r[5],
            json.loads(r[6]),
            None if r[7] is None else json.loads(r[7]),
            None if r[8] is None else json.loads(r[8]),
            r[9],
        )
    except (ValueError, TypeError, RecursionError):
        raise DamagedRow(
            f"stored row {shown(r[1], 20)}:{shown(r[2], 60)} does not read back as JSON (changed by hand)"
        ) from None


STATE_COLS = (
    "session_id, phase, snapshot, version, fence, holder, started_at, lease_expires_at, cancel_requested, "
    "last_request_id, last_response, updated_at"
)


def run_record(r: Sequence[Any]) -> RunRecord:
    """A saved row as selected with ``STATE_COLS``."""
    return RunRecord(
        r[0],
        r[1],
        json.loads(r[2]),
        r[3],
        r[4],
        r[5],
        r[6],
        r[7],
        r[8],
        r[9],
        None if r[10] is None else json.loads(r[10]),
        r[11],
    )


#: One encoder for every value the store writes: ``json.dumps`` with options builds a new encoder each call, which
#: was 2% of the router's instructions a turn, plaintext or encrypted (callgrind, benchmarks/router_turn_cpu.py).
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def dump(value: Any) -> str:
    """JSON as the store writes it: sorted keys, no spaces (equal values, equal text)."""
    return _ENCODER.encode(value)
