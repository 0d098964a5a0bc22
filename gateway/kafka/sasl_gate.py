"""The SASL exchange of one client connection (SaslHandshake v0–1, SaslAuthenticate v0–2).

Owns: the authentication states of a connection and their transitions:

    HANDSHAKE --SaslHandshake--> AUTHENTICATING --SaslAuthenticate ok--> AUTHENTICATED
        ^                           |  (more rounds: stays)                 |
        |                           +-- failure --> FAILED (answer, close)  |
        +------------------ (KIP-368 re-authentication: SaslHandshake v1) --+

After a v0 handshake the client sends bare SASL tokens (no Kafka header) and gets bare tokens
back (`raw_tokens`). A re-authentication must end with the same principal and mechanism (Kafka's
rule); while it runs, the connection stays authenticated. The client's address (`peer`) goes to
every exchange: failed logins back off per source address (docs/security.md, logins). Answers are
kio response entities; the session writes them. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from brokers.wire.entities import make, response_module
from brokers.wire.errors import ErrorCode
from gateway.auth.authenticator import (
    Authenticated,
    AuthenticationFailed,
    Authenticator,
    SaslExchange,
    UnsupportedMechanismError,
)

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
LifetimeFn = Callable[["Authenticated"], int]  # the session lifetime (ms, 0 = none) of a login
CHANGED_IDENTITY = "Authentication failed: re-authentication must keep the principal and mechanism"


class AuthState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATING = "authenticating"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class GateAnswer:
    response: Any  # a kio response entity, or raw token bytes after a v0 handshake
    authenticated: Authenticated | None = None  # set when this answer completes a login
    close: bool = False  # close the connection once the answer is written


class SaslGate:
    def __init__(self, authenticator: Authenticator, peer: str = "") -> None:
        self._authenticator = authenticator
        self._peer = peer
        self.state = AuthState.HANDSHAKE
        self.identity: Authenticated | None = None
        self.raw_tokens = False
        self._exchange: SaslExchange | None = None
        self._mechanism = ""

    @property
    def authenticated(self) -> bool:
        """True once logged in, including while a re-authentication is under way."""
        return self.identity is not None and self.state is not AuthState.FAILED

    def handshake(self, version: int, request: Any) -> GateAnswer:
        module = response_module(SASL_HANDSHAKE, version)
        mechanisms = tuple(self._authenticator.mechanisms)
        reauth = self.identity is not None
        if self._exchange is not None or (reauth and version < 1):
            return GateAnswer(
                self._handshake(module, ErrorCode.illegal_sasl_state, mechanisms), close=True
            )
        try:
            self._exchange = self._authenticator.exchange(str(request.mechanism), self._peer)
        except UnsupportedMechanismError:
            return GateAnswer(
                self._handshake(module, ErrorCode.unsupported_sasl_mechanism, mechanisms),
                close=True,
            )
        self._mechanism = str(request.mechanism)
        self.raw_tokens = version == 0
        if not reauth:
            self.state = AuthState.AUTHENTICATING
        return GateAnswer(self._handshake(module, ErrorCode.none, mechanisms))

    async def authenticate(self, version: int, request: Any, lifetime: LifetimeFn) -> GateAnswer:
        module = response_module(SASL_AUTHENTICATE, version)
        if self._exchange is None:
            return GateAnswer(
                _auth_response(module, ErrorCode.illegal_sasl_state, "no SaslHandshake first"),
                close=True,
            )
        token = bytes(request.auth_bytes)
        try:
            step, identity = await self._step(token)
        except AuthenticationFailed as failure:
            return GateAnswer(
                _auth_response(module, ErrorCode.sasl_authentication_failed, str(failure)),
                close=True,
            )
        if identity is None:
            return GateAnswer(_auth_response(module, ErrorCode.none, None, step))
        answer = _auth_response(
            module, ErrorCode.none, None, step, session_lifetime_ms=lifetime(identity)
        )
        return GateAnswer(answer, authenticated=identity)

    def refusal(self, version: int, reason: str) -> Any:
        """A SaslAuthenticate answer refusing a valid login for `reason` (a tenant limit, an
        inactive tenant): the key is right, so saying why tells an attacker nothing."""
        self._fail()
        self.identity = None
        module = response_module(SASL_AUTHENTICATE, version)
        return _auth_response(module, ErrorCode.sasl_authentication_failed, f"Refused: {reason}")

    async def raw_token(self, token: bytes) -> GateAnswer:
        """A bare token after a v0 handshake; the answer is bare token bytes."""
        try:
            step, identity = await self._step(token)
        except AuthenticationFailed:
            return GateAnswer(b"", close=True)
        if identity is not None:
            self.raw_tokens = False
        return GateAnswer(step, authenticated=identity)

    async def _step(self, token: bytes) -> tuple[bytes, Authenticated | None]:
        assert self._exchange is not None
        try:
            step = await self._exchange.evaluate(token)
        except AuthenticationFailed:
            self._fail()
            raise
        identity = step.authenticated
        if identity is None:
            return step.challenge, None
        if self.identity is not None and (
            identity.principal != self.identity.principal
            or self._mechanism != self.identity.mechanism
        ):
            self._fail()
            raise AuthenticationFailed(CHANGED_IDENTITY)
        self.identity = identity
        self.state = AuthState.AUTHENTICATED
        self._exchange = None
        return step.challenge, identity

    def _fail(self) -> None:
        self.state = AuthState.FAILED
        self._exchange = None

    @staticmethod
    def _handshake(module: Any, error: ErrorCode, mechanisms: tuple[str, ...]) -> Any:
        return make(module, "SaslHandshakeResponse", error_code=error, mechanisms=mechanisms)


def _auth_response(
    module: Any,
    error: ErrorCode,
    message: str | None,
    token: bytes = b"",
    *,
    session_lifetime_ms: int = 0,
) -> Any:
    return make(
        module,
        "SaslAuthenticateResponse",
        error_code=error,
        error_message=message,
        auth_bytes=token,
        session_lifetime=_millis(session_lifetime_ms),
    )


def _millis(ms: int) -> timedelta:
    return timedelta(milliseconds=ms)
