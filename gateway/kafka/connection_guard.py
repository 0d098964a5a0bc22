"""The gateway-wide bookkeeping that keeps client connections bounded (`ConnectionLimits`).

Owns: admission at accept (the per-address cap, Kafka's `max.connections.per.ip`, the cap on
connections not yet logged in, and a rate of new connections for an address whose failed logins
are backing off: its logins fail unchecked anyway, so a flood of guesses is refused at accept
instead of costing a SASL exchange each, as Kafka's KIP-612 per-IP connection rate would), the pool of bytes read before login (gateway-wide) and each
tenant's pool of request bytes in flight (`ByteBudget`), the sweep that closes connections past a
deadline (authentication, a stalled frame, idleness) and the metrics of all of it: closures by
reason (`pier_gateway_connection_close_total`, as Kafka's `connection-close-total`), and gauges read
at scrape time. The clock is injected (monotonic seconds). Runs on the event loop; not thread-safe,
except the gauges' collector, which only reads integers.

In a worker of `pier gateway --workers N` the per-address count and the failing address's
connection rate live in the workers' shared `AddressTable` (`gateway.auth.address_table`), so
they hold across the workers; the caps on what is not yet logged in are the gateway's divided
by N (`ConnectionLimits.per_worker`: they bound memory, which each worker holds on its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter as Tally
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from gateway.auth.address_table import AddressTable, SharedEntry
from gateway.kafka.byte_budget import ByteBudget, Defer, call_soon
from gateway.kafka.connection_limits import ConnectionLimits

log = logging.getLogger("pier.gateway.connection")
MAX_FAILING_TRACKED = 65_536

# Why the gateway closes a connection on its own (the `reason` label).
CLOSE_REASONS = (
    "max_connections_per_ip",
    "max_unauthenticated_connections",
    "unauthenticated_buffer_full",
    "authentication_timeout",
    "frame_read_timeout",
    "idle",
    "frame_too_large",
    "failed_login_connection_rate",  # an address backing off after failed logins, too fast
    "close_timeout",  # closed by the gateway, but its last answers were never read
)


class Guarded(Protocol):
    """What the guard needs of a connection (`ClientConnection`)."""

    def overdue(self, now: float) -> str | None:
        """The reason to close this connection now, if a deadline has passed."""
        ...

    def close_for(self, reason: str, detail: str) -> None: ...


class ConnectionGuard:
    def __init__(
        self,
        limits: ConnectionLimits | None = None,
        *,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.monotonic,
        defer: Defer = call_soon,
        failing: Callable[[str], bool] = lambda _host: False,
        shared: AddressTable | None = None,
    ) -> None:
        self.limits = limits or ConnectionLimits()
        self._shared = shared
        self._shared_counted: set[Guarded] = set()  # counted in the shared table
        self.clock = clock
        self._failing = failing  # the login backoff: this address is waiting out its failures
        self._failing_rate: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, at
        self._defer = defer
        self.unauthenticated_bytes = ByteBudget(
            self.limits.unauthenticated_buffer_max_bytes, defer=defer
        )
        self._tenant_budgets: dict[str, ByteBudget] = {}
        self._per_host: Tally[str] = Tally()
        self._connections: set[Guarded] = set()
        self._unauthenticated: set[Guarded] = set()
        self._sweeper: asyncio.Task[None] | None = None
        registry = registry if registry is not None else CollectorRegistry()
        self._closed = Counter(
            "pier_gateway_connection_close",
            "Connections the gateway closed on its own, by reason",
            ["reason"],
            registry=registry,
        )
        for reason in CLOSE_REASONS:
            self._closed.labels(reason)
        registry.register(_Gauges(self))

    # -- admission -----------------------------------------------------------------------------
    def admit(self, connection: Guarded, host: str) -> str | None:
        """Register a new connection; the reason to close it at once when a cap is reached."""
        if self._shared is not None:
            return self._admit_shared(connection, host, self._shared)
        if self._per_host[host] >= self.limits.per_ip(host):
            return "max_connections_per_ip"
        if len(self._unauthenticated) >= self.limits.max_unauthenticated_connections:
            return "max_unauthenticated_connections"
        if self._failing(host) and not self._take_failing_token(host):
            return "failed_login_connection_rate"
        self._per_host[host] += 1
        self._connections.add(connection)
        self._unauthenticated.add(connection)
        return None

    def _admit_shared(self, connection: Guarded, host: str, shared: AddressTable) -> str | None:
        """`admit` with the per-address count and token bucket of every worker."""
        failing = self._failing(host)  # its own lock: asked before this one is taken
        now = self.clock()
        with shared.entry(f"conn:{host}", now) as entry:
            open_here = self._per_host[host] if entry is None else entry.connections
            if open_here >= self.limits.per_ip(host):
                return "max_connections_per_ip"
            if len(self._unauthenticated) >= self.limits.max_unauthenticated_connections:
                return "max_unauthenticated_connections"
            if failing:
                taken = (
                    self._take_failing_token(host)
                    if entry is None
                    else _take_token(entry, self.limits.failed_login_connection_rate, now)
                )
                if not taken:
                    return "failed_login_connection_rate"
            if entry is not None:
                entry.own_connections += 1
                self._shared_counted.add(connection)
        self._per_host[host] += 1
        self._connections.add(connection)
        self._unauthenticated.add(connection)
        return None

    def _take_failing_token(self, host: str) -> bool:
        """A token bucket per failing address (`failed.login.connection.rate` a second, as many
        at once); the table forgets its oldest entries past `MAX_FAILING_TRACKED`."""
        rate = self.limits.failed_login_connection_rate
        now = self.clock()
        tokens, at = self._failing_rate.pop(host, (rate, now))
        tokens = min(rate, tokens + (now - at) * rate)
        taken = tokens >= 1.0
        self._failing_rate[host] = (tokens - 1.0 if taken else tokens, now)
        while len(self._failing_rate) > MAX_FAILING_TRACKED:
            self._failing_rate.popitem(last=False)
        return taken

    def authenticated(self, connection: Guarded) -> None:
        self._unauthenticated.discard(connection)

    def gone(self, connection: Guarded, host: str) -> None:
        if connection not in self._connections:
            return
        self._connections.discard(connection)
        self._unauthenticated.discard(connection)
        if self._shared is not None and connection in self._shared_counted:
            self._shared_counted.discard(connection)
            with self._shared.entry(f"conn:{host}", self.clock()) as entry:
                if entry is not None:
                    entry.own_connections -= 1
        self._per_host[host] -= 1
        if self._per_host[host] <= 0:
            del self._per_host[host]

    def tenant_budget(self, tenant_id: str) -> ByteBudget:
        budget = self._tenant_budgets.get(tenant_id)
        if budget is None:
            budget = ByteBudget(self.limits.queued_max_request_bytes, defer=self._defer)
            self._tenant_budgets[tenant_id] = budget
        return budget

    def count_close(self, reason: str) -> None:
        self._closed.labels(reason).inc()

    def refuse_at_accept(self, host: str, reason: str) -> None:
        self.count_close(reason)
        log.info("event=connection_closed reason=%s peer=%s tenant=", reason, host)

    # -- deadlines -----------------------------------------------------------------------------
    def sweep(self, now: float | None = None) -> int:
        """Close every connection past a deadline; how many were closed."""
        now = self.clock() if now is None else now
        closed = 0
        for connection in list(self._connections):
            reason = connection.overdue(now)
            if reason is not None:
                connection.close_for(reason, "deadline passed")
                closed += 1
        return closed

    def start(self) -> None:
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(
                self._sweep_forever(), name="connection-guard"
            )

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.limits.sweep_interval_s)
            try:
                self.sweep()
            except Exception as exc:  # one bad connection must not end the sweeping
                log.error("event=connection_sweep_failed error=%r", exc)

    # -- what the gauges read --------------------------------------------------------------------
    @property
    def unauthenticated_count(self) -> int:
        return len(self._unauthenticated)

    def budgets(self) -> list[tuple[str, ByteBudget]]:
        return list(self._tenant_budgets.items())


def _take_token(entry: SharedEntry, rate: float, now: float) -> bool:
    """`ConnectionGuard._take_failing_token` on a shared entry's bucket (`rate` a second)."""
    tokens = rate if entry.tokens_at == 0.0 else entry.tokens
    tokens = min(rate, tokens + (now - (entry.tokens_at or now)) * rate)
    taken = tokens >= 1.0
    entry.tokens, entry.tokens_at = (tokens - 1.0 if taken else tokens), now
    return taken


class _Gauges(Collector):
    def __init__(self, guard: ConnectionGuard) -> None:
        self._guard = guard

    def collect(self) -> Iterator[GaugeMetricFamily]:
        guard = self._guard
        yield GaugeMetricFamily(
            "pier_gateway_unauthenticated_connections",
            "Open connections not yet logged in",
            value=guard.unauthenticated_count,
        )
        yield GaugeMetricFamily(
            "pier_gateway_unauthenticated_buffered_bytes",
            "Bytes of frames read before login and not yet answered (announced sizes)",
            value=guard.unauthenticated_bytes.used,
        )
        used = GaugeMetricFamily(
            "pier_gateway_queued_request_bytes",
            "A tenant's request bytes read and not yet answered (queued.max.request.bytes)",
            labels=["tenant"],
        )
        waiting = GaugeMetricFamily(
            "pier_gateway_muted_connections",
            "A tenant's connections not read until its request bytes drain",
            labels=["tenant"],
        )
        for tenant, budget in self._guard.budgets():
            used.add_metric([tenant], budget.used)
            waiting.add_metric([tenant], budget.waiting)
        yield used
        yield waiting
