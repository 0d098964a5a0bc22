"""Credential checks for the gateway: PLAIN / HTTP Basic secrets and SCRAM verifiers.

A key authenticates only while it is unrevoked, unexpired and its tenant is active; every failure
is the same `None`, so a caller learns nothing about why (key ids are not secret, so a fast `None`
for an unknown id reveals nothing new). Successful checks go through the `VerificationCache`.
`last_used_at` is written at most once per `LAST_USED_PRECISION` per key, outside any audit
(it is telemetry, not a change), so busy keys do not turn every login into a write. Inputs that
could not be a key (wrong shape, oversized secret) are refused before any database work.

The gateway splits a PLAIN check in three so that only the scrypt runs on its bounded hashing
threads and a cached success costs no thread at all (docs/security.md, logins): `cached_plain` /
`cached_scram` / `has_verified_secret` (the cache only: cheap, callable on an event loop), `plain_verifier` (the database
read: the stored hash of a usable key, with the cache epoch taken before the read), then
`remember_plain` after the caller verified the secret with `tenancy.credentials.verify_secret`
(False when the key or its tenant changed in the cache's view since the read: the caller re-reads
the key, and the check stands if it is still usable with the same hash; the change may have been
committed before the read and applied to the cache only after). `verify_api_key` does all three on the
calling thread. Mixin of `TenantStore`; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update

from tenancy.credentials import verify_secret
from tenancy.domain import Principal, ScramCredential
from tenancy.errors import ValidationError
from tenancy.ids import KEY_ID
from tenancy.models import ApiKeyRow, ScramCredentialRow, TenantRow
from tenancy.scram import MECHANISMS
from tenancy.store_base import StoreCore

LAST_USED_PRECISION = timedelta(minutes=1)
MAX_SECRET_LENGTH = 256
RECONFIRMATIONS = 3  # re-reads of a key that changed (in the cache's view) while it was checked


@dataclass(frozen=True)
class KeyLogin:
    """What a verified key logs in as, and until when the key itself is valid."""

    principal: Principal
    expires_at: datetime | None


@dataclass(frozen=True)
class PlainVerifier:
    """A usable key's stored secret hash, read at cache `epoch` (see `remember_plain`)."""

    login: KeyLogin
    secret_hash: str = field(repr=False)
    epoch: int
    last_used_at: datetime | None = None


@dataclass(frozen=True)
class ScramLogin:
    login: KeyLogin
    credential: ScramCredential


_CHANGED = ScramLogin(KeyLogin(Principal("", "", ""), None), ScramCredential("", b"", 0, b"", b""))


def _plausible(key_id: str, secret: str) -> bool:
    if not isinstance(key_id, str) or KEY_ID.fullmatch(key_id) is None:
        return False
    return isinstance(secret, str) and 0 < len(secret) <= MAX_SECRET_LENGTH


def _usable(row: ApiKeyRow, tenant_status: str, now: datetime) -> bool:
    if row.revoked_at is not None or tenant_status != "active":
        return False
    return row.expires_at is None or row.expires_at > now


