"""The reference router service: execute / continue over a run-state store, every machine composed.

    from loopfsm.router import Router
    router = Router("sqlite:///runs.db", create=True)
    response = router.handle("s1", {"type": "execute", "request_id": "r1", "data": {"prompt": "hi"}})

See :mod:`loopfsm.router.service` for the rules, :mod:`loopfsm.router.protocol`
for the messages and :mod:`loopfsm.router.http` for the ASGI app.
"""

from .protocol import Request, parse_request
from .service import DEMO_SCRIPT, Router

__all__ = ["Router", "Request", "parse_request", "DEMO_SCRIPT"]
