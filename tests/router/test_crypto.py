"""Sealed envelopes: round trips, and every way a ciphertext can be misused is refused."""

from __future__ import annotations

import base64
import json
import os
import stat

import pytest
from hypothesis import given
from hypothesis import strategies as st

nacl = pytest.importorskip("nacl")

from loopfsm.router.crypto import (  # noqa: E402
    ALGORITHM,
    Envelope,
    Keyring,
    associated_data,
    content_ref,
    key_id_for,
    split_ref,
)
from loopfsm.core.errors import LoopFsmError  # noqa: E402
from loopfsm.router.errors import SealError  # noqa: E402

RING = Keyring.generate()
REF = content_ref("message", "0194")


def test_envelope_has_the_seed_shape_and_round_trips() -> None:
    env = RING.seal("the assistant turn", session_id="s1", ref=REF)
    wire = env.to_json()
    assert set(wire) == {"version", "algorithm", "key_id", "nonce", "ciphertext"}
    assert wire["version"] == 1 and wire["algorithm"] == ALGORITHM == "xchacha20poly1305"
    assert wire["key_id"] == RING.current and wire["key_id"].startswith("kf_")
    assert len(base64.b64decode(wire["nonce"])) == 24
    assert b"assistant" not in base64.b64decode(wire["ciphertext"])
    parsed = Envelope.from_json(json.loads(json.dumps(wire)))
    assert RING.open(parsed, session_id="s1", ref=REF) == b"the assistant turn"


@pytest.mark.slow
@given(st.binary(max_size=2048), st.text(min_size=1, max_size=20).filter(lambda s: ":" not in s))
def test_any_content_round_trips_and_nonces_differ(data: bytes, row: str) -> None:
    ref = content_ref("tool_call", row)
    a = RING.seal(data, session_id="s", ref=ref)
    b = RING.seal(data, session_id="s", ref=ref)
    assert a.nonce != b.nonce and a.ciphertext != b.ciphertext
    assert RING.open(a.to_json(), session_id="s", ref=ref) == data


@pytest.mark.parametrize(
    "where",
    [
        {"session_id": "s2", "ref": REF},  # moved to another session
        {"session_id": "s1", "ref": "message:0195"},  # moved to another row
        {"session_id": "s1", "ref": "diff:0194"},  # moved to another kind
    ],
)
def test_a_moved_ciphertext_does_not_open(where: dict[str, str]) -> None:
    env = RING.seal("secret", session_id="s1", ref=REF)
    with pytest.raises(SealError) as err:
        RING.open(env, **where)
    assert "secret" not in str(err.value)


def test_tampered_ciphertext_nonce_or_key_id_is_refused() -> None:
    env = RING.seal("secret", session_id="s1", ref=REF).to_json()
    raw = bytearray(base64.b64decode(env["ciphertext"]))
    raw[0] ^= 1
    for bad in (
        {**env, "ciphertext": base64.b64encode(bytes(raw)).decode()},
        {**env, "nonce": base64.b64encode(bytes(24)).decode()},
    ):
        with pytest.raises(SealError, match="does not open"):
            RING.open(bad, session_id="s1", ref=REF)
    with pytest.raises(SealError, match="no key with id"):
        RING.open({**env, "key_id": "kf_00000000"}, session_id="s1", ref=REF)
    # a second key in the same keyring: relabelling the envelope with it fails authentication
    ring = Keyring({k: RING._keys[k] for k in RING.key_ids}, RING.current)
    other = ring.rotate()
    with pytest.raises(SealError, match="does not open"):
        ring.open({**env, "key_id": other}, session_id="s1", ref=REF)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda e: None,
        lambda e: [],
        lambda e: {**e, "extra": 1},
        lambda e: {k: v for k, v in e.items() if k != "nonce"},
        lambda e: {**e, "version": 2},
        lambda e: {**e, "version": True},
        lambda e: {**e, "algorithm": "aes256gcm"},
        lambda e: {**e, "nonce": "not base64!"},
        lambda e: {**e, "nonce": base64.b64encode(bytes(12)).decode()},
        lambda e: {**e, "ciphertext": base64.b64encode(b"short").decode()},
        lambda e: {**e, "key_id": 5},
        lambda e: {**e, "key_id": ""},
    ],
)
def test_malformed_envelopes_are_refused_typed(mutate) -> None:  # type: ignore[no-untyped-def]
    env = RING.seal("x", session_id="s1", ref=REF).to_json()
    with pytest.raises(SealError):
        RING.open(mutate(env), session_id="s1", ref=REF)


