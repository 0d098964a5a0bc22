"""Produce frames through a real standalone broker's `Dispatcher` (the routes and metrics its
listener serves): the struct-packed answer decodes to the offsets the log assigned, and the
counters found once per API and per topic keep counting every request, record and byte."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import zstandard

from brokers.client.messages import decode_response
from brokers.records.batch import HEADER_SIZE
from brokers.records.builder import simple_batch
from brokers.server.dispatcher import Dispatcher, Peer
from brokers.server.routes import RouteTable
from brokers.wire.entities import make, request_module
from brokers.wire.errors import ErrorCode
from infra.bench.produce_request_cost import java_batch, produce_frame, request_frame
from tests.unit.handlers.admin_harness import standalone_broker

pytestmark = pytest.mark.unit
PEER = Peer("127.0.0.1", "dispatch-1")


@pytest.mark.parametrize("version", [3, 12])
def test_produce_answers_and_counters(tmp_path: Path, version: int) -> None:
    with standalone_broker(tmp_path) as broker:
        broker.topics.create_topic("orders", 1, 1, {})
        broker.topics.create_topic("audit", 1, 1, {})
        dispatcher = Dispatcher(broker.routes, broker.server_metrics)
        now = int(time.time() * 1000)
        batch = simple_batch([b"v" * 10] * 3, timestamps=[now] * 3)
        sent = [("orders", 0), ("audit", 1), ("orders", 2), ("orders", 3)]

        async def produce_all() -> list[tuple[str, int]]:
            offsets = []
            for topic, correlation_id in sent:
                frame = memoryview(produce_frame(version, 1, topic, batch, correlation_id))
                reply = await dispatcher.dispatch(frame, PEER)
                assert reply is not None and reply.correlation_id == correlation_id
                assert isinstance(reply.body, bytes)
                answer = decode_response(0, version, memoryview(reply.body), 0)
                (topic_answer,) = answer.responses
                (partition,) = topic_answer.partition_responses
                assert topic_answer.name == topic
                assert partition.error_code == ErrorCode.none
                offsets.append((topic, partition.base_offset))
            return offsets

        assert asyncio.run(produce_all()) == [
            ("orders", 0),
            ("audit", 0),
            ("orders", 3),
            ("orders", 6),
        ]

        def value(name: str, **labels: str) -> float | None:
            return broker.registry.get_sample_value(name, labels)

        assert value("kafka_network_requests_total", request="Produce") == 4
        assert value("kafka_network_request_total_time_seconds_count", request="Produce") == 4
        assert value("kafka_server_brokertopicmetrics_messages_in_total", topic="orders") == 9
        assert value("kafka_server_brokertopicmetrics_messages_in_total", topic="audit") == 3
        assert value("kafka_server_brokertopicmetrics_bytes_in_total", topic="orders") == (
            3 * len(batch)
        )


def test_a_deleted_topics_series_go_and_a_new_one_of_its_name_counts_afresh(
    tmp_path: Path,
) -> None:
    """As Kafka's removeMetrics: a tenant creating, writing and deleting topics all day must not
    grow the broker's memory and every scrape."""
    with standalone_broker(tmp_path) as broker:
        broker.topics.create_topic("orders", 2, 1, {})
        broker.topics.create_topic("audit", 1, 1, {})
        dispatcher = Dispatcher(broker.routes, broker.server_metrics)
        batch = simple_batch([b"v" * 10] * 3, timestamps=[int(time.time() * 1000)] * 3)

        def produce(topic: str) -> None:
            frame = memoryview(produce_frame(12, 1, topic, batch, 7))
            reply = asyncio.run(dispatcher.dispatch(frame, PEER))
            assert reply is not None and isinstance(reply.body, bytes)
            answer = decode_response(0, 12, memoryview(reply.body), 0)
            assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none

        def series(topic: str) -> list[str]:
            return [
                sample.name
                for metric in broker.registry.collect()
                for sample in metric.samples
                if sample.labels.get("topic") == topic
            ]

        produce("orders")
        produce("audit")
        assert "kafka_server_brokertopicmetrics_messages_in_total" in series("orders")
        broker.topics.delete_topic("orders")
        assert series("orders") == []
        assert broker.registry.get_sample_value(
            "kafka_server_brokertopicmetrics_messages_in_total", {"topic": "audit"}
        ) == 3  # fmt: skip
        broker.topics.create_topic("orders", 1, 1, {})
        produce("orders")  # counted in a series the registry exports, from zero
        assert broker.registry.get_sample_value(
            "kafka_server_brokertopicmetrics_messages_in_total", {"topic": "orders"}
        ) == 3  # fmt: skip


