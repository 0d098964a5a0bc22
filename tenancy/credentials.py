"""Secret hashing for API keys and operator tokens: what is stored instead of the secret.

- API key secrets: scrypt (hashlib, RFC 7914) with N=2^14, r=8, p=1, a 16-byte salt and a 32-byte
  output: the parameters the scrypt paper gives for interactive logins (16 MiB, tens of ms). The
  secrets are 381 random bits, so no hash is brute-forced; the slow hash is defence in depth should
  the database leak, and costs the same order as the SCRAM client's PBKDF2. The stored string is
  self-describing (`scrypt$N$r$p$salt$hash`), so parameters can rise later without a migration.
- Operator tokens: SHA-256 of the token, looked up by equality. A bearer token names no account, so
  a salted hash could not be found without scanning every operator; with 381-bit random tokens a
  fast unsalted hash is as safe as a slow one (the reasoning GitHub gives for its token storage).
Every comparison is constant-time. Stateless; safe from any thread.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

SCRYPT_N = 2**14
SCRYPT_R = 8
SCRYPT_P = 1
SCRYPT_SALT_BYTES = 16
SCRYPT_DKLEN = 32
_SCRYPT_MAXMEM = 64 * 2**20  # room for N=2^15 should the parameters be raised


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _scrypt(secret: str, salt: bytes, n: int, r: int, p: int, dklen: int) -> bytes:
    return hashlib.scrypt(
        secret.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=dklen, maxmem=_SCRYPT_MAXMEM
    )


def hash_secret(secret: str) -> str:
    """The storable scrypt hash of `secret` with a fresh random salt."""
    salt = secrets.token_bytes(SCRYPT_SALT_BYTES)
    digest = _scrypt(secret, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P, SCRYPT_DKLEN)
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(digest)}"


def verify_secret(secret: str, stored: str) -> bool:
    """True when `secret` hashes to `stored`; False for any malformed stored value."""
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        expected = _unb64(digest)
        actual = _scrypt(secret, _unb64(salt), int(n), int(r), int(p), len(expected))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(actual, expected)


def token_digest(token: str) -> str:
    """Hex SHA-256 of an operator token: the indexed lookup value."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
