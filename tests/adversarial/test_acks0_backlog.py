"""An acks=0 producer cannot pile its requests up in the gateway behind a broker that stopped
reading.

acks=0 Produce has no answer, so its byte-budget charge is given back as soon as it is forwarded;
what bounded the requests waiting for the broker's socket was nothing (H7's review, session 33).
Defended (`gateway.kafka.session.MAX_UNSENT_BYTES`): a session takes no request while more than
8 MiB of its requests wait for the broker's socket, so the client is paused and its own queue
fills instead. Checked against a real gateway and broker: the broker is stopped (SIGSTOP), a
confluent-kafka producer with acks=0 offers 160 MiB, and the gateway's resident memory grows by
far less than what was offered.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.adversarial.gateway_probes import rss_bytes
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

MiB = 1024 * 1024
OFFERED = 160 * MiB
RECORD = bytes(range(256)) * 400  # 100 KiB, uncompressed
RECORDS = OFFERED // len(RECORD)
GROWTH_BOUND = 64 * MiB  # 8 MiB unsent + socket buffers + the reader's frames, with slack


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[GatewayStack]:
    with GatewayStack(tmp_path / "acks0-backlog") as started:
        yield started


def test_acks0_requests_behind_a_stopped_broker_stay_bounded_in_the_gateway(
    stack: GatewayStack,
) -> None:
    assert stack.broker is not None
    admin = AdminClient(stack.client_config("acme"))
    admin.create_topics([NewTopic("flood", 1)])["flood"].result(timeout=30)
    producer = Producer(
        {
            **stack.client_config("acme"),
            "acks": 0,
            "linger.ms": 5,
            "queue.buffering.max.kbytes": 2 * OFFERED // 1024,
        }
    )
    producer.produce("flood", RECORD)
    assert producer.flush(30) == 0  # metadata known, the connection to the gateway open
    before = rss_bytes(stack)
    os.kill(stack.broker.pid, signal.SIGSTOP)
    try:
        for _ in range(RECORDS):
            producer.produce("flood", RECORD)
            producer.poll(0)
        queued: list[int] = []

        def client_stopped_sending() -> bool:  # sampled a second apart
            producer.poll(0)
            queued.append(len(producer))
            return len(queued) >= 3 and queued[-1] == queued[-2]

        wait_until(client_stopped_sending, what="the producer held back", timeout=60, interval=1)
        grown = rss_bytes(stack) - before
    finally:
        os.kill(stack.broker.pid, signal.SIGCONT)
    assert 0 < queued[-1] < RECORDS  # the client sent some, then was held with the rest
    assert grown < GROWTH_BOUND, f"gateway grew {grown / MiB:.0f} MiB for 160 MiB offered"
    producer.purge()
    producer.flush(10)