def test_the_topic_gone_listeners_hear_of_a_topic_once_its_last_partition_here_goes(
    tmp_path: Path,
) -> None:
    with standalone_broker(tmp_path) as broker:
        broker.topics.create_topic("orders", 2, 1, {})
        gone: list[str] = []
        broker.replicas.on_topic_gone(gone.append)
        broker.replicas.get("orders", 0)
        broker.replicas.get("orders", 1)
        broker.replicas.delete("orders", 0)
        assert gone == []  # partition 1 is still hosted here
        broker.replicas.delete("orders", 1)
        broker.replicas.delete("orders", 1)  # already gone: heard once
        assert gone == ["orders"]


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_java_compressed_batches_are_stored_as_sent(tmp_path: Path, codec: str) -> None:
    """A 1 KiB-record batch as ProducerPerformance's Java producer compresses it (too large for
    the loop: validated on the produce worker) is stored byte for byte as it was sent, with only
    the leader's offset and epoch in the header: nothing recompressed or rebuilt (Kafka's
    LogValidator in-place path). The zstd frame is a stream without a content size, as zstd-jni
    writes it."""
    now = int(time.time() * 1000)
    batch = java_batch(codec, 365, 1024, now, seed=7)
    if codec == "zstd":
        assert zstandard.frame_content_size(batch[HEADER_SIZE:]) == -1
    with standalone_broker(tmp_path) as broker:
        broker.topics.create_topic("perf", 1, 1, {})
        dispatcher = Dispatcher(broker.routes, broker.server_metrics)

        async def produce_twice() -> None:
            for correlation_id in (1, 2):
                frame = memoryview(produce_frame(12, 1, "perf", batch, correlation_id))
                reply = await dispatcher.dispatch(frame, PEER)
                assert reply is not None and isinstance(reply.body, bytes)
                answer = decode_response(0, 12, memoryview(reply.body), 0)
                (partition,) = answer.responses[0].partition_responses
                assert partition.error_code == ErrorCode.none

        asyncio.run(produce_twice())
        (segment,) = (tmp_path / "data" / "perf-0").glob("*.log")
        stored = segment.read_bytes()
    assert len(stored) == 2 * len(batch)
    second = stored[len(batch) :]
    assert second[:8] == (365).to_bytes(8, "big")  # base offset assigned by the log
    assert second[16:] == batch[16:]  # magic, CRC, attributes, records: as sent


@pytest.mark.parametrize("version", [3, 9, 12, 13])
def test_the_handler_reads_each_record_set_in_the_request_buffer(
    tmp_path: Path, version: int
) -> None:
    """Produce is read raw (brokers.wire.produce_request), not by kio, which would copy every
    record set into a bytes object of its own: the handler gets views of the frame's buffer,
    and the log holds exactly those bytes."""
    with standalone_broker(tmp_path) as broker:
        broker.topics.create_topic("orders", 1, 1, {})
        produce = broker.routes.get(0)
        assert produce is not None and produce.decode is not None
        seen: list[Any] = []

        async def spying(ctx: Any, request: Any) -> Any:
            seen.append(request)
            return await produce.handler(ctx, request)

        table = RouteTable()
        table.add(dataclasses.replace(produce, handler=spying))
        dispatcher = Dispatcher(table, broker.server_metrics)
        now = int(time.time() * 1000)
        batch = simple_batch([b"v" * 100] * 5, timestamps=[now] * 5)
        metadata = broker.metadata.topic("orders")  # v13 names the topic by its id
        assert metadata is not None and metadata.topic_id is not None
        frame = bytearray(_produce_frame(version, "orders", metadata.topic_id, batch))
        reply = asyncio.run(dispatcher.dispatch(memoryview(frame), PEER))
        assert reply is not None and isinstance(reply.body, bytes)
        answer = decode_response(0, version, memoryview(reply.body), 0)
        assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none
        [request] = seen
        [records] = [p.records for t in request.topics for p in t.partitions]
        assert isinstance(records, memoryview) and records.obj is frame, "a copy was made"
        assert bytes(records) == batch
        log = broker.replicas.get("orders", 0).log
        assert log.log_end_offset == 5


