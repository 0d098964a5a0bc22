"""The fleet's exchange of quota rates through ZooKeeper (docs/gateway.md, "Quotas across
gateways").

Owns: this gateway's ephemeral znode `/pier/gateways/<gateway id>.<incarnation>` (under the
chroot of `zookeeper.connect`, beside the brokers' Kafka paths), rewritten every `interval_s` with
the rates of its quota sensors that had traffic and the units it charged to its metadata-change
limits (`gateway.fleet.codec`, `gateway.quotas.shared_units`), and the periodic read of
every other gateway's znode into the `PeerTable`; Prometheus: the peers counted, failed rounds and
sensors left out by the cap. Polling, not watches: one write, one `get_children` and one read per
peer each interval, and a peer that stops writing is noticed by its unchanged version. An
ephemeral lost with an expired session is created again on the next write; a missing chroot is
created first. ZooKeeper unreachable at start or later is not an error: the table keeps the last
rates for its hold time, then the gateway enforces full local quotas (logged).

Concurrency: kazoo runs its own threads; every blocking kazoo call runs in one worker thread per
round (`asyncio.to_thread`), one round at a time. Rates are collected and the table updated on
the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Hashable, Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from prometheus_client import CollectorRegistry, Counter, Gauge

from gateway.fleet.codec import UnitCount, encode_rates, sensor_id
from gateway.fleet.peers import PeerTable
from gateway.quotas.fleet_share import PeerRate
from gateway.quotas.mutation_quota import CONTROLLER_MUTATION_RATE

log = logging.getLogger("pier.gateway.fleet")
GATEWAYS_PATH = "/pier/gateways"
CONNECT_TIMEOUT_S = 10.0
Rates = Callable[[int], Iterable[tuple[str, Hashable, PeerRate]]]  # now_ms → (kind, key, rate)
Units = Callable[[int], Iterable[tuple[str, Hashable, int, int]]]  # → (kind, key, units, since)


def _unit_priority(count: tuple[str, Hashable, int, int]) -> tuple[bool, int]:
    """The tenants' own pacings first (one count per tenant and pacing: what holds the fleet),
    then KIP-599's buckets (one per principal or client id: a tenant's many client ids must not
    push other tenants' counts out of the znode), each the largest first."""
    kind, _, units, _ = count
    return kind == CONTROLLER_MUTATION_RATE, -units


class ZooKeeperUnavailable(Exception):
    """No ZooKeeper session right now."""


class RateExchange:
    def __init__(
        self,
        connect: str,
        name: str,
        table: PeerTable,
        rates: Rates,
        *,
        units: Units | None = None,
        interval_s: float,
        clock_ms: Callable[[], int],
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.path = f"{GATEWAYS_PATH}/{name}"
        self._connect = connect
        self._name = name
        self._table = table
        self._rates = rates
        self._units = units
        self._interval_s = interval_s
        self._clock_ms = clock_ms
        self._zk = KazooClient(hosts=connect, timeout=CONNECT_TIMEOUT_S)
        self._task: asyncio.Task[None] | None = None
        self._down_logged = False
        registry = registry or CollectorRegistry()
        self._peers = Gauge(
            "pier_gateway_fleet_peers",
            "Other gateways whose quota rates this gateway counts (0: it enforces full quotas)",
            registry=registry,
        )
        self._failures = Counter(
            "pier_gateway_fleet_exchange_failures",
            "Rounds of the quota-rate exchange that could not reach ZooKeeper",
            registry=registry,
        )
        self._capped = Counter(
            "pier_gateway_fleet_rates_capped",
            "Quota sensors left out of this gateway's znode by the entry cap",
            registry=registry,
        )

    def start(self) -> None:
        """Connect in the background (kazoo retries for ever) and start exchanging."""
        self._zk.start_async()
        self._task = asyncio.create_task(self._run(), name="fleet-rates")

    async def stop(self) -> None:
        """Stop exchanging and close the session (the ephemeral znode goes with it)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await asyncio.to_thread(self._close)

    async def _run(self) -> None:
        await self._first_connection()
        while True:
            try:
                await self.exchange_once()
            except Exception as exc:  # a round that fails for any reason must not end the rounds
                log.error("event=fleet_exchange_failed error=%r", type(exc).__name__)
                self._failures.inc()
            await asyncio.sleep(self._interval_s)

    async def _first_connection(self) -> None:
        """Give the first session up to `CONNECT_TIMEOUT_S` before a round counts as failed (a
        starting gateway is not "ZooKeeper unavailable" for the milliseconds it takes)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONNECT_TIMEOUT_S
        while not self._zk.connected and loop.time() < deadline:
            await asyncio.sleep(0.05)

    async def exchange_once(self) -> None:
        now_ms = self._clock_ms()
        rates = self._rates(now_ms)
        counts = [] if self._units is None else sorted(self._units(now_ms), key=_unit_priority)
        data, dropped = encode_rates(
            ((sensor_id(kind, key), rate) for kind, key, rate in rates),
            ((sensor_id(kind, key), UnitCount(units, since)) for kind, key, units, since in counts),
        )
        if dropped:
            log.warning("event=fleet_rates_capped dropped=%d", dropped)
            self._capped.inc(dropped)
        try:
            nodes = await asyncio.to_thread(self._write_and_read, data)
        except (ZooKeeperUnavailable, KazooException, KazooTimeoutError) as exc:
            if not self._down_logged:
                log.warning("event=fleet_zookeeper_unavailable error=%r", type(exc).__name__)
                self._down_logged = True
            self._failures.inc()
            self._table.failed(self._clock_ms())
            self._peers.set(self._table.peers)
            return
        if self._down_logged:
            log.info("event=fleet_zookeeper_available peers=%d", len(nodes))
            self._down_logged = False
        self._table.update(nodes, self._clock_ms())
        self._peers.set(self._table.peers)

    def _write_and_read(self, data: bytes) -> dict[str, tuple[int, bytes]]:
        """In a worker thread: write our rates, read every other gateway's (version, data)."""
        if not self._zk.connected:
            raise ZooKeeperUnavailable()
        try:
            self._zk.set(self.path, data)
        except NoNodeError:
            self._ensure_paths()
            with contextlib.suppress(NodeExistsError):  # a set racing our own create
                self._zk.create(self.path, data, ephemeral=True)
        nodes: dict[str, tuple[int, bytes]] = {}
        for child in self._zk.get_children(GATEWAYS_PATH):
            if child == self._name:
                continue
            with contextlib.suppress(NoNodeError):  # it left between the list and the read
                value, stat = self._zk.get(f"{GATEWAYS_PATH}/{child}")
                nodes[child] = (stat.version, value)
        return nodes

    def _ensure_paths(self) -> None:
        """`/pier/gateways`, and first the chroot of `zookeeper.connect` when it is missing (as
        Kafka creates its chroot): a session inside a chroot cannot create the chroot itself."""
        try:
            self._zk.ensure_path(GATEWAYS_PATH)
        except NoNodeError:
            hosts, _, chroot = self._connect.partition("/")
            root = KazooClient(hosts=hosts, timeout=CONNECT_TIMEOUT_S)
            root.start(CONNECT_TIMEOUT_S)
            try:
                root.ensure_path(f"/{chroot}")
            finally:
                root.stop()
                root.close()
            self._zk.ensure_path(GATEWAYS_PATH)

    def _close(self) -> None:
        with contextlib.suppress(KazooException, KazooTimeoutError):
            self._zk.stop()
        self._zk.close()
