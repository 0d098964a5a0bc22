"""The idempotent producer against a real broker: a retry after a lost response appends once,
sequences continue per partition, a batch in doubt is deduplicated when resent as it was and
fenced off by a new producer id when something else is sent, and OUT_OF_ORDER_SEQUENCE_NUMBER
takes a new producer id.

Responses are lost in-process: a connection that, for chosen Produce requests, waits for the
broker's answer and then drops the connection instead of returning it (the broker has appended)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from brokers.client import ClientConfig, Cluster, IdempotentProducer, TopicPartition
from brokers.client.connection import BrokerConnection
from brokers.client.consumer import fetch
from brokers.client.errors import BrokerConnectionError, ConnectionClosedError
from brokers.client.topics import NewTopic, create_topics
from brokers.records.batch import BatchHeader, iter_headers
from brokers.records.builder import read_batch
from infra.stack import BrokerProcess

pytestmark = pytest.mark.integration
T = TypeVar("T")
TP = TopicPartition("usage-test", 0)
PRODUCE = 0


class LosingConnection(BrokerConnection):
    """Drops the connection after the broker answered the next `lose` Produce requests."""

    lose = 0

    async def send(self, request: Any, *, timeout_s: float | None = None) -> Any:
        response = await super().send(request, timeout_s=timeout_s)
        if int(request.__api_key__) == PRODUCE and LosingConnection.lose > 0:
            LosingConnection.lose -= 1
            self.close()
            raise ConnectionClosedError(f"{self.address}: response lost on purpose")
        return response


def run(broker: BrokerProcess, body: Callable[[Cluster], Awaitable[T]], retries: int = 5) -> T:
    async def main() -> T:
        LosingConnection.lose = 0
        config = ClientConfig(retries=retries, retry_backoff_s=0.01, retry_backoff_max_s=0.05)
        async with Cluster(broker.bootstrap, config, connector=LosingConnection.connect) as cluster:
            results = await create_topics(cluster, [NewTopic(TP.topic, 1, 1)])
            assert results[TP.topic] is None
            return await body(cluster)

    return asyncio.run(main())


async def batches(cluster: Cluster) -> list[tuple[BatchHeader, list[bytes]]]:
    fetched = (await fetch(cluster, {TP: 0}))[TP]
    out = []
    for position, _header in iter_headers(fetched.records):
        header, records = read_batch(fetched.records, position)
        out.append((header, [bytes(r.value or b"") for r in records]))
    return out


def test_a_retry_after_a_lost_response_appends_once(broker: BrokerProcess) -> None:
    async def body(cluster: Cluster) -> None:
        producer = IdempotentProducer(cluster)
        LosingConnection.lose = 1
        first = await producer.send(TP, [(b"k", b"a"), (b"k", b"b")])
        assert LosingConnection.lose == 0  # the first answer was lost and the send retried
        second = await producer.send(TP, [(b"k", b"c")])
        assert (first, second) == (0, 2)
        assert producer.next_sequence(TP) == 3
        seen = await batches(cluster)
        assert [values for _, values in seen] == [[b"a", b"b"], [b"c"]]
        assert [h.base_sequence for h, _ in seen] == [0, 2]
        assert {(h.producer_id, h.producer_epoch) for h, _ in seen} == {producer.producer}

    run(broker, body)


def test_sequences_are_per_partition(broker: BrokerProcess) -> None:
    other = TopicPartition("usage-other", 0)

    async def body(cluster: Cluster) -> None:
        assert (await create_topics(cluster, [NewTopic(other.topic, 1, 1)]))[other.topic] is None
        producer = IdempotentProducer(cluster)
        await asyncio.gather(
            producer.send(TP, [(None, b"1")]),
            producer.send(TP, [(None, b"2"), (None, b"3")]),
            producer.send(other, [(None, b"x")]),
        )
        assert producer.next_sequence(TP) == 3
        assert producer.next_sequence(other) == 1
        assert [values for _, values in await batches(cluster)] in (
            [[b"1"], [b"2", b"3"]],
            [[b"2", b"3"], [b"1"]],
        )

    run(broker, body)


def test_a_batch_in_doubt_resent_as_it_was_is_deduplicated(broker: BrokerProcess) -> None:
    async def body(cluster: Cluster) -> None:
        producer = IdempotentProducer(cluster)
        LosingConnection.lose = 1  # with no retries, the only answer is lost: outcome unknown
        with pytest.raises(BrokerConnectionError):
            await producer.send(TP, [(b"k", b"a")])
        identity = producer.producer
        assert await producer.send(TP, [(b"k", b"a")]) == 0
        assert producer.producer == identity
        assert [values for _, values in await batches(cluster)] == [[b"a"]]

    run(broker, body, retries=0)


def test_other_records_after_a_batch_in_doubt_take_a_new_producer_id(
    broker: BrokerProcess,
) -> None:
    async def body(cluster: Cluster) -> None:
        producer = IdempotentProducer(cluster)
        LosingConnection.lose = 1
        with pytest.raises(BrokerConnectionError):
            await producer.send(TP, [(b"k", b"a")])
        identity = producer.producer
        assert await producer.send(TP, [(b"k", b"b")]) == 1  # never deduplicated as "a"
        assert producer.producer != identity
        seen = await batches(cluster)
        assert [values for _, values in seen] == [[b"a"], [b"b"]]
        assert seen[1][0].base_sequence == 0

    run(broker, body, retries=0)


def test_out_of_order_sequence_takes_a_new_producer_id(broker: BrokerProcess) -> None:
    async def body(cluster: Cluster) -> None:
        producer = IdempotentProducer(cluster)
        await producer.send(TP, [(None, b"a")])
        identity = producer.producer
        producer._sequences[TP] = 7  # a gap the broker refuses as OUT_OF_ORDER_SEQUENCE_NUMBER
        assert await producer.send(TP, [(None, b"b")]) == 1
        assert producer.producer != identity
        assert producer.next_sequence(TP) == 1
        seen = await batches(cluster)
        assert [h.base_sequence for h, _ in seen] == [0, 0]

    run(broker, body)
