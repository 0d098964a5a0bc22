"""Gateways' heartbeats in the store: which change-feed version each running gateway has applied.

A gateway reports `(id, applied version)` when it starts, after applying changes, and every
heartbeat interval while idle (`report_gateway`); it removes its row when it stops
(`forget_gateway`). The admin API, after committing a change that takes access away (an ACL, a
revoked key, a suspended tenant), reads `gateway_positions` until every live gateway has applied
the change's version, so the change is in force everywhere before the operator gets the answer
(docs/security.md). A gateway whose last report is older than `stale_after_s` is not live: it is
not waited for (it has lost the store and cannot have read anything newer either). Reports are
not journaled (they are not tenancy changes and would feed themselves). `gateway_connections`
sums each gateway's connection shares (`tenancy.limit_holdings`) for the operator's view of the
fleet (`GET /v1/gateways`). Mixin of `TenantStore`;
thread-safe (one session per call).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select

from tenancy.limit_holdings import CONNECTIONS
from tenancy.models import GatewayRow, LimitHoldingRow
from tenancy.store_base import MAX_NAME, StoreCore, check_text

FORGET_AFTER = timedelta(days=1)  # rows of gateways that died without removing theirs


@dataclass(frozen=True)
class GatewayPosition:
    gateway_id: str
    applied_version: int
    last_seen: datetime
    started_at: datetime  # when this gateway's row was made (its first report)


@dataclass(frozen=True)
class GatewayConnections:
    """The connection slots one gateway holds in the store (`tenancy.limit_holdings`): Kafka
    sessions and HTTP consumer instances (a release is written back within about a second)."""

    connections: int
    tenants: int  # tenants holding at least one


class GatewayRegistry(StoreCore):
    def report_gateway(self, gateway_id: str, applied_version: int) -> None:
        """Record that `gateway_id` has applied every change up to `applied_version`."""
        check_text("gateway_id", gateway_id, max_length=MAX_NAME, allow_empty=False)
        now = self._now()
        with self._db.write() as session:
            row = session.get(GatewayRow, gateway_id)
            if row is None:
                session.execute(delete(GatewayRow).where(GatewayRow.last_seen < now - FORGET_AFTER))
                session.add(
                    GatewayRow(
                        id=gateway_id,
                        applied_version=applied_version,
                        started_at=now,
                        last_seen=now,
                    )
                )
                return
            row.applied_version = max(row.applied_version, applied_version)
            row.last_seen = now

    def forget_gateway(self, gateway_id: str) -> None:
        with self._db.write() as session:
            session.execute(delete(GatewayRow).where(GatewayRow.id == gateway_id))

    def gateway_positions(self, *, stale_after_s: float) -> list[GatewayPosition]:
        """The live gateways (reported within `stale_after_s`), by id."""
        since = self._now() - timedelta(seconds=stale_after_s)
        query = select(GatewayRow).where(GatewayRow.last_seen >= since).order_by(GatewayRow.id)
        with self._db.read() as session:
            return [
                GatewayPosition(row.id, row.applied_version, row.last_seen, row.started_at)
                for row in session.scalars(query)
            ]

    def gateway_connections(self) -> dict[str, GatewayConnections]:
        """Each gateway's held connection slots, by gateway id (one grouped read of the shares)."""
        shares = LimitHoldingRow
        query = (
            select(shares.gateway_id, func.sum(shares.held), func.count())
            .where(shares.kind == CONNECTIONS, shares.held > 0)
            .group_by(shares.gateway_id)
        )
        with self._db.read() as session:
            return {
                gateway: GatewayConnections(int(held), int(tenants))
                for gateway, held, tenants in session.execute(query)
            }
