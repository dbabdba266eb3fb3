"""The review site's errors: a request it refuses, said in words the page shows."""

from __future__ import annotations

from loopfsm.core.errors import LoopFsmError


class ReviewSiteError(LoopFsmError):
    """A request the review site refuses (a 4xx, ``status``): a malformed upload, an argument of the wrong type,
    a machine the site does not show."""

    def __init__(self, message: str = "", status: int = 400) -> None:
        super().__init__(message)
        self.status = status
