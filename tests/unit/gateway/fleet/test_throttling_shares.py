"""`GatewayThrottling` with a `PeerTable`: what it tells the fleet (`live_rates`: each quota'd
sensor with traffic, the tenant aggregate under its own family, the throttling flag) and a peer's
saturated rates halving what a principal and its tenant's cap get here, on a fake clock."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from prometheus_client import CollectorRegistry

from gateway.fleet.codec import encode_rates, sensor_id
from gateway.fleet.peers import PeerTable
from gateway.kafka.services import QuotaSubject
from gateway.quotas.client_quotas import SensorKey
from gateway.quotas.fleet_share import PeerRate
from gateway.quotas.quota_book import QuotaBook
from gateway.throttling import GatewayThrottling
from tenancy.domain import DEFAULT_LIMITS, QuotaEntity
from tests.unit.gateway.quotas.fakes import FakeSource

pytestmark = pytest.mark.unit

MB = 1_000_000
T0 = 1_000_000
ALICE = QuotaSubject("acme", "sa-alice", "app")
ALICE_KEY = SensorKey("acme", "sa-alice", "")  # the user entity matched: no client-id part


def throttling(source: FakeSource, peers: PeerTable) -> GatewayThrottling:
    gate = GatewayThrottling(
        QuotaBook(source), samples=11, window_s=1, registry=CollectorRegistry(), fleet=peers
    )
    asyncio.run(gate.load("acme"))
    return gate


def drive(gate: GatewayThrottling, rate: int, start_ms: int, seconds: int) -> int:
    """ALICE produces `rate` bytes/s in 100 ms steps, ignoring throttles; the bytes let through
    without a throttle."""
    free = 0
    for step in range(seconds * 10):
        if gate.produce(ALICE, rate // 10, start_ms + step * 100) == 0:
            free += rate // 10
    return free


def source_with(limits: dict[str, int] | None = None) -> FakeSource:
    source = FakeSource({"acme": {QuotaEntity("sa-alice", None): {"producer_byte_rate": MB}}})
    if limits:
        source.limits["acme"] = dataclasses.replace(DEFAULT_LIMITS, **limits)
    return source


def test_live_rates_name_the_sensors_with_traffic_and_whether_they_throttle() -> None:
    gate = throttling(source_with({"max_producer_byte_rate": 10 * MB}), PeerTable(hold_ms=5000))
    assert list(gate.live_rates(T0)) == []
    drive(gate, 3 * MB, T0, 15)
    rates = {(kind, key): rate for kind, key, rate in gate.live_rates(T0 + 15_000)}
    assert set(rates) == {("producer_byte_rate", ALICE_KEY), ("tenant_producer_byte_rate", "acme")}
    assert rates["producer_byte_rate", ALICE_KEY].saturated  # 3 MB/s against 1 MB/s
    assert not rates["tenant_producer_byte_rate", "acme"].saturated  # within the 10 MB/s cap
    assert rates["producer_byte_rate", ALICE_KEY].rate == pytest.approx(3 * MB, rel=0.1)
    assert list(gate.live_rates(T0 + 15_000 + 12_000)) == []  # idle for a window: nothing


def test_a_saturated_peer_halves_the_quota_here() -> None:
    alone = throttling(source_with(), PeerTable(hold_ms=60_000))
    peers = PeerTable(hold_ms=60_000)
    data, _ = encode_rates([(sensor_id("producer_byte_rate", ALICE_KEY), PeerRate(MB, True))])
    peers.update({"gw-2.x": (1, data)}, T0)
    shared = throttling(source_with(), peers)
    # At 0.7 MB/s: within the whole quota, over half of it.
    assert drive(alone, 700_000, T0, 20) == 700_000 * 20
    assert drive(shared, 700_000, T0, 20) < 700_000 * 20 * 0.9


def test_the_tenant_cap_is_shared_too() -> None:
    limits = {"max_producer_byte_rate": MB}
    source = source_with(limits)
    source.tenants["acme"] = {}  # no client quota: only the tenant's cap
    peers = PeerTable(hold_ms=60_000)
    data, _ = encode_rates([(sensor_id("tenant_producer_byte_rate", "acme"), PeerRate(MB, True))])
    peers.update({"gw-2.x": (1, data)}, T0)
    assert drive(throttling(source, PeerTable(hold_ms=60_000)), 700_000, T0, 20) == 700_000 * 20
    assert drive(throttling(source, peers), 700_000, T0, 20) < 700_000 * 20 * 0.9
