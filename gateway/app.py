"""The gateway process's composition root: builds every part in order, hands each what it uses,
and stops them in reverse.

Order: tenant store (with a verification cache) → the fleet view (a broker must answer) →
quotas (held with the other gateways through ZooKeeper when `zookeeper.connect` is set,
`gateway.fleet`), directory and the change-feed follower (open before any tenant is served; it
reports the version applied, `gateway.feed_follower`) → authenticator → usage meter, `__usage` writer, storage
sampler → listeners (bootstrap plus one port per broker) → the tenant HTTP API when a port is set
(`gateway.http`: the same services, its own fleet client; with ZooKeeper its v2 consumer
instances are recorded there for the other gateways, `gateway.http.instance_directory`) → the
metrics endpoint. A worker of
`--workers N` (`gateway.supervisor`) is one such gateway with its own id, `<id>.w<k>`.
`stop()` drains: listeners and the HTTP API close (its consumer instances leave their groups),
the usage writer flushes what was metered, then the rest. Runs on one event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import ssl
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server

from brokers.client import ClientConfig, Cluster
from gateway.auth.address_table import FILE_NAME as ADDRESS_TABLE
from gateway.auth.address_table import AddressTable
from gateway.auth.authenticator import Authenticator
from gateway.auth.backoff import BackoffPolicy, LoginBackoff
from gateway.auth.hashing import HashingPool
from gateway.auth.metrics import AuthMetrics
from gateway.config import GatewayConfig
from gateway.connection_ledger import ConnectionLedger
from gateway.directory import TenantDirectory
from gateway.feed_follower import FeedFollower
from gateway.fleet.exchange import RateExchange
from gateway.fleet.peers import PeerTable
from gateway.http.context import HttpServices, HttpSettings
from gateway.http.instance_directory import InstanceDirectory
from gateway.http.server import HttpServer
from gateway.http.worker_routing import WorkerRouter
from gateway.kafka.byte_budget import ByteBudget
from gateway.kafka.client_connection import ClientConnection
from gateway.kafka.connection_guard import ConnectionGuard
from gateway.kafka.connection_limits import ConnectionLimits
from gateway.kafka.coordinated_names import CoordinatedNames, NameLimits
from gateway.kafka.fleet import MEMBER_LOOKUP_MAX_BYTES, FleetDirectory
from gateway.kafka.listener import Listeners
from gateway.kafka.member_ledger import MemberLedger
from gateway.kafka.metrics import GatewayMetrics
from gateway.kafka.namespace import tenant_of
from gateway.kafka.services import SessionServices
from gateway.kafka.session import Session
from gateway.metering.meter import UsageMeter
from gateway.metering.storage_sampler import StorageSampler
from gateway.metering.writer import UsageWriter
from gateway.quotas.quota_book import QuotaBook
from gateway.reservations import LedgerSettings, PartitionLedger
from gateway.storage_ledger import StorageLedger
from gateway.throttling import GatewayThrottling
from tenancy.store import TenantStore

log = logging.getLogger("pier.gateway")
FEED_START_S = 30.0


class GatewayStartError(Exception):
    """The gateway cannot serve with what it was given; the message says what to do."""


def clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Gateway:
    def __init__(self, config: GatewayConfig, *, registry: CollectorRegistry | None = None) -> None:
        self.config = config
        self.registry = registry or CollectorRegistry()
        self.incarnation = secrets.token_hex(6)
        self._tasks: list[asyncio.Task[Any]] = []
        self._store: TenantStore | None = None
        self._cluster: Cluster | None = None
        self.fleet: FleetDirectory | None = None
        self.listeners: Listeners | None = None
        self.writer: UsageWriter | None = None
        self.sampler: StorageSampler | None = None
        self._metrics_server: Any = None
        self.http: HttpServer | None = None
        self._http_cluster: Cluster | None = None
        self._members_cluster: Cluster | None = None
        self._hash_pool: HashingPool | None = None
        self.follower: FeedFollower | None = None
        self.ledger: PartitionLedger | None = None
        self.connections: ConnectionLedger | None = None
        self.storage: StorageLedger | None = None
        self.rates: RateExchange | None = None
        self.instances: InstanceDirectory | None = None

    async def start(self) -> None:
        config = self.config
        ttl_s = config.setting("verification.cache.ttl.ms") / 1000
        self._store = store = TenantStore.open(config.db_url, verification_cache_ttl_s=ttl_s)
        if await asyncio.to_thread(store.schema_revision) is None:
            raise GatewayStartError(
                f"the tenant store {store!r} has no schema: run `pier tenancy init --db URL`"
            )
        self._cluster = cluster = Cluster(config.bootstrap, ClientConfig(client_id="pier-gateway"))
        # Member look-ups (`FleetDirectory.consumer_group_members`) on their own connections: a
        # tenant's large group answer neither waits in line with nor fails everyone's look-ups.
        self._members_cluster = Cluster(
            config.bootstrap,
            ClientConfig(
                client_id="pier-gateway-members", max_response_bytes=MEMBER_LOOKUP_MAX_BYTES
            ),
        )
        self.fleet = fleet = FleetDirectory(
            cluster,
            members_cluster=self._members_cluster,
            advertised_host=config.public_host,
            port_base=config.port_base,
            default_partitions=config.setting("num.partitions"),
            refresh_s=config.setting("fleet.refresh.interval.ms") / 1000,
            on_brokers=self._brokers_changed,
        )
        await fleet.start()
        self.ledger = self._ledger(store, fleet)
        quota_book = QuotaBook(store)
        self.connections, self.storage = self._limit_ledgers(store)
        storage = self.storage
        directory = TenantDirectory(
            store,
            on_quota_change=quota_book.refresh,
            connections=self.connections,
            on_admit=lambda tenant: storage.warm(tenant.id, tenant.limits.max_storage_bytes),
        )
        self._directory = directory
        await self._follow(store, directory)
        meter = UsageMeter(config.id, self.incarnation, clock_ms)
        self.writer = UsageWriter(
            cluster,
            meter,
            interval_s=config.setting("usage.flush.interval.ms") / 1000,
            partitions=config.setting("usage.topic.partitions"),
            replication_factor=config.usage_replication_factor,
            clock_ms=clock_ms,
            registry=self.registry,
        )
        await self.writer.start()
        self.sampler = StorageSampler(
            cluster,
            self.writer,
            tenant_topic=tenant_of,
            interval_s=config.setting("storage.sample.interval.ms") / 1000,
            sampler_id=config.sampler_id,
            clock_ms=clock_ms,
            on_round=storage.settle,
        )
        await self.sampler.start()
        policy = BackoffPolicy.from_settings(config.setting)
        addresses = self._address_table(policy.max_s)
        backoff = LoginBackoff(policy, shared=addresses)
        peers = None
        if config.zookeeper_connect is not None:
            peers = PeerTable(hold_ms=config.setting("fleet.rates.hold.ms"), started_ms=clock_ms())
        throttling = GatewayThrottling(
            quota_book,
            samples=config.setting("quota.window.num"),
            window_s=config.setting("quota.window.size.seconds"),
            registry=self.registry,
            fleet=peers,
            fleet_units=peers,
            config_changes_per_s=config.setting("tenant.config.changes.per.second"),
            partition_mutations_per_s=config.setting("tenant.partition.mutations.per.second"),
        )
        if peers is not None:
            self._share_rates(peers, throttling)
        services = SessionServices(
            authenticator=Authenticator(
                store,
                failure_delay_s=config.setting("sasl.failure.delay.ms") / 1000,
                metrics=AuthMetrics(self.registry),
                hashing=self._hashing(),
                backoff=backoff,
            ),
            directory=directory,
            throttling=throttling,
            meter=meter,
            fleet=fleet,
            storage=storage,
            clock_ms=clock_ms,
            max_reauth_ms=config.setting("connections.max.reauth.ms") or None,
            max_request_bytes=config.setting("socket.request.max.bytes"),
            partitions=self.ledger,
            names=CoordinatedNames(
                fleet,
                NameLimits(
                    groups=config.setting("tenant.max.groups"),
                    transactional_ids=config.setting("tenant.max.transactional.ids"),
                ),
            ),
            members=MemberLedger(config.setting("tenant.max.group.member.bytes")),
        )
        metrics = GatewayMetrics(self.registry)

        def make_session(connection: ClientConnection, peer: str, node_id: int | None) -> Session:
            return Session(services, connection, peer_host=peer, node_id=node_id, metrics=metrics)

        self.listeners = Listeners(
            config.host,
            config.port,
            fleet.port_for,
            make_session,
            tls=self._tls(),
            reuse_port=config.reuse_port,
            guard=ConnectionGuard(
                ConnectionLimits.from_settings(
                    config.setting, config.connections_per_ip_overrides
                ).per_worker(1 if config.worker is None else config.worker.count),
                registry=self.registry,
                failing=lambda host: backoff.wait_s(host) > 0,
                shared=addresses,
            ),
        )
        await self.listeners.start(fleet.broker_ids())
        if config.tenant_http_port is not None:
            await self._start_http(
                services, config.tenant_http_port, self.listeners.guard.tenant_budget
            )
        if config.metrics_listen_port is not None:
            self._metrics_server = start_http_server(
                config.metrics_listen_port, addr=config.metrics_bind_host, registry=self.registry
            )

    async def _start_http(
        self,
        services: SessionServices,
        port: int,
        tenant_budget: Callable[[str], ByteBudget] | None = None,
    ) -> None:
        config = self.config
        bootstrap = config.bootstrap

        def make_cluster(client_id: str) -> Cluster:
            return Cluster(bootstrap, ClientConfig(client_id=client_id))

        self._http_cluster = make_cluster("pier-gateway-http")
        directory = None
        if config.zookeeper_connect is not None:
            directory = self.instances = InstanceDirectory(
                config.zookeeper_connect, f"{config.id}/{self.incarnation}"
            )
        settings = HttpSettings(
            bootstrap=bootstrap,
            consumer_instance_timeout_ms=config.setting("consumer.instance.timeout.ms"),
            quota_window_ms=config.setting("quota.window.num")
            * config.setting("quota.window.size.seconds")
            * 1000,
        )
        self.http = HttpServer(
            HttpServices(
                services,
                self._http_cluster,
                settings,
                make_cluster,
                verify_operator=None if self._store is None else self._store.verify_operator,
                billing=self._store,  # a tenant's own usage and invoices (gateway.http.usage)
            ),
            host=config.host,
            port=port,
            tls=self._tls(),
            body_timeout_s=config.setting("http.body.read.timeout.ms") / 1000,
            tenant_budget=tenant_budget,  # HTTP bodies share the tenant's Kafka request pool
            router=None if config.worker is None else WorkerRouter(config.worker),
            directory=directory,
        )
        await self.http.start(public_host=config.public_host)

    def _address_table(self, forget_s: float) -> AddressTable | None:
        """A worker's view of the per-address table its supervisor made (None: not a worker);
        its own columns are zeroed first (what a crashed predecessor held is released)."""
        slot = self.config.worker
        if slot is None:
            return None
        table = AddressTable(
            slot.socket_dir / ADDRESS_TABLE, slot.count, slot.index, forget_s=forget_s
        )
        table.reset_worker()
        return table

    def _share_rates(self, peers: PeerTable, throttling: GatewayThrottling) -> None:
        """Register in the fleet's ZooKeeper and hold rate quotas and metadata-change limits with
        the other gateways (docs/gateway.md, "Quotas across gateways"); stopped by `stop`."""
        config = self.config
        assert config.zookeeper_connect is not None
        self.rates = RateExchange(
            config.zookeeper_connect,
            f"{config.id}.{self.incarnation}",
            peers,
            throttling.live_rates,
            units=throttling.live_units,
            interval_s=config.setting("fleet.rates.interval.ms") / 1000,
            clock_ms=clock_ms,
            registry=self.registry,
        )
        self.rates.start()
        log.info(
            "event=fleet_rates_started zookeeper=%s node=%s",
            config.zookeeper_connect,
            self.rates.path,
        )

    @property
    def http_port(self) -> int | None:
        return None if self.http is None else self.http.port

    def _hashing(self) -> HashingPool:
        """The bounded threads that check secrets (docs/security.md, logins); closed by `stop`."""
        self._hash_pool = HashingPool(
            self.config.setting("sasl.hash.threads"),
            self.config.setting("sasl.hash.queue.size"),
            self.config.setting("sasl.hash.queue.timeout.ms") / 1000,
        )
        return self._hash_pool

    def _ledger(self, store: TenantStore, fleet: FleetDirectory) -> PartitionLedger:
        """Partition limits reserved in the tenant store, reconciled with the fleet (stopped by
        `stop`)."""
        setting = self.config.setting

        ledger = PartitionLedger(
            store,
            fleet.tenant_partitions,
            holder=f"{self.config.id}/{self.incarnation}",
            settings=LedgerSettings(
                interval_s=setting("partition.reconcile.interval.ms") / 1000,
                quiet_s=setting("partition.reconcile.quiet.ms") / 1000,
                stale_s=setting("partition.reservation.timeout.ms") / 1000,
            ),
        )
        ledger.start()
        return ledger

    def _limit_ledgers(self, store: TenantStore) -> tuple[ConnectionLedger, StorageLedger]:
        """`max_connections` and `max_storage_bytes` held in the tenant store under this gateway's
        heartbeat id (docs/gateway.md, limits); stopped by `stop`."""
        setting = self.config.setting
        gateway_id = f"{self.config.id}/{self.incarnation}"
        # A live gateway's shares must outlast two missed heartbeats.
        heartbeat_ms = setting("gateway.heartbeat.interval.ms")
        stale_s = max(setting("limit.holding.timeout.ms"), 2 * heartbeat_ms) / 1000
        connections = ConnectionLedger(
            store,
            gateway_id,
            stale_s=stale_s,
            flush_s=setting("connection.release.interval.ms") / 1000,
            registry=self.registry,
        )
        connections.start()
        storage = StorageLedger(
            store,
            gateway_id,
            clock_ms=clock_ms,
            lease_bytes=setting("storage.lease.bytes"),
            stale_s=stale_s,
            settle_ms=setting("storage.lease.settle.ms"),
            registry=self.registry,
        )
        return connections, storage

    def _tls(self) -> ssl.SSLContext | None:
        if self.config.tls_cert is None or self.config.tls_key is None:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.config.tls_cert, self.config.tls_key)
        return context

    async def _follow(self, store: TenantStore, directory: TenantDirectory) -> None:
        """Start applying the store's changes (and reporting them) before any tenant is served:
        a tenant loaded before the feed's starting version could miss a change."""
        self.follower = FeedFollower(
            store,
            directory,
            gateway_id=f"{self.config.id}/{self.incarnation}",
            heartbeat_s=self.config.setting("gateway.heartbeat.interval.ms") / 1000,
            registry=self.registry,
        )
        self._tasks.append(asyncio.create_task(self.follower.run(), name="change-feed"))
        try:
            await asyncio.wait_for(self.follower.started.wait(), FEED_START_S)
        except TimeoutError:
            raise GatewayStartError(
                f"cannot follow the tenant store's change feed ({store!r}) within {FEED_START_S:g} s"
            ) from None

    def _brokers_changed(self, node_ids: set[int]) -> None:
        if self.listeners is not None:
            self._tasks.append(asyncio.create_task(self.listeners.ensure(node_ids)))

    @property
    def bootstrap_port(self) -> int:
        assert self.listeners is not None
        return self.listeners.bootstrap_port

    async def stop(self) -> None:
        if self.listeners is not None:
            await self.listeners.stop()
        if self.http is not None:
            await self.http.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.sampler is not None:
            await self.sampler.stop()
        if self.writer is not None:
            await self.writer.stop()
        if self.ledger is not None:
            await self.ledger.stop()
        if self.rates is not None:  # leaves the fleet's ZooKeeper (its ephemeral znode goes)
            await self.rates.stop()
        if self.connections is not None:  # gives back this gateway's slots and headroom
            await self.connections.stop()
        if self.fleet is not None:
            await self.fleet.stop()
        for cluster in (self._http_cluster, self._cluster, self._members_cluster):
            if cluster is not None:
                await cluster.close()
        if self._metrics_server is not None:
            with contextlib.suppress(Exception):
                self._metrics_server[0].shutdown()
        if self._hash_pool is not None:
            self._hash_pool.close()
        if self._store is not None:
            self._store.close()
