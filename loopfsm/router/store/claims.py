"""Holder-id claims: one serving process per lock-holder id, recorded in the store.

A router frees, when it starts, the locks its previous incarnation held under
its holder id (:meth:`~loopfsm.router.store.runstore.RunStore.recover`).  Two
processes serving under one holder id would free each other's locks in
flight: a turn lost after its model call, a run left waiting on a tool.  So a
process claims its holder id in the store's ``holders`` table before it
recovers anything, keeps the claim fresh while it serves, and gives it up when
it stops.  A second process asking for a claimed id is refused at start with
one line naming the claimer (host, pid, since when), unless the store shows
the claimer dead:

- **stale by the lease rule:** its claim was not renewed for a lease
  (``lease_ms``, 30 s by default: a lock of a router that stalled that long
  may be taken over too), or
- **gone from this host:** it was made on this host (same host name) by a
  process that no longer runs.  A restarted worker takes over its dead
  predecessor's claim at once this way.  Host names must then tell hosts
  apart, as Kubernetes pod names do; two containers sharing a host name
  and not a process table would see each other as gone.

Each claim carries a random token: only its claimer renews or releases it.  A
claimer that finds its claim taken (it stalled past the lease and another
process took over) has lost the id: :class:`ClaimKeeper` stops the process
rather than serve on beside the new claimer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, UTC
from typing import TYPE_CHECKING

from loopfsm.router.errors import ClaimLost, HolderClaimed

if TYPE_CHECKING:  # pragma: no cover
    from .runstore import RunStore

log = logging.getLogger("loopfsm.router")


@dataclass(frozen=True)
class Claim:
    """One holder id's claim, as the store records it (times in ms)."""

    holder: str
    host: str
    pid: int
    since: int
    expires_at: int
    token: str

    def described(self) -> str:
        when = datetime.fromtimestamp(self.since / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"host {self.host}, pid {self.pid}, since {when}"


def this_host() -> str:
    return socket.gethostname()


def pid_runs(pid: int) -> bool:
    """Whether a process ``pid`` runs on this host (one we may not signal runs too)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_COLS = "holder, host, pid, since, expires_at, token"


def _claim(row: tuple[object, ...]) -> Claim:
    holder, host, pid, since, expires_at, token = row
    return Claim(str(holder), str(host), int(pid), int(since), int(expires_at), str(token))  # type: ignore[call-overload]


def read_claim(store: RunStore, holder: str) -> Claim | None:
    _, rows = store.backend.run(f"SELECT {_COLS} FROM {store.prefix}holders WHERE holder = ?", (holder,))
    return _claim(rows[0]) if rows else None


def claims(store: RunStore) -> list[Claim]:
    """Every claim the store records, by holder id."""
    _, rows = store.backend.run(f"SELECT {_COLS} FROM {store.prefix}holders ORDER BY holder")
    return [_claim(r) for r in rows]


def claim(
    store: RunStore,
    holder: str,
    *,
    token: str | None = None,
    host: str | None = None,
    pid: int | None = None,
    now_ms: int | None = None,
    alive: Callable[[int], bool] = pid_runs,
) -> Claim:
    """Claim ``holder`` for this process, or raise :class:`HolderClaimed` naming the live claimer.

    ``token`` takes over a claim made with the same token (a supervisor claims
    its workers' ids before it forks them; each worker then claims with that
    token, recording its own pid).  The claim lasts the store's lease from now.
    """
    host = this_host() if host is None else host
    pid = os.getpid() if pid is None else pid
    token = token or secrets.token_hex(16)
    table = f"{store.prefix}holders"
    for _ in range(8):  # a claim that changed between the read and the write is read again
        now = store.now(now_ms)
        expires = now + store.lease_ms
        with store.backend.transaction():
            held = read_claim(store, holder)
            if held is None:
                _, rows = store.backend.run(
                    f"INSERT INTO {table} ({_COLS}) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (holder) DO NOTHING "
                    "RETURNING holder",
                    (holder, host, pid, now, expires, token),
                )
                if rows:
                    return Claim(holder, host, pid, now, expires, token)
                continue
            ours = held.token == token
            dead = held.expires_at <= now or (held.host == host and held.pid != pid and not alive(held.pid))
            if not ours and not dead:
                raise HolderClaimed(
                    f"holder id {holder!r} is claimed by a router that is serving ({held.described()}): give this "
                    "router its own --holder, or stop that one first (its claim lapses "
                    f"{store.lease_ms / 1000:g} s after it stops renewing it)"
                )
            since = held.since if ours else now
            _, rows = store.backend.run(
                f"UPDATE {table} SET host = ?, pid = ?, since = ?, expires_at = ?, token = ? "
                "WHERE holder = ? AND token = ? RETURNING holder",
                (host, pid, since, expires, token, holder, held.token),
            )
            if rows:
                return Claim(holder, host, pid, since, expires, token)
    raise HolderClaimed(f"holder id {holder!r}: its claim kept changing while this router asked for it")


def renew(store: RunStore, mine: Claim, *, now_ms: int | None = None) -> Claim:
    """Keep ``mine`` for another lease from now; :class:`ClaimLost` when another process took it over."""
    now = store.now(now_ms)
    with store.backend.transaction():
        _, rows = store.backend.run(
            f"UPDATE {store.prefix}holders SET expires_at = ? WHERE holder = ? AND token = ? RETURNING holder",
            (now + store.lease_ms, mine.holder, mine.token),
        )
    if not rows:
        raise ClaimLost(f"holder id {mine.holder!r} was claimed by another process while this one stalled")
    return Claim(mine.holder, mine.host, mine.pid, mine.since, now + store.lease_ms, mine.token)


def release(store: RunStore, mine: Claim) -> bool:
    """Give up ``mine`` (when it is still ours); whether it was."""
    with store.backend.transaction():
        _, rows = store.backend.run(
            f"DELETE FROM {store.prefix}holders WHERE holder = ? AND token = ? RETURNING holder",
            (mine.holder, mine.token),
        )
    return bool(rows)


class ClaimKeeper:
    """Renews a claim every third of the lease on its own thread and connection, and releases it at :meth:`stop`.

    A renewal that fails (the database restarted) is retried at the next tick
    with a fresh connection; the claim holds for a whole lease, so two misses
    in a row are survived.  A claim found taken over calls ``on_lost`` (by
    default: SIGTERM to this process, which stops serving as on Ctrl-C).
    """

    def __init__(
        self,
        open_store: Callable[[], RunStore],
        mine: Claim,
        *,
        every_s: float,
        on_lost: Callable[[ClaimLost], None] | None = None,
    ):
        self.open_store, self.mine, self.every_s = open_store, mine, every_s
        self.on_lost = on_lost or _stop_this_process
        self.renewals = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> ClaimKeeper:
        self._thread = threading.Thread(target=self._loop, name="loopfsm-holder-claim", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        with contextlib.suppress(Exception):  # best effort: an unreleased claim lapses after a lease
            store = self.open_store()
            try:
                release(store, self.mine)
            finally:
                store.close()

    def _loop(self) -> None:
        store: RunStore | None = None
        while not self._stop.wait(self.every_s):
            try:
                if store is None:
                    store = self.open_store()
                self.mine = renew(store, self.mine)
                self.renewals += 1
            except ClaimLost as lost:
                log.error("%s; stopping", lost)
                self.on_lost(lost)
                break
            except Exception as err:  # noqa: BLE001 - retried next tick; the claim outlasts two misses
                log.warning("renewing the holder claim failed (%s); retrying", type(err).__name__)
                if store is not None:
                    with contextlib.suppress(Exception):
                        store.close()
                store = None
        if store is not None:
            with contextlib.suppress(Exception):
                store.close()


def _stop_this_process(lost: ClaimLost) -> None:
    print(f"loopfsm router: {lost}; stopping", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGTERM)


__all__ = ["Claim", "ClaimKeeper", "ClaimLost", "HolderClaimed", "claim", "claims", "read_claim", "release", "renew"]
