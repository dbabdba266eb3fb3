"""The run-state store: the router's saved runs on SQLite (embedded default) or PostgreSQL (shared).

    from loopfsm.router.store import open_store
    store = open_store("sqlite:///runs.db", create=True)
    adm = store.admit(session_id, "execute", request_id, holder="router-1")
    if adm.outcome == "admitted":
        ...  # process with no transaction open; store.renew(adm.lease) while it takes long
        store.checkpoint(adm.lease, phase, request_id=request_id, response=response, rows=rows, trace=events)

See :mod:`loopfsm.router.store.runstore` for the protocol and docs/machines/router_run.md
("Crash recovery") for crash recovery.
"""

from . import ids
from .runstore import REQUESTS, Admission, Lease, Row, RunRecord, RunStore, StoredRow, open_store
from .sql import SCHEMA_VERSION
from .sweep import REQUEST_RETENTION_MS, Swept, sweep

__all__ = [
    "open_store",
    "RunStore",
    "RunRecord",
    "Lease",
    "Admission",
    "Row",
    "StoredRow",
    "REQUESTS",
    "SCHEMA_VERSION",
    "REQUEST_RETENTION_MS",
    "Swept",
    "sweep",
    "ids",
]
