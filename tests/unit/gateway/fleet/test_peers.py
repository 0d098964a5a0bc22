"""The fleet's rate exchange without ZooKeeper: the znode codec (ids, cap, size, bad data) and
`PeerTable` on an injected clock: shares from the peers' rates, a peer that stops publishing left
out, the last rates held while ZooKeeper is unreadable, then the full quota, logged."""

from __future__ import annotations

import json
import logging

import pytest

from gateway.fleet.codec import (
    MAX_ENTRIES,
    RatesFormatError,
    decode_rates,
    encode_rates,
    sensor_id,
)
from gateway.fleet.peers import PeerTable
from gateway.quotas.client_quotas import SensorKey
from gateway.quotas.fleet_share import PeerRate

pytestmark = pytest.mark.unit

Q = 1_000_000.0
KIND = "producer_byte_rate"
KEY = SensorKey("acme", "sa-1", "")
BUSY = PeerRate(Q, saturated=True)
HOLD_MS = 5000


def node(version: int, *rates: tuple[SensorKey, PeerRate]) -> tuple[int, bytes]:
    data, _ = encode_rates((sensor_id(KIND, key), rate) for key, rate in rates)
    return version, data


def test_a_sensor_id_is_the_same_everywhere_and_names_nothing() -> None:
    sid = sensor_id(KIND, KEY)
    assert sid == sensor_id(KIND, SensorKey("acme", "sa-1", ""))
    assert sid != sensor_id("consumer_byte_rate", KEY)
    assert sid != sensor_id(KIND, SensorKey("acme", "sa-2", ""))
    assert len(sid) == 16 and "acme" not in sid


def test_rates_round_trip() -> None:
    data, dropped = encode_rates([("a" * 16, PeerRate(12.5, True)), ("b" * 16, PeerRate(3, False))])
    assert dropped == 0
    assert decode_rates(data) == {"a" * 16: PeerRate(12.5, True), "b" * 16: PeerRate(3, False)}


def test_the_znode_keeps_the_fastest_sensors_and_stays_under_a_megabyte() -> None:
    rates = [(f"{i:016x}", PeerRate(float(i), False)) for i in range(MAX_ENTRIES + 500)]
    data, dropped = encode_rates(rates)
    assert dropped == 500
    kept = decode_rates(data)
    assert len(kept) == MAX_ENTRIES and f"{0:016x}" not in kept
    assert f"{MAX_ENTRIES + 499:016x}" in kept
    assert len(data) < 1_000_000


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xff",
        b"[]",
        b'{"v": 2, "rates": []}',
        b'{"v": 1, "rates": [["x", -1, 0]]}',
        b'{"v": 1, "rates": [["x", 1, 2]]}',
        b'{"v": 1, "rates": [[1, 1, 0]]}',
        json.dumps({"v": 1, "rates": [["x", 1, 0]] * (MAX_ENTRIES + 1)}).encode(),
    ],
)
def test_data_that_is_not_a_rates_document_is_refused(data: bytes) -> None:
    with pytest.raises(RatesFormatError):
        decode_rates(data)


def test_without_peers_the_quota_is_whole() -> None:
    table = PeerTable(hold_ms=HOLD_MS)
    assert table.share(KIND, KEY, Q, BUSY, 0) == Q
    table.update({}, 0)
    assert table.share(KIND, KEY, Q, BUSY, 100) == Q


def test_a_saturated_peer_on_the_same_sensor_halves_the_share() -> None:
    table = PeerTable(hold_ms=HOLD_MS)
    table.update({"gw-2": node(1, (KEY, BUSY))}, 0)
    assert table.share(KIND, KEY, Q, BUSY, 100) == Q / 2
    other = SensorKey("acme", "sa-2", "")
    assert table.share(KIND, other, Q, BUSY, 100) == Q  # the peer has no traffic on it


def test_a_peer_that_stops_publishing_is_left_out_after_the_hold() -> None:
    table = PeerTable(hold_ms=HOLD_MS)
    table.update({"gw-2": node(1, (KEY, BUSY))}, 0)
    table.update({"gw-2": node(1, (KEY, BUSY))}, HOLD_MS)  # same version, still within the hold
    assert table.share(KIND, KEY, Q, BUSY, HOLD_MS) == Q / 2
    table.update({"gw-2": node(1, (KEY, BUSY))}, HOLD_MS + 1)
    assert table.peers == 0
    assert table.share(KIND, KEY, Q, BUSY, HOLD_MS + 1) == Q
    table.update({"gw-2": node(2, (KEY, BUSY))}, HOLD_MS + 2)  # it writes again
    assert table.share(KIND, KEY, Q, BUSY, HOLD_MS + 2) == Q / 2


def test_zookeeper_down_holds_the_last_shares_then_gives_the_whole_quota(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = PeerTable(hold_ms=HOLD_MS)
    table.update({"gw-2": node(1, (KEY, BUSY))}, 0)
    caplog.set_level(logging.INFO, "pier.gateway.fleet")
    table.failed(1000)
    assert table.share(KIND, KEY, Q, BUSY, HOLD_MS) == Q / 2
    assert "fleet_quota_fallback" not in caplog.text
    assert table.share(KIND, KEY, Q, BUSY, HOLD_MS + 1) == Q
    assert caplog.text.count("event=fleet_quota_fallback") == 1
    table.failed(HOLD_MS + 500)
    assert caplog.text.count("event=fleet_quota_fallback") == 1  # logged once
    table.update({"gw-2": node(2, (KEY, BUSY))}, HOLD_MS + 1000)
    assert "event=fleet_quota_shared" in caplog.text
    assert table.share(KIND, KEY, Q, BUSY, HOLD_MS + 1000) == Q / 2


def test_a_peer_with_bad_data_is_ignored_and_the_rest_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = PeerTable(hold_ms=HOLD_MS)
    table.update({"bad": (1, b"not json"), "gw-2": node(1, (KEY, BUSY))}, 0)
    assert table.peers == 1
    assert table.share(KIND, KEY, Q, BUSY, 0) == Q / 2
    assert "event=fleet_peer_ignored peer=bad" in caplog.text
