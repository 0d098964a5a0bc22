"""In-process brokers with distinct node ids for replication tests, each on its own event loop
thread (like `tests.integration.inproc.broker_thread`, which runs node 0 only and hides its
loop), a fake `IsrWriter`, and one-shot Produce/Fetch calls from the test's thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from brokers.app.runtime import Broker
from brokers.app.standalone import build_standalone
from brokers.client import ClientConfig, TopicPartition
from brokers.client.connection import BrokerConnection
from brokers.client.consumer import FetchedPartition, FetchPosition, fetch_from
from brokers.client.messages import make, millis, request_module
from brokers.client.versions import ApiKey
from brokers.common.config import BrokerConfig

T = TypeVar("T")
START_TIMEOUT_S = 30.0


@dataclass
class Node:
    broker: Broker
    loop: asyncio.AbstractEventLoop

    @property
    def port(self) -> int:
        return self.broker.port

    def call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the broker's loop (its state is not thread-safe) and return its result."""

        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(START_TIMEOUT_S)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(START_TIMEOUT_S)


class FakeIsrWriter:
    """Accepts every conditional write whose version matches; records the ISRs written."""

    def __init__(self) -> None:
        self.version = 0
        self.written: list[list[int]] = []

    async def write_isr(
        self, topic: str, partition: int, leader_epoch: int, isr: list[int], zk_version: int,
        controller_epoch: int,
    ) -> int | None:  # fmt: skip
        if zk_version != self.version:
            return None
        self.version += 1
        self.written.append(list(isr))
        return self.version


@contextmanager
def node(
    root: Path, node_id: int, *, isr_writer: FakeIsrWriter | None = None, lag_ms: int = 30_000,
    properties: Mapping[str, str] | None = None,
) -> Iterator[Node]:  # fmt: skip
    properties = {"replica.lag.time.max.ms": str(lag_ms), **(properties or {})}
    config = BrokerConfig(
        data_dir=root / f"node{node_id}", node_id=node_id, port=0, properties=properties
    )
    broker = build_standalone(config, isr_writer=isr_writer)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name=f"pier-node{node_id}", daemon=True)
    thread.start()
    started = Node(broker, loop)
    try:
        started.run(broker.start())
        try:
            yield started
        finally:
            started.run(broker.replicas.shutdown())
            started.run(broker.stop())
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(START_TIMEOUT_S)
        loop.close()


def produce(
    port: int, tp: TopicPartition, batch: bytes, *, acks: int, timeout_s: float,
    transactional_id: str | None = None,
) -> Any:  # fmt: skip
    """One Produce request; returns the partition's answer (error_code, base_offset, …).
    Transactional batches need a `transactional_id` (and, unless the broker's
    `transaction.partition.verification.enable` is off, a coordinator that knows them)."""

    async def send() -> Any:
        connection = await BrokerConnection.connect("127.0.0.1", port, ClientConfig())
        try:
            module = request_module(ApiKey.PRODUCE, connection.version(ApiKey.PRODUCE))
            data = make(module, "PartitionProduceData", index=tp.partition, records=batch)
            topic = make(module, "TopicProduceData", name=tp.topic, partition_data=(data,))
            request = make(
                module, "ProduceRequest", transactional_id=transactional_id, acks=acks,
                timeout=millis(timeout_s), topic_data=(topic,),
            )  # fmt: skip
            response = await connection.send(request, timeout_s=timeout_s + 10)
            return response.responses[0].partition_responses[0]
        finally:
            await connection.aclose()

    return asyncio.run(send())


def consume(port: int, tp: TopicPartition) -> FetchedPartition:
    """A consumer Fetch from offset 0."""

    async def fetch() -> FetchedPartition:
        connection = await BrokerConnection.connect("127.0.0.1", port, ClientConfig())
        try:
            return (await fetch_from(connection, {tp: FetchPosition(0)}))[tp]
        finally:
            await connection.aclose()

    return asyncio.run(fetch())
