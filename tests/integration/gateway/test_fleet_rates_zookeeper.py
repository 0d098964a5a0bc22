"""`RateExchange` on a real ZooKeeper (its own server, so it can be stopped and started again):
two gateways' exchanges register ephemeral znodes under `/pier/gateways` (in a chroot they
create), read each other's rates and halve a quota both saturate; a gateway that stops takes its znode with it and the other gets
the whole quota back; with ZooKeeper stopped the last shares are held, then the full quota is
enforced (logged), and once ZooKeeper is back (same port and data) the shares return, the
ephemeral znodes written again (docs/gateway.md, "Quotas across gateways")."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Hashable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from prometheus_client import CollectorRegistry

from gateway.fleet.codec import decode_rates, sensor_id
from gateway.fleet.exchange import GATEWAYS_PATH, RateExchange
from gateway.fleet.peers import PeerTable
from gateway.quotas.client_quotas import SensorKey
from gateway.quotas.fleet_share import PeerRate
from infra.stack import ZooKeeperProcess, start_zookeeper
from tests.polling import wait_until_async

pytestmark = pytest.mark.integration

Q = 1_000_000.0
KIND = "producer_byte_rate"
KEY = SensorKey("acme", "sa-1", "")
BUSY = PeerRate(Q, saturated=True)
HOLD_MS = 1500


def clock_ms() -> int:
    return time.time_ns() // 1_000_000


def saturating(now_ms: int) -> list[tuple[str, Hashable, PeerRate]]:
    return [(KIND, KEY, BUSY)]


@pytest.fixture
def own_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperProcess]:
    server = start_zookeeper(tmp_path / "zookeeper")
    try:
        yield server
    finally:
        server.stop()


def exchange(
    connect: str, name: str, registry: CollectorRegistry | None = None
) -> tuple[RateExchange, PeerTable]:
    table = PeerTable(hold_ms=HOLD_MS)
    rates = RateExchange(
        connect, name, table, saturating, interval_s=0.1, clock_ms=clock_ms, registry=registry
    )
    return rates, table


def share(table: PeerTable) -> float:
    return table.share(KIND, KEY, Q, BUSY, clock_ms())


async def shared(table: PeerTable, expected: float, what: str) -> None:
    async def check() -> bool:
        return share(table) == expected

    await wait_until_async(check, what=what, timeout=60)


def znodes(connect: str) -> dict[str, bytes]:
    client = KazooClient(hosts=connect)
    client.start(10)
    try:
        names = client.get_children(GATEWAYS_PATH) if client.exists(GATEWAYS_PATH) else []
        return {name: client.get(f"{GATEWAYS_PATH}/{name}")[0] for name in names}
    finally:
        client.stop()
        client.close()


def test_two_exchanges_share_a_quota_and_a_stopped_one_leaves(
    own_zookeeper: ZooKeeperProcess,
) -> None:
    connect = f"{own_zookeeper.connect}/pier-test/fleet"  # not there: the exchange creates it

    registry = CollectorRegistry()

    async def scenario() -> None:
        first, first_table = exchange(connect, "gw-a.1", registry)
        second, _ = exchange(connect, "gw-b.1")
        first.start()
        second.start()
        try:
            await shared(first_table, Q / 2, "gw-a sees gw-b saturating the sensor")
            assert registry.get_sample_value("pier_gateway_fleet_peers") == 1
            nodes = await asyncio.to_thread(znodes, connect)
            assert sorted(nodes) == ["gw-a.1", "gw-b.1"]
            assert decode_rates(nodes["gw-b.1"]) == {sensor_id(KIND, KEY): BUSY}
            assert b"acme" not in nodes["gw-b.1"]  # no tenant name in ZooKeeper
        finally:
            await second.stop()
        try:
            assert sorted(await asyncio.to_thread(znodes, connect)) == ["gw-a.1"]
            await shared(first_table, Q, "gw-a alone after gw-b stopped")
        finally:
            await first.stop()

    asyncio.run(scenario())


def test_zookeeper_down_holds_then_falls_back_then_shares_again(
    own_zookeeper: ZooKeeperProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "pier.gateway.fleet")
    connect = own_zookeeper.connect

    async def scenario() -> None:
        (first, first_table), (second, _) = exchange(connect, "gw-a.1"), exchange(connect, "gw-b.1")
        first.start()
        second.start()
        try:
            await shared(first_table, Q / 2, "shares before the outage")
            await asyncio.to_thread(own_zookeeper.stop)
            await shared(first_table, Q, "the full quota once the hold is over")
            assert "event=fleet_zookeeper_unavailable" in caplog.text
            assert "event=fleet_quota_fallback" in caplog.text
            restarted.append(
                await asyncio.to_thread(
                    start_zookeeper, own_zookeeper.data_dir, port=own_zookeeper.port
                )
            )
            await shared(first_table, Q / 2, "shares again with ZooKeeper back")
            assert "event=fleet_quota_shared" in caplog.text
            assert sorted(await asyncio.to_thread(znodes, connect)) == ["gw-a.1", "gw-b.1"]
        finally:
            await first.stop()
            await second.stop()

    restarted: list[ZooKeeperProcess] = []
    try:
        asyncio.run(scenario())
    finally:
        for server in restarted:
            server.stop()
