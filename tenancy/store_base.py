"""What every part of the tenant store shares: the database, the clock, the verification cache,
input checks used by several resources, and the one way to journal a mutation.

The store's command groups (`tenancy.tenants`, `tenancy.api_keys`, ...) are mixins over this core;
`tenancy.store.TenantStore` assembles them. Thread-safe as long as each call uses its own session
(which `Database.read()`/`write()` guarantee); the cache has its own lock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from tenancy import journal
from tenancy.database import Database
from tenancy.domain import Change
from tenancy.errors import NotFoundError, TenantDeletedError, ValidationError
from tenancy.models import TenantRow
from tenancy.verification_cache import VerificationCache

Clock = Callable[[], datetime]
MAX_NAME = 200
MAX_TEXT = 1000


def utcnow() -> datetime:
    return datetime.now(UTC)


def check_text(field: str, value: object, *, max_length: int, allow_empty: bool) -> str:
    """A printable string of bounded length (names, descriptions, actors)."""
    if not isinstance(value, str):
        raise ValidationError(field, "must be a string")
    if not value.strip() and not allow_empty:
        raise ValidationError(field, "must not be empty")
    if len(value) > max_length:
        raise ValidationError(field, f"must be at most {max_length} characters")
    if not value.isprintable():
        raise ValidationError(field, "must not contain control characters")
    return value


class StoreCore:
    """State and helpers shared by the store's command groups."""

    def __init__(self, db: Database, clock: Clock, cache: VerificationCache) -> None:
        self._db = db
        self._clock = clock
        self._cache = cache

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None:
            raise ValueError("the tenant store's clock must return aware datetimes")
        return now.astimezone(UTC)

    def _journal(
        self,
        session: Session,
        *,
        actor: str,
        action: str,
        tenant_id: str | None,
        subject: str,
        details: dict[str, Any],
        at: datetime | None = None,
    ) -> Change:
        check_text("actor", actor, max_length=MAX_NAME, allow_empty=False)
        return journal.record(
            session,
            at=at or self._now(),
            actor=actor,
            action=action,
            tenant_id=tenant_id,
            subject=subject,
            details=details,
        )

    @staticmethod
    def _tenant(session: Session, tenant_id: str) -> TenantRow:
        """The tenant's row (any status); NotFoundError when there is none."""
        row = session.get(TenantRow, tenant_id) if isinstance(tenant_id, str) else None
        if row is None:
            raise NotFoundError(f"tenant {tenant_id!r} not found")
        return row

    @classmethod
    def _live_tenant(cls, session: Session, tenant_id: str) -> TenantRow:
        """The tenant's row for a change under it: deleted tenants are read-only (TenantDeletedError)."""
        row = cls._tenant(session, tenant_id)
        if row.status == "deleted":
            raise TenantDeletedError(f"tenant {tenant_id!r} is deleted")
        return row
