"""The async face of SASL authentication that a client connection's session uses.

Owns: choosing the mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), driving the sans-io PLAIN
parser and SCRAM state machine round by round, the credential look-ups (synchronous SQLAlchemy,
so each runs in a worker thread), the failure policy and the KIP-368 session lifetime.

Failure policy: whatever the cause (bad syntax, unknown, revoked or expired key, suspended tenant,
wrong secret or proof, a store error), the failure is counted, logged once at INFO as
`event=sasl_failed mechanism=… key_id=… reason=…` (never a secret or proof; a key id only when
it has a key id's shape, since a client may paste its secret into the username), delayed by
`failure_delay_s` (Kafka's `connection.failed.authentication.delay.ms`) and raised as
`AuthenticationFailed` with one message that says nothing of the cause. A failed exchange stays
failed. Keys already expired by the authenticator's clock are refused even if the store (with its
own clock or cache) let them through. Runs on the event loop; not thread-safe (one exchange per
connection, one round at a time).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, NoReturn, Protocol, TypeVar

from gateway.auth.metrics import AuthMetrics
from gateway.auth.plain import PlainCredentials, PlainError, parse_plain
from gateway.auth.scram import ScramError, ScramServer, ScramState
from tenancy.domain import ApiKey, Principal, ScramCredential
from tenancy.ids import KEY_ID

log = logging.getLogger(__name__)
T = TypeVar("T")

MECHANISMS: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
FAILED_MESSAGE: Final = "Authentication failed: invalid credentials"
REJECTED: Final = "credentials_rejected"  # the store said no: unknown, revoked, expired, suspended


class CredentialStore(Protocol):
    """What authentication needs of the tenant store (`tenancy.store.TenantStore` satisfies it)."""

    def verify_api_key(self, key_id: str, secret: str) -> Principal | None: ...

    def scram_credential(
        self, key_id: str, mechanism: str
    ) -> tuple[Principal, ScramCredential] | None: ...

    def record_key_use(self, key_id: str) -> None: ...

    def get_api_key(self, key_id: str) -> ApiKey: ...


@dataclass(frozen=True)
class Authenticated:
    principal: Principal
    mechanism: str
    key_expires_at_ms: int | None


@dataclass(frozen=True)
class SaslStep:
    challenge: bytes  # the token to send back (may be empty)
    authenticated: Authenticated | None = None  # None: the exchange needs more rounds


class AuthenticationFailed(Exception):
    def __init__(self, message: str = FAILED_MESSAGE) -> None:
        super().__init__(message)


class UnsupportedMechanismError(Exception):
    def __init__(self, mechanism: str) -> None:
        super().__init__(
            f"unsupported SASL mechanism {mechanism[:64]!r}; enabled: {', '.join(MECHANISMS)}"
        )
        self.mechanism = mechanism


class _Refused(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def session_lifetime_ms(
    now_ms: int, max_reauth_ms: int | None, key_expires_at_ms: int | None
) -> int:
    """KIP-368 `SessionLifetimeMs`, as Kafka's `SaslServerAuthenticator` computes it: the smaller of
    `connections.max.reauth.ms` (unset or ≤ 0: none) and the credential's remaining life; 0 when
    neither applies, which clients read as "no re-authentication needed". Kafka clamps a negative
    remainder to that same 0; here it is at least 1 ms, so a key that expires in the instant after
    the `Authenticator` accepted it closes the session instead of lifting every limit."""
    limits: list[int] = []
    if max_reauth_ms is not None and max_reauth_ms > 0:
        limits.append(max_reauth_ms)
    if key_expires_at_ms is not None:
        limits.append(max(1, key_expires_at_ms - now_ms))
    return min(limits, default=0)


def _loggable(key_id: str | None) -> str:
    if not key_id:
        return "-"
    return key_id if KEY_ID.fullmatch(key_id) else "<malformed>"


class Authenticator:
    def __init__(
        self,
        store: CredentialStore,
        *,
        failure_delay_s: float = 1.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        metrics: AuthMetrics | None = None,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self._store = store
        self._failure_delay_s = failure_delay_s
        self._sleep = sleep
        self._metrics = metrics
        self._clock_ms = clock_ms

    @property
    def mechanisms(self) -> tuple[str, ...]:
        return MECHANISMS

    def exchange(self, mechanism: str) -> SaslExchange:
        """A new exchange for `mechanism`; UnsupportedMechanismError for any other name."""
        if mechanism == "PLAIN":
            return PlainExchange(self, mechanism)
        if mechanism in MECHANISMS:
            return ScramExchange(self, mechanism)
        raise UnsupportedMechanismError(mechanism)

    async def _in_thread(self, call: Callable[[], T]) -> T:
        try:
            return await asyncio.to_thread(call)
        except Exception as exc:  # the store is down or misbehaves: a failure like any other
            raise _Refused(f"store_error:{type(exc).__name__}") from None

    async def _plain(self, credentials: PlainCredentials) -> Authenticated:
        def check() -> tuple[Principal, ApiKey] | None:
            principal = self._store.verify_api_key(credentials.key_id, credentials.secret)
            if principal is None:
                return None
            return principal, self._store.get_api_key(credentials.key_id)

        found = await self._in_thread(check)
        if found is None:
            raise _Refused(REJECTED)
        return self._accept("PLAIN", *found)

    async def _scram_credential(
        self, key_id: str, mechanism: str
    ) -> tuple[Principal, ScramCredential, ApiKey] | None:
        def fetch() -> tuple[Principal, ScramCredential, ApiKey] | None:
            found = self._store.scram_credential(key_id, mechanism)
            if found is None:
                return None
            return found[0], found[1], self._store.get_api_key(key_id)

        return await self._in_thread(fetch)

    async def _record_use(self, key_id: str) -> None:
        """`last_used_at` is telemetry: failing to write it does not fail the login."""
        try:
            await asyncio.to_thread(self._store.record_key_use, key_id)
        except Exception as exc:
            log.warning("event=key_use_not_recorded key_id=%s error=%s", key_id, type(exc).__name__)

    def _accept(self, mechanism: str, principal: Principal, key: ApiKey) -> Authenticated:
        expires_ms = None if key.expires_at is None else int(key.expires_at.timestamp() * 1000)
        if expires_ms is not None and expires_ms <= self._clock_ms():
            raise _Refused("key_expired")
        if self._metrics is not None:
            self._metrics.authenticated(mechanism, principal.tenant_id)
        return Authenticated(principal, mechanism, expires_ms)

    async def _reject(self, mechanism: str, key_id: str | None, reason: str) -> NoReturn:
        if self._metrics is not None:
            self._metrics.failed(mechanism)
        log.info(
            "event=sasl_failed mechanism=%s key_id=%s reason=%s",
            mechanism,
            _loggable(key_id),
            reason,
        )
        await self._sleep(self._failure_delay_s)
        raise AuthenticationFailed()


class SaslExchange:
    """One SASL authentication (or KIP-368 re-authentication) of one connection."""

    def __init__(self, authenticator: Authenticator, mechanism: str) -> None:
        self.mechanism = mechanism
        self._authenticator = authenticator
        self._key_id: str | None = None
        self._failed = False
        self._complete = False

    async def evaluate(self, token: bytes) -> SaslStep:
        """The answer to the client's next token; AuthenticationFailed ends the exchange."""
        if self._failed:
            raise AuthenticationFailed()
        try:
            if self._complete:
                raise _Refused("token_after_completion")
            step = await self._round(bytes(token))
        except _Refused as refused:
            self._failed = True
            await self._authenticator._reject(self.mechanism, self._key_id, refused.reason)
        self._complete = step.authenticated is not None
        return step

    async def _round(self, token: bytes) -> SaslStep:
        raise NotImplementedError


