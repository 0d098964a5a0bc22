"""API keys: issue (secret shown once), list, look up, revoke.

The secret is generated here and returned once as a `Secret`; what is stored is its scrypt hash
(`tenancy.credentials`) and one SCRAM verifier per mechanism (`tenancy.scram`). Hashing runs
before the write transaction opens, so the SQLite write lock is never held for it. Revocation is
final and idempotent: it also erases the stored hash and verifiers, which can never be needed
again. Keys of a deleted tenant can still be revoked. Mixin of `TenantStore`; thread-safe.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select

from tenancy.credentials import hash_secret
from tenancy.domain import ApiKey, Page, Secret
from tenancy.errors import ConflictError, NotFoundError, ValidationError
from tenancy.ids import new_key_id, new_secret
from tenancy.models import ApiKeyRow, ScramCredentialRow
from tenancy.pagination import keyset_page
from tenancy.scram import MECHANISMS, make_credential
from tenancy.service_accounts import tenant_account
from tenancy.store_base import MAX_TEXT, StoreCore, check_text

REVOKED_HASH = "revoked"  # never parses as a hash, so nothing verifies against it


def key_from_row(row: ApiKeyRow) -> ApiKey:
    return ApiKey(
        row.key_id,
        row.tenant_id,
        row.service_account_id,
        row.description,
        row.created_at,
        row.expires_at,
        row.revoked_at,
        row.last_used_at,
    )


class ApiKeyCommands(StoreCore):
    def create_api_key(
        self,
        tenant_id: str,
        *,
        service_account_id: str,
        description: str = "",
        expires_at: datetime | None = None,
        actor: str,
    ) -> tuple[ApiKey, Secret]:
        """Issue a key for one of the tenant's service accounts: (key, secret shown once)."""
        check_text("description", description, max_length=MAX_TEXT, allow_empty=True)
        self._check_expiry(expires_at)
        secret = new_secret()
        secret_hash = hash_secret(secret)
        verifiers = [make_credential(mechanism, secret) for mechanism in MECHANISMS]
        with self._db.write() as session:
            self._live_tenant(session, tenant_id)
            tenant_account(session, tenant_id, service_account_id, "service_account_id")
            key_id = new_key_id()
            if session.get(ApiKeyRow, key_id) is not None:  # 36^16 ids: practically never
                raise ConflictError("key id collision; retry")
            row = ApiKeyRow(
                key_id=key_id,
                tenant_id=tenant_id,
                service_account_id=service_account_id,
                description=description,
                secret_hash=secret_hash,
                created_at=self._now(),
                expires_at=expires_at,
            )
            session.add(row)
            session.flush()  # the key row must exist before its verifiers (foreign key)
            session.add_all(
                ScramCredentialRow(
                    key_id=key_id,
                    mechanism=verifier.mechanism,
                    salt=verifier.salt,
                    iterations=verifier.iterations,
                    stored_key=verifier.stored_key,
                    server_key=verifier.server_key,
                )
                for verifier in verifiers
            )
            details = {
                "service_account_id": service_account_id,
                "description": description,
                "expires_at": expires_at.isoformat() if expires_at else None,
            }
            self._journal(
                session,
                actor=actor,
                action="api_key.created",
                tenant_id=tenant_id,
                subject=key_id,
                details=details,
                at=row.created_at,
            )
            return key_from_row(row), Secret(secret)

    def _check_expiry(self, expires_at: datetime | None) -> None:
        if expires_at is None:
            return
        if not isinstance(expires_at, datetime) or expires_at.tzinfo is None:
            raise ValidationError("expires_at", "must be an aware datetime")
        if expires_at <= self._now():
            raise ValidationError("expires_at", "must be in the future")

    def get_api_key(self, key_id: str) -> ApiKey:
        with self._db.read() as session:
            row = session.get(ApiKeyRow, key_id) if isinstance(key_id, str) else None
            if row is None:
                raise NotFoundError(f"api key {key_id!r} not found")
            return key_from_row(row)

    def list_api_keys(
        self, tenant_id: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[ApiKey]:
        """The tenant's keys oldest first, revoked and expired ones included (never secrets)."""
        query = select(ApiKeyRow).where(ApiKeyRow.tenant_id == tenant_id)
        with self._db.read() as session:
            self._tenant(session, tenant_id)
            return keyset_page(
                session, query, ApiKeyRow.created_at, ApiKeyRow.key_id, cursor, limit, key_from_row
            )

    def revoke_api_key(self, key_id: str, *, actor: str) -> ApiKey:
        """Revoke now (idempotent: an already revoked key is returned unchanged)."""
        with self._db.write() as session:
            row = session.get(ApiKeyRow, key_id) if isinstance(key_id, str) else None
            if row is None:
                raise NotFoundError(f"api key {key_id!r} not found")
            if row.revoked_at is not None:
                return key_from_row(row)
            row.revoked_at = self._now()
            row.secret_hash = REVOKED_HASH
            session.execute(delete(ScramCredentialRow).where(ScramCredentialRow.key_id == key_id))
            change = self._journal(
                session,
                actor=actor,
                action="api_key.revoked",
                tenant_id=row.tenant_id,
                subject=key_id,
                details={"service_account_id": row.service_account_id},
                at=row.revoked_at,
            )
            key = key_from_row(row)
        self._cache.apply(change)
        return key
