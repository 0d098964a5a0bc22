"""`GatewayThrottling`: client quotas from the quota book, the tenant-wide cap, and a throttled
fetch taken back, on a fake clock."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from prometheus_client import CollectorRegistry

from gateway.kafka.services import QuotaSubject
from gateway.quotas.quota_book import QuotaBook
from gateway.throttling import GatewayThrottling
from tenancy.domain import DEFAULT_LIMITS, QuotaEntity
from tests.unit.gateway.quotas.fakes import FakeSource

pytestmark = pytest.mark.unit

MB = 1_000_000
ALICE = QuotaSubject("acme", "sa-alice", "app")
BOB = QuotaSubject("acme", "sa-bob", "app")


def throttling(source: FakeSource) -> GatewayThrottling:
    gate = GatewayThrottling(
        QuotaBook(source), samples=11, window_s=1, registry=CollectorRegistry()
    )
    asyncio.run(gate.load("acme"))
    return gate


def drive(gate: GatewayThrottling, subjects: list[QuotaSubject], rate: int, seconds: int) -> int:
    """Each subject produces `rate` bytes/s in 100 ms steps; the largest throttle seen."""
    worst = 0
    for step in range(seconds * 10):
        for subject in subjects:
            worst = max(worst, gate.produce(subject, rate // 10, 1_000_000 + step * 100))
    return worst


def test_a_principal_over_its_quota_is_throttled_and_one_under_is_not() -> None:
    source = FakeSource({"acme": {QuotaEntity("sa-alice", None): {"producer_byte_rate": MB}}})
    gate = throttling(source)
    assert drive(gate, [ALICE], 5 * MB, 15) > 0
    assert drive(gate, [BOB], MB // 2, 15) == 0  # no quota for bob at any level


def test_the_tenant_cap_holds_principals_that_are_each_within_their_quota() -> None:
    quotas: dict[QuotaEntity, dict[str, float]] = {
        QuotaEntity("<default>", None): {"producer_byte_rate": 2 * MB}
    }
    source = FakeSource({"acme": quotas})
    uncapped = throttling(source)
    assert drive(uncapped, [ALICE, BOB], int(1.5 * MB), 15) == 0
    source.limits["acme"] = dataclasses.replace(DEFAULT_LIMITS, max_producer_byte_rate=2 * MB)
    capped = throttling(source)
    assert drive(capped, [ALICE, BOB], int(1.5 * MB), 15) > 0  # 3 MB/s together over the cap


def test_a_throttled_fetch_is_taken_back() -> None:
    source = FakeSource({"acme": {QuotaEntity("<default>", None): {"consumer_byte_rate": MB}}})
    gate = throttling(source)
    now = 1_000_000
    assert gate.fetch(ALICE, 20 * MB, now) > 0
    # The 20 MB were never delivered: a small fetch right after is within the quota again.
    assert gate.fetch(ALICE, 1000, now + 1) == 0
    assert gate.fetch_max_bytes(ALICE) == 10 * MB  # quota × (samples − 1) × window
    assert gate.fetch_max_bytes(QuotaSubject("acme", "sa-x", "")) == 10 * MB  # <default> user


def test_partitions_are_paced_per_tenant_whatever_the_quota_and_the_version() -> None:
    """`tenant.partition.mutations.per.second` (here 10: a burst of 200, then 30 s of backlog)
    holds with no `controller_mutation_rate` set and on a permissive (pre-KIP-599) version: past
    the burst a throttle, past the backlog a refusal; a strict caller is refused at the burst;
    another tenant is not slowed."""
    gate = GatewayThrottling(
        QuotaBook(FakeSource({"acme": {}, "bolt": {}})),
        samples=11,
        window_s=1,
        registry=CollectorRegistry(),
        partition_mutations_per_s=10,
    )
    asyncio.run(gate.load("acme"))
    asyncio.run(gate.load("bolt"))
    now = 1_000_000
    budget = gate.mutations(ALICE, False, now)  # a version that KIP-599 only throttles
    assert not budget.exceeded()
    budget.record(200)  # the burst
    assert gate.mutation_throttle_ms(ALICE, now) == 0
    strict = gate.mutations(BOB, True, now, caller_strict=True)  # the HTTP API's
    assert not strict.exceeded()
    budget.record(100)  # 10 s past the burst: throttled, still taken
    assert gate.mutation_throttle_ms(ALICE, now) == 10_000
    assert not gate.mutations(ALICE, False, now).exceeded()
    assert gate.mutations(BOB, True, now, caller_strict=True).exceeded()
    budget.record(250)  # 35 s past it: refused on any version, from any connection
    assert gate.mutations(BOB, False, now).exceeded()
    assert not gate.mutations(BOB, False, now + 5_001).exceeded()  # 50 partitions paid back
    other = QuotaSubject("bolt", "sa-carol", "app")
    assert not gate.mutations(other, True, now, caller_strict=True).exceeded()
    assert gate.mutation_throttle_ms(other, now) == 0
