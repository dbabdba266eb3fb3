"""Errors of the router product: its store, providers, streams, protocol, client and sealing."""

from __future__ import annotations

from typing import Any

from loopfsm.core.errors import LoopFsmError, ScriptError


class SealError(LoopFsmError):
    """Sealed content could not be made or opened: wrong key, tampered or moved ciphertext, bad envelope or keyring.

    The message names which check failed and never includes key material or plaintext.
    """


class SealedStateError(SealError):
    """A run's sealed state cannot be opened (a router key it was not sealed under, or a damaged row).

    The message says which key the row needs and what to do; never key
    material, never content.
    """


class StoreError(LoopFsmError):
    """The run-state store cannot be opened or used (bad URL, unreachable server, schema version mismatch)."""


class SessionTraceError(StoreError):
    """A session's kept feeds do not read back whole (steps written before feeds were kept, or rows edited)."""


class DamagedRow(StoreError):
    """A stored row does not read back as the router wrote it (its JSON does not parse: changed by hand)."""


class DamagedHistory(DamagedRow):
    """A session's history row names a message the store does not hold as the router wrote it.

    Only a store changed by hand (a row deleted, a sealed column cleared, the
    history row edited) gets here; the router refuses to run on a conversation
    with a hole in it rather than send the model a shorter one. The message
    names the row, never its content.
    """


class HolderClaimed(StoreError):
    """Another live process serves under the holder id asked for (:mod:`loopfsm.router.store.claims`)."""


class ClaimLost(StoreError):
    """This process's holder-id claim was taken over (it stalled past the lease): it no longer owns the id."""


class StreamEventError(LoopFsmError):
    """A stream event is not shaped as its provider documents it (a missing field, a wrong type)."""


class ProviderError(LoopFsmError):
    """A model call failed; ``outcome`` is the failure class the model fallback breaker records.

    ``retry_after_ms`` is what the provider asked the caller to wait, when it said.
    The message names the provider and the class, never the prompt.
    """

    def __init__(self, provider: str, outcome: str, detail: str = "", retry_after_ms: int | None = None):
        self.provider = provider
        self.outcome = outcome
        self.retry_after_ms = retry_after_ms
        why = f": {detail}" if detail else ""
        super().__init__(f"{provider}: model call failed ({outcome}){why}")


class ProtocolError(LoopFsmError):
    """A router protocol message is malformed or does not fit the pause it answers; nothing changed.

    The message names the rule and the place (a JSON path), never the content.
    """


class ClientError(LoopFsmError):
    """The reference client could not reach the router after its retries, or got an answer it cannot act on."""


class NotAScriptedModel(ScriptError):
    """A file given as a scripted model that is not one; ``document`` is what it holds (never shown).

    The command line, which knows the ``run --script`` drivers, names the one
    such a file was written for; this layer only says what a scripted model is.
    """

    def __init__(self, document: Any):
        super().__init__("a script file is a mapping with a 'replies' list")
        self.document = document
