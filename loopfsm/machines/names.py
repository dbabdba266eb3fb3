"""What counts as a name a person or a tool can be told by: tool names, owners, approvers, run ids.

``"".strip()`` is the obvious test for "nobody", but a zero-width space
(``"\\u200b"``), a right-to-left mark or a lone combining accent passes it and
names nobody a reader can see.  A name here must hold at least one visible
character: a letter, digit, punctuation mark or symbol (Unicode categories
L, N, P and S); separators, control and format characters and marks alone do
not count.  And it is bounded: a tool name, an owner or an approver longer
than :data:`MAX_NAME` characters is a mistake or an attack (it would be kept
in every snapshot and named in every trace), not a name.
"""

from __future__ import annotations

import unicodedata

#: The longest name accepted, in characters (a tool, an owner, an approver, a run id).
MAX_NAME = 256


def invisible(name: str) -> bool:
    """Whether ``name`` has no visible character (empty, blanks, zero-width or control characters only)."""
    return not any(unicodedata.category(c)[0] in "LNPS" for c in name)


def name_problem(name: str) -> str | None:
    """Why ``name`` (a string) names nobody, in words (``"holds no visible character"``), or None."""
    if len(name) > MAX_NAME:
        return f"is longer than {MAX_NAME} characters ({len(name):,})"
    if not name:
        return "is empty"
    if invisible(name):
        return "holds no visible character"
    return None
