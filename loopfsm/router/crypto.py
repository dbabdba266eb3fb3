"""Sealed content for end-to-end-encrypted sessions: XChaCha20-Poly1305 envelopes bound to their place.

The router of an encrypted session holds none of the client's keys; only the
client seals and opens the session's content.  The router has a key of its
own, used only for the short-lived state it keeps between the turns of a run
(:meth:`Keyring.seal_at_rest`), so that state is never written in clear
either.  An envelope is useless anywhere but where it was sealed for: its
associated data names the session and the ``kind:id`` reference of the row,
plus the envelope's version, algorithm and key id, so a ciphertext copied to
another row or session, or relabelled with another key id, fails to open
instead of decrypting into the wrong place.  The associated data is never
stored: it is recomputed from where the row lives.

Keys never leave the process that owns them.  A :class:`Keyring` file is refused unless it is
a regular file owned by the current user and unreadable by anyone else.
"""

from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import json
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopfsm.router.errors import SealError

VERSION = 1
ALGORITHM = "xchacha20poly1305"
KEY_BYTES = 32
NONCE_BYTES = 24
TAG_BYTES = 16
#: The stores a content reference may name (seed 002's ``kind:id`` maps).
CONTENT_KINDS = ("message", "tool_call", "diff", "plan", "memory", "trace")
#: An envelope larger than this is refused before any base64 decoding (a row is text, not a disk image).
MAX_CIPHERTEXT_BYTES = 16 * 1024 * 1024
#: A keyring file larger than this is not a keyring.
MAX_KEYRING_BYTES = 1024 * 1024
KEYRING_FORMAT = 1

_ENVELOPE_KEYS = frozenset({"version", "algorithm", "key_id", "nonce", "ciphertext"})


def _aead() -> Any:
    """PyNaCl's AEAD bindings, imported on first use so plaintext users need no libsodium."""
    try:
        from nacl import bindings
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise SealError("encryption needs PyNaCl: pip install 'loopfsm[crypto]'") from err
    return bindings


def content_ref(kind: str, row_id: str) -> str:
    """The ``kind:id`` reference of a stored row; refuses kinds outside seed 002's list."""
    if kind not in CONTENT_KINDS:
        raise SealError(f"unknown content kind {kind[:32]!r} (kinds: {', '.join(CONTENT_KINDS)})")
    if not row_id or ":" in row_id:
        raise SealError("a content id must be non-empty and contain no ':'")
    return f"{kind}:{row_id}"


def split_ref(ref: str) -> tuple[str, str]:
    """``"message:0194"`` -> ``("message", "0194")``, refusing anything :func:`content_ref` would."""
    kind, sep, row_id = ref.partition(":")
    if not sep:
        raise SealError("a content reference has the form kind:id")
    content_ref(kind, row_id)
    return kind, row_id


def key_id_for(key: bytes) -> str:
    """A short public name for a key (``kf_`` and 8 hex digits); reveals nothing about the key."""
    return "kf_" + hashlib.blake2b(key, digest_size=4, person=b"loopfsm-kid").hexdigest()


def associated_data(*, session_id: str, ref: str, key_id: str, version: int = VERSION) -> bytes:
    """Canonical JSON of where a ciphertext belongs; authenticated, never stored."""
    split_ref(ref)
    doc = {"alg": ALGORITHM, "kid": key_id, "ref": ref, "sid": session_id, "v": version}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def at_rest_associated_data(*, session_id: str, row: str, key_id: str, version: int = VERSION) -> bytes:
    """Where a row the router sealed for itself belongs (``input:b-<run>``); authenticated, never stored.

    Its ``use`` member puts it in a domain of its own: no envelope a client
    sealed under a content reference opens as router state, nor the reverse.
    """
    doc = {"alg": ALGORITHM, "kid": key_id, "row": row, "sid": session_id, "use": "router-at-rest", "v": version}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _b64decode(value: str, field: str) -> bytes:
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise SealError(f"envelope {field} is not standard base64") from None


