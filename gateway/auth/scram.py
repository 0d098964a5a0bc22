"""The server side of SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as a sans-io state machine.

Owns the exchange Kafka's `ScramSaslServer` runs, minus any I/O:

    receive_client_first(msg) -> user ... caller looks the credential up ...
    server_first(credential | None) -> b"r=<c+s nonce>,s=<salt>,i=<iterations>"
    receive_client_final(msg) -> b"v=<server signature>"

The caller fetches the credential of `user` (the API key id) between the first two steps, so
nothing here blocks. Refused: a `p=` channel binding (we offer none; `n` and `y` are fine), an
authzid other than the user, the reserved `m=` attribute, any client-first extension (notably
Kafka's `tokenauth=true`: we issue no delegation tokens), a `c=` that is not the gs2 header, a
nonce other than the combined one, a wrong proof, and verifiers under Kafka's 4096 iterations.
Without a usable credential the exchange goes on with a decoy salt (stable per user in this
process) and fails at the proof, as RFC 5802 §5.1 suggests, so a client cannot tell an unknown,
revoked or expired key from a wrong secret. Refusals are `ScramError` with an internal `reason`;
a refused exchange stays refused. One instance per exchange; not thread-safe.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hmac
import re
import secrets
from collections.abc import Callable
from typing import Final, NoReturn

from tenancy.domain import ScramCredential
from tenancy.scram import (
    MECHANISMS,
    SCRAM_ITERATIONS,
    SCRAM_SALT_BYTES,
    server_signature,
    verify_client_proof,
)

MIN_ITERATIONS: Final = 4096  # Kafka's ScramMechanism.minIterations for SHA-256 and SHA-512
MAX_MESSAGE_BYTES: Final = 2048
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_B64 = r"[A-Za-z0-9+/]*={0,2}"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>(?P<cbind>[ny]|p=[^,]*),(?:a=(?P<authzid>{_SASLNAME}))?,)"
    rf"(?P<bare>(?P<mext>m=[^,]*,)?n=(?P<user>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})"
    r"(?P<extensions>(?:,[A-Za-z]+=[^,]+)*))"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<cbind>{_B64}),r=(?P<nonce>{_PRINTABLE})(?:,[A-Za-z]+=[^,]+)*)"
    rf",p=(?P<proof>{_B64})"
)
_ESCAPE = re.compile("=(2C|3D)")
_DECOY_KEY = secrets.token_bytes(32)


class ScramError(ValueError):
    """A SCRAM message or proof refused; `reason` is an internal, loggable code."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"SCRAM authentication refused ({reason})")
        self.reason = reason


class ScramState(enum.Enum):
    CLIENT_FIRST = "client-first"
    CREDENTIAL = "credential"  # waiting for the caller's credential lookup
    CLIENT_FINAL = "client-final"
    COMPLETE = "complete"
    FAILED = "failed"


def unescape_saslname(name: str) -> str:
    """RFC 5802 §5.1: `=2C` is `,` and `=3D` is `=` (the regex admits no other `=`)."""
    return _ESCAPE.sub(lambda escape: "," if escape[1] == "2C" else "=", name)


def server_nonce() -> str:
    return secrets.token_urlsafe(24)  # 32 printable characters, none of them a comma


def _decoy(mechanism: str, user: str) -> ScramCredential:
    """A credential no secret matches, with a salt that does not change between attempts."""
    tag = hmac.digest(_DECOY_KEY, f"{mechanism}\0{user}".encode(), "sha256")
    return ScramCredential(mechanism, tag[:SCRAM_SALT_BYTES], SCRAM_ITERATIONS, b"", b"")


