"""Rate sensors of one quota type and the throttle times they earn (Kafka's `ClientQuotaManager`).

One `ClientQuotaManager` per quota: `producer_byte_rate`, `consumer_byte_rate` or
`request_percentage`. A sensor is a `SampledRate` keyed as Kafka keys it: by the user and
client-id parts of the *matched* quota entity, filled with the connection's own names (so a
`/config/users/<default>` quota gives each user a sensor, `/config/clients/<default>` each client
id), within one tenant. A record is kept even when it violates the quota, and the throttle time is
the time the rate needs to fall back under it; `request_percentage` throttles are capped at one
window (`ClientRequestQuotaManager`). A `TenantAggregate` measures all of a tenant's principals
against a tenant-wide cap with the same math; the larger throttle wins. Sensors idle for an hour
are dropped (Kafka's `INACTIVE_SENSOR_EXPIRATION_TIME_SECONDS`), so memory stays bounded.
Given a `FleetView` (gateways sharing quotas through ZooKeeper, `gateway.fleet`), a sensor is
measured against this gateway's share of the quota (`fleet_share`) instead of the whole of it, and
`live_rates` lists what the fleet is told: each sensor with traffic in the window, its rate and
whether it is throttling ("saturated": a throttle handed out ended less than
`SATURATION_GRACE_MS` ago). Runs on the event loop; not thread-safe.

Sharing also paces each sensor as a whole: Kafka's throttle time assumes nothing more arrives while
the client waits, which holds for one connection, but each of k connections of one sensor gets its
own throttle and sends again when it ends, so a sensor with several connections on one gateway runs
over its quota (measured in a simulation of this code with 60 KB requests and a 3 × 1 s window:
1.18× with 2 connections, 1.45× with 4; this is what pushed the 2 gateways × 2 workers test to
1.16×). With a `FleetView` the throttle is therefore the sensor's pacing delay, a virtual-scheduling
rate limiter (GCRA) at the share: each record moves the sensor's theoretical arrival time on by
value / share, and a request ahead of it by more than the burst Kafka allows in a window ((samples −
1) windows of the share) waits the difference; the same simulation then gives 1.00–1.04× for 1 to 8
connections. Kafka's formula is not added to it there: measured on the windowed rate against a share
that moves, it over-throttles after the share drops (the window still holds the rate of the larger
share: up to 11 s of silence in a simulation where 4 gateways share what one held), and the silence
comes back as a fresh burst, then again: 1.04–1.13× over 30 s in a simulation, 1.05–1.10× in the 2
gateways × 2 workers test. Over any span the pacing lets through at most the share's worth plus one
burst and one request. Alone, the throttle stays Kafka's own.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from gateway.quotas.fleet_share import FleetView, PeerRate
from gateway.quotas.rate import SampledRate
from gateway.quotas.throttle import INT32_MAX, max_value_in_window, throttle_time_ms

K = TypeVar("K", bound=Hashable)
S = TypeVar("S")

RATE_QUOTAS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
INACTIVE_SENSOR_EXPIRY_MS = 3_600_000
EXPIRY_SWEEP_MS = 30_000  # how often Kafka's ExpireSensorTask looks for idle sensors
SATURATION_GRACE_MS = 1000  # a sensor counts as throttling this long after its last throttle ended


@dataclass(frozen=True, slots=True)
class SensorKey:
    """Kafka's quota metric tags within a tenant: "" where the matched entity has no such part."""

    tenant_id: str
    user: str
    client_id: str


