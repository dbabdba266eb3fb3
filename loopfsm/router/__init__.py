"""The reference router service: execute / continue over a run-state store, every machine composed.

    from loopfsm.router import Router
    router = Router("sqlite:///runs.db", create=True)
    response = router.handle("s1", {"type": "execute", "request_id": "r1", "data": {"prompt": "hi"}})

See :mod:`loopfsm.router.service` for the rules, :mod:`loopfsm.router.protocol`
for the messages and :mod:`loopfsm.router.http` for the ASGI app.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .session_id import SESSION_ID_PATTERN as SESSION_ID_PATTERN

# Imported on first use (PEP 562): the command line imports loopfsm.cli.router_commands for every
# command, and only ``router serve`` needs the service, the store and the providers behind it.
_EXPORTS = {"Router": "service", "DEMO_SCRIPT": "service", "Request": "protocol", "parse_request": "protocol"}

__all__ = ["Router", "Request", "parse_request", "DEMO_SCRIPT"]


if TYPE_CHECKING:
    from .protocol import Request as Request, parse_request as parse_request
    from .service import DEMO_SCRIPT as DEMO_SCRIPT, Router as Router


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'loopfsm.router' has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