@dataclass(frozen=True)
class Envelope:
    """Seed 002's sealed-content envelope; ``nonce`` and ``ciphertext`` are raw bytes here, base64 on the wire."""

    key_id: str
    nonce: bytes
    ciphertext: bytes
    version: int = VERSION
    algorithm: str = ALGORITHM

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "algorithm": self.algorithm,
            "key_id": self.key_id,
            "nonce": base64.b64encode(self.nonce).decode("ascii"),
            "ciphertext": base64.b64encode(self.ciphertext).decode("ascii"),
        }

    @classmethod
    def from_json(cls, obj: object) -> Envelope:
        """Parse a wire envelope strictly: exact keys, known version and algorithm, sane sizes."""
        if not isinstance(obj, Mapping):
            raise SealError("an envelope is a JSON object")
        keys = set(obj)
        if keys != _ENVELOPE_KEYS:
            missing = sorted(_ENVELOPE_KEYS - keys)
            extra = sorted(str(k)[:32] for k in keys - _ENVELOPE_KEYS)
            raise SealError(f"envelope keys wrong (missing: {missing}, unexpected: {extra})")
        version, algorithm = obj["version"], obj["algorithm"]
        if type(version) is not int or version != VERSION:
            raise SealError(f"unsupported envelope version (this reader knows {VERSION})")
        if algorithm != ALGORITHM:
            raise SealError(f"unsupported envelope algorithm (this reader knows {ALGORITHM})")
        key_id, nonce, ciphertext = obj["key_id"], obj["nonce"], obj["ciphertext"]
        if not (isinstance(key_id, str) and isinstance(nonce, str) and isinstance(ciphertext, str)):
            raise SealError("envelope key_id, nonce and ciphertext are strings")
        if not key_id or len(key_id) > 64:
            raise SealError("envelope key_id must be 1 to 64 characters")
        if len(ciphertext) > MAX_CIPHERTEXT_BYTES * 4 // 3 + 4:
            raise SealError(f"envelope ciphertext larger than {MAX_CIPHERTEXT_BYTES} bytes")
        raw_nonce = _b64decode(nonce, "nonce")
        if len(raw_nonce) != NONCE_BYTES:
            raise SealError(f"envelope nonce must be {NONCE_BYTES} bytes")
        raw_ct = _b64decode(ciphertext, "ciphertext")
        if len(raw_ct) < TAG_BYTES:
            raise SealError("envelope ciphertext is shorter than its authentication tag")
        return cls(key_id=key_id, nonce=raw_nonce, ciphertext=raw_ct)


