"""The async face of SASL authentication that a client connection's session uses.

Owns: choosing the mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), driving the sans-io PLAIN
parser and SCRAM state machine round by round, the order of a credential check, the failure
policy and the KIP-368 session lifetime.

Order of a check (docs/security.md, logins), so that wrong secrets sent at full speed starve no
one: (1) the verification cache, on the loop (a secret verified before, or a SCRAM verifier read
before, costs no thread and no throttling: the key's owner gets in at once; and while a key's
secret is cached any other PLAIN secret for it is known wrong, a failure without a check); (2) the
failed-login
backoff (`LoginBackoff`, per source address and per key id), which may refuse without any check;
(3) the store read, in a worker thread; (4) for PLAIN, the scrypt on the bounded hashing threads
(`HashingPool`; full: the attempt fails at once). SCRAM's server side stretches nothing (the client
pays the PBKDF2), so its proof check, three HMACs, runs on the loop; a wrong proof still counts as
a failure of the address.

Failure policy: whatever the cause (bad syntax, unknown, revoked or expired key, suspended tenant,
wrong secret or proof, throttled, no hashing capacity, a store error), the failure is counted,
logged once at INFO as `event=sasl_failed mechanism=… key_id=… reason=…` (never a secret or
proof; a key id only when it has a key id's shape, since a client may paste its secret into the
username; failures refused without a check, which a flood sends as fast as it can, at most one
line a second with `suppressed=N` for those left out), delayed by `failure_delay_s` (Kafka's
`connection.failed.authentication.delay.ms`) and raised as `AuthenticationFailed` with one
message that says nothing of the cause. A failed
exchange stays failed. Keys already expired by the authenticator's clock are refused even if the
store (with its own clock or cache) let them through. Runs on the event loop; not thread-safe
(one exchange per connection, one round at a time).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, NoReturn, Protocol, TypeVar

from gateway.auth.backoff import LoginBackoff, Ticket
from gateway.auth.hashing import HashingBusy, HashingPool
from gateway.auth.metrics import AuthMetrics
from gateway.auth.plain import PlainCredentials, PlainError, parse_plain
from gateway.auth.scram import ScramError, ScramServer, ScramState
from tenancy.authentication import KeyLogin, PlainVerifier, ScramLogin
from tenancy.credentials import verify_secret
from tenancy.domain import Principal
from tenancy.ids import KEY_ID
from tenancy.verification_cache import VerificationCache

log = logging.getLogger(__name__)
T = TypeVar("T")

MECHANISMS: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
FAILED_MESSAGE: Final = "Authentication failed: invalid credentials"
REJECTED: Final = "credentials_rejected"  # the store said no: unknown, revoked, expired, suspended
THROTTLED: Final = "throttled"  # the failed-login backoff refused a check
KNOWN_WRONG: Final = "secret_differs_from_verified"  # the key's own secret is in the cache


class CredentialStore(Protocol):
    """What authentication needs of the tenant store (`tenancy.store.TenantStore` satisfies it).
    The `cached_*` methods are called on the event loop (cache only); the others in threads."""

    def cached_plain(self, key_id: str, secret: str) -> KeyLogin | None: ...

    def has_verified_secret(self, key_id: str) -> bool: ...

    def plain_verifier(self, key_id: str) -> PlainVerifier | None: ...

    def remember_plain(self, verifier: PlainVerifier, secret: str) -> bool: ...

    def cached_scram(self, key_id: str, mechanism: str) -> ScramLogin | None: ...

    def scram_login(self, key_id: str, mechanism: str) -> ScramLogin | None: ...

    def record_key_use(self, key_id: str) -> None: ...


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


MAX_CACHED_KEYS = 10_000
RECONFIRMATIONS = 3  # re-reads of a key changed while its secret was being checked
UNCHECKED = frozenset({THROTTLED, KNOWN_WRONG})  # failures logged at most once a second
UNCHECKED_LOG_EVERY_MS = 1000
RECORD_USE_EVERY_MS = 60_000


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


def _started(check: Awaitable[T]) -> asyncio.Future[T]:
    """`check` as a task several logins may await (each through `asyncio.shield`, so one
    closing its connection cancels nothing of the others'); its exception counts as retrieved
    even when every waiter has gone."""
    task = asyncio.ensure_future(check)
    task.add_done_callback(lambda done: None if done.cancelled() else done.exception())
    return task


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
        hashing: HashingPool | None = None,
        backoff: LoginBackoff | None = None,
    ) -> None:
        self._store = store
        self._failure_delay_s = failure_delay_s
        self._sleep = sleep
        self._metrics = metrics
        self._clock_ms = clock_ms
        self.hashing = hashing or HashingPool()
        self.backoff = backoff or LoginBackoff()
        self._use_recorded_ms: dict[str, int] = {}
        self._plain_checks: dict[bytes, asyncio.Future[KeyLogin]] = {}  # under way, by credentials
        self._scram_reads: dict[tuple[str, str], asyncio.Future[ScramLogin]] = {}
        self._unchecked_logged_ms = -UNCHECKED_LOG_EVERY_MS
        self._unchecked_suppressed = 0

    @property
    def mechanisms(self) -> tuple[str, ...]:
        return MECHANISMS

    def login_epoch(self) -> int | None:
        """The verification cache's change epoch, to take before a login that a caller keeps for
        a short while (an HTTP connection reusing its login); None: keep nothing (no cache, or
        a store without one)."""
        epoch = getattr(self._store, "login_epoch", None)
        return None if epoch is None else epoch()

    def login_changed_since(self, principal: Principal, epoch: int) -> bool:
        """True when a login kept since `epoch` may be stale: its key or tenant changed (a
        revocation, a suspension) or the cache was cleared (a feed gap)."""
        changed = getattr(self._store, "login_changed_since", None)
        return True if changed is None else bool(changed(principal, epoch))

    def exchange(self, mechanism: str, peer: str = "") -> SaslExchange:
        """A new exchange for `mechanism` from source address `peer`; UnsupportedMechanismError
        for any other name."""
        if mechanism == "PLAIN":
            return PlainExchange(self, mechanism, peer)
        if mechanism in MECHANISMS:
            return ScramExchange(self, mechanism, peer)
        raise UnsupportedMechanismError(mechanism)

    async def _in_thread(self, call: Callable[[], T]) -> T:
        try:
            return await asyncio.to_thread(call)
        except Exception as exc:  # the store is down or misbehaves: a failure like any other
            raise _Refused(f"store_error:{type(exc).__name__}") from None

    def _admit(self, mechanism: str, peer: str, key_id: str) -> Ticket:
        ticket = self.backoff.admit(peer, key_id)
        if ticket is None:
            if self._metrics is not None:
                self._metrics.throttled(mechanism)
            raise _Refused(THROTTLED)
        return ticket

    async def _plain(self, credentials: PlainCredentials, peer: str) -> Authenticated:
        cached = self._store.cached_plain(credentials.key_id, credentials.secret)
        if cached is not None:
            if self._metrics is not None:
                self._metrics.cache_hit("PLAIN")
            login = cached
        elif self._store.has_verified_secret(credentials.key_id):
            self.backoff.note_failure(peer)  # another secret is cached: this one is wrong
            raise _Refused(KNOWN_WRONG)
        else:
            login = await self._shared_plain_check(credentials, peer)
        authenticated = self._accept("PLAIN", login)
        await self._record_use(credentials.key_id)
        return authenticated

    async def _shared_plain_check(self, credentials: PlainCredentials, peer: str) -> KeyLogin:
        """One check of the same key id and secret at a time: a client's connections logging in
        together (a pool, a consumer group on one host) wait for the first one's check instead of
        each paying a store read and a scrypt, and, from one address, counting against the
        backoff as checks under way. Its outcome, success or failure, is theirs too."""
        flight = VerificationCache.plain_key(credentials.key_id, credentials.secret)
        running = self._plain_checks.get(flight)
        if running is None:
            ticket = self._admit("PLAIN", peer, credentials.key_id)
            running = _started(self._settled(ticket, self._checked_plain(credentials)))
            self._plain_checks[flight] = running
            running.add_done_callback(lambda _done: self._plain_checks.pop(flight, None))
        return await asyncio.shield(running)

    async def _settled(self, ticket: Ticket, check: Awaitable[T]) -> T:
        """Await a check admitted by `ticket` and tell the backoff how it ended."""
        outcome = self.backoff.abandoned
        try:
            result = await check
            outcome = self.backoff.succeeded
            return result
        except _Refused as refused:
            if refused.reason == REJECTED:
                outcome = self.backoff.failed
            raise
        finally:
            outcome(ticket)

    async def _checked_plain(self, credentials: PlainCredentials) -> KeyLogin:
        verifier = await self._in_thread(lambda: self._store.plain_verifier(credentials.key_id))
        if verifier is None:
            raise _Refused(REJECTED)
        try:
            matched = await self.hashing.run(
                lambda: verify_secret(credentials.secret, verifier.secret_hash)
            )
        except HashingBusy:
            self._secret_checked("busy")
            raise _Refused("hashing_busy") from None
        self._secret_checked("match" if matched else "mismatch")
        if not matched:
            raise _Refused(REJECTED)
        return await self._remembered(verifier, credentials)

    async def _remembered(self, verifier: PlainVerifier, credentials: PlainCredentials) -> KeyLogin:
        """Cache the verified secret. A change to the key or its tenant applied since the read
        (`remember_plain` False) may predate the read or not: re-read the key (the change is
        committed by now), and the check stands if the key is still usable with the same hash."""
        for _ in range(RECONFIRMATIONS):
            if self._store.remember_plain(verifier, credentials.secret):
                return verifier.login
            fresh = await self._in_thread(lambda: self._store.plain_verifier(credentials.key_id))
            if fresh is None or fresh.secret_hash != verifier.secret_hash:
                raise _Refused(REJECTED)
            verifier = fresh
        raise _Refused("key_changed_during_check")

    def _secret_checked(self, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.secret_checked(outcome)

    async def _scram_login(self, mechanism: str, peer: str, key_id: str) -> ScramLogin | None:
        cached = self._store.cached_scram(key_id, mechanism)
        if cached is not None:
            if self._metrics is not None:
                self._metrics.cache_hit(mechanism)
            return cached
        running = self._scram_reads.get((key_id, mechanism))  # one read per key at a time
        if running is None:
            ticket = self._admit(mechanism, peer, key_id)

            async def read() -> ScramLogin:
                found = await self._in_thread(lambda: self._store.scram_login(key_id, mechanism))
                if found is None:
                    raise _Refused(REJECTED)
                return found

            running = _started(self._settled(ticket, read()))
            self._scram_reads[(key_id, mechanism)] = running
            running.add_done_callback(
                lambda _done: self._scram_reads.pop((key_id, mechanism), None)
            )
        return await asyncio.shield(running)

    async def _record_use(self, key_id: str) -> None:
        """`last_used_at` is telemetry: failing to write it does not fail the login, and it is
        written at most once a minute per key from here (the store keeps minute precision)."""
        now = self._clock_ms()
        if now - self._use_recorded_ms.get(key_id, -RECORD_USE_EVERY_MS) < RECORD_USE_EVERY_MS:
            return
        if len(self._use_recorded_ms) >= MAX_CACHED_KEYS:
            self._use_recorded_ms.clear()
        self._use_recorded_ms[key_id] = now
        try:
            await asyncio.to_thread(self._store.record_key_use, key_id)
        except Exception as exc:
            log.warning("event=key_use_not_recorded key_id=%s error=%s", key_id, type(exc).__name__)

    def _accept(self, mechanism: str, login: KeyLogin) -> Authenticated:
        expires = login.expires_at
        expires_ms = None if expires is None else int(expires.timestamp() * 1000)
        if expires_ms is not None and expires_ms <= self._clock_ms():
            raise _Refused("key_expired")
        if self._metrics is not None:
            self._metrics.authenticated(mechanism, login.principal.tenant_id)
        return Authenticated(login.principal, mechanism, expires_ms)

    async def _reject(self, mechanism: str, key_id: str | None, reason: str) -> NoReturn:
        if self._metrics is not None:
            self._metrics.failed(mechanism)
        if self._should_log(reason):
            log.info(
                "event=sasl_failed mechanism=%s key_id=%s reason=%s%s",
                mechanism,
                _loggable(key_id),
                reason,
                self._suppressed_note(reason),
            )
        await self._sleep(self._failure_delay_s)
        raise AuthenticationFailed()

    def _should_log(self, reason: str) -> bool:
        """Failures refused without a check come as fast as a flood can send them: one line a
        second for all of them (with the count left out), not one each, so a flood cannot fill
        the log's disk; every other failure is logged."""
        if reason not in UNCHECKED:
            return True
        now = self._clock_ms()
        if now - self._unchecked_logged_ms >= UNCHECKED_LOG_EVERY_MS:
            self._unchecked_logged_ms = now
            return True
        self._unchecked_suppressed += 1
        return False

    def _suppressed_note(self, reason: str) -> str:
        if reason not in UNCHECKED or not self._unchecked_suppressed:
            return ""
        note, self._unchecked_suppressed = f" suppressed={self._unchecked_suppressed}", 0
        return note


class SaslExchange:
    """One SASL authentication (or KIP-368 re-authentication) of one connection."""

    def __init__(self, authenticator: Authenticator, mechanism: str, peer: str = "") -> None:
        self.mechanism = mechanism
        self.peer = peer
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
        return SaslStep(b"", await self._authenticator._plain(credentials, self.peer))


class ScramExchange(SaslExchange):
    """SCRAM is two rounds: client-first → server-first, client-final → server-final."""

    def __init__(self, authenticator: Authenticator, mechanism: str, peer: str = "") -> None:
        super().__init__(authenticator, mechanism, peer)
        self._server = ScramServer(mechanism)
        self._found: KeyLogin | None = None
        self._missing = REJECTED  # why there is no credential, for the log at the proof

    async def _round(self, token: bytes) -> SaslStep:
        try:
            if self._server.state is ScramState.CLIENT_FIRST:
                return await self._client_first(token)
            return await self._client_final(token)
        except ScramError as error:
            if error.reason == "wrong_proof":
                self._authenticator.backoff.note_failure(self.peer)
            raise _Refused(
                self._missing if error.reason == "no_credential" else error.reason
            ) from None

    async def _client_first(self, token: bytes) -> SaslStep:
        self._key_id = self._server.receive_client_first(token)
        found: ScramLogin | None = None
        try:
            found = await self._authenticator._scram_login(self.mechanism, self.peer, self._key_id)
        except _Refused as refused:  # decoy on, as for an unknown key: fail at the proof
            self._missing = refused.reason
        if found is not None:
            self._found = found.login
        return SaslStep(self._server.server_first(None if found is None else found.credential))

    async def _client_final(self, token: bytes) -> SaslStep:
        server_final = self._server.receive_client_final(token)
        assert self._found is not None  # a proof only verifies against a credential we found
        authenticated = self._authenticator._accept(self.mechanism, self._found)
        await self._authenticator._record_use(self._found.principal.key_id)
        return SaslStep(server_final, authenticated)
