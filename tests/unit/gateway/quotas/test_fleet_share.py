"""`fleet_share`: a quota split over gateways by max-min fairness, and two gateways' sensors
exchanging rates on a fake clock converging to one quota between them, whatever the split of
their clients (docs/gateway.md, "Quotas across gateways")."""

from __future__ import annotations

from collections.abc import Hashable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.quotas.client_quotas import ClientQuotaManager, SensorKey
from gateway.quotas.fleet_share import FLOOR, HEADROOM, PeerRate, fleet_share, water_level

pytestmark = pytest.mark.unit

Q = 1_000_000.0
KEY = SensorKey("acme", "sa-1", "")
BUSY = PeerRate(Q, saturated=True)


def test_alone_a_gateway_gets_the_whole_quota() -> None:
    assert fleet_share(Q, PeerRate(5 * Q, saturated=True), []) == Q


def test_two_saturated_gateways_split_the_quota_equally_whatever_they_measure() -> None:
    assert fleet_share(Q, PeerRate(0.9 * Q, True), [PeerRate(0.1 * Q, True)]) == Q / 2
    assert fleet_share(Q, PeerRate(0.1 * Q, True), [PeerRate(0.9 * Q, True)]) == Q / 2


def test_a_saturated_gateway_gets_what_an_unsaturated_one_does_not_want() -> None:
    light = PeerRate(0.2 * Q, saturated=False)
    assert fleet_share(Q, BUSY, [light]) == pytest.approx(Q - 0.2 * Q * HEADROOM)
    assert fleet_share(Q, light, [BUSY]) == pytest.approx(0.2 * Q * HEADROOM)


def test_a_gateway_that_just_started_seeing_traffic_gets_the_floor() -> None:
    newcomer = PeerRate(0.0, saturated=False)
    assert fleet_share(Q, newcomer, [BUSY]) == pytest.approx(FLOOR * Q)
    assert fleet_share(Q, BUSY, [newcomer]) == pytest.approx((1 - FLOOR) * Q)


def test_what_nobody_wants_is_spread_over_all() -> None:
    a, b = PeerRate(0.1 * Q, False), PeerRate(0.3 * Q, False)
    spare = (Q - 0.1 * Q * HEADROOM - 0.3 * Q * HEADROOM) / 2
    assert fleet_share(Q, a, [b]) == pytest.approx(0.1 * Q * HEADROOM + spare)
    assert fleet_share(Q, a, [b]) + fleet_share(Q, b, [a]) == pytest.approx(Q)


def test_a_saturated_gateway_gets_at_least_an_equal_split() -> None:
    peers = [PeerRate(0.5 * Q, False)] * 20
    assert fleet_share(Q, BUSY, peers) == pytest.approx(Q / 21)


def test_the_water_level() -> None:
    assert water_level(10.0, [1.0, 2.0, float("inf")]) == 7.0
    assert water_level(10.0, [float("inf")] * 4) == 2.5
    assert water_level(10.0, [1.0, 2.0]) == float("inf")


rates = st.builds(PeerRate, st.floats(0, 10 * Q), st.booleans())


@given(st.lists(rates, min_size=1, max_size=8))
def test_shares_computed_from_the_same_rates_add_up_to_at_most_the_quota(
    gateways: list[PeerRate],
) -> None:
    shares = [fleet_share(Q, g, gateways[:i] + gateways[i + 1 :]) for i, g in enumerate(gateways)]
    assert sum(shares) == pytest.approx(Q) if len(gateways) > 1 else shares == [Q]
    assert all(share >= FLOOR * Q / len(gateways) - 1e-6 for share in shares)
    for share, gateway in zip(shares, gateways, strict=True):
        if gateway.saturated:
            assert share >= Q / len(gateways) - 1e-6


class Exchange:
    """What the gateways last published of the one sensor (a fake ZooKeeper)."""

    def __init__(self) -> None:
        self.published: dict[int, PeerRate] = {}


class View:
    """Gateway `me`'s `FleetView`: its peers' last published rates of the sensor."""

    def __init__(self, exchange: Exchange, me: int) -> None:
        self.exchange = exchange
        self.me = me

    def share(self, kind: str, key: Hashable, quota: float, local: PeerRate, now_ms: int) -> float:
        peers = [rate for i, rate in self.exchange.published.items() if i != self.me]
        return fleet_share(quota, local, peers)


def publish(exchange: Exchange, managers: list[ClientQuotaManager], now_ms: int) -> None:
    for i, manager in enumerate(managers):
        live = dict(manager.live_rates(now_ms))
        if KEY in live:
            exchange.published[i] = live[KEY]
        else:
            exchange.published.pop(i, None)


@pytest.mark.parametrize("sizes", [(100_000, 100_000), (200_000, 20_000)])
def test_two_gateways_hold_one_quota_between_them(sizes: tuple[int, int]) -> None:
    """Two clients that obey their throttles, each wanting far more than the quota, one through
    each gateway: together they get the quota (± 10 %) over a minute, not twice it."""
    exchange = Exchange()
    managers = [ClientQuotaManager("producer_byte_rate", fleet=View(exchange, i)) for i in (0, 1)]
    next_send = [0, 0]
    sent = [0.0, 0.0]
    for now in range(0, 80_000, 10):
        if now % 500 == 0:
            publish(exchange, managers, now)
        for i in (0, 1):
            if now >= next_send[i]:
                throttle = managers[i].record_and_throttle_ms(KEY, sizes[i], Q, now)
                if now >= 20_000:
                    sent[i] += sizes[i]
                next_send[i] = now + max(10, throttle)
    rate = sum(sent) / 60
    assert rate == pytest.approx(Q, rel=0.10)
    assert min(sent) / max(sent) > 0.3  # neither is starved
