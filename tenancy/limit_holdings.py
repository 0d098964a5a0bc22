"""Connection and storage limits held in the tenant store, per gateway, so the fleet cannot pass them.

Owns the rows of revision 0008. Per tenant and kind, `limit_totals` holds `held` (what every
gateway holds together) beside `base` (0 for connections; for storage the bytes the tenant's
partitions held at the newest sample, `sampled_ms`); `limit_holdings` holds each gateway's share.
A gateway always writes its share as an absolute value (what it really holds), so a lost or
repeated write is corrected by the next one.
- `hold_connections(tenant, gateway, held)`: the gateway's share becomes `held` when the fleet's
  total stays within the tenant's `max_connections` (or `held` is no more than before: a release
  always applies). False, and nothing changed, when it would pass the limit.
- `lease_storage(tenant, gateway, held, wanted)`: the gateway's share becomes `held` (bytes it has
  charged and not yet seen in a sample, plus unused headroom) plus up to `wanted` more, as much as
  `base + held of all` leaves under `max_storage_bytes`.
  With `sample` (the gateway's newest: stored bytes, when it was taken) the transaction first
  replaces `base`, fenced: only by a sample taken later than the row's (`sampled_ms`). The
  gateway calls it after each of its samples, with `held` less what the sample now counts.
- `drop_holdings(gateway)`: a gateway stopping gives everything back.
Every reservation is one transaction: the totals row is locked (SQLite: BEGIN IMMEDIATE;
PostgreSQL: FOR UPDATE); the shares of gateways whose heartbeat (`gateways.last_seen`,
`tenancy.gateway_registry`) and whose last write of the share are both older than `stale_s` are
deleted and taken off `held` (a dead gateway's connections and leases expire; a restarted
gateway has a new id and starts from zero); and `held` changes by a conditional UPDATE that
re-checks the limit. Mixin of `TenantStore`; thread-safe (each call its own session).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from sqlalchemy import Table, delete, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import InstrumentedAttribute, Session

from tenancy.errors import NotFoundError, ValidationError
from tenancy.models import GatewayRow, LimitHoldingRow, LimitTotalRow, TenantRow
from tenancy.store_base import MAX_NAME, StoreCore, check_text

T = LimitTotalRow
H = LimitHoldingRow
TOTALS = cast(Table, T.__table__)
HOLDINGS = cast(Table, H.__table__)
CONNECTIONS, STORAGE = "connections", "storage"
MAX_AMOUNT = 2**62


@dataclass(frozen=True, slots=True)
class Holding:
    """The answer to a reservation: whether it applied, the gateway's share now, the tenant's use
    (`base + held` of every gateway, after the change) and its limit."""

    granted: bool
    held: int
    in_use: int
    limit: int


@dataclass(frozen=True, slots=True)
class _Totals:
    base: int
    held: int
    own: int
    limit: int

    @property
    def others(self) -> int:
        return self.base + self.held - self.own


def _amount(field: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_AMOUNT:
        raise ValidationError(field, "must be a non-negative integer")
    return value


def _limit_column(kind: str) -> InstrumentedAttribute[int]:
    return TenantRow.max_connections if kind == CONNECTIONS else TenantRow.max_storage_bytes


class LimitHoldings(StoreCore):
    def hold_connections(
        self, tenant_id: str, gateway_id: str, held: int, *, stale_s: float
    ) -> Holding:
        """The gateway now holds `held` of the tenant's connections, if the fleet stays within
        `max_connections` (a decrease always applies)."""
        _amount("held", held)
        with self._db.write() as session:
            totals = self._lock(session, tenant_id, CONNECTIONS, gateway_id, stale_s)
            refused = Holding(False, totals.own, totals.others + totals.own, totals.limit)
            if held > totals.own and totals.others + held > totals.limit:
                return refused
            if not self._set_share(session, tenant_id, CONNECTIONS, gateway_id, held, totals):
                return refused
            return Holding(True, held, totals.others + held, totals.limit)

    def lease_storage(
        self,
        tenant_id: str,
        gateway_id: str,
        held: int,
        wanted: int,
        *,
        stale_s: float,
        sample: tuple[int, int] | None = None,
    ) -> Holding:
        """The gateway's share becomes `held` plus as much of `wanted` as the tenant's storage
        limit leaves; `granted` says whether any was added. `sample`: the gateway's newest
        (stored bytes, sampled_ms), applied first when newer than the row's (a first lease after
        a fleet restart counts what the tenant already stores)."""
        _amount("held", held)
        _amount("wanted", wanted)
        with self._db.write() as session:
            totals = self._lock(session, tenant_id, STORAGE, gateway_id, stale_s, sample=sample)
            room = max(0, totals.limit - totals.others - held)
            share = held + min(wanted, room)
            self._set_share(session, tenant_id, STORAGE, gateway_id, share, totals, checked=False)
            return Holding(share > held, share, totals.others + share, totals.limit)

    def drop_holdings(self, gateway_id: str) -> int:
        """Give back every share of `gateway_id` (it is stopping); the rows removed."""
        with self._db.write() as session:
            rows = session.execute(
                select(H.tenant_id, H.kind, H.held).where(H.gateway_id == gateway_id)
            ).all()
            for tenant_id, kind, held in rows:
                _change_held(session, tenant_id, kind, -int(held), self._now())
            session.execute(delete(H).where(H.gateway_id == gateway_id))
            return len(rows)

    def limit_use(self, tenant_id: str, kind: str) -> tuple[int, int, dict[str, int]]:
        """(`base`, `held`, each gateway's share) of one of the tenant's limits: for tests and
        operators; (0, 0, {}) before its first reservation."""
        with self._db.read() as session:
            row = session.get(T, (tenant_id, kind))
            shares = session.execute(
                select(H.gateway_id, H.held).where(H.tenant_id == tenant_id, H.kind == kind)
            ).all()
            base, held = (0, 0) if row is None else (row.base, row.held)
            return int(base), int(held), {g: int(h) for g, h in shares}

    # -- one reservation's steps ------------------------------------------------------------------
    def _lock(
        self,
        session: Session,
        tenant_id: str,
        kind: str,
        gateway_id: str,
        stale_s: float,
        *,
        sample: tuple[int, int] | None = None,
    ) -> _Totals:
        """Lock the tenant's totals row (made if missing), apply `sample` (stored bytes,
        sampled_ms) when newer, expire dead gateways' shares and read
        the limit and this gateway's share."""
        check_text("gateway_id", gateway_id, max_length=MAX_NAME, allow_empty=False)
        now = self._now()
        limit = session.scalar(select(_limit_column(kind)).where(TenantRow.id == tenant_id))
        if limit is None:
            raise NotFoundError(f"tenant {tenant_id!r} not found")
        _insert_totals(session, self._db.dialect, tenant_id, kind, now)
        if sample is not None:
            _apply_sample(session, tenant_id, *sample)
        row = session.execute(
            select(T.base, T.held).where(T.tenant_id == tenant_id, T.kind == kind).with_for_update()
        ).one()
        held = int(row.held)
        expired = _expire(session, tenant_id, kind, gateway_id, now - timedelta(seconds=stale_s))
        if expired:
            _change_held(session, tenant_id, kind, -expired, now)
            held = max(0, held - expired)
        own = session.scalar(
            select(H.held).where(
                H.tenant_id == tenant_id, H.kind == kind, H.gateway_id == gateway_id
            )
        )
        return _Totals(int(row.base), held, int(own or 0), int(limit))

    def _set_share(
        self,
        session: Session,
        tenant_id: str,
        kind: str,
        gateway_id: str,
        held: int,
        t: _Totals,
        *,
        checked: bool = True,
    ) -> bool:
        """Make the gateway's share `held`; with `checked`, an increase is the conditional UPDATE
        (False, nothing written, when it would pass the limit)."""
        now = self._now()
        change = held - t.own
        if change and not _change_held(
            session, tenant_id, kind, change, now, _limit_column(kind) if checked else None
        ):
            return False
        insert = postgresql.insert if self._db.dialect == "postgresql" else sqlite.insert
        statement = insert(HOLDINGS).values(
            tenant_id=tenant_id, kind=kind, gateway_id=gateway_id, held=held, updated_at=now
        )
        session.execute(
            statement.on_conflict_do_update(
                index_elements=["tenant_id", "kind", "gateway_id"],
                set_={"held": held, "updated_at": now},
            )
        )
        return True


