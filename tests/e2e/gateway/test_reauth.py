"""KIP-368 at the gateway: sessions live `connections.max.reauth.ms`, set low for this module.

librdkafka re-authenticates before its session expires: a producer per mechanism keeps producing
across several session lifetimes without an error, a failed delivery or a disconnect, and its
statistics show the repeated SaslAuthenticate requests on the same connections. aiokafka does not
re-authenticate: the gateway closes its connection at expiry, and its next produce still succeeds
on a new connection.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import KafkaError, Message, Producer

from tests.e2e.gateway.clients import security_settings
from tests.gateway_stack import MECHANISMS, GatewayStack
from tests.polling import wait_until, wait_until_async

pytestmark = pytest.mark.e2e

# librdkafka re-authenticates at 90 % of the session lifetime: 4 s leaves it 400 ms to finish.
LIFETIME_MS = 4_000
LIFETIMES = 3  # how many session lifetimes the librdkafka producers run through
RATE = 50  # records/s per producer
EXPIRY_TIMEOUT_S = LIFETIME_MS / 1000 + 10.0


@pytest.fixture(scope="module")
def gateway_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    settings = {"connections.max.reauth.ms": str(LIFETIME_MS)}
    with GatewayStack(
        tmp_path_factory.mktemp("gateway-reauth"), gateway_settings=settings
    ) as stack:
        yield stack


class StatsProducer:
    """A confluent-kafka producer that keeps its errors, failures and latest statistics."""

    def __init__(self, stack: GatewayStack, mechanism: str) -> None:
        self.mechanism = mechanism
        self.errors: list[KafkaError] = []
        self.failed: list[str] = []
        self.delivered = 0
        self.stats: dict[str, Any] = {}
        self.producer = Producer(
            stack.client_config(
                "acme",
                mechanism,
                error_cb=self.errors.append,
                stats_cb=self._on_stats,
                **{"acks": "all", "linger.ms": 5, "statistics.interval.ms": 500},
            )
        )

    def _on_stats(self, document: str) -> None:
        self.stats = json.loads(document)

    def on_delivery(self, error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            self.failed.append(str(error))
        else:
            self.delivered += 1

    def close(self) -> None:
        """Drop the client now: its callbacks hold this object, so GC alone would be late."""
        del self.producer

    def brokers(self) -> list[dict[str, Any]]:
        """Statistics of the connections to the gateway's broker ports (the bootstrap and
        librdkafka's internal entries have node id -1)."""
        return [b for b in self.stats.get("brokers", {}).values() if b.get("nodeid", -1) != -1]


def test_librdkafka_reauthenticates_and_keeps_producing(
    gateway_stack: GatewayStack, topic_name: str
) -> None:
    producers = [StatsProducer(gateway_stack, mechanism) for mechanism in MECHANISMS]
    try:
        run_and_check(producers, topic_name)
    finally:
        for producer in producers:
            producer.close()


def fresh_statistics(producer: StatsProducer, before: object) -> bool:
    producer.producer.poll(0.1)
    return producer.stats.get("ts") != before


def run_and_check(producers: list[StatsProducer], topic_name: str) -> None:
    sent = 0
    started = time.monotonic()
    run_until = started + LIFETIMES * LIFETIME_MS / 1000
    while time.monotonic() < run_until:
        for producer in producers:
            producer.producer.produce(topic_name, b"%d" % sent, on_delivery=producer.on_delivery)
        sent += 1
        due = started + sent / RATE
        while (wait := due - time.monotonic()) > 0:  # a steady stream, served meanwhile
            for producer in producers:
                producer.producer.poll(wait / len(producers))
    for producer in producers:
        assert producer.producer.flush(30) == 0, f"{producer.mechanism}: records unacknowledged"
        stats_before = producer.stats.get("ts")
        wait_until(  # statistics covering the whole run; polling serves their callback
            functools.partial(fresh_statistics, producer, stats_before),
            what=f"{producer.mechanism}: fresh statistics",
            timeout=10,
            interval=0,
        )
    for producer in producers:
        name = producer.mechanism
        assert not producer.errors, f"{name}: client errors {producer.errors[:3]}"
        assert not producer.failed, f"{name}: failed deliveries {producer.failed[:3]}"
        assert producer.delivered == sent, f"{name}: {producer.delivered} of {sent} delivered"
        brokers = producer.brokers()
        assert brokers, f"{name}: no broker statistics"
        for broker in brokers:
            assert broker["connects"] == 1, f"{name}: {broker['name']} reconnected"
            assert broker["disconnects"] == 0, f"{name}: {broker['name']} was disconnected"
        # One login plus re-authentications on the connection that carried the records.
        logins = max(b["req"].get("SaslAuthenticate", 0) for b in brokers)
        rounds = 1 if name == "PLAIN" else 2  # SCRAM takes two SaslAuthenticate per login
        assert logins >= rounds * LIFETIMES, f"{name}: {logins} SaslAuthenticate requests"


def test_a_client_without_reauthentication_is_disconnected_at_expiry_and_reconnects(
    gateway_stack: GatewayStack, topic_name: str
) -> None:
    asyncio.run(aiokafka_across_expiry(gateway_stack, topic_name))


async def aiokafka_across_expiry(stack: GatewayStack, topic: str) -> None:
    security = security_settings("aiokafka", stack.credentials["acme"], "SCRAM-SHA-256")
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap, acks="all", **security)
    await producer.start()
    try:
        first = await producer.send_and_wait(topic, b"before expiry")
        connections = [c for c in producer.client._conns.values() if c.connected()]
        assert connections, "aiokafka holds no open connection"

        async def all_closed() -> bool:  # checked on the client's loop, which runs meanwhile
            return not any(c.connected() for c in connections)

        await wait_until_async(
            all_closed,
            what="the gateway closing the expired session",
            timeout=EXPIRY_TIMEOUT_S,
        )
        second = await producer.send_and_wait(topic, b"after expiry")
        assert (second.partition, second.offset) == (first.partition, first.offset + 1)
        reopened = [c for c in producer.client._conns.values() if c.connected()]
        assert reopened and not set(map(id, reopened)) & set(map(id, connections))
    finally:
        await producer.stop()
