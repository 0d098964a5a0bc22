"""Secret hashing, SCRAM verifiers (RFC 7677's test vector), identifiers and redaction."""

from __future__ import annotations

import base64

import pytest

from tenancy.credentials import hash_secret, token_digest, verify_secret
from tenancy.domain import ScramCredential, Secret
from tenancy.errors import ValidationError
from tenancy.ids import (
    KEY_ID,
    SERVICE_ACCOUNT_ID,
    TENANT_ID,
    check_tenant_id,
    new_key_id,
    new_secret,
    new_service_account_id,
    new_tenant_id,
)
from tenancy.scram import client_proof, make_credential, server_signature, verify_client_proof

pytestmark = pytest.mark.unit

# RFC 7677 §3: user "user", password "pencil".
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_AUTH_MESSAGE = (
    b"n=user,r=rOprNGfwEbeRWgbNEkqO,"
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
)
RFC_PROOF = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_SIGNATURE = base64.b64decode("6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_scram_sha256_matches_rfc7677() -> None:
    credential = make_credential("SCRAM-SHA-256", "pencil", iterations=4096, salt=RFC_SALT)
    assert client_proof("SCRAM-SHA-256", "pencil", RFC_SALT, 4096, RFC_AUTH_MESSAGE) == RFC_PROOF
    assert verify_client_proof(credential, RFC_AUTH_MESSAGE, RFC_PROOF)
    assert server_signature(credential, RFC_AUTH_MESSAGE) == RFC_SERVER_SIGNATURE
    tampered = bytes([RFC_PROOF[0] ^ 1]) + RFC_PROOF[1:]
    assert not verify_client_proof(credential, RFC_AUTH_MESSAGE, tampered)
    assert not verify_client_proof(credential, RFC_AUTH_MESSAGE, RFC_PROOF[:-1])


def test_scram_sha512_round_trip_and_defaults() -> None:
    credential = make_credential("SCRAM-SHA-512", "secret")
    assert credential.iterations >= 4096 and len(credential.salt) >= 16
    assert len(credential.stored_key) == len(credential.server_key) == 64
    proof = client_proof("SCRAM-SHA-512", "secret", credential.salt, credential.iterations, b"m")
    assert verify_client_proof(credential, b"m", proof)
    assert not verify_client_proof(credential, b"other message", proof)
    with pytest.raises(ValueError):
        make_credential("SCRAM-SHA-1", "secret")


def test_secret_hash_is_salted_and_verifies() -> None:
    first, second = hash_secret("abc"), hash_secret("abc")
    assert first != second and first.startswith("scrypt$16384$8$1$")
    assert "abc" not in first
    assert verify_secret("abc", first) and verify_secret("abc", second)
    assert not verify_secret("abd", first)
    for broken in ("", "revoked", "scrypt$1$2$3", "pbkdf2$1$1$1$AA$AA", "scrypt$x$8$1$AA$AA"):
        assert not verify_secret("abc", broken)


def test_token_digest_is_sha256_hex() -> None:
    assert len(token_digest("pop_x")) == 64 and token_digest("pop_x") != token_digest("pop_y")


def test_generated_ids_have_their_shapes() -> None:
    for _ in range(50):
        assert TENANT_ID.fullmatch(check_tenant_id(new_tenant_id()))
        assert SERVICE_ACCOUNT_ID.fullmatch(new_service_account_id())
        assert KEY_ID.fullmatch(new_key_id())
        secret = new_secret()
        assert len(secret) == 64 and secret.isalnum()
    assert len({new_secret() for _ in range(100)}) == 100


@pytest.mark.parametrize("bad", ["", "ab", "a" * 17, "9abc", "abc-", "a--b", "ABC", 5])
def test_bad_tenant_ids(bad: object) -> None:
    with pytest.raises(ValidationError):
        check_tenant_id(bad)  # type: ignore[arg-type]


def test_secrets_are_redacted_in_repr() -> None:
    secret = Secret("hunter2hunter2")
    assert secret == "hunter2hunter2" and str(secret) == "hunter2hunter2"
    assert "hunter2" not in repr(secret) and "hunter2" not in repr((1, secret))
    assert "hunter2" not in f"{secret!r}"
    credential = make_credential("SCRAM-SHA-256", "pencil", iterations=4096, salt=RFC_SALT)
    shown = repr(credential)
    assert credential.stored_key.hex() not in shown and "stored_key" not in shown
    assert isinstance(credential, ScramCredential)
