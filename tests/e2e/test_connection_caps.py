"""Connection caps on a real broker: `max.connections.per.ip` and `max.connections` (Kafka's).

Without a cap one client could open thousands of connections and take the descriptors the
partitions' share needs (brokers/common/descriptors.py). A connection past its address's cap is
closed right after accept, before anything is read; at `max.connections` the broker stops
accepting until a connection ends, so the next client waits in the listen backlog.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from infra.stack import BrokerProcess, free_port
from tests.conftest import BrokerFactory
from tests.e2e.raw_wire import RawConnection, frame, request_bytes
from tests.e2e.test_metrics import scrape, value
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
PER_IP = 3
MAX_CONNECTIONS = 2


@contextlib.contextmanager
def held(broker: BrokerProcess, count: int) -> Iterator[list[RawConnection]]:
    """`count` connections, each answered once (so the broker serves them)."""
    connections: list[RawConnection] = []
    try:
        for _ in range(count):
            connection = RawConnection(broker.host, broker.port)
            connections.append(connection)
            connection.api_versions()
        yield connections
    finally:
        for connection in connections:
            connection.close()


def capped(broker_factory: BrokerFactory, setting: str, cap: int) -> BrokerProcess:
    return broker_factory(config={setting: str(cap)}, metrics_port=free_port())


def listen_backlog(port: int) -> int:
    """Connections the kernel completed on the listening socket that nobody accepted yet."""
    waiting = 0
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].split(":")[1], 16)
            if local_port == port and fields[3] == "0A":  # LISTEN
                waiting += int(fields[4].split(":")[1], 16)  # rx_queue: the accept backlog
    return waiting


def test_a_connection_past_max_connections_per_ip_is_closed_at_once(
    broker_factory: BrokerFactory,
) -> None:
    broker = capped(broker_factory, "max.connections.per.ip", PER_IP)
    with held(broker, PER_IP) as connections:
        with RawConnection(broker.host, broker.port) as extra:
            assert extra.closed_by_peer(timeout=10.0), "a 4th connection from 127.0.0.1 is closed"
        samples = scrape(broker)
        refused = "kafka_network_connections_refused_total"
        assert value(samples, refused, reason="max.connections.per.ip") >= 1
        assert all(not c.closed_by_peer(timeout=0.01) for c in connections), "the 3 are kept"
        assert "event=connection_refused" in broker.log_path.read_text()

        connections.pop().close()  # one place frees up: a real client gets in
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})

        def lists_brokers() -> bool:
            return list(admin.list_topics(timeout=5).brokers) == [broker.node_id]

        wait_until(
            lists_brokers,
            what="a client served once a connection closed",
            retry_on=(KafkaException,),  # the broker may not have seen the close yet
        )


def test_the_connection_past_max_connections_waits_until_one_closes(
    broker_factory: BrokerFactory,
) -> None:
    broker = capped(broker_factory, "max.connections", MAX_CONNECTIONS)
    with held(broker, MAX_CONNECTIONS) as connections:
        waiting = RawConnection(broker.host, broker.port)  # the kernel completes the handshake
        try:
            waiting.send(
                frame(
                    request_bytes(
                        ApiVersionsRequest(
                            client_software_name="pier-e2e", client_software_version="1.0"
                        ),
                        correlation_id=7,
                    )
                )
            )
            wait_until(
                lambda: (
                    listen_backlog(broker.port) == 1
                    and "event=accept_blocked" in broker.log_path.read_text()
                ),
                what="the broker at max.connections, the 3rd connection in its listen backlog",
            )
            with pytest.raises(TimeoutError):  # not served meanwhile (a short look, no timing)
                waiting.read_frame(timeout=0.2)
            connections.pop().close()  # one ends: the broker accepts and serves the waiting one
            answer = waiting.read_frame(timeout=30)
            assert answer[:4] == (7).to_bytes(4, "big"), "the waiting request answered"
            assert listen_backlog(broker.port) == 0
        finally:
            waiting.close()
    blocked = value(scrape(broker), "kafka_network_acceptor_blocked_seconds_total")
    assert blocked > 0