class IdleSensors(Generic[K, S]):
    """Sensors by key, each dropped once it goes `expire_after_ms` without a record."""

    def __init__(self, factory: Callable[[], S], expire_after_ms: int) -> None:
        self._factory = factory
        self._expire_after_ms = expire_after_ms
        self._sensors: dict[K, S] = {}
        self._last_ms: dict[K, int] = {}
        self._swept_ms: int | None = None

    def __len__(self) -> int:
        return len(self._sensors)

    def get(self, key: K) -> S | None:
        return self._sensors.get(key)

    def recent(self, now_ms: int, within_ms: int) -> Iterator[tuple[K, S]]:
        """The sensors recorded in the last `within_ms`."""
        for key, last in self._last_ms.items():
            if now_ms - last <= within_ms:
                yield key, self._sensors[key]

    def touch(self, key: K, now_ms: int) -> S:
        """The sensor of `key` (created if new), marked as recorded at `now_ms`."""
        if self._swept_ms is None or now_ms - self._swept_ms >= EXPIRY_SWEEP_MS:
            self.expire(now_ms)
        sensor = self._sensors.get(key)
        if sensor is None:
            sensor = self._sensors[key] = self._factory()
        self._last_ms[key] = now_ms
        return sensor

    def expire(self, now_ms: int) -> int:
        """Drop sensors idle for longer than the expiry; how many were dropped."""
        self._swept_ms = now_ms
        idle = [k for k, last in self._last_ms.items() if now_ms - last > self._expire_after_ms]
        for key in idle:
            del self._sensors[key], self._last_ms[key]
        return len(idle)

    def __contains__(self, key: object) -> bool:
        return key in self._sensors


class RateSensors(Generic[K]):
    """Rates by key measured against a quota given with each record."""

    def __init__(
        self,
        *,
        samples: int = 11,
        window_s: int = 1,
        max_throttle_ms: int = INT32_MAX,
        expire_after_ms: int = INACTIVE_SENSOR_EXPIRY_MS,
        kind: str = "",
        fleet: FleetView | None = None,
    ) -> None:
        self.samples = samples
        self.window_s = window_s
        self.max_throttle_ms = max_throttle_ms
        self.kind = kind  # the sensor family's name in the fleet's exchange
        self.fleet = fleet
        self.sensors: IdleSensors[K, SampledRate] = IdleSensors(
            lambda: SampledRate(samples=samples, window_ms=window_s * 1000), expire_after_ms
        )
        self._throttled_until: dict[K, int] = {}
        self._paced: dict[K, tuple[float, float]] = {}  # key → (arrival time ms, share per s)
        self._burst_ms = max(samples - 1, 1) * window_s * 1000

    def record_and_throttle_ms(self, key: K, value: float, quota: float | None, now_ms: int) -> int:
        """Record `value`; the throttle time when the rate is now over `quota` (else 0). Without
        a quota nothing is recorded (Kafka records only while quotas are enabled)."""
        if quota is None:
            return 0
        rate = self.sensors.touch(key, now_ms)
        rate.record(value, now_ms)
        observed = rate.measure(now_ms)
        if self.fleet is None:
            if observed <= quota:
                return 0
            return min(
                throttle_time_ms(observed, quota, rate.window_ms(now_ms)), self.max_throttle_ms
            )
        local = PeerRate(observed, self.saturated(key, now_ms))
        share = self.fleet.share(self.kind, key, quota, local, now_ms)
        throttle = self._pacing_ms(key, value, share, now_ms)
        if throttle <= 0:
            return 0
        throttle = min(throttle, self.max_throttle_ms)
        self._throttled_until[key] = now_ms + throttle
        return throttle

    def _pacing_ms(self, key: K, value: float, share: float, now_ms: int) -> int:
        """The sensor's GCRA delay at `share` per second after `value` more (see the module)."""
        if share <= 0:
            return 0
        arrival, _ = self._paced.get(key, (0.0, share))
        arrival = max(arrival, float(now_ms)) + value * 1000.0 / share
        # A capped throttle (request time: one window) lets the client back before its bytes
        # are paid for; what the cap forgives is not kept as debt for later requests.
        arrival = min(arrival, now_ms + self._burst_ms + self.max_throttle_ms)
        self._paced[key] = (arrival, share)
        return int(arrival - now_ms - self._burst_ms)

    def saturated(self, key: K, now_ms: int) -> bool:
        """Whether `key` was throttled recently (its demand is above what it gets)."""
        until = self._throttled_until.get(key)
        if until is None:
            return False
        if now_ms - until < SATURATION_GRACE_MS:
            return True
        del self._throttled_until[key]
        return False

    def live_rates(self, now_ms: int) -> Iterator[tuple[K, PeerRate]]:
        """Each sensor with traffic in the window: its rate and whether it is throttling."""
        window_ms = self.samples * self.window_s * 1000
        for key, rate in list(self.sensors.recent(now_ms, window_ms)):
            measured = rate.measure(now_ms)
            if measured > 0:
                yield key, PeerRate(measured, self.saturated(key, now_ms))
        for key in [k for k in self._throttled_until if k not in self.sensors]:
            del self._throttled_until[key]  # its sensor expired
        for key in [k for k in self._paced if k not in self.sensors]:
            del self._paced[key]

    def record_no_throttle(self, key: K, value: float, now_ms: int) -> None:
        """Record without checking; the next checked record pays for it (`recordNoThrottle`)."""
        self.sensors.touch(key, now_ms).record(value, now_ms)

    def unrecord(self, key: K, value: float, now_ms: int) -> None:
        """Take back `value` (a throttled fetch returns no data, so its bytes do not count)."""
        if self.sensors.get(key) is not None:
            self.sensors.touch(key, now_ms).unrecord(value, now_ms)
        paced = self._paced.get(key)
        if paced is not None:  # the pacing takes it back too, at the share it was paced at
            arrival, share = paced
            self._paced[key] = (arrival - value * 1000.0 / share, share)

    def rate(self, key: K, now_ms: int) -> float:
        """The measured rate of `key` (0 when it has no sensor)."""
        sensor = self.sensors.get(key)
        return 0.0 if sensor is None else sensor.measure(now_ms)