def _produce_frame(version: int, topic: str, topic_id: uuid.UUID, batch: bytes) -> bytes:
    module = request_module(0, version)
    data = make(module, "PartitionProduceData", index=0, records=batch)
    named = make(module, "TopicProduceData", name=topic, topic_id=topic_id, partition_data=(data,))
    request = make(
        module, "ProduceRequest", transactional_id=None, acks=1,
        timeout=datetime.timedelta(seconds=30), topic_data=(named,),
    )  # fmt: skip
    return request_frame(0, version, request, 5)


def test_names_no_partition_has_make_no_series(tmp_path: Path) -> None:
    """A Fetch or Produce may name topics that do not exist, each up to 32 KiB: as Kafka (which
    counts no UnknownTopicOrPartition), their failures are not counted per topic, or every name
    would stay a series until a restart. A hosted topic's failures still count."""
    with standalone_broker(tmp_path) as broker:
        broker.topics.create_topic("orders", 1, 1, {})
        dispatcher = Dispatcher(broker.routes, broker.server_metrics)
        batch = simple_batch([b"v"], timestamps=[int(time.time() * 1000)])
        fetch = request_module(1, 4)

        def codes(frame: bytes, api_key: int, version: int) -> list[int]:
            reply = asyncio.run(dispatcher.dispatch(memoryview(frame), PEER))
            assert reply is not None
            parts = [reply.body] if isinstance(reply.body, bytes) else reply.body.parts
            body = b"".join(part for part in parts if isinstance(part, bytes | memoryview))
            answer = decode_response(api_key, version, memoryview(body), 0)
            if api_key == 0:
                return [p.error_code for t in answer.responses for p in t.partition_responses]
            return [p.error_code for t in answer.responses for p in t.partitions]

        def fetch_frame(topic: str, partition: int) -> bytes:
            wanted = make(fetch, "FetchPartition", partition=partition, fetch_offset=0,
                          partition_max_bytes=1024)  # fmt: skip
            request = make(
                fetch, "FetchRequest", replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0,
                max_bytes=1 << 20, isolation_level=0,
                topics=(make(fetch, "FetchTopic", topic=topic, partitions=(wanted,)),),
            )  # fmt: skip
            return request_frame(1, 4, request, 9)

        unknown = ErrorCode.unknown_topic_or_partition
        for i in range(50):
            ghost = f"ghost-{i}-" + "x" * 1000
            assert codes(produce_frame(12, 1, ghost, batch, i), 0, 12) == [unknown]
            assert codes(fetch_frame(ghost, 0), 1, 4) == [unknown]
        assert codes(fetch_frame("orders", 5), 1, 4) == [unknown]  # no such partition either
        labelled = {
            sample.labels["topic"]
            for metric in broker.registry.collect()
            for sample in metric.samples
            if "topic" in sample.labels
        }
        assert not any(topic.startswith("ghost-") for topic in labelled)
        corrupt = batch[:-1] + bytes([batch[-1] ^ 0xFF])  # the CRC no longer matches
        assert codes(produce_frame(12, 1, "orders", corrupt, 99), 0, 12) == [
            ErrorCode.corrupt_message
        ]
        assert broker.registry.get_sample_value(
            "kafka_server_brokertopicmetrics_failed_produce_requests_total", {"topic": "orders"}
        ) == 1  # fmt: skip
