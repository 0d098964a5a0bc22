"""Partition limits reserved in the tenant store, so concurrent creations cannot pass them together.

Owns the rows of revision 0006. Per tenant, `partition_allocations` holds `allocated` (what the
tenant's topics hold on the fleet, as last reconciled and then adjusted by settled creations and
deletions), `reserved` (what creations under way hold) and `version` (bumped by every change).
- `reserve_partitions`: one transaction; each wanted size is granted in order while
  `allocated + reserved + size` stays within the tenant's `max_partitions` (read from the tenant
  row in the same transaction, so a limit change applies at once), and the sum is added to
  `reserved` by a conditional UPDATE (`... WHERE allocated + reserved + :n <= max_partitions`):
  atomic on SQLite (writers serialise on BEGIN IMMEDIATE) and PostgreSQL (the row lock, the
  condition re-checked under it). A tenant without a row raises `AllocationUnknown`: its count
  must first come from the fleet (`reconcile_partitions`).
- `settle_partitions`: the broker answered; the reservation ends and what was really created is
  added to `allocated`. `release_partitions`: topics were deleted.
- `reconcile_partitions`: the fleet's real count replaces `allocated`, fenced: only when the row
  still has the version the caller read before asking the fleet, has been quiet for `quiet_s`
  (the fleet's metadata lags a creation) and holds no live reservation. Reservations older than
  `stale_s` (a gateway that died between reserve and create) expire in the same transaction, so a
  crash never holds a tenant's partitions for ever.
Mixin of `TenantStore`; thread-safe (each call its own session).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Table, delete, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from tenancy.errors import TenancyError, ValidationError
from tenancy.models import PartitionAllocationRow, PartitionReservationRow, TenantRow
from tenancy.store_base import StoreCore

A = PartitionAllocationRow
R = PartitionReservationRow
ALLOCATIONS = cast(Table, A.__table__)  # Core statements, for RETURNING on both databases
MAX_SIZES = 10_000  # topics in one reservation (a CreateTopics request's worth)


class AllocationUnknown(TenancyError):
    """The tenant has no allocation row yet: reconcile it with the fleet's count first."""


@dataclass(frozen=True, slots=True)
class PartitionAllocation:
    tenant_id: str
    allocated: int
    reserved: int
    version: int
    limit: int

    @property
    def in_use(self) -> int:
        return self.allocated + self.reserved


@dataclass(frozen=True, slots=True)
class PartitionGrant:
    """The answer to one reservation: which sizes were granted (in the order asked), the id to
    settle with (None when nothing was granted), and the tenant's use before and its limit."""

    reservation_id: str | None
    granted: tuple[bool, ...]
    in_use: int
    limit: int


def _sizes(sizes: Sequence[int]) -> list[int]:
    if len(sizes) > MAX_SIZES:
        raise ValidationError("sizes", f"at most {MAX_SIZES} per reservation")
    for size in sizes:
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size < 2**31:
            raise ValidationError("sizes", "each must be a partition count from 0 to 2**31-1")
    return list(sizes)