class PlainExchange(SaslExchange):
    """PLAIN is one round: the client's token carries the key id and secret."""

    async def _round(self, token: bytes) -> SaslStep:
        try:
            credentials = parse_plain(token)
        except PlainError as error:
            raise _Refused(error.reason) from None
        self._key_id = credentials.key_id
        return SaslStep(b"", await self._authenticator._plain(credentials))


class ScramExchange(SaslExchange):
    """SCRAM is two rounds: client-first → server-first, client-final → server-final."""

    def __init__(self, authenticator: Authenticator, mechanism: str) -> None:
        super().__init__(authenticator, mechanism)
        self._server = ScramServer(mechanism)
        self._found: tuple[Principal, ApiKey] | None = None
        self._missing = REJECTED  # why there is no credential, for the log at the proof

    async def _round(self, token: bytes) -> SaslStep:
        try:
            if self._server.state is ScramState.CLIENT_FIRST:
                return await self._client_first(token)
            return await self._client_final(token)
        except ScramError as error:
            raise _Refused(
                self._missing if error.reason == "no_credential" else error.reason
            ) from None

    async def _client_first(self, token: bytes) -> SaslStep:
        self._key_id = self._server.receive_client_first(token)
        credential: ScramCredential | None = None
        try:
            found = await self._authenticator._scram_credential(self._key_id, self.mechanism)
        except _Refused as refused:  # decoy on, as for an unknown key: fail at the proof
            found, self._missing = None, refused.reason
        if found is not None:
            principal, credential, key = found
            self._found = (principal, key)
        return SaslStep(self._server.server_first(credential))

    async def _client_final(self, token: bytes) -> SaslStep:
        server_final = self._server.receive_client_final(token)
        assert self._found is not None  # a proof only verifies against a credential we found
        principal, key = self._found
        authenticated = self._authenticator._accept(self.mechanism, principal, key)
        await self._authenticator._record_use(principal.key_id)
        return SaslStep(server_final, authenticated)
