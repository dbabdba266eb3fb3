"""The card arrows' ends chosen for a picture (:mod:`.arrow_ends`), kept in loopfsm's cache directory so the
same picture is not searched again: up to 120 layouts of router_run cost about 2.5 s, and ``build``, the
review site and a live instance's picture draw the same DOT text again and again.

Filed under a key of the DOT text, the Graphviz version that laid it out, and the size and time of the
text of the modules whose code decides the ends (a new loopfsm or an edited checkout misses).  An entry holds only the
ends, never DOT text: it is read as untrusted input (the cache's own rules, :mod:`loopfsm.core.speccache`),
and each end must be one the search could have chosen, for as many arrows as the text has.
"""

from __future__ import annotations

import subprocess
from functools import lru_cache
from pathlib import Path

from loopfsm.core import speccache

from .arrow_ends import Ends, arrows

FORMAT = 1
_HERE = Path(__file__).resolve().parent
_DECIDING = ("arrow_ends.py", "geometry.py", "dot.py", "svgtext.py", "ends_cache.py")
_TAILS = frozenset({"e", "w"})
_HEADS = frozenset({"", "n", "ne", "nw"})


@lru_cache(maxsize=4)
def graphviz_version(program: str) -> str:
    """What ``dot -V`` says of itself ("" when it cannot say): another Graphviz may lay the text out otherwise."""
    try:
        done = subprocess.run([program, "-V"], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stderr.decode("utf-8", "replace").strip()[:200]


@lru_cache(maxsize=1)
def code() -> str:
    """A digest of the modules that turn DOT text into an SVG, arrow ends included: their text, not their
    dates, so a clone agrees.  It files the ends here and stamps each SVG (:func:`.dot.source_digest`): a
    changed search left router_run's SVG drawn by the earlier one while ``build --check`` said up to date."""
    from hashlib import blake2b  # noqa: PLC0415 - only a drawing pays for it

    digest = blake2b(digest_size=32)
    for name in _DECIDING:
        try:
            digest.update((_HERE / name).read_bytes())
        except OSError:  # an install without the sources: the names alone
            digest.update(name.encode())
    return digest.hexdigest()


def key(source: str, program: str) -> str:
    """The name the ends of ``source``, laid out by ``program``, are filed under."""
    from hashlib import blake2b  # noqa: PLC0415 - only a drawing pays for it

    text = f"ends {FORMAT}\n{graphviz_version(program)}\n{code()}\n{source}"
    return "ends-" + blake2b(text.encode(), digest_size=32).hexdigest()


def lookup(name: str, source: str) -> dict[int, Ends] | None:
    """The ends filed as ``name`` for ``source``, or None when there are none that could be its."""
    raw = speccache.read_entry(name, FORMAT)
    tails = arrows(source)
    ends = raw.get("ends") if raw is not None else None
    if not isinstance(ends, list) or len(ends) != len(tails):
        return None
    out = {}
    for i, end in enumerate(ends):
        if not (isinstance(end, list) and len(end) == 3):
            return None
        tail, head, heavy = end
        if tail not in _TAILS or head not in _HEADS or not isinstance(heavy, bool):
            return None
        if head and head[-1:] not in ("n", tail):  # a corner on the side it leaves, as the search tries
            return None
        out[i] = Ends(tail, head, heavy)
    return out


def store(name: str, chosen: dict[int, Ends]) -> None:
    """File ``chosen`` as ``name``; a failure leaves the cache without it."""
    ends = [[chosen[i].tail, chosen[i].head, chosen[i].heavy] for i in range(len(chosen))]
    speccache.write_entry(name, {"format": FORMAT, "key": name, "ends": ends})
