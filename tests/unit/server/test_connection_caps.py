"""`max.connections`, `max.connections.per.ip` and its overrides: the counting (fed events), the
settings' checks, and the listener's gate (a closed connection lets the accept loop go on)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from brokers.common.config import UNLIMITED_CONNECTIONS, BrokerConfig, BrokerConfigError
from brokers.server.accept import (
    ConnectionQuotas,
    LogLimiter,
    normalize_address,
    resolve_overrides,
)
from brokers.server.listener import Listener
from brokers.server.metrics import ServerMetrics
from tests.polling import wait_until_async
from tests.unit.server.echo_connection import Echo
from tests.unit.server.test_connection_limits import FakeClock

pytestmark = pytest.mark.unit


def config(**properties: str) -> BrokerConfig:
    return BrokerConfig(data_dir=Path("/nonexistent"), properties=properties)


def test_an_address_at_its_cap_is_refused_and_others_are_not() -> None:
    quotas = ConnectionQuotas(max_per_ip=2)
    assert [quotas.admit("10.0.0.1") for _ in range(3)] == [True, True, False]
    assert quotas.admit("10.0.0.2"), "another address has its own count"
    assert (quotas.total, quotas.count("10.0.0.1")) == (3, 2)
    quotas.release("10.0.0.1")
    assert quotas.admit("10.0.0.1"), "a connection that ended frees its address's place"
    assert not quotas.admit("10.0.0.1")


def test_overrides_raise_or_lower_one_address_cap() -> None:
    quotas = ConnectionQuotas(max_per_ip=0, overrides={"127.0.0.1": 3})
    assert not quotas.admit("10.0.0.9"), "max.connections.per.ip=0: only overridden hosts"
    assert [quotas.admit("127.0.0.1") for _ in range(4)] == [True, True, True, False]


def test_full_at_max_connections_until_one_ends() -> None:
    quotas = ConnectionQuotas(max_connections=2)
    quotas.admit("a")
    assert not quotas.full
    quotas.admit("b")
    assert quotas.full
    quotas.release("a")
    assert not quotas.full and quotas.total == 1
    quotas.release("a")  # a release of nothing held changes nothing
    assert quotas.total == 1


def test_ipv4_mapped_addresses_count_as_their_ipv4_address() -> None:
    assert normalize_address("::ffff:127.0.0.1") == "127.0.0.1"
    assert normalize_address("::1") == "::1"


def test_override_hosts_are_resolved_to_addresses_and_an_unknown_one_stops_start_up() -> None:
    resolved = resolve_overrides({"localhost": 5, "10.1.2.3": 7})
    assert resolved["127.0.0.1"] == 5 and resolved["10.1.2.3"] == 7
    with pytest.raises(BrokerConfigError, match=r"cannot resolve 'no-such-host\.invalid'"):
        resolve_overrides({"no-such-host.invalid": 1})


def test_refusal_log_lines_are_rate_limited_and_count_what_they_stand_for() -> None:
    clock = FakeClock()
    limiter = LogLimiter(clock, interval_s=10.0)
    assert limiter.event() == 1
    assert [limiter.event() for _ in range(100)] == [None] * 100
    clock.now += 10.0
    assert limiter.event() == 101


def test_settings_default_to_kafkas_unlimited_and_parse_overrides() -> None:
    assert config().max_connections == UNLIMITED_CONNECTIONS == 2**31 - 1
    assert config().max_connections_per_ip == UNLIMITED_CONNECTIONS
    assert config().max_connections_per_ip_overrides == {}
    raw = "hostName:100, 127.0.0.1:200,[::1]:5"
    parsed = config(**{"max.connections.per.ip.overrides": raw})
    assert parsed.max_connections_per_ip_overrides == {"hostName": 100, "127.0.0.1": 200, "::1": 5}


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"max.connections": "-1"}, r"max\.connections=-1 must be at least 0"),
        ({"max.connections.per.ip": "many"}, "is not an integer"),
        ({"max.connections.per.ip": "0"}, r"needs max\.connections\.per\.ip\.overrides"),
        ({"max.connections.per.ip.overrides": "host100"}, "is not host:count"),
        ({"max.connections.per.ip.overrides": "host:-1"}, "is not host:count"),
    ],
)
def test_bad_values_are_refused_at_start(properties: dict[str, str], message: str) -> None:
    with pytest.raises(BrokerConfigError, match=message):
        config(**properties).validate()


def listener(quotas: ConnectionQuotas) -> tuple[Listener, CollectorRegistry]:
    registry = CollectorRegistry()
    dispatcher: Any = Echo()
    metrics = ServerMetrics(registry)
    return Listener(dispatcher, "127.0.0.1", 0, metrics=metrics, quotas=quotas), registry


def test_the_listener_closes_a_connection_past_the_per_ip_cap_before_reading() -> None:
    async def scenario() -> None:
        served, registry = listener(ConnectionQuotas(max_per_ip=1))  # a socketpair's address: ""
        first, second = socket.socketpair(), socket.socketpair()
        try:
            served.adopt(first[0])
            served.adopt(second[0])
            assert second[0].fileno() == -1, "the second connection from one address is closed"
            assert first[0].fileno() != -1
            refused = registry.get_sample_value(
                "kafka_network_connections_refused_total", {"reason": "max.connections.per.ip"}
            )
            assert refused == 1
        finally:
            await served.stop()
            for pair in (first, second):
                for end in pair:
                    end.close()
        assert served.quotas.total == 0, "a connection's end releases its place"

    asyncio.run(scenario())


def test_wait_for_room_returns_once_a_connection_ends() -> None:
    async def scenario() -> None:
        served, registry = listener(ConnectionQuotas(max_connections=1))
        ours, theirs = socket.socketpair()
        served.adopt(ours)
        waiting = asyncio.create_task(served.wait_for_room())
        try:
            await asyncio.sleep(0)  # let it start waiting (a yield, not a wait for state)
            assert not waiting.done(), "at max.connections the accept loop must wait"
            theirs.close()  # the client leaves: the connection ends and wakes the loop
            await wait_until_async(lambda: _done(waiting), what="the accept loop woken")
            blocked = registry.get_sample_value("kafka_network_acceptor_blocked_seconds_total")
            assert blocked is not None and blocked >= 0
        finally:
            waiting.cancel()
            await served.stop()

    asyncio.run(scenario())


async def _done(task: asyncio.Task[None]) -> bool:
    return task.done()
