"""Broker configuration: Kafka's broker property names, parsed and validated once at start-up.

Owns: `BrokerConfig` (immutable) and reading a Java-properties file. Topic-level defaults
(`log.*`, `num.partitions`, …) stay in `properties` and are interpreted by
`brokers.log.config.LogConfig.from_properties`, so Kafka's names mean one thing everywhere.
Pure; thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_QUEUED_MAX_REQUEST_BYTES = 512 * 1024 * 1024
UNLIMITED_CONNECTIONS = 2**31 - 1  # Kafka's max.connections(.per.ip) default: Int.MaxValue
MAX_CONNECTION_OVERRIDES = 10_000  # entries in max.connections.per.ip.overrides


class BrokerConfigError(ValueError):
    """A setting that cannot be used; the CLI prints it as one line and exits 2."""


def read_properties(path: Path) -> dict[str, str]:
    """Java-properties subset: `key=value` or `key: value`, `#`/`!` comments, blank lines."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BrokerConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    properties: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        separator = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if separator < 0:
            raise BrokerConfigError(f"{path}:{number}: expected key=value, got {line!r}")
        properties[line[:separator].strip()] = line[separator + 1 :].strip()
    return properties


def int_setting(
    properties: Mapping[str, str],
    key: str,
    default: int,
    minimum: int = 0,
    error: type[ValueError] = ValueError,
) -> int:
    """A Kafka integer setting, checked; `error` names the component that refuses it."""
    raw = properties.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise error(f"{key}={raw!r} is not an integer") from None
    if value < minimum:
        raise error(f"{key}={value} must be at least {minimum}")
    return value


# replica.selector.class values (Kafka's class names; KIP-392)
LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
REPLICA_SELECTORS = (LEADER_SELECTOR, RACK_AWARE_SELECTOR)


