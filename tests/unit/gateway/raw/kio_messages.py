"""Produce requests and Fetch responses built with kio, for the raw rewriters' tests: what a
client or broker would send, and the renamed message the gateway must turn it into."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from brokers.client.messages import decode_response
from brokers.wire.entities import make, request_module, response_module
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import decode_request, encode_entity
from gateway.kafka.namespace import TenantNamespace

NAMESPACE = TenantNamespace("acme")
PRODUCE_VERSIONS = range(3, 13)
FETCH_VERSIONS = range(4, 13)
TOPIC_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"

PartitionSpec = tuple[int, bytes | None]  # index, records
TopicSpec = tuple[str, list[PartitionSpec]]


def produce_request(
    version: int, topics: list[TopicSpec], transactional_id: str | None = None, acks: int = -1
) -> Any:
    module = request_module(0, version)
    topic_data = tuple(
        make(
            module,
            "TopicProduceData",
            name=name,
            partition_data=tuple(
                make(module, "PartitionProduceData", index=i, records=r) for i, r in partitions
            ),
        )
        for name, partitions in topics
    )
    return make(
        module,
        "ProduceRequest",
        transactional_id=transactional_id,
        acks=acks,
        timeout=datetime.timedelta(milliseconds=1500),
        topic_data=topic_data,
    )


def decoded_request(version: int, parts: list[bytes | memoryview]) -> Any:
    return decode_request(0, version, memoryview(b"".join(parts)), 0)


def fetch_partition(version: int, index: int, records: bytes | None, *, aborted: bool) -> Any:
    """One partition with every optional field set away from its default, so a rewrite that
    loses any of them shows."""
    module = response_module(1, version)
    transactions = (
        tuple(
            make(module, "AbortedTransaction", producer_id=1000 + n, first_offset=n * 7)
            for n in range(index % 3)
        )
        if aborted
        else None
    )
    return make(
        module,
        "PartitionData",
        partition_index=index,
        error_code=ErrorCode.none if index % 4 else ErrorCode.not_leader_or_follower,
        high_watermark=100 + index,
        last_stable_offset=90 + index,
        log_start_offset=index,
        aborted_transactions=transactions,
        preferred_read_replica=index % 5 - 1,
        records=records,
        **_tagged_partition_fields(module, version, index),
    )


def _tagged_partition_fields(module: Any, version: int, index: int) -> dict[str, Any]:
    if version < 12:
        return {}
    return {
        "diverging_epoch": module.EpochEndOffset(epoch=index + 1, end_offset=40 + index),
        "current_leader": module.LeaderIdAndEpoch(leader_id=index + 2, leader_epoch=9),
        "snapshot_id": module.SnapshotId(end_offset=30, epoch=index + 3),
    }


def fetch_response(
    version: int, topics: list[tuple[str, list[Any]]], throttle_ms: int = 25, session_id: int = 77
) -> Any:
    module = response_module(1, version)
    responses = tuple(
        make(module, "FetchableTopicResponse", topic=name, partitions=tuple(partitions))
        for name, partitions in topics
    )
    return make(
        module,
        "FetchResponse",
        throttle_time=datetime.timedelta(milliseconds=throttle_ms),
        error_code=ErrorCode.none,
        session_id=session_id,
        responses=responses,
    )


def expected_fetch(response: Any, *, throttle_ms: int, drop_records: bool) -> Any:
    """What the tenant must receive: its topics only, renamed; the throttle time replaced."""
    topics = []
    for topic in response.responses:
        name = NAMESPACE.local(topic.topic)
        if name is None:
            continue
        partitions = topic.partitions
        if drop_records:
            partitions = tuple(dataclasses.replace(p, records=b"") for p in partitions)
        topics.append(dataclasses.replace(topic, topic=name, partitions=partitions))
    return dataclasses.replace(
        response,
        responses=tuple(topics),
        throttle_time=datetime.timedelta(milliseconds=throttle_ms),
    )


def decoded_response(version: int, parts: list[bytes | memoryview]) -> Any:
    return decode_response(1, version, memoryview(b"".join(parts)), 0)


def encoded(entity: Any) -> memoryview:
    """A fresh buffer, as a frame read off a socket would be."""
    return memoryview(bytearray(encode_entity(entity)))