def test_rotation_keeps_old_rows_readable() -> None:
    ring = Keyring.generate()
    old = ring.seal("old row", session_id="s", ref=REF)
    new_kid = ring.rotate()
    new = ring.seal("new row", session_id="s", ref=REF)
    assert new.key_id == new_kid != old.key_id
    assert ring.open(old, session_id="s", ref=REF) == b"old row"
    assert ring.open(new, session_id="s", ref=REF) == b"new row"


def test_associated_data_binds_every_label() -> None:
    base = associated_data(session_id="s", ref=REF, key_id="kf_1")
    assert json.loads(base) == {"alg": ALGORITHM, "kid": "kf_1", "ref": REF, "sid": "s", "v": 1}
    assert base != associated_data(session_id="s", ref=REF, key_id="kf_2")
    assert base != associated_data(session_id="s", ref=REF, key_id="kf_1", version=2)


@pytest.mark.parametrize("ref", ["message", "secret:1", "message:", ":1", "message:a:b"])
def test_content_refs_are_checked(ref: str) -> None:
    with pytest.raises(SealError):
        split_ref(ref)


def test_keyring_file_is_owner_only_and_round_trips(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "keys.json"
    ring = Keyring.generate()
    ring.rotate()
    ring.save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    loaded = Keyring.load(path)
    assert set(loaded.key_ids) == set(ring.key_ids) and loaded.current == ring.current
    env = ring.seal("x", session_id="s", ref=REF)
    assert loaded.open(env, session_id="s", ref=REF) == b"x"
    secrets = [base64.b64encode(loaded._keys[k]).decode() for k in loaded.key_ids]
    assert not any(secret in repr(loaded) for secret in secrets)
    assert not any(loaded._keys[k].hex() in repr(loaded) for k in loaded.key_ids)


def test_keyring_file_refusals(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "keys.json"
    Keyring.generate().save(path)
    os.chmod(path, 0o644)
    with pytest.raises(SealError, match="readable by others"):
        Keyring.load(path)
    os.chmod(path, 0o600)
    link = tmp_path / "link.json"
    link.symlink_to(path)
    assert Keyring.load(link).key_ids == Keyring.load(path).key_ids  # a link to a file that passes the checks
    os.chmod(path, 0o640)
    with pytest.raises(SealError, match="readable by others"):  # the checks are the final target's
        Keyring.load(link)
    os.chmod(path, 0o600)
    (tmp_path / "nowhere.json").symlink_to(tmp_path / "missing.json")
    with pytest.raises(SealError, match="cannot open keyring .*nowhere.json: No such file"):
        Keyring.load(tmp_path / "nowhere.json")
    with pytest.raises(SealError, match="regular file"):
        Keyring.load(tmp_path)
    bad = tmp_path / "bad.json"
    for text in ("{", "[]", '{"format": 1, "current": "kf_x", "keys": {"kf_x": "AAAA"}}'):
        bad.write_text(text)
        os.chmod(bad, 0o600)
        with pytest.raises(SealError):
            Keyring.load(bad)


def test_keyring_refuses_mislabelled_or_short_keys() -> None:
    key = bytes(range(32))
    with pytest.raises(SealError, match="does not match"):
        Keyring({"kf_00000000": key}, "kf_00000000")
    with pytest.raises(SealError, match="32 bytes"):
        Keyring({key_id_for(b"x"): b"x"}, key_id_for(b"x"))
    assert issubclass(SealError, LoopFsmError)


def test_a_key_mounted_as_a_kubernetes_secret_is_read_through_its_links(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The kubelet's layout: key -> ..data/key, ..data -> ..<timestamp>/, the file in the timestamped folder."""
    secret = tmp_path / "secret"
    stamped = secret / "..2026_12_04_00_00_00.000000001"
    stamped.mkdir(parents=True)
    Keyring.generate().save(stamped / "key")
    (secret / "..data").symlink_to(stamped.name)
    (secret / "key").symlink_to("..data/key")
    assert Keyring.load(secret / "key").key_ids == Keyring.load(stamped / "key").key_ids
    os.chmod(stamped / "key", 0o644)  # the kubelet's default mode: refused, as the file itself would be
    with pytest.raises(SealError, match="readable by others"):
        Keyring.load(secret / "key")
