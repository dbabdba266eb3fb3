"""The router's own key, and the run state it seals with it, so an encrypted session is never written in clear.

Between two requests of a run the router keeps what the run needs to go on
(its run-input bundle: the engine brain's snapshot with the whole
conversation, the pending calls, content waiting for the client's seal, the
response to replay).  In an encrypted session that is the session's content,
so it is written only sealed: XChaCha20-Poly1305 under the router's key,
bound by associated data to the session and the row (``input:b-<run>``), in
a domain of its own (:func:`loopfsm.router.crypto.at_rest_associated_data`).  No
byte of it reaches a database page, SQLite's WAL, PostgreSQL's heap or
``pg_wal`` in clear.

The router key is a keyring file (the client's format: owner-only, refused
otherwise).  ``router serve --key-file PATH`` names one, which must exist
(a typo must not start a router under a fresh key); without the option the
router uses ``$XDG_STATE_HOME/loopfsm/router.key`` (``~/.local/state/...``),
generated owner-only on first use.  Routers sharing a store share the key
file.  Several keys may be in it: the current one seals, any opens.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from .crypto import Keyring
from loopfsm.core.errors import ConfigError
from loopfsm.router.errors import SealedStateError, SealError
from .store import Row, StoredRow

KEY_FILE_NAME = "router.key"


def default_key_path() -> Path:
    """``$XDG_STATE_HOME/loopfsm/router.key``, or ``~/.local/state/loopfsm/router.key``."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "loopfsm" / KEY_FILE_NAME


def create_key_file(path: str | os.PathLike[str]) -> bool:
    """Write a fresh owner-only router key at ``path`` unless a file is there; True when this call made it.

    The file appears complete or not at all, and two routers starting at once
    both end up with the one key that won (a link never replaces a file).
    """
    target = Path(path)
    if os.path.lexists(target):
        return False
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.new")
    Keyring.generate().save(tmp)
    try:
        os.link(tmp, target)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    return True


def load_router_key(path: str | os.PathLike[str] | None = None) -> Keyring:
    """The router key: ``path`` (which must exist), or the default file, created on first use.

    Every problem (missing file, a file others can read, not a keyring) is a
    :class:`ConfigError` naming the file.
    """
    if path is not None:
        if not os.path.lexists(path):
            raise ConfigError(
                f"router key file {os.fspath(path)} does not exist: create it with "
                f"`loopfsm router keygen {os.fspath(path)}`, or give the file the other routers of this store use"
            )
        target = Path(path)
    else:
        target = default_key_path()
        try:
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            create_key_file(target)
        except OSError as err:
            raise ConfigError(
                f"cannot create the router key file {target}: {err.strerror or err}; name one with --key-file"
            ) from None
    try:
        return Keyring.load(target)
    except SealError as err:
        raise ConfigError(f"router key file {target}: {err}") from None


class SealedState:
    """Seals and opens the run-input bundle of an encrypted session under the router key.

    ``key`` is a :class:`Keyring`, a key file path, or None for the default
    file; a path is read on first use (a router that only ever serves
    plaintext sessions never reads or creates one).
    """

    def __init__(self, key: Keyring | str | os.PathLike[str] | None = None):
        self._key: Keyring | None = key if isinstance(key, Keyring) else None
        self._source = None if isinstance(key, Keyring) else key
        self._lock = threading.Lock()

    def keyring(self) -> Keyring:
        with self._lock:
            if self._key is None:
                try:
                    self._key = load_router_key(self._source)
                except ConfigError:
                    # The operator's problem, said without the path to the client that hit it.
                    raise SealedStateError(
                        "the router cannot read or create its key file, so it cannot keep an encrypted run; "
                        "its operator must start it with a readable --key-file"
                    ) from None
            return self._key

    def seal(self, session_id: str, row_id: str, body: dict[str, Any]) -> dict[str, Any]:
        text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        return self.keyring().seal_at_rest(text, session_id=session_id, row=f"input:{row_id}").to_json()

    def open(self, session_id: str, row_id: str, envelope: Any) -> dict[str, Any]:
        """The bundle a sealed row holds; :class:`SealedStateError` saying what to do when it does not open."""
        keyring = self.keyring()
        kid = envelope.get("key_id") if isinstance(envelope, dict) else None
        if isinstance(kid, str) and kid not in keyring.key_ids:
            raise SealedStateError(
                f"this run's state is sealed under router key {kid[:32]}, which this router was not started "
                "with: restart it with the key file that holds that key, or break the run"
            )
        try:
            raw = keyring.open_at_rest(envelope, session_id=session_id, row=f"input:{row_id}")
            body = json.loads(raw)
        except (SealError, ValueError):
            raise SealedStateError(
                "this run's state does not open under the router key (damaged or moved row): break the run"
            ) from None
        if not isinstance(body, dict):
            raise SealedStateError("this run's sealed state is not a run-input bundle: break the run")
        return body

    def bundle_row(self, session_id: str, run_id: str, bundle: dict[str, Any], *, encrypted: bool) -> Row:
        """The live run's bundle row: sealed in an encrypted session, clear in a plaintext one."""
        row_id = f"b-{run_id}"
        meta = {"run_id": run_id}
        if encrypted:
            return Row("input", "bundle", meta, sealed=self.seal(session_id, row_id, bundle), row_id=row_id)
        return Row("input", "bundle", meta, body=bundle, row_id=row_id)

    def read_bundle(self, session_id: str, row: StoredRow | None) -> dict[str, Any] | None:
        """The bundle a stored row holds (opened when sealed; a clear one as an older loopfsm wrote it), or None."""
        if row is None:
            return None
        if row.sealed is not None:
            return self.open(session_id, row.row_id, row.sealed)
        return dict(row.body) if isinstance(row.body, dict) else None


__all__ = ["SealedState", "SealedStateError", "create_key_file", "default_key_path", "load_router_key"]
