"""The gateway's settings: immutable, validated when built, Kafka's names where Kafka has one.

Owns: `GatewayConfig` (command-line values plus the properties of `--config FILE`) and its
validation, which raises `GatewayConfigError` with one line naming the setting. Pure; thread-safe.

Properties (Java-properties file, all optional):
| name | default | meaning |
|---|---|---|
| `gateway.id` | `gw-<port>` | this gateway's id in usage-record ids (`[A-Za-z0-9._-]`, ≤ 64) |
| `connections.max.reauth.ms` | 3600000 | KIP-368 session lifetime bound (0 = only key expiry) |
| `sasl.failure.delay.ms` | 1000 | the pause before a failed login is answered |
| `sasl.hash.threads` | 1 | threads that check PLAIN / HTTP Basic secrets (scrypt), apart from the event loop and the store's threads |
| `sasl.hash.queue.size` | 32 | secret checks that may wait for a hashing thread; past it an attempt fails at once |
| `sasl.hash.queue.timeout.ms` | 5000 | the longest a secret check waits for a hashing thread before the attempt fails |
| `sasl.failure.backoff.free.failures` | 5 | failed checks a source address (IPv4, IPv6 /64) may make before it backs off |
| `sasl.failure.backoff.ms` | 1000 | the first backoff of an address; it doubles with each further failure |
| `sasl.failure.backoff.max.ms` | 60000 | the longest backoff; an address quiet this long is forgiven |
| `sasl.key.check.burst` | 10 | checks of one key id from addresses that have failed (a token bucket; clean addresses are exempt) |
| `sasl.key.check.refill.ms` | 1000 | one more such check of the key per this interval |
| `quota.window.num` | 11 | quota samples (Kafka's) |
| `quota.window.size.seconds` | 1 | quota sample length (Kafka's) |
| `usage.flush.interval.ms` | 5000 | how often usage windows go to `__usage` |
| `usage.topic.partitions` | 12 | partitions of `__usage` when the gateway creates it |
| `usage.topic.replication.factor` | min(3, brokers) | its replication factor |
| `storage.sample.interval.ms` | 60000 | how often partition sizes are sampled |
| `storage.sampler.id` | `fleet` | the sampler id in storage-sample ids (same on every gateway: samples dedupe) |
| `num.partitions` | 1 | what the brokers give an auto-created topic (counts against tenant limits) |
| `socket.request.max.bytes` | 104857600 | the largest frame after login (a tenant's own limit applies to Produce) |
| `authentication.timeout.ms` | 10000 | a connection not logged in this long after accept is closed |
| `max.unauthenticated.connections` | 1000 | connections not yet logged in (gateway-wide); past it a new one is closed at once |
| `unauthenticated.buffer.max.bytes` | 33554432 | bytes of frames read before login (gateway-wide, announced sizes); a frame that does not fit closes its connection |
| `max.connections.per.ip` | 100 | open connections from one address (Kafka's; its default is unbounded); past it a new one is closed at once |
| `max.connections.per.ip.overrides` | none | `host:count,...` per-address exceptions (Kafka's) |
| `frame.read.timeout.ms` | 30000 | a partial frame that receives no byte this long closes its connection (time the gateway itself does not read is not counted) |
| `connections.max.idle.ms` | 600000 | a connection with no traffic and no request pending this long is closed (Kafka's) |
| `queued.max.request.bytes` | 33554432 | request bytes read and not yet answered, per tenant (Kafka's, per broker there); a tenant over it is not read until answers drain; also caps a frame's size |
| `verification.cache.ttl.ms` | 60000 | how long a successful credential check is cached |
| `fleet.refresh.interval.ms` | 10000 | how often broker addresses are re-read |
| `gateway.heartbeat.interval.ms` | 1000 | how often the gateway reports the change-feed version it has applied to the tenant store while idle (it reports at once after applying a change); the admin API waits, up to 1 s, for every gateway heard from in the last 10 s before it answers a change that takes access away |
| `http.port` | none | the tenant HTTP API's port (`--http-port` wins; none: no HTTP API; 0: any free port) |
| `consumer.instance.timeout.ms` | 300000 | an HTTP v2 consumer instance unused this long is closed (leaves its group) |
| `http.body.read.timeout.ms` | 30000 | an HTTP request body that receives no byte this long is answered 408 and its connection closed (its bytes go back to the tenant's `queued.max.request.bytes` pool) |
| `partition.reconcile.interval.ms` | 60000 | how often a tenant's reserved partition count (tenant store) is compared with the fleet's real count |
| `partition.reconcile.quiet.ms` | 30000 | a count changed more recently than this is not reconciled yet (the fleet's metadata lags a creation) |
| `partition.reservation.timeout.ms` | 120000 | a partition reservation not settled this long (a gateway died between reserve and create) expires |
| `tenant.max.groups` | 10000 | consumer groups a tenant may hold on the fleet unless its plan or tenant record sets `max_groups` (coordinator state kept for days, which Kafka does not bound); a request that would make one more is refused GROUP_AUTHORIZATION_FAILED (`gateway/kafka/coordinated_names.py`) |
| `tenant.max.transactional.ids` | 50000 | transactional ids likewise, unless it sets `max_transactional_ids` (InitProducerId of one more: TRANSACTIONAL_ID_AUTHORIZATION_FAILED); Kafka Streams with exactly-once v2 takes new ids at every restart of an instance (one per stream thread), which stay until `transactional.id.expiration.ms` |
| `tenant.max.group.member.bytes` | 67108864 | bytes of consumer group members a tenant may hold at the fleet's coordinators through this gateway (each member's protocols, instance id and assignment, or KIP-848 subscription, plus 2 KiB; Kafka bounds only each group's member count, unlimited by default); a JoinGroup, SyncGroup or ConsumerGroupHeartbeat that would take it past is refused GROUP_MAX_SIZE_REACHED (`gateway/kafka/member_ledger.py`) |
| `tenant.config.changes.per.second` | 5 | topic config changes a tenant may make per second, after a burst of 50 (held across the gateways and workers given `zookeeper.connect`, else per gateway process) (each topic resource an AlterConfigs or IncrementalAlterConfigs forwards; in ZooKeeper mode each is a notice every broker reads, kept 15 min; Kafka has no quota for it); past the burst the answer carries a throttle and the connection is muted, 30 s past it (HTTP: at once) THROTTLING_QUOTA_EXCEEDED (`gateway/quotas/tenant_pacing.py`) |
| `tenant.partition.mutations.per.second` | 100 | partitions a tenant may create or delete per second, after a burst of 20 seconds' worth (2,000; held across the gateways and workers given `zookeeper.connect`, else per gateway process), whatever its `controller_mutation_rate` (each is ZooKeeper writes and a metadata round on the brokers; a tenant's topic churn slows every tenant's produce); past the burst the answer carries a throttle and the connection is muted, 30 s past it (HTTP: at once) THROTTLING_QUOTA_EXCEEDED (`gateway/quotas/tenant_pacing.py`) |
| `limit.holding.timeout.ms` | 10000 | the connection slots and storage headroom a gateway holds in the tenant store expire once its heartbeat is this old (it died); at least 2× `gateway.heartbeat.interval.ms` |
| `connection.release.interval.ms` | 500 | closed connections' slots are written back to the tenant store in batches this often |
| `storage.lease.bytes` | 8388608 | storage headroom a gateway leases from the tenant store at a time (at most an eighth of the tenant's `max_storage_bytes`, at least the request) |
| `storage.lease.settle.ms` | 5000 | bytes charged this long before a storage sample started are taken as counted by it (a produce lands within this) |
| `metrics.host` | 127.0.0.1 | the Prometheus endpoint's address (`--metrics-host` wins): operators only, never the tenant listener's address by default (it names every tenant) |
| `listeners.reuse.port` | false | open the ports with `SO_REUSEPORT`: several gateway processes on one host share them (the kernel spreads connections); off, a port in use is an error |
| `zookeeper.connect` | none | `host:port[,host:port...][/chroot]` of the fleet's ZooKeeper (`--zookeeper` wins): the gateways register there and hold each tenant's rate quotas together (docs/gateway.md, "Quotas across gateways"); none: quotas per gateway |
| `fleet.rates.interval.ms` | 500 | how often a gateway publishes its quota sensors' rates and reads its peers' |
| `fleet.rates.hold.ms` | 5000 | with ZooKeeper unreadable, the peers' last rates are used this long, then the full quota locally (logged); a peer whose rates stood still this long is left out |
| `workers` | cores | worker processes serving the one listener set (`--workers` wins; `gateway.supervisor`): each its own event loop and gateway id `<gateway.id>.w<k>`, metrics on the metrics port + k. Default: the machine's cores (at most 8) when the ports are fixed and `zookeeper.connect` is set, else 1 |

`WorkerSlot`: which worker of how many this process is (set by the supervisor, never by a file).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gateway.kafka.connection_limits import parse_overrides

MAX_DEFAULT_WORKERS = 8  # the default `workers` is the machine's cores, at most this
_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_INT_SETTINGS: dict[str, tuple[int, int, int | None]] = {
    # name: (default, minimum, maximum)
    "connections.max.reauth.ms": (3_600_000, 0, None),
    "sasl.failure.delay.ms": (1000, 0, 60_000),
    "sasl.hash.threads": (1, 1, 64),
    "sasl.hash.queue.size": (32, 0, 10_000),
    "sasl.hash.queue.timeout.ms": (5000, 1, 60_000),
    "sasl.failure.backoff.free.failures": (5, 0, 1000),
    "sasl.failure.backoff.ms": (1000, 0, 3_600_000),
    "sasl.failure.backoff.max.ms": (60_000, 0, 86_400_000),
    "sasl.key.check.burst": (10, 1, 100_000),
    "sasl.key.check.refill.ms": (1000, 0, 3_600_000),
    "quota.window.num": (11, 2, 1000),
    "quota.window.size.seconds": (1, 1, 3600),
    "usage.flush.interval.ms": (5000, 100, 3_600_000),
    "usage.topic.partitions": (12, 1, 1000),
    "storage.sample.interval.ms": (60_000, 1000, 3_600_000),
    "num.partitions": (1, 1, 100_000),
    "socket.request.max.bytes": (100 * 1024 * 1024, 1024, 2**31 - 1),
    "authentication.timeout.ms": (10_000, 100, 3_600_000),
    "max.unauthenticated.connections": (1000, 1, 1_000_000),
    "unauthenticated.buffer.max.bytes": (32 * 1024 * 1024, 512 * 1024, 2**40),
    "max.connections.per.ip": (100, 1, 2**31 - 1),
    "frame.read.timeout.ms": (30_000, 100, 3_600_000),
    "connections.max.idle.ms": (600_000, 1000, 2**31 - 1),
    "queued.max.request.bytes": (32 * 1024 * 1024, 1024, 2**40),
    "failed.login.connection.rate": (10, 1, 1_000_000),
    "verification.cache.ttl.ms": (60_000, 0, 3_600_000),
    "fleet.refresh.interval.ms": (10_000, 100, 3_600_000),
    "gateway.heartbeat.interval.ms": (1_000, 100, 5_000),
    "consumer.instance.timeout.ms": (300_000, 100, 86_400_000),
    "http.body.read.timeout.ms": (30_000, 100, 3_600_000),
    "partition.reconcile.interval.ms": (60_000, 100, 86_400_000),
    "partition.reconcile.quiet.ms": (30_000, 0, 3_600_000),
    "partition.reservation.timeout.ms": (120_000, 1000, 3_600_000),
    "tenant.max.groups": (10_000, 1, 2**31 - 1),
    "tenant.max.transactional.ids": (50_000, 1, 2**31 - 1),
    "tenant.max.group.member.bytes": (64 << 20, 64 << 10, 2**40),
    "tenant.config.changes.per.second": (5, 1, 1_000_000),
    "tenant.partition.mutations.per.second": (100, 1, 1_000_000),
    "limit.holding.timeout.ms": (10_000, 1000, 3_600_000),
    "connection.release.interval.ms": (500, 10, 1000),
    "storage.lease.bytes": (8 * 1024 * 1024, 1024, 2**40),
    "storage.lease.settle.ms": (5_000, 0, 3_600_000),
    "fleet.rates.interval.ms": (500, 50, 10_000),
    "fleet.rates.hold.ms": (5_000, 100, 600_000),
    "workers": (1, 1, 64),
}
_KNOWN = {
    *_INT_SETTINGS,
    "gateway.id",
    "storage.sampler.id",
    "usage.topic.replication.factor",
    "listeners.reuse.port",
    "max.connections.per.ip.overrides",
    "http.port",
    "metrics.host",
    "zookeeper.connect",
}
_ZK_CONNECT = re.compile(r"[A-Za-z0-9.\[\]:-]+:\d{1,5}(,[A-Za-z0-9.\[\]:-]+:\d{1,5})*(/[\w./-]*)?")


class GatewayConfigError(ValueError):
    """A setting that cannot be used; the message names it."""


@dataclass(frozen=True)
class WorkerSlot:
    """Worker `index` of `count` (0-based), started by `gateway.supervisor`; `socket_dir` holds
    each worker's internal HTTP socket `w<k>.sock` (the HTTP v2 instance routing's)."""

    index: int
    count: int
    socket_dir: Path

    def socket_path(self, index: int) -> Path:
        return self.socket_dir / f"w{index}.sock"


@dataclass(frozen=True)
class GatewayConfig:
    bootstrap: str
    db_url: str
    port: int
    host: str = "127.0.0.1"
    advertised_host: str | None = None
    broker_port_base: int | None = None  # default: port + 1 (broker N listens on base + N)
    metrics_port: int | None = None
    metrics_host: str | None = None  # --metrics-host; else `metrics.host`; else 127.0.0.1
    gateway_id: str | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    http_port: int | None = None  # --http-port; else the `http.port` property; None: no HTTP API
    properties: Mapping[str, str] = field(default_factory=dict)
    worker: WorkerSlot | None = None  # set in a worker process of `--workers N`

    def __post_init__(self) -> None:
        unknown = sorted(set(self.properties) - _KNOWN)
        if unknown:
            raise GatewayConfigError(f"unknown gateway setting {unknown[0]!r}")
        for name in _INT_SETTINGS:
            self.setting(name)
        if not 0 <= self.port < 65536:
            raise GatewayConfigError(f"--port {self.port} is not a port")
        if self.port == 0 and self.broker_port_base is None:
            raise GatewayConfigError("--port 0 needs --broker-port-base (brokers' ports follow it)")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise GatewayConfigError("--tls-cert and --tls-key go together")
        for name, value in (("gateway.id", self.id), ("storage.sampler.id", self.sampler_id)):
            if _ID.fullmatch(value) is None:
                raise GatewayConfigError(f"{name} {value!r} must be 1-64 of [A-Za-z0-9._-]")
        self.connections_per_ip_overrides  # noqa: B018 (validated when loaded)
        if self.properties.get("listeners.reuse.port", "false") not in ("true", "false"):
            raise GatewayConfigError("listeners.reuse.port must be true or false")
        port = self.tenant_http_port
        if port is not None and not 0 <= port < 65536:
            raise GatewayConfigError(f"http port {port} is not a port")
        if self.usage_replication_factor is not None and self.usage_replication_factor < 1:
            raise GatewayConfigError("usage.topic.replication.factor must be at least 1")
        if self.setting("workers") > 1 and (self.port == 0 or port == 0):
            raise GatewayConfigError("workers > 1 needs fixed ports (--port and --http-port not 0)")
        connect = self.zookeeper_connect
        if connect is not None and _ZK_CONNECT.fullmatch(connect) is None:
            raise GatewayConfigError(
                f"zookeeper.connect {connect[:200]!r} is not host:port[,host:port...][/chroot]"
            )

    def setting(self, name: str) -> int:
        default, low, high = _INT_SETTINGS[name]
        raw = self.properties.get(name)
        if raw is None:
            return self.default_workers if name == "workers" else default
        try:
            value = int(raw)
        except ValueError:
            raise GatewayConfigError(f"{name}={raw!r} is not an integer") from None
        if value < low or (high is not None and value > high):
            bound = f"{low}..{high}" if high is not None else f">= {low}"
            raise GatewayConfigError(f"{name}={value} is out of range ({bound})")
        return value

    @property
    def default_workers(self) -> int:
        """`workers` when it is not set: the machine's cores (at most `MAX_DEFAULT_WORKERS`) when
        the listener ports are fixed and quotas are shared through ZooKeeper; else 1 (workers
        need fixed ports, and without ZooKeeper each would enforce the whole of every quota)."""
        if self.port == 0 or self.tenant_http_port == 0 or self.zookeeper_connect is None:
            return 1
        return max(1, min(os.cpu_count() or 1, MAX_DEFAULT_WORKERS))

    @property
    def id(self) -> str:
        """This process's gateway id: a worker's is the gateway's with `.w<k>`."""
        suffix = "" if self.worker is None else f".w{self.worker.index}"
        return self.gateway_id_base + suffix

    @property
    def gateway_id_base(self) -> str:
        return self.gateway_id or self.properties.get("gateway.id") or f"gw-{self.port}"

    @property
    def metrics_listen_port(self) -> int | None:
        """The metrics port of this process: worker k serves on `metrics_port` + k (0: any)."""
        if self.metrics_port is None or self.worker is None or self.metrics_port == 0:
            return self.metrics_port
        return self.metrics_port + self.worker.index

    @property
    def sampler_id(self) -> str:
        return self.properties.get("storage.sampler.id", "fleet")

    @property
    def usage_replication_factor(self) -> int | None:
        raw = self.properties.get("usage.topic.replication.factor")
        if raw is None:
            return None
        try:
            return int(raw)
        except ValueError:
            raise GatewayConfigError(
                f"usage.topic.replication.factor={raw!r} is not an integer"
            ) from None

    @property
    def tenant_http_port(self) -> int | None:
        """The tenant HTTP API's port: `--http-port`, else `http.port`, else None (not served)."""
        if self.http_port is not None:
            return self.http_port
        raw = self.properties.get("http.port")
        if raw is None:
            return None
        try:
            return int(raw)
        except ValueError:
            raise GatewayConfigError(f"http.port={raw!r} is not an integer") from None

    @property
    def metrics_bind_host(self) -> str:
        """The metrics endpoint's address: `--metrics-host`, else `metrics.host`, else loopback
        (never `host`: the tenant listener may face the internet, the metrics name every tenant)."""
        return self.metrics_host or self.properties.get("metrics.host") or "127.0.0.1"

    @property
    def connections_per_ip_overrides(self) -> dict[str, int]:
        """`max.connections.per.ip.overrides` as {host: count}."""
        try:
            return parse_overrides(self.properties.get("max.connections.per.ip.overrides", ""))
        except ValueError as exc:
            raise GatewayConfigError(f"max.connections.per.ip.overrides: {exc}") from None

    @property
    def zookeeper_connect(self) -> str | None:
        """The fleet's ZooKeeper (`--zookeeper` sets the property); None: quotas per gateway."""
        return self.properties.get("zookeeper.connect") or None

    @property
    def reuse_port(self) -> bool:
        """`SO_REUSEPORT` on the listeners: set, or always in a worker (they share the ports)."""
        if self.worker is not None:
            return True
        return self.properties.get("listeners.reuse.port", "false") == "true"

    @property
    def public_host(self) -> str:
        return self.advertised_host or self.host

    @property
    def port_base(self) -> int:
        return self.broker_port_base if self.broker_port_base is not None else self.port + 1
