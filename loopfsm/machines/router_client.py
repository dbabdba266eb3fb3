"""Guards and actions of the protocol client (``machines/router_client.yaml``); the table is in the YAML.

The machine only tracks what the client may send next; running tools, asking
the user and sealing content are the driver's work at the edge.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from loopfsm.core.registry import Registry
from .args import listed
from loopfsm.core.declared import DeclaredMachine
from loopfsm.core.instance import PolicyArg

REGISTRY = Registry("router_client")


@REGISTRY.guard
def advertised(m: Any, ctx: Any) -> bool:
    """The last response listed this message among its allowed_continuations: the client never leads."""
    return bool(ctx.args["type"] in m.data.allowed)


@REGISTRY.guard
def answers_outstanding(m: Any, ctx: Any) -> bool:
    """The response answers the request still on the wire (not one a break or inject superseded)."""
    return bool(ctx.args["request_id"] == m.data.outstanding)


@REGISTRY.action
def send_request(m: Any, ctx: Any) -> None:
    """The new request is the outstanding one; what the last response allowed is spent."""
    m.data.outstanding = ctx.args["request_id"]
    m.data.allowed = []
    m.data.sent += 1


@REGISTRY.action
def take_response(m: Any, ctx: Any) -> None:
    m.data.outstanding = None
    m.data.allowed = list(ctx.args["allowed"])


@REGISTRY.action
def ignore_superseded(m: Any, ctx: Any) -> None:
    m.data.superseded += 1


MessageType = Literal["execute", "tool_results", "approval_decisions", "decrypted", "sealed", "inject", "break"]
Status = Literal["completed", "awaiting_tool", "awaiting_approval", "awaiting_decrypt", "idle", "error"]


class RouterClient(DeclaredMachine, machine="router_client", registry=REGISTRY, policy="RouterClientPolicy"):
    """The protocol client; compiled from ``machines/router_client.yaml`` on first use."""

    __slots__ = ()

    def send(self, type: MessageType, request_id: str, *, policy: PolicyArg = None) -> None:
        """The client puts a message on the wire."""
        self.feed("send", type, request_id, policy=policy)

    def response(
        self,
        request_id: str,
        status: Status,
        allowed: Iterable[str],
        has_to_encrypt: bool = False,
        retryable: bool = False,
        *,
        policy: PolicyArg = None,
    ) -> None:
        """The router's response to a request arrives."""
        allowed_list = listed(allowed, "router_client", "response", "allowed")
        self.feed("response", request_id, status, allowed_list, has_to_encrypt, retryable, policy=policy)


if TYPE_CHECKING:  # what type checkers see: the stub written from the YAML's policy block
    from .policies import RouterClientPolicy as RouterClientPolicy


def __getattr__(name: str) -> Any:
    if name == "RouterClientPolicy":  # built from the YAML's policy block, so compiled on first use
        return RouterClient.compiled.Policy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