def _count(field: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**62:
        raise ValidationError(field, "must be a non-negative integer")
    return value


class PartitionReservations(StoreCore):
    def partition_allocation(self, tenant_id: str) -> PartitionAllocation | None:
        """The tenant's allocation row with its current limit; None before its first reconcile."""
        with self._db.read() as session:
            return _allocation(session, tenant_id)

    def reserve_partitions(
        self, tenant_id: str, sizes: Sequence[int], *, holder: str
    ) -> PartitionGrant:
        """Grant `sizes` in order while they fit the tenant's limit, in one transaction."""
        wanted = _sizes(sizes)
        with self._db.write() as session:
            current = _allocation(session, tenant_id, lock=True)
            if current is None:
                raise AllocationUnknown(f"tenant {tenant_id!r} has no partition allocation yet")
            room = current.limit - current.in_use
            granted = []
            for size in wanted:
                fits = size <= room
                granted.append(fits)
                room -= size if fits else 0
            total = sum(s for s, ok in zip(wanted, granted, strict=True) if ok)
            if not any(granted):
                return PartitionGrant(None, tuple(granted), current.in_use, current.limit)
            if not _add_reserved(session, tenant_id, total, self._now()):
                return PartitionGrant(None, (False,) * len(wanted), current.in_use, current.limit)
            reservation_id = secrets.token_hex(16)
            session.add(
                R(
                    id=reservation_id,
                    tenant_id=tenant_id,
                    partitions=total,
                    holder=holder[:200],
                    created_at=self._now(),
                )
            )
            return PartitionGrant(reservation_id, tuple(granted), current.in_use, current.limit)

    def settle_partitions(self, tenant_id: str, reservation_id: str, created: int) -> None:
        """End a reservation: `created` partitions (at most those reserved) now exist. A reservation
        that already expired only adds `created` (a reconcile corrects any double count)."""
        _count("created", created)
        now = self._now()
        with self._db.write() as session:
            row = session.get(R, reservation_id, with_for_update=True)
            if row is not None and row.tenant_id == tenant_id:
                created = min(created, row.partitions)
                session.delete(row)
                reserved_change = -row.partitions
            else:
                reserved_change = 0
            session.execute(
                update(A)
                .where(A.tenant_id == tenant_id)
                .values(
                    allocated=A.allocated + created,
                    reserved=_floor(self._db.dialect, A.reserved + reserved_change),
                    version=A.version + 1,
                    updated_at=now,
                )
                .execution_options(synchronize_session=False)
            )

    def release_partitions(self, tenant_id: str, partitions: int) -> None:
        """`partitions` of the tenant's were deleted."""
        _count("partitions", partitions)
        if partitions == 0:
            return
        with self._db.write() as session:
            session.execute(
                update(A)
                .where(A.tenant_id == tenant_id)
                .values(
                    allocated=_floor(self._db.dialect, A.allocated - partitions),
                    version=A.version + 1,
                    updated_at=self._now(),
                )
                .execution_options(synchronize_session=False)
            )

    def reconcile_partitions(
        self,
        tenant_id: str,
        fleet_count: int,
        seen_version: int | None,
        *,
        quiet_s: float,
        stale_s: float,
    ) -> bool:
        """Set `allocated` to the fleet's count read after `seen_version` was (None: the tenant
        had no row). True when it was applied; False when the row changed meanwhile, is not
        quiet, or holds a live reservation (try again later)."""
        _count("fleet_count", fleet_count)
        now = self._now()
        with self._db.write() as session:
            if seen_version is None:
                return _insert_allocation(session, self._db.dialect, tenant_id, fleet_count, now)
            row = session.get(A, tenant_id, with_for_update=True)
            if row is None:
                return False
            fenced = row.version == seen_version
            quiet = row.updated_at <= now - timedelta(seconds=quiet_s)
            expired = _expire(session, tenant_id, now - timedelta(seconds=stale_s))
            if expired:
                row.reserved = max(0, row.reserved - expired)
                row.version += 1
                row.updated_at = now
            if not (fenced and quiet and row.reserved == 0):
                return False
            row.allocated = fleet_count
            row.version += 1
            row.reconciled_at = row.updated_at = now
            return True

    def partition_tenants(self, *, reconciled_before_s: float, limit: int = 100) -> list[str]:
        """Tenants whose allocation was last reconciled more than `reconciled_before_s` ago."""
        with self._db.read() as session:
            edge = self._now() - timedelta(seconds=reconciled_before_s)
            query = select(A.tenant_id).where(A.reconciled_at <= edge).order_by(A.reconciled_at)
            return list(session.scalars(query.limit(limit)))


def _floor(dialect: str, value: Any) -> Any:
    """`max(value, 0)` in SQL (SQLite's scalar max, PostgreSQL's greatest)."""
    return (func.max if dialect == "sqlite" else func.greatest)(value, 0)


def _allocation(
    session: Session, tenant_id: str, *, lock: bool = False
) -> PartitionAllocation | None:
    query = (
        select(A.allocated, A.reserved, A.version, TenantRow.max_partitions)
        .join(TenantRow, TenantRow.id == A.tenant_id)
        .where(A.tenant_id == tenant_id)
    )
    if lock:
        query = query.with_for_update(of=A)
    found = session.execute(query).first()
    if found is None:
        return None
    allocated, reserved, version, limit = found
    return PartitionAllocation(tenant_id, int(allocated), int(reserved), int(version), int(limit))


def _add_reserved(session: Session, tenant_id: str, partitions: int, now: datetime) -> bool:
    """The conditional UPDATE: True when `partitions` more still fit the tenant's limit."""
    limit = select(TenantRow.max_partitions).where(TenantRow.id == tenant_id).scalar_subquery()
    table = ALLOCATIONS.c
    statement = (
        update(ALLOCATIONS)
        .where(table.tenant_id == tenant_id, table.allocated + table.reserved + partitions <= limit)
        .values(reserved=table.reserved + partitions, version=table.version + 1, updated_at=now)
        .returning(table.tenant_id)
    )
    return session.execute(statement).first() is not None


def _insert_allocation(
    session: Session, dialect: str, tenant_id: str, count: int, now: datetime
) -> bool:
    """The tenant's first row, unless another gateway made it first (then False)."""
    if session.get(TenantRow, tenant_id) is None:
        return False
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    values = dict(
        tenant_id=tenant_id,
        allocated=count,
        reserved=0,
        version=0,
        reconciled_at=now,
        updated_at=now,
    )
    statement = insert(ALLOCATIONS).values(**values).on_conflict_do_nothing()
    return session.execute(statement.returning(ALLOCATIONS.c.tenant_id)).first() is not None


def _expire(session: Session, tenant_id: str, before: datetime) -> int:
    """Delete the tenant's reservations made before `before`; the partitions they held."""
    stale = select(func.coalesce(func.sum(R.partitions), 0)).where(
        R.tenant_id == tenant_id, R.created_at < before
    )
    total = int(session.scalar(stale) or 0)
    if total:
        session.execute(delete(R).where(R.tenant_id == tenant_id, R.created_at < before))
    return total