class TenantAggregate(RateSensors[str]):
    """One rate per tenant over all of its principals, for a tenant-wide cap."""


class ClientQuotaManager(RateSensors[SensorKey]):
    """The sensors of one quota type, plus the tenant-wide aggregate of the same quantity."""

    def __init__(
        self,
        quota_name: str,
        *,
        samples: int = 11,
        window_s: int = 1,
        expire_after_ms: int = INACTIVE_SENSOR_EXPIRY_MS,
        fleet: FleetView | None = None,
    ) -> None:
        if quota_name not in RATE_QUOTAS:
            raise ValueError(f"{quota_name!r} is not one of {', '.join(RATE_QUOTAS)}")
        # Request time is capped at one window: a single slow request must not mute a client
        # for longer than the window it is measured over (ClientRequestQuotaManager).
        cap = window_s * 1000 if quota_name == "request_percentage" else INT32_MAX
        super().__init__(
            samples=samples,
            window_s=window_s,
            max_throttle_ms=cap,
            expire_after_ms=expire_after_ms,
            kind=quota_name,
            fleet=fleet,
        )
        self.quota_name = quota_name
        self.tenants = TenantAggregate(
            samples=samples,
            window_s=window_s,
            max_throttle_ms=cap,
            expire_after_ms=expire_after_ms,
            kind=f"tenant_{quota_name}",
            fleet=fleet,
        )

    def record_and_throttle_ms(
        self,
        key: SensorKey,
        value: float,
        quota: float | None,
        now_ms: int,
        *,
        tenant_cap: float | None = None,
    ) -> int:
        """Record in the client's sensor and, with a `tenant_cap`, in the tenant's aggregate;
        the larger of the two throttle times."""
        throttle = super().record_and_throttle_ms(key, value, quota, now_ms)
        aggregate = self.tenants.record_and_throttle_ms(key.tenant_id, value, tenant_cap, now_ms)
        return max(throttle, aggregate)

    def record_no_throttle(self, key: SensorKey, value: float, now_ms: int) -> None:
        super().record_no_throttle(key, value, now_ms)
        if self.tenants.sensors.get(key.tenant_id) is not None:
            self.tenants.record_no_throttle(key.tenant_id, value, now_ms)

    def unrecord(self, key: SensorKey, value: float, now_ms: int) -> None:
        super().unrecord(key, value, now_ms)
        self.tenants.unrecord(key.tenant_id, value, now_ms)

    def max_value_in_window(self, quota: float | None) -> int:
        """A fetch's max bytes cap: quota × (samples − 1) × window (`maxValueInQuotaWindow`)."""
        return max_value_in_window(quota, self.samples, self.window_s)

    def expire(self, now_ms: int) -> int:
        """Drop idle client and tenant sensors now (they are also swept as records arrive)."""
        return self.sensors.expire(now_ms) + self.tenants.sensors.expire(now_ms)
