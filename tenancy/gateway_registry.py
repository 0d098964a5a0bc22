"""Gateways' heartbeats in the store: which change-feed version each running gateway has applied.

A gateway reports `(id, applied version)` when it starts, after applying changes, and every
heartbeat interval while idle (`report_gateway`); it removes its row when it stops
(`forget_gateway`). The admin API, after committing a change that takes access away (an ACL, a
revoked key, a suspended tenant), reads `gateway_positions` until every live gateway has applied
the change's version, so the change is in force everywhere before the operator gets the answer
(docs/security.md). A gateway whose last report is older than `stale_after_s` is not live: it is
not waited for (it has lost the store and cannot have read anything newer either). Reports are
not journaled (they are not tenancy changes and would feed themselves). Mixin of `TenantStore`;
thread-safe (one session per call).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select

from tenancy.models import GatewayRow
from tenancy.store_base import MAX_NAME, StoreCore, check_text

FORGET_AFTER = timedelta(days=1)  # rows of gateways that died without removing theirs


@dataclass(frozen=True)
class GatewayPosition:
    gateway_id: str
    applied_version: int
    last_seen: datetime


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
                GatewayPosition(row.id, row.applied_version, row.last_seen)
                for row in session.scalars(query)
            ]
