"""SASL/PLAIN (RFC 4616) message parsing, sans-io: `[authzid] NUL authcid NUL passwd` in UTF-8.

Owns: turning the client's single PLAIN token into (API key id, secret), refusing what Kafka's
`PlainSaslServer` refuses (not exactly three fields, an empty username or password, an authzid
other than the username) and what RFC 4616 lets a server bound (each field up to 255 octets; the
password up to our longest secret). The username is the API key id, the password its secret.
Refusals carry an internal `reason` for the log, never the secret. Pure; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

MAX_IDENTITY_BYTES: Final = 255  # RFC 4616 §2: authzid and authcid "MUST accept up to 255 octets"
MAX_PASSWORD_BYTES: Final = 256  # tenancy.authentication.MAX_SECRET_LENGTH (ASCII secrets)
MAX_MESSAGE_BYTES: Final = 2 * MAX_IDENTITY_BYTES + MAX_PASSWORD_BYTES + 2


class PlainError(ValueError):
    """A PLAIN message refused; `reason` is an internal, loggable code."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"invalid SASL/PLAIN message ({reason})")
        self.reason = reason


@dataclass(frozen=True)
class PlainCredentials:
    key_id: str
    secret: str = field(repr=False)


def _text(raw: bytes, limit: int, name: str) -> str:
    if len(raw) > limit:
        raise PlainError(f"{name}_too_long")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PlainError(f"{name}_not_utf8") from None


def parse_plain(message: bytes) -> PlainCredentials:
    """The (key id, secret) in a PLAIN token, or PlainError."""
    if len(message) > MAX_MESSAGE_BYTES:
        raise PlainError("message_too_long")
    fields = message.split(b"\0")
    if len(fields) != 3:
        raise PlainError("not_three_fields")
    authzid = _text(fields[0], MAX_IDENTITY_BYTES, "authzid")
    username = _text(fields[1], MAX_IDENTITY_BYTES, "username")
    password = _text(fields[2], MAX_PASSWORD_BYTES, "password")
    if not username:
        raise PlainError("empty_username")
    if not password:
        raise PlainError("empty_password")
    if authzid and authzid != username:
        raise PlainError("authzid_differs")
    return PlainCredentials(username, password)
