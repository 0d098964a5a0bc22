"""`TenantStore`: the tenant store's one entry point, on SQLite (embedded) or PostgreSQL (production).

Assembles the command groups (tenants, service accounts, API keys, authentication, quotas, ACLs,
plans, operators, billing reads; each a mixin over `tenancy.store_base.StoreCore`) and owns what
spans them: opening and migrating the database, the audit log, the change versions and the change
feed, and the verification cache. Every mutation journals an audit entry and a change in its own transaction.

Synchronous SQLAlchemy: call it from threads (the admin API uses a thread pool) or directly; every
method is thread-safe. `watch()` is the asynchronous part. Nothing here logs a secret; `repr()` hides
the database password.
"""

from __future__ import annotations

from types import TracebackType

from tenancy import journal
from tenancy.acls import AclCommands
from tenancy.api_keys import ApiKeyCommands
from tenancy.authentication import Authentication
from tenancy.billing_store import BillingReads
from tenancy.change_feed import ChangeFeed
from tenancy.database import Database
from tenancy.domain import AuditEntry, Change, Page
from tenancy.errors import ValidationError
from tenancy.gateway_registry import GatewayRegistry
from tenancy.limit_holdings import LimitHoldings
from tenancy.operators import OperatorCommands
from tenancy.plans import PlanCommands
from tenancy.quotas import QuotaCommands
from tenancy.reservations import PartitionReservations
from tenancy.service_accounts import ServiceAccountCommands
from tenancy.store_base import Clock, utcnow
from tenancy.tenants import TenantCommands
from tenancy.verification_cache import VerificationCache

MAX_CHANGES = 10_000


class TenantStore(
    TenantCommands,
    ServiceAccountCommands,
    ApiKeyCommands,
    Authentication,
    QuotaCommands,
    AclCommands,
    PlanCommands,
    OperatorCommands,
    BillingReads,
    GatewayRegistry,
    PartitionReservations,
    LimitHoldings,
):
    @classmethod
    def open(
        cls, url: str, *, clock: Clock = utcnow, verification_cache_ttl_s: float = 0.0
    ) -> TenantStore:
        """Connect to `sqlite:///path` or `postgresql+psycopg://…` (no schema change: see `upgrade`).

        `verification_cache_ttl_s > 0` caches successful credential checks that long (the gateway
        sets it and keeps a `watch()` running, which invalidates entries on revocation).
        """
        db = Database(url)
        return cls(db, clock, VerificationCache(verification_cache_ttl_s, clock))

    def upgrade(self, revision: str = "head") -> None:
        """Migrate the schema to `revision` (Alembic; `head` = latest). Idempotent."""
        self._db.upgrade(revision)

    def schema_revision(self) -> str | None:
        """The database's Alembic revision; None before the first `upgrade`."""
        return self._db.revision()

    @property
    def database(self) -> Database:
        """The store's engines, for the components whose tables live here too (billing)."""
        return self._db

    @property
    def dialect(self) -> str:
        """`sqlite` or `postgresql`."""
        return self._db.dialect

    def close(self) -> None:
        self._db.dispose()

    def __enter__(self) -> TenantStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TenantStore({self._db.url.render_as_string(hide_password=True)!r})"

    # --- audit log and change feed ---------------------------------------------------------------

    def audit_log(
        self, *, cursor: str | None = None, limit: int = 100, tenant_id: str | None = None
    ) -> Page[AuditEntry]:
        """Audit entries, newest first; `tenant_id` narrows to one tenant's."""
        with self._db.read() as session:
            return journal.audit_page(session, cursor, limit, tenant_id)

    def current_version(self) -> int:
        """The version of the latest committed change (0 for a new store)."""
        with self._db.read() as session:
            return journal.current_version(session)

    def changes_since(self, version: int, *, limit: int = 1000) -> list[Change]:
        """Changes with a version above `version`, oldest first, at most `limit`."""
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ValidationError("version", "must be a non-negative integer")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_CHANGES:
            raise ValidationError("limit", f"must be an integer from 1 to {MAX_CHANGES}")
        with self._db.read() as session:
            return journal.changes_since(session, version, limit)

    def prune_changes(self, through_version: int) -> int:
        """Forget change records up to `through_version` (the audit log stays); returns the count.
        Subscribers still behind that version will see a gap and resynchronise."""
        with self._db.write() as session:
            return journal.prune_changes(session, through_version)

    def watch(self, *, from_version: int | None = None, poll_interval_s: float = 0.2) -> ChangeFeed:
        """A feed of changes after `from_version` (None: from now on). See `tenancy.change_feed`."""
        return ChangeFeed(
            self,
            from_version=from_version,
            poll_interval_s=poll_interval_s,
            notify_url=self._db.notify_url,
            channel=journal.NOTIFY_CHANNEL,
            sqlite_path=self._db.sqlite_path,
        )

    def invalidate(self, change: Change) -> None:
        """Drop cached credential checks that `change` may have made stale."""
        self._cache.apply(change)

    def invalidate_all(self) -> None:
        self._cache.clear()
