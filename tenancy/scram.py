"""SCRAM-SHA-256 / SCRAM-SHA-512 verifiers (RFC 5802, RFC 7677) and the server's proof check.

The store keeps, per API key and mechanism, only (salt, iterations, StoredKey, ServerKey), so the
gateway authenticates SCRAM clients without the secret, as Kafka does with its ZooKeeper-stored
credentials. Iterations: 8192, Kafka's documented example (its accepted range is 4096–16384; 4096 is
RFC 7677's floor); the client pays this PBKDF2 once per connection. Secrets are ASCII alphanumerics,
for which SASLprep is the identity. Stateless; safe from any thread.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Final

from tenancy.domain import ScramCredential

SCRAM_ITERATIONS: Final = 8192
SCRAM_SALT_BYTES: Final = 16
MECHANISMS: Final = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


def _digest_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}") from None


def salted_password(mechanism: str, secret: str, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i) of RFC 5802 §2.2: PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(_digest_name(mechanism), secret.encode("utf-8"), salt, iterations)


def make_credential(
    mechanism: str, secret: str, *, iterations: int = SCRAM_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key")."""
    name = _digest_name(mechanism)
    salt = salt if salt is not None else secrets.token_bytes(SCRAM_SALT_BYTES)
    salted = salted_password(mechanism, secret, salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", name)
    server_key = hmac.digest(salted, b"Server Key", name)
    stored_key = hashlib.new(name, client_key).digest()
    return ScramCredential(mechanism, salt, iterations, stored_key, server_key)


def client_proof(
    mechanism: str, secret: str, salt: bytes, iterations: int, auth_message: bytes
) -> bytes:
    """What a client sends: ClientKey XOR HMAC(StoredKey, AuthMessage). Used by tests and benches."""
    name = _digest_name(mechanism)
    client_key = hmac.digest(
        salted_password(mechanism, secret, salt, iterations), b"Client Key", name
    )
    signature = hmac.digest(hashlib.new(name, client_key).digest(), auth_message, name)
    return bytes(a ^ b for a, b in zip(client_key, signature, strict=True))


def verify_client_proof(credential: ScramCredential, auth_message: bytes, proof: bytes) -> bool:
    """RFC 5802 §3 server check: H(proof XOR HMAC(StoredKey, AuthMessage)) == StoredKey."""
    name = _digest_name(credential.mechanism)
    signature = hmac.digest(credential.stored_key, auth_message, name)
    if len(proof) != len(signature):
        return False
    client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
    return hmac.compare_digest(hashlib.new(name, client_key).digest(), credential.stored_key)


def server_signature(credential: ScramCredential, auth_message: bytes) -> bytes:
    """HMAC(ServerKey, AuthMessage): the `v=` attribute of the server-final-message."""
    return hmac.digest(credential.server_key, auth_message, _digest_name(credential.mechanism))