class Keyring:
    """The client's keys by key id; the current one seals, every one can open (rotation keeps old keys).

    Deliberately has no ``__repr__`` that shows keys, and is not serializable
    except through :meth:`save` to an owner-only file.
    """

    __slots__ = ("_keys", "current")

    def __init__(self, keys: Mapping[str, bytes], current: str):
        checked: dict[str, bytes] = {}
        for kid, key in keys.items():
            if not isinstance(key, bytes) or len(key) != KEY_BYTES:
                raise SealError(f"key {kid[:32]!r} must be {KEY_BYTES} bytes")
            if key_id_for(key) != kid:
                raise SealError(f"key id {kid[:32]!r} does not match its key")
            checked[kid] = key
        if current not in checked:
            raise SealError("the current key id names no key in the keyring")
        self._keys = checked
        self.current = current

    @classmethod
    def generate(cls) -> Keyring:
        key = _aead().randombytes(KEY_BYTES)
        return cls({key_id_for(key): key}, key_id_for(key))

    def rotate(self) -> str:
        """Add a fresh key and make it current; returns its id.  Old keys still open old rows."""
        key = _aead().randombytes(KEY_BYTES)
        kid = key_id_for(key)
        self._keys[kid] = key
        self.current = kid
        return kid

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(self._keys)

    def __repr__(self) -> str:
        return f"<Keyring {len(self._keys)} key(s), current {self.current}>"

    # -- sealing ----------------------------------------------------------------
    def seal(self, plaintext: str | bytes, *, session_id: str, ref: str) -> Envelope:
        """Encrypt for exactly this session and row, under the current key, with a fresh random nonce."""
        return self._seal(plaintext, lambda kid: associated_data(session_id=session_id, ref=ref, key_id=kid))

    def open(self, envelope: Envelope | Mapping[str, Any], *, session_id: str, ref: str) -> bytes:
        """Decrypt, or raise :class:`SealError` without saying more than which check failed."""
        env = envelope if isinstance(envelope, Envelope) else Envelope.from_json(envelope)
        aad = associated_data(session_id=session_id, ref=ref, key_id=env.key_id, version=env.version)
        return self._open(
            env, aad, f"{ref}: ciphertext does not open here (tampered, moved, or sealed for another session)"
        )

    def seal_at_rest(self, plaintext: str | bytes, *, session_id: str, row: str) -> Envelope:
        """Seal a row the router keeps for itself (see :func:`at_rest_associated_data`)."""
        return self._seal(plaintext, lambda kid: at_rest_associated_data(session_id=session_id, row=row, key_id=kid))

    def open_at_rest(self, envelope: Envelope | Mapping[str, Any], *, session_id: str, row: str) -> bytes:
        """Open a row :meth:`seal_at_rest` sealed, or raise :class:`SealError` naming only which check failed."""
        env = envelope if isinstance(envelope, Envelope) else Envelope.from_json(envelope)
        aad = at_rest_associated_data(session_id=session_id, row=row, key_id=env.key_id, version=env.version)
        return self._open(env, aad, f"{row}: sealed state does not open here (tampered, moved, or another key)")

    def _seal(self, plaintext: str | bytes, aad_for: Callable[[str], bytes]) -> Envelope:
        data = plaintext.encode() if isinstance(plaintext, str) else plaintext
        if len(data) > MAX_CIPHERTEXT_BYTES - TAG_BYTES:
            raise SealError(f"content larger than {MAX_CIPHERTEXT_BYTES - TAG_BYTES} bytes")
        aead = _aead()
        kid = self.current
        nonce = aead.randombytes(NONCE_BYTES)
        ct = aead.crypto_aead_xchacha20poly1305_ietf_encrypt(data, aad_for(kid), nonce, self._keys[kid])
        return Envelope(key_id=kid, nonce=nonce, ciphertext=ct)

    def _open(self, env: Envelope, aad: bytes, refused: str) -> bytes:
        key = self._keys.get(env.key_id)
        if key is None:
            raise SealError(f"no key with id {env.key_id[:32]!r} in this keyring")
        aead = _aead()
        from nacl.exceptions import CryptoError

        try:
            out: bytes = aead.crypto_aead_xchacha20poly1305_ietf_decrypt(env.ciphertext, aad, env.nonce, key)
        except CryptoError:
            raise SealError(refused) from None
        return out

    # -- the keyring file ------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the keyring readable by its owner only, replaced atomically, never through a link."""
        target = Path(path)
        doc = {
            "format": KEYRING_FORMAT,
            "current": self.current,
            "keys": {kid: base64.b64encode(key).decode("ascii") for kid, key in self._keys.items()},
        }
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, sort_keys=True)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Keyring:
        """Read a keyring file, refusing other owners, group/other permissions, non-files and oversized files.

        A symbolic link is followed to its final target (Kubernetes mounts a
        secret as ``key -> ..data/key``, ``..data -> ..2026_12_04...``), and
        the checks apply to that file: it is opened by its resolved path with
        ``O_NOFOLLOW``, so a link swapped in after the resolve is refused, not
        followed.  Opened non-blocking, so a FIFO or a device named as the
        keyring is refused as not a regular file instead of waiting forever
        for a writer.
        """
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        target = os.path.realpath(path) if os.path.islink(path) else os.fspath(path)
        try:
            fd = os.open(target, flags)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise SealError(f"keyring {os.fspath(path)!s} changed into a symbolic link while it was read") from None
            raise SealError(f"cannot open keyring {os.fspath(path)!s}: {err.strerror}") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise SealError("a keyring must be a regular file")
        with os.fdopen(fd, "rb") as fh:
            if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
                raise SealError("a keyring must be owned by the user who reads it")
            if st.st_mode & 0o077:
                raise SealError(f"keyring is readable by others (mode {stat.S_IMODE(st.st_mode):o}); chmod 600 it")
            raw = fh.read(MAX_KEYRING_BYTES + 1)
        if len(raw) > MAX_KEYRING_BYTES:
            raise SealError("keyring file too large")
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise SealError("keyring file is not JSON") from None
        if not isinstance(doc, dict) or doc.get("format") != KEYRING_FORMAT:
            raise SealError(f"keyring format must be {KEYRING_FORMAT}")
        keys, current = doc.get("keys"), doc.get("current")
        if not isinstance(keys, dict) or not isinstance(current, str):
            raise SealError("keyring needs 'keys' (an object) and 'current' (a key id)")
        decoded: dict[str, bytes] = {}
        for kid, value in keys.items():
            if not isinstance(value, str):
                raise SealError("keyring keys are base64 strings")
            decoded[kid] = _b64decode(value, "key")
        return cls(decoded, current)
