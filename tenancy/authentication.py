"""Credential checks for the gateway: PLAIN / HTTP Basic secrets and SCRAM verifiers.

A key authenticates only while it is unrevoked, unexpired and its tenant is active; every failure
is the same `None`, so a caller learns nothing about why (key ids are not secret, so a fast `None`
for an unknown id reveals nothing new). Successful checks go through the `VerificationCache`.
`last_used_at` is written at most once per `LAST_USED_PRECISION` per key, outside any audit
(it is telemetry, not a change), so busy keys do not turn every login into a write. Inputs that
could not be a key (wrong shape, oversized secret) are refused before any database work.
Mixin of `TenantStore`; thread-safe.
"""

from __future__ import annotations

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


def _usable(row: ApiKeyRow, tenant_status: str, now: datetime) -> bool:
    if row.revoked_at is not None or tenant_status != "active":
        return False
    return row.expires_at is None or row.expires_at > now


class Authentication(StoreCore):
    def verify_api_key(self, key_id: str, secret: str) -> Principal | None:
        """The principal for a (key id, secret) pair, or None: unknown, revoked, expired, suspended."""
        if not isinstance(key_id, str) or KEY_ID.fullmatch(key_id) is None:
            return None
        if not isinstance(secret, str) or not 0 < len(secret) <= MAX_SECRET_LENGTH:
            return None
        cache_key = self._cache.plain_key(key_id, secret)
        cached = self._cache.get(cache_key)
        if cached is not None:
            return cached.principal
        now = self._now()
        with self._db.read() as session:
            query = select(ApiKeyRow, TenantRow.status).join(
                TenantRow, TenantRow.id == ApiKeyRow.tenant_id
            )
            found = session.execute(query.where(ApiKeyRow.key_id == key_id)).first()
        if found is None or not _usable(found[0], found[1], now):
            return None
        row: ApiKeyRow = found[0]
        if not verify_secret(secret, row.secret_hash):
            return None
        principal = Principal(row.tenant_id, row.service_account_id, key_id)
        self._cache.put(cache_key, principal, row.expires_at)
        if row.last_used_at is None or now - row.last_used_at >= LAST_USED_PRECISION:
            self.record_key_use(key_id)
        return principal

    def scram_credential(
        self, key_id: str, mechanism: str
    ) -> tuple[Principal, ScramCredential] | None:
        """The stored SCRAM verifier of a usable key, or None. After the client's proof checks out
        (`tenancy.scram.verify_client_proof`), the gateway should call `record_key_use`."""
        if mechanism not in MECHANISMS:
            raise ValidationError("mechanism", f"must be one of {', '.join(MECHANISMS)}")
        if not isinstance(key_id, str) or KEY_ID.fullmatch(key_id) is None:
            return None
        cache_key = self._cache.scram_key(key_id, mechanism)
        cached = self._cache.get(cache_key)
        if cached is not None and cached.credential is not None:
            return cached.principal, cached.credential
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
        self._cache.put(cache_key, principal, row.expires_at, credential)
        return principal, credential

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