class ScramServer:
    def __init__(self, mechanism: str, *, nonce: Callable[[], str] = server_nonce) -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism!r}")
        self.mechanism = mechanism
        self.state = ScramState.CLIENT_FIRST
        self.user = ""
        self._nonce = nonce
        self._gs2_header = b""
        self._client_first_bare = ""
        self._server_first = ""
        self._combined_nonce = ""
        self._client_nonce = ""
        self._credential: ScramCredential | None = None

    def receive_client_first(self, message: bytes) -> str:
        """Parse the client-first-message; the user (API key id) whose credential is needed."""
        self._expect(ScramState.CLIENT_FIRST)
        match = _CLIENT_FIRST.fullmatch(self._decode(message))
        if match is None:
            self._refuse("malformed_client_first")
        if match["cbind"].startswith("p="):
            self._refuse("channel_binding_requested")
        if match["mext"] is not None:
            self._refuse("reserved_mext")
        if match["extensions"]:
            self._refuse("extensions_unsupported")
        user = unescape_saslname(match["user"])
        if match["authzid"] is not None and unescape_saslname(match["authzid"]) != user:
            self._refuse("authzid_differs")
        self.user = user
        self._gs2_header = match["gs2"].encode("ascii")
        self._client_first_bare = match["bare"]
        self._client_nonce = match["nonce"]
        self._combined_nonce = match["nonce"] + self._nonce()
        self.state = ScramState.CREDENTIAL
        return user

    def server_first(self, credential: ScramCredential | None) -> bytes:
        """The server-first-message; None (no usable credential) fails at the proof instead."""
        self._expect(ScramState.CREDENTIAL)
        if credential is not None and credential.mechanism != self.mechanism:
            self._refuse("mechanism_mismatch")
        if credential is not None and credential.iterations < MIN_ITERATIONS:
            self._refuse("iterations_below_minimum")
        self._credential = credential
        shown = credential or _decoy(self.mechanism, self.user)
        salt = base64.b64encode(shown.salt).decode("ascii")
        self._server_first = f"r={self._combined_nonce},s={salt},i={shown.iterations}"
        self.state = ScramState.CLIENT_FINAL
        return self._server_first.encode("ascii")

    def receive_client_final(self, message: bytes) -> bytes:
        """Check the client-final-message and its proof; the server-final-message."""
        self._expect(ScramState.CLIENT_FINAL)
        match = _CLIENT_FINAL.fullmatch(self._decode(message))
        if match is None:
            self._refuse("malformed_client_final")
        if self._b64(match["cbind"], "malformed_channel_binding") != self._gs2_header:
            self._refuse("channel_binding_mismatch")
        if not self._nonce_matches(match["nonce"]):
            self._refuse("nonce_mismatch")
        proof = self._b64(match["proof"], "malformed_proof")
        if self._credential is None:
            self._refuse("no_credential")
        auth_message = ",".join(
            (self._client_first_bare, self._server_first, match["without_proof"])
        ).encode("ascii")
        if not verify_client_proof(self._credential, auth_message, proof):
            self._refuse("wrong_proof")
        signature = server_signature(self._credential, auth_message)
        self._credential = None
        self.state = ScramState.COMPLETE
        return b"v=" + base64.b64encode(signature)

    def _nonce_matches(self, nonce: str) -> bool:
        """The combined nonce, or older librdkafka's client nonce + combined nonce: its SCRAM
        client prepends its own nonce once more (2.0.2, in kcat 1.7.1, does), which Kafka's
        `ScramSaslServer` long accepted (it checked `endsWith`). No other prefix is accepted."""
        quirk = self._client_nonce + self._combined_nonce
        return hmac.compare_digest(nonce.encode(), self._combined_nonce.encode()) or (
            hmac.compare_digest(nonce.encode(), quirk.encode())
        )

    def _b64(self, text: str, reason: str) -> bytes:
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            self._refuse(reason)

    def _decode(self, message: bytes) -> str:
        if len(message) > MAX_MESSAGE_BYTES:
            self._refuse("message_too_long")
        try:
            return message.decode("ascii")  # Kafka's grammar is 7-bit (its SASLNAME is \x01-\x7F)
        except UnicodeDecodeError:
            self._refuse("not_ascii")

    def _expect(self, state: ScramState) -> None:
        if self.state is not state:
            self._refuse(f"unexpected_message_in_{self.state.value}")

    def _refuse(self, reason: str) -> NoReturn:
        self.state = ScramState.FAILED
        self._credential = None
        raise ScramError(reason)
