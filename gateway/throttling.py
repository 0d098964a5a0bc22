"""The gateway's quota enforcement for one process: each connection's requests charged to Kafka's
client quotas, and the throttle time they earn.

Owns: `GatewayThrottling`, the facade sessions call (`gateway.kafka.services.Throttling`): one
`ClientQuotaManager` per rate quota (producer bytes, consumer bytes, request percentage) and the
controller-mutation token buckets and the tenants' pacing of config changes and of partitions
created or deleted (`gateway.quotas.tenant_pacing`), fed with the quotas `QuotaBook` resolves for
(tenant, user, client-id) through Kafka's 8-level chain, plus the tenant's own caps over all its
principals (`max_producer_byte_rate` / `max_consumer_byte_rate` of its limits; the larger
throttle wins).
Alone, quotas are enforced per gateway process, as Kafka enforces them per broker
(docs/gateway-options.md); given a `FleetView`, each rate quota is this gateway's share of it
across the fleet (docs/gateway.md, "Quotas across gateways") and `live_rates` is what the fleet is
told; given `FleetUnits`, the controller-mutation buckets and both pacings are charged with what
the other gateways charged before they are asked, and `live_units` is what this one charged
(`gateway.quotas.shared_units`). A throttled fetch's bytes are taken back (Kafka's
`unrecordQuotaSensor`). Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator

from prometheus_client import CollectorRegistry

from gateway.kafka.services import QuotaSubject
from gateway.quotas.client_quotas import ClientQuotaManager, RateSensors, SensorKey
from gateway.quotas.fleet_share import FleetView, PeerRate
from gateway.quotas.metrics import QuotaMetrics
from gateway.quotas.mutation_quota import (
    CONTROLLER_MUTATION_RATE,
    ControllerMutationQuota,
    MutationBudget,
)
from gateway.quotas.quota_book import ClientQuotas, QuotaBook
from gateway.quotas.shared_units import FleetUnits, UnitCounters
from gateway.quotas.tenant_pacing import (
    CONFIG_CHANGES_PER_SECOND,
    PARTITION_MUTATIONS_PER_SECOND,
    PacedBudget,
    TenantPacing,
)
from gateway.quotas.throttle import request_percentage


class GatewayThrottling:
    def __init__(
        self,
        book: QuotaBook,
        *,
        samples: int,
        window_s: int,
        registry: CollectorRegistry,
        fleet: FleetView | None = None,
        fleet_units: FleetUnits | None = None,
        config_changes_per_s: float = CONFIG_CHANGES_PER_SECOND,
        partition_mutations_per_s: float = PARTITION_MUTATIONS_PER_SECOND,
    ) -> None:
        self._book = book
        self._produce, self._fetch, self._request = (
            ClientQuotaManager(name, samples=samples, window_s=window_s, fleet=fleet)
            for name in ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
        )
        self._fleet_units = fleet_units
        counters = self._counters = None if fleet_units is None else UnitCounters()
        self._mutations = ControllerMutationQuota(
            samples=samples, window_s=window_s, counters=counters
        )
        self._config_changes = TenantPacing.for_config_changes(config_changes_per_s, counters)
        self._partition_pacing = TenantPacing.for_partitions(partition_mutations_per_s, counters)
        self._metrics = QuotaMetrics(registry)

    async def load(self, tenant_id: str) -> None:
        """Make the tenant's quotas available (at login; later changes come by `refresh`)."""
        await self._book.load(tenant_id)

    def live_rates(self, now_ms: int) -> Iterator[tuple[str, Hashable, PeerRate]]:
        """(sensor family, key, rate) of every quota sensor with traffic in the window."""
        managers = (self._produce, self._fetch, self._request)
        sensors: list[RateSensors[SensorKey] | RateSensors[str]] = []
        for manager in managers:
            sensors += [manager, manager.tenants]
        for family in sensors:
            for key, rate in family.live_rates(now_ms):
                yield family.kind, key, rate

    def live_units(self, now_ms: int) -> Iterator[tuple[str, Hashable, int, int]]:
        """(limit, key, units, since) of what this gateway charged to its metadata-change limits
        recently (nothing without `FleetUnits`)."""
        if self._counters is not None:
            yield from self._counters.live(now_ms)

    def _catch_up_pacing(self, pacing: TenantPacing, tenant_id: str) -> None:
        """Charge the pacing with what the other gateways charged to it since last asked."""
        if self._fleet_units is not None:
            for at_ms, units in self._fleet_units.drain_units(pacing.kind, tenant_id):
                pacing.apply(tenant_id, units, at_ms)

    def _catch_up_mutations(self, quotas: ClientQuotas) -> None:
        """Charge the KIP-599 bucket with the tokens the other gateways took since last asked
        (none to apply while the principal has no quota)."""
        if self._fleet_units is None:
            return
        taken = self._fleet_units.drain_units(CONTROLLER_MUTATION_RATE, quotas.mutation_key)
        rate = quotas.controller_mutation_rate
        if rate is not None:
            for at_ms, units in taken:
                self._mutations.apply(quotas.mutation_key, units, rate, at_ms)

    def _quotas(self, subject: QuotaSubject) -> ClientQuotas:
        return self._book.quotas_for(subject.tenant, subject.user, subject.client_id)

    def produce(self, subject: QuotaSubject, request_bytes: int, now_ms: int) -> int:
        quotas = self._quotas(subject)
        throttle = self._produce.record_and_throttle_ms(
            quotas.producer_key,
            request_bytes,
            quotas.producer_byte_rate,
            now_ms,
            tenant_cap=quotas.tenant_producer_byte_rate,
        )
        return self._noted(subject, "producer_byte_rate", throttle)

    def fetch(self, subject: QuotaSubject, response_bytes: int, now_ms: int) -> int:
        quotas = self._quotas(subject)
        key = quotas.consumer_key
        throttle = self._fetch.record_and_throttle_ms(
            key,
            response_bytes,
            quotas.consumer_byte_rate,
            now_ms,
            tenant_cap=quotas.tenant_consumer_byte_rate,
        )
        if throttle > 0:  # the client gets no data: do not charge it for data it never saw
            self._fetch.unrecord(key, response_bytes, now_ms)
        return self._noted(subject, "consumer_byte_rate", throttle)

    def fetch_max_bytes(self, subject: QuotaSubject) -> int | None:
        rate = self._quotas(subject).consumer_byte_rate
        return None if rate is None else self._fetch.max_value_in_window(rate)

    def produce_max_bytes(self, subject: QuotaSubject) -> int | None:
        """The most one produce request may carry and still fit the producer quota's window
        (the tenant's cap included); None without a quota. The HTTP API answers 429 above it."""
        quotas = self._quotas(subject)
        rates = [r for r in (quotas.producer_byte_rate, quotas.tenant_producer_byte_rate) if r]
        return None if not rates else self._produce.max_value_in_window(min(rates))

    def request_time(self, subject: QuotaSubject, elapsed_ms: float, now_ms: int) -> int:
        quotas = self._quotas(subject)
        if quotas.request_percentage is None:
            return 0
        throttle = self._request.record_and_throttle_ms(
            quotas.request_key, request_percentage(elapsed_ms), quotas.request_percentage, now_ms
        )
        return self._noted(subject, "request_percentage", throttle)

    def mutations(
        self, subject: QuotaSubject, strict: bool, now_ms: int, *, caller_strict: bool = False
    ) -> MutationBudgets:
        """The request's KIP-599 budget (`strict`: from the versions that refuse) and its
        tenant's partition pacing (`caller_strict`: refused as soon as its burst is spent)."""
        quotas = self._quotas(subject)
        self._catch_up_mutations(quotas)
        self._catch_up_pacing(self._partition_pacing, subject.tenant)
        quota = self._mutations.budget(
            quotas.mutation_key, quotas.controller_mutation_rate, strict=strict, now_ms=now_ms
        )
        pacing = self._partition_pacing.budget(subject.tenant, now_ms, strict=caller_strict)
        return MutationBudgets(quota, pacing)

    def mutation_throttle_ms(self, subject: QuotaSubject, now_ms: int) -> int:
        quotas = self._quotas(subject)
        self._catch_up_mutations(quotas)
        self._catch_up_pacing(self._partition_pacing, subject.tenant)
        throttle = self._mutations.throttle_time_ms(
            quotas.mutation_key, quotas.controller_mutation_rate, now_ms
        )
        paced = self._partition_pacing.throttle_ms(subject.tenant, now_ms)
        if paced > throttle:
            return self._noted(subject, self._partition_pacing.kind, paced)
        return self._noted(subject, CONTROLLER_MUTATION_RATE, throttle)

    def config_change_budget(self, subject: QuotaSubject, strict: bool, now_ms: int) -> PacedBudget:
        self._catch_up_pacing(self._config_changes, subject.tenant)
        return self._config_changes.budget(subject.tenant, now_ms, strict=strict)

    def config_change_throttle_ms(self, subject: QuotaSubject, now_ms: int) -> int:
        self._catch_up_pacing(self._config_changes, subject.tenant)
        throttle = self._config_changes.throttle_ms(subject.tenant, now_ms)
        return self._noted(subject, self._config_changes.kind, throttle)

    def _noted(self, subject: QuotaSubject, quota: str, throttle_ms: int) -> int:
        if throttle_ms > 0:
            self._metrics.throttled(subject.tenant, quota, throttle_ms)
        return throttle_ms


class MutationBudgets:
    """One request's KIP-599 quota budget and its tenant's partition pacing, asked and charged
    together (the filters' `MutationBudget`)."""

    __slots__ = ("pacing", "quota")

    def __init__(self, quota: MutationBudget, pacing: PacedBudget) -> None:
        self.quota, self.pacing = quota, pacing

    def exceeded(self) -> bool:
        return self.quota.exceeded() or self.pacing.exceeded()

    def record(self, partitions: int) -> None:
        self.quota.record(partitions)
        self.pacing.record(partitions)