def _int(properties: Mapping[str, str], key: str, default: int, minimum: int = 0) -> int:
    return int_setting(properties, key, default, minimum, BrokerConfigError)


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    data_dir: Path
    node_id: int = 0
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    metrics_port: int | None = None
    rack: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    zookeeper: str | None = None  # host:port[,host:port][/chroot]; None: standalone

    @property
    def zookeeper_connect(self) -> str | None:
        """ZooKeeper mode when set: `--zookeeper`, else Kafka's `zookeeper.connect` property."""
        return self.zookeeper or self.properties.get("zookeeper.connect") or None

    @property
    def broker_rack(self) -> str | None:
        """`--rack`, else Kafka's `broker.rack` property."""
        return self.rack or self.properties.get("broker.rack") or None

    @property
    def advertised(self) -> str:
        return self.advertised_host or self.host

    @property
    def inter_broker_address(self) -> tuple[str, int] | None:
        """`inter.broker.advertised.address=host:port`: where other brokers (followers, the
        controller) reach this one, registered as the `REPLICATION` listener (Kafka's
        `inter.broker.listener.name`); None: they use the client endpoint. The broker still
        listens on one port; something in between (a fault proxy, NAT) forwards to it."""
        raw = self.properties.get("inter.broker.advertised.address", "").strip()
        if not raw:
            return None
        host, separator, port = raw.rpartition(":")
        if not separator or not host or not port.isdigit() or not 0 < int(port) <= 65535:
            raise BrokerConfigError(f"inter.broker.advertised.address={raw!r} is not host:port")
        return host.strip("[]"), int(port)

    @property
    def replica_lag_time_max_ms(self) -> int:
        return _int(self.properties, "replica.lag.time.max.ms", 30_000, minimum=1)

    @property
    def socket_request_max_bytes(self) -> int:
        return _int(self.properties, "socket.request.max.bytes", 100 * 1024 * 1024, minimum=1024)

    @property
    def connections_max_idle_ms(self) -> int:
        """Kafka's `connections.max.idle.ms` (10 min); negative: never close idle connections."""
        return _int(self.properties, "connections.max.idle.ms", 600_000, minimum=-(2**63))

    @property
    def queued_max_request_bytes(self) -> int:
        """Kafka's `queued.max.request.bytes`: request bytes read but not yet processed before
        the broker stops reading (≤ 0: unbounded). Kafka's default is -1; ours is 512 MiB (or
        `socket.request.max.bytes` if larger), so stalled partial frames cannot take the host's
        memory. A bound must be at least `socket.request.max.bytes`, as Kafka requires."""
        max_request = self.socket_request_max_bytes
        default = max(DEFAULT_QUEUED_MAX_REQUEST_BYTES, max_request)
        value = _int(self.properties, "queued.max.request.bytes", default, minimum=-(2**63))
        if 0 < value < max_request:
            raise BrokerConfigError(
                f"queued.max.request.bytes={value} must be -1 (unbounded) or at least "
                f"socket.request.max.bytes ({max_request})"
            )
        return value

    @property
    def max_connections(self) -> int:
        """Kafka's `max.connections`: client connections the broker serves at once; at the cap
        it stops accepting until one closes (brokers/server/accept.py). Default: unlimited."""
        return _int(self.properties, "max.connections", UNLIMITED_CONNECTIONS)

    @property
    def max_connections_per_ip(self) -> int:
        """Kafka's `max.connections.per.ip`: a connection past it is closed at once. 0 is
        allowed only with overrides (those hosts alone may connect), as Kafka requires."""
        value = _int(self.properties, "max.connections.per.ip", UNLIMITED_CONNECTIONS)
        if value == 0 and not self.max_connections_per_ip_overrides:
            raise BrokerConfigError(
                "max.connections.per.ip=0 needs max.connections.per.ip.overrides "
                "(otherwise no client could connect)"
            )
        return value

    @property
    def max_connections_per_ip_overrides(self) -> dict[str, int]:
        """Kafka's `max.connections.per.ip.overrides`: `host:count,host:count` (an IP address
        or a host name, resolved when the listener starts; an IPv6 address may be bracketed)."""
        raw = self.properties.get("max.connections.per.ip.overrides", "").strip()
        overrides: dict[str, int] = {}
        for item in filter(None, (part.strip() for part in raw.split(","))):
            host, separator, count = item.rpartition(":")
            host = host.strip().strip("[]")
            if not separator or not host or not count.strip().isdigit():
                raise BrokerConfigError(
                    f"max.connections.per.ip.overrides: {item!r} is not host:count "
                    "(count a non-negative integer)"
                )
            overrides[host] = min(int(count), UNLIMITED_CONNECTIONS)
        if len(overrides) > MAX_CONNECTION_OVERRIDES:
            raise BrokerConfigError(
                f"max.connections.per.ip.overrides has {len(overrides)} hosts; "
                f"at most {MAX_CONNECTION_OVERRIDES}"
            )
        return overrides

    @property
    def retention_check_interval_ms(self) -> int:
        return _int(self.properties, "log.retention.check.interval.ms", 300_000, minimum=1)

    @property
    def flush_scheduler_interval_ms(self) -> int:
        return _int(self.properties, "log.flush.scheduler.interval.ms", 1_000, minimum=1)

    @property
    def checkpoint_interval_ms(self) -> int:
        return _int(self.properties, "log.flush.offset.checkpoint.interval.ms", 60_000, minimum=1)

    @property
    def auto_create_topics(self) -> bool:
        return self.properties.get("auto.create.topics.enable", "true").lower() == "true"

    @property
    def replica_selector_class(self) -> str | None:
        """Kafka's `replica.selector.class` (KIP-392): None (unset, Kafka's default) or one of
        `REPLICA_SELECTORS`; see brokers/replication/replica_selector.py."""
        name = self.properties.get("replica.selector.class", "").strip()
        if name and name not in REPLICA_SELECTORS:
            known = ", ".join(REPLICA_SELECTORS)
            raise BrokerConfigError(f"replica.selector.class={name!r}: Pier knows {known}")
        return name or None

    @property
    def fetch_max_bytes(self) -> int:
        return _int(self.properties, "fetch.max.bytes", 55 * 1024 * 1024, minimum=1024)

    def validate(self) -> None:
        """Parse every numeric setting once, so a bad value fails at start-up, not later."""
        if not 0 <= self.node_id <= 2**31 - 1:
            raise BrokerConfigError(f"node id {self.node_id} out of range")
        if not 0 <= self.port <= 65535:
            raise BrokerConfigError(f"port {self.port} out of range")
        for name in (
            "socket_request_max_bytes",
            "connections_max_idle_ms",
            "queued_max_request_bytes",
            "max_connections",
            "max_connections_per_ip",
            "max_connections_per_ip_overrides",
            "retention_check_interval_ms",
            "flush_scheduler_interval_ms",
            "checkpoint_interval_ms",
            "fetch_max_bytes",
            "inter_broker_address",
            "replica_lag_time_max_ms",
            "replica_selector_class",
        ):
            getattr(self, name)
        for key in ("num.partitions", "default.replication.factor"):
            _int(self.properties, key, 1, minimum=1)
        _int(self.properties, "zookeeper.session.timeout.ms", 18_000, minimum=1)
        connect = self.zookeeper_connect
        if connect is not None and not connect.split("/", 1)[0].strip():
            raise BrokerConfigError(f"zookeeper {connect!r} names no host:port")
