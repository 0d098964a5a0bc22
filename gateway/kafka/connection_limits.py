"""The bounds every tenant-facing Kafka connection lives within, before and after login.

Owns: `ConnectionLimits` (the settings, read from `GatewayConfig`) and the frame size a logged-in
connection may send. Defaults, with Kafka's equivalent where there is one:

| setting | default | bounds |
|---|---|---|
| `authentication.timeout.ms` | 10000 | time from accept to a successful login (none in Kafka) |
| `max.unauthenticated.connections` | 1000 | connections not yet logged in, gateway-wide |
| `unauthenticated.buffer.max.bytes` | 32 MiB | bytes of frames read before login, gateway-wide |
| `max.connections.per.ip` | 100 | open connections from one address (Kafka's, default unbounded) |
| `max.connections.per.ip.overrides` | none | `host:count,...` (Kafka's) |
| `frame.read.timeout.ms` | 30000 | a partial frame receiving no byte this long (none in Kafka) |
| `connections.max.idle.ms` | 600000 | a connection with no traffic and nothing pending (Kafka's) |
| `queued.max.request.bytes` | 32 MiB | request bytes in flight per tenant (Kafka's is per broker) |
| `socket.request.max.bytes` | 100 MiB | the largest frame after login (Kafka's) |
| `failed.login.connection.rate` | 10 | new connections a second from an address whose failed logins are backing off (KIP-612's per-IP `connection_creation_rate`, applied to failing addresses only) |

After login a frame is also limited to the tenant's `max_request_bytes` plus as much again (at
least 1 MiB), so a request a little over the tenant's limit still gets MESSAGE_TOO_LARGE while one
far over it closes the connection before its body is read, and never to more than the tenant's
request budget, so one frame always fits in an empty budget. Pure; thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from brokers.wire.framing import PRE_AUTH_MAX_REQUEST_BYTES

MiB = 1024 * 1024
REQUEST_SLACK_BYTES = MiB  # the least slack over a tenant's max_request_bytes


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    authentication_timeout_s: float = 10.0
    max_unauthenticated_connections: int = 1000
    unauthenticated_buffer_max_bytes: int = 32 * MiB
    max_connections_per_ip: int = 100
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    frame_read_timeout_s: float = 30.0
    connections_max_idle_s: float = 600.0
    queued_max_request_bytes: int = 32 * MiB
    socket_request_max_bytes: int = 100 * MiB
    pre_auth_max_request_bytes: int = PRE_AUTH_MAX_REQUEST_BYTES
    failed_login_connection_rate: float = 10.0

    @classmethod
    def from_settings(
        cls, setting: Callable[[str], int], overrides: Mapping[str, int]
    ) -> ConnectionLimits:
        """From the gateway's properties (`GatewayConfig.setting`, names as in the table above)."""
        return cls(
            authentication_timeout_s=setting("authentication.timeout.ms") / 1000,
            max_unauthenticated_connections=setting("max.unauthenticated.connections"),
            unauthenticated_buffer_max_bytes=setting("unauthenticated.buffer.max.bytes"),
            max_connections_per_ip=setting("max.connections.per.ip"),
            max_connections_per_ip_overrides=dict(overrides),
            frame_read_timeout_s=setting("frame.read.timeout.ms") / 1000,
            connections_max_idle_s=setting("connections.max.idle.ms") / 1000,
            queued_max_request_bytes=setting("queued.max.request.bytes"),
            socket_request_max_bytes=setting("socket.request.max.bytes"),
            failed_login_connection_rate=setting("failed.login.connection.rate"),
        )

    def per_worker(self, workers: int) -> ConnectionLimits:
        """The limits of one of `workers` worker processes: the caps on what is not yet logged
        in are the gateway's divided among them (each worker holds its own buffers); the rest,
        per address or per connection, are whole (per-address ones shared: `AddressTable`)."""
        if workers <= 1:
            return self
        return replace(
            self,
            max_unauthenticated_connections=-(-self.max_unauthenticated_connections // workers),
            unauthenticated_buffer_max_bytes=max(
                -(-self.unauthenticated_buffer_max_bytes // workers),
                self.pre_auth_max_request_bytes,
            ),
        )

    def per_ip(self, host: str) -> int:
        return self.max_connections_per_ip_overrides.get(host, self.max_connections_per_ip)

    def frame_limit(self, tenant_max_request_bytes: int) -> int:
        """The largest frame a logged-in connection of a tenant may send."""
        slack = max(tenant_max_request_bytes, REQUEST_SLACK_BYTES)
        return min(
            self.socket_request_max_bytes,
            self.queued_max_request_bytes,
            tenant_max_request_bytes + slack,
        )

    @property
    def sweep_interval_s(self) -> float:
        """How often deadlines are checked: a quarter of the shortest, within 50 ms .. 1 s."""
        shortest = min(
            self.authentication_timeout_s, self.frame_read_timeout_s, self.connections_max_idle_s
        )
        return min(1.0, max(0.05, shortest / 4))


def parse_overrides(text: str) -> dict[str, int]:
    """Kafka's `max.connections.per.ip.overrides`: `host:count` pairs separated by commas."""
    overrides: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.isdigit():
            raise ValueError(f"{item!r} is not host:count")
        overrides[host] = int(count)
    return overrides
