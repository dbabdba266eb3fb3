"""One admitted request being served: what every concern of the service reads and adds to.

The modules of this package are functions over a :class:`Ctx`; the router
itself reaches them only as :class:`Services` (a protocol the
:class:`~loopfsm.router.service.Router` satisfies), so no module imports the
router and none imports another in a circle.  A resumed run hands its brain
back as :class:`Resume` and the router drives the next turn, which is how
the turn loop and the continuations that feed it stay apart.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from loopfsm.router.errors import DamagedHistory, ProtocolError
from loopfsm.core.errors import SnapshotError
from ...machines.engine_brain import LoopMachine
from ...machines.fallback_breaker import FallbackBreaker
from ...machines.tool_breaker import ToolHealth
from loopfsm.router.store import Lease, Row, RunStore, ids
from loopfsm.router.store.records import RunRecord
from .. import protocol as P
from ..atrest import SealedState
from .bundle import RunBundle


class Services(Protocol):
    """What the concerns use of the router: its store, its model routes, its policy and key."""

    provider: Any
    fallback: Any
    model: str
    fallback_model: str
    permissions: dict[str, str]
    policy: Any  # router_run's policy (a class built from the YAML)
    breaker: FallbackBreaker
    breaker_lock: threading.Lock
    max_rounds: int
    max_model_attempts: int
    monotonic: Callable[[], float]
    tracer: Any
    metrics: Any  # the process's RouterMetrics (loopfsm.router.service.metrics)
    sealed_state: SealedState

    def store(self) -> RunStore: ...


@dataclass
class Outcome:
    """What processing ended with: how to feed the phase, and the response's data."""

    kind: str  # needs_decrypt, gate, tools, completed, failed, expired, aborted, broken, sealed
    pause: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Resume:
    """A run that goes on in this request: the turn loop takes it from this brain and these breakers."""

    brain: LoopMachine
    health: ToolHealth


class Ctx:
    """One admitted request being processed."""

    def __init__(
        self,
        services: Services,
        session_id: str,
        req: P.Request,
        lease: Lease,
        record: RunRecord,
        now: int,
        emit: Callable[[str], None],
        phase: Any = None,
    ):
        """``phase`` is the record's router_run instance when admission already restored it (None: restored here)."""
        self.services, self.session_id, self.req = services, session_id, req
        self.lease, self.record, self.now = lease, record, now
        self.phase = record.phase_machine() if phase is None else phase
        self.rows: list[Row] = []
        self.events: list[str | dict[str, Any]] = []
        self._emit = emit
        #: The live run's bundle (None: no run was live and none started in this request).
        self.bundle: RunBundle | None = None
        self.run_id: str = self.phase.data.run_id or ""
        #: The run live when the request was admitted ("" when none), as saved: ``run_id`` moves to a new run.
        self.saved_run_id = self.run_id
        self.to_encrypt: dict[str, str] = {}
        self.expire = False
        # The session's history row as read once for this request (None: not read yet); only the
        # request's own checkpoint writes it, and it holds the lock until then.
        self.history: dict[str, Any] | None = None
        #: The request's span (:class:`.spans.TurnSpan`) when the router traces; None when it does not.
        self.span: Any = None

    @property
    def run(self) -> RunBundle:
        """The bundle of the run this request serves (processing a run's step needs one)."""
        if self.bundle is None:  # pragma: no cover - every path past admission loads or starts one
            raise ProtocolError("no run is live")
        return self.bundle

    @property
    def encrypted(self) -> bool:
        return self.bundle is not None and self.bundle.encrypted

    def event(self, name: str) -> None:
        self.events.append(name)
        self._emit(name)

    def trace(self, row: dict[str, Any]) -> None:
        """An event with metadata (a model call's provider, tokens, latency): a trace row of its own."""
        self.events.append(row)
        self._emit(row["event"])

    def history_row(self) -> dict[str, Any]:
        """The session's history row, read from the store at most once per request.

        Checked here, where it is read, so no step goes on from one the router did not write (changed by
        hand): not a JSON object, a mode neither plaintext nor encrypted, or references that are not
        ``kind:id`` strings each named once raise :class:`DamagedHistory`.  A missing row is a session no
        run has completed in (the sweep ends an expired first run without writing one), so a deleted row
        reads as that.
        """
        if self.history is None:
            row = self.services.store().row(self.session_id, "input", "history")
            self.history = {} if row is None else _checked_history(row.body)
        return dict(self.history)

    # -- rows -------------------------------------------------------------------------------
    def rid(self, slot: str) -> str:
        """A new row's id, from (session, run, step, slot): no other step of any run can mint it.

        A row a later step updates (a tool call's result, a diff's status) is
        addressed by the ref minted here, never by deriving the id again.
        """
        return ids.row_id(self.session_id, self.run_id, self.lease.step, slot)

    def put(self, kind: str, row_id: str, meta: dict[str, Any], content: Any = None, sealed: Any = None) -> None:
        """Write a row now; in an encrypted session content never reaches a row (only its seal does)."""
        body = None if self.encrypted else content
        self.rows.append(Row(kind, f"{kind}/{row_id}", meta, body=body, sealed=sealed, row_id=row_id))
        self.run.meta[f"{kind}:{row_id}"] = meta

    def hold_for_seal(self, ref: str, text: str, meta: dict[str, Any]) -> None:
        """Router-authored content of an encrypted session: handed out in to_encrypt, written when sealed."""
        self.to_encrypt[ref] = text
        self.run.pending_seals()[ref] = meta
        self.run.meta[ref] = meta


def restore(run: RunBundle) -> tuple[LoopMachine, ToolHealth]:
    """The brain and the tool breakers a paused run kept."""
    if run.brain is None or run.health is None:  # pragma: no cover - a paused run always kept both
        raise SnapshotError("the live run's bundle holds no brain")
    return LoopMachine.restore(run.brain), ToolHealth.restore(run.health)


def _checked_history(body: object) -> dict[str, Any]:
    """A history row's body as the router writes it, or :class:`DamagedHistory` saying what is not."""
    if not isinstance(body, dict):
        raise DamagedHistory("this session's history row is not a JSON object (changed by hand)")
    if body.get("mode") not in (None, "plaintext", "encrypted"):
        raise DamagedHistory(
            "this session's history row names a mode neither plaintext nor encrypted (changed by hand)"
        )
    refs = body.get("refs", [])
    if (
        not isinstance(refs, list)
        or not all(isinstance(r, str) and ":" in r for r in refs)
        or len(set(refs)) != len(refs)  # each row holds one message, written once
    ):
        raise DamagedHistory("this session's history row holds references the router did not write (changed by hand)")
    return dict(body)