def _insert_totals(
    session: Session, dialect: str, tenant_id: str, kind: str, now: datetime
) -> None:
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    values = dict(
        tenant_id=tenant_id, kind=kind, base=0, held=0, sampled_ms=0, version=0, updated_at=now
    )
    session.execute(insert(TOTALS).values(**values).on_conflict_do_nothing())


def _apply_sample(session: Session, tenant_id: str, stored: int, sampled_ms: int) -> bool:
    """The fenced base update: `stored` replaces the base only if sampled after the row's."""
    _amount("stored", stored)
    _amount("sampled_ms", sampled_ms)
    table = TOTALS.c
    newer = session.execute(
        update(TOTALS)
        .where(table.tenant_id == tenant_id, table.kind == STORAGE, table.sampled_ms < sampled_ms)
        .values(base=stored, sampled_ms=sampled_ms)
        .returning(table.tenant_id)
    ).first()
    return newer is not None


def _change_held(
    session: Session,
    tenant_id: str,
    kind: str,
    change: int,
    now: datetime,
    limit: InstrumentedAttribute[int] | None = None,
) -> bool:
    """`held += change` (never below 0) on the locked totals row. With `limit` (the tenants
    column) an increase applies only while `base + held + change` stays within it: the
    conditional UPDATE, re-checked under the row lock; False when it did not apply."""
    table = TOTALS.c
    floor = func.max if session.get_bind().dialect.name == "sqlite" else func.greatest
    where = [table.tenant_id == tenant_id, table.kind == kind]
    if limit is not None and change > 0:
        cap = select(limit).where(TenantRow.id == tenant_id).scalar_subquery()
        where.append(table.base + table.held + change <= cap)
    statement = (
        update(TOTALS)
        .where(*where)
        .values(held=floor(table.held + change, 0), version=table.version + 1, updated_at=now)
        .returning(table.tenant_id)
    )
    return session.execute(statement).first() is not None


def _expire(session: Session, tenant_id: str, kind: str, keep: str, before: datetime) -> int:
    """Delete the tenant's shares of gateways not heard from since `before` (neither a heartbeat
    nor a write of the share; never `keep`, the gateway asking); the amount they held."""
    live = select(GatewayRow.id).where(GatewayRow.last_seen >= before)
    dead = (
        H.tenant_id == tenant_id,
        H.kind == kind,
        H.gateway_id != keep,
        H.gateway_id.not_in(live),
        H.updated_at < before,  # a share just written is live (its first heartbeat may follow)
    )
    total = int(session.scalar(select(func.coalesce(func.sum(H.held), 0)).where(*dead)) or 0)
    gone = session.execute(delete(H).where(*dead).returning(H.gateway_id)).all()
    return total if gone else 0