class Authentication(StoreCore):
    def verify_api_key(self, key_id: str, secret: str) -> Principal | None:
        """The principal for a (key id, secret) pair, or None: unknown, revoked, expired, suspended."""
        cached = self.cached_plain(key_id, secret)
        if cached is not None:
            return cached.principal
        verifier = self.plain_verifier(key_id) if _plausible(key_id, secret) else None
        if verifier is None or not verify_secret(secret, verifier.secret_hash):
            return None
        for _ in range(RECONFIRMATIONS):  # changed meanwhile: still usable with the same hash?
            if self.remember_plain(verifier, secret):
                break
            fresh = self.plain_verifier(key_id)
            if fresh is None or fresh.secret_hash != verifier.secret_hash:
                return None
            verifier = fresh
        else:
            return None
        used = verifier.last_used_at
        if used is None or self._now() - used >= LAST_USED_PRECISION:
            self.record_key_use(key_id)
        return verifier.login.principal

    def cached_plain(self, key_id: str, secret: str) -> KeyLogin | None:
        """A cached success of exactly this (key id, secret); no database work."""
        if not _plausible(key_id, secret):
            return None
        cached = self._cache.get(self._cache.plain_key(key_id, secret))
        return None if cached is None else KeyLogin(cached.principal, cached.expires_at)

    def login_epoch(self) -> int | None:
        """The verification cache's change epoch, taken before a login whose outcome a caller
        keeps for a while (`login_changed_since` then says when to drop it); None while the
        cache is disabled (ttl 0): nothing may be kept. Cache only; callable on an event loop."""
        return self._cache.epoch() if self._cache.enabled else None

    def login_changed_since(self, principal: Principal, epoch: int) -> bool:
        """True when the key or its tenant changed (a revocation, say) or the cache was cleared
        after `epoch`. Cache only; callable on an event loop."""
        return self._cache.changed_since(principal, epoch)

    def has_verified_secret(self, key_id: str) -> bool:
        """True while a secret of the key is cached: any other secret is wrong (no check needed:
        a key's secret never changes). Cache only; callable on an event loop."""
        return isinstance(key_id, str) and self._cache.has_verified_secret(key_id)

    def plain_verifier(self, key_id: str) -> PlainVerifier | None:
        """The stored secret hash of a usable key, or None (unknown, revoked, expired, suspended)."""
        if not isinstance(key_id, str) or KEY_ID.fullmatch(key_id) is None:
            return None
        epoch = self._cache.epoch()
        with self._db.read() as session:
            query = select(ApiKeyRow, TenantRow.status).join(
                TenantRow, TenantRow.id == ApiKeyRow.tenant_id
            )
            found = session.execute(query.where(ApiKeyRow.key_id == key_id)).first()
        if found is None or not _usable(found[0], found[1], self._now()):
            return None
        row: ApiKeyRow = found[0]
        principal = Principal(row.tenant_id, row.service_account_id, key_id)
        login = KeyLogin(principal, row.expires_at)
        return PlainVerifier(login, row.secret_hash, epoch, row.last_used_at)

    def remember_plain(self, verifier: PlainVerifier, secret: str) -> bool:
        """After `secret` matched `verifier.secret_hash`: cache the success. False when the key or
        its tenant changed since the verifier was read (the check must not count)."""
        login = verifier.login
        cache_key = self._cache.plain_key(login.principal.key_id, secret)
        return self._cache.put(cache_key, login.principal, login.expires_at, epoch=verifier.epoch)

    def cached_scram(self, key_id: str, mechanism: str) -> ScramLogin | None:
        """A cached SCRAM verifier of the key; no database work."""
        if mechanism not in MECHANISMS or not isinstance(key_id, str):
            return None
        cached = self._cache.get(self._cache.scram_key(key_id, mechanism))
        if cached is None or cached.credential is None:
            return None
        return ScramLogin(KeyLogin(cached.principal, cached.expires_at), cached.credential)

    def scram_credential(
        self, key_id: str, mechanism: str
    ) -> tuple[Principal, ScramCredential] | None:
        """The stored SCRAM verifier of a usable key, or None. After the client's proof checks out
        (`tenancy.scram.verify_client_proof`), the gateway should call `record_key_use`."""
        found_login = self.scram_login(key_id, mechanism)
        if found_login is None:
            return None
        return found_login.login.principal, found_login.credential

    def scram_login(self, key_id: str, mechanism: str) -> ScramLogin | None:
        """The SCRAM verifier of a usable key (cached, else read and cached), or None."""
        if mechanism not in MECHANISMS:
            raise ValidationError("mechanism", f"must be one of {', '.join(MECHANISMS)}")
        if not isinstance(key_id, str) or KEY_ID.fullmatch(key_id) is None:
            return None
        cached = self.cached_scram(key_id, mechanism)
        if cached is not None:
            return cached
        for _ in range(RECONFIRMATIONS):  # a change applied during the read: read again
            found = self._read_scram(key_id, mechanism)
            if found is None or found is not _CHANGED:
                return found
        return None

    def _read_scram(self, key_id: str, mechanism: str) -> ScramLogin | None:
        """The verifier from the database, cached; `_CHANGED` when the key or its tenant changed
        in the cache's view during the read (the read may predate the change)."""
        cache_key = self._cache.scram_key(key_id, mechanism)
        epoch = self._cache.epoch()
        with self._db.read() as session:
            query = (
                select(ApiKeyRow, TenantRow.status, ScramCredentialRow)
                .join(TenantRow, TenantRow.id == ApiKeyRow.tenant_id)
                .join(ScramCredentialRow, ScramCredentialRow.key_id == ApiKeyRow.key_id)
                .where(ApiKeyRow.key_id == key_id, ScramCredentialRow.mechanism == mechanism)
            )
            found = session.execute(query).first()
        if found is None or not _usable(found[0], found[1], self._now()):
            return None
        row, verifier = found[0], found[2]
        principal = Principal(row.tenant_id, row.service_account_id, key_id)
        credential = ScramCredential(
            mechanism,
            bytes(verifier.salt),
            verifier.iterations,
            bytes(verifier.stored_key),
            bytes(verifier.server_key),
        )
        if not self._cache.put(cache_key, principal, row.expires_at, credential, epoch=epoch):
            return _CHANGED
        return ScramLogin(KeyLogin(principal, row.expires_at), credential)

    def record_key_use(self, key_id: str) -> None:
        """Set the key's `last_used_at` to now unless it was set less than a minute ago."""
        now = self._now()
        with self._db.write() as session:
            session.execute(
                update(ApiKeyRow)
                .where(
                    ApiKeyRow.key_id == key_id,
                    or_(
                        ApiKeyRow.last_used_at.is_(None),
                        ApiKeyRow.last_used_at <= now - LAST_USED_PRECISION,
                    ),
                )
                .values(last_used_at=now)
            )
