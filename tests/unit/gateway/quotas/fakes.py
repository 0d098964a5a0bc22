"""A fake quota source (the tenant store's `list_quotas` and `get_tenant`) for the quota book's
and the throttling facade's unit tests."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from tenancy.domain import DEFAULT_LIMITS, QuotaEntity, Tenant, TenantLimits
from tenancy.errors import NotFoundError

Entities = dict[QuotaEntity, dict[str, float]]
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)


class FakeSource:
    """Quotas and limits per tenant; optionally holds each quota read until its gate (by data
    version) opens."""

    def __init__(self, tenants: dict[str, Entities]) -> None:
        self.tenants = tenants
        self.limits: dict[str, TenantLimits] = {}  # DEFAULT_LIMITS (no caps) when absent
        self.version = 1
        self.reads = 0
        self.gates: dict[int, threading.Event] = {}
        self.threads: set[int] = set()

    def list_quotas(self, tenant_id: str) -> list[tuple[QuotaEntity, dict[str, float]]]:
        if tenant_id not in self.tenants:
            self.reads += 1
            raise NotFoundError(f"tenant {tenant_id!r} not found")
        snapshot = [(e, dict(q)) for e, q in self.tenants[tenant_id].items()]
        gate = self.gates.get(self.version)
        self.threads.add(threading.get_ident())
        self.reads += 1  # after the snapshot: a test waiting for it may now change the data
        if gate is not None:
            assert gate.wait(timeout=30), "test gate never opened"
        return snapshot

    def get_tenant(self, tenant_id: str) -> Tenant:
        self.threads.add(threading.get_ident())
        if tenant_id not in self.tenants:
            raise NotFoundError(f"tenant {tenant_id!r} not found")
        limits = self.limits.get(tenant_id, DEFAULT_LIMITS)
        return Tenant(tenant_id, tenant_id, "free", "active", limits, EPOCH, EPOCH)
