"""Producing whole record batches to a partition's leader.

Owns: `produce`. The batch is v2 record-batch bytes, already built (e.g. by
`brokers.records.builder.build_batch`) and sent as they are: no per-record work. acks=0 writes
without waiting (the broker sends no response); acks=1/-1 return the assigned base offset.
Retriable errors (NOT_LEADER_OR_FOLLOWER, a lost connection, …) are retried after a metadata
refresh, as Kafka's producer does; without idempotence a retry after a lost response may append
the batch twice (at-least-once). Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brokers.client.cluster import Cluster
from brokers.client.errors import InvalidArgumentError, check
from brokers.client.messages import epoch_ms, make, millis, request_module
from brokers.client.metadata import TopicPartition
from brokers.client.versions import ApiKey

VALID_ACKS = (-1, 0, 1)


@dataclass(frozen=True, slots=True)
class ProduceResult:
    base_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int


async def produce(
    cluster: Cluster,
    tp: TopicPartition,
    batch: bytes,
    *,
    acks: int = -1,
    timeout_s: float = 30.0,
    transactional_id: str | None = None,
) -> ProduceResult | None:
    """Append `batch` to `tp`; None for acks=0."""
    if acks not in VALID_ACKS:
        raise InvalidArgumentError(f"acks must be one of {VALID_ACKS}, not {acks}")
    return await cluster.call(
        lambda: produce_once(cluster, tp, batch, acks, timeout_s, transactional_id)
    )


async def produce_once(
    cluster: Cluster,
    tp: TopicPartition,
    batch: bytes,
    acks: int,
    timeout_s: float,
    transactional_id: str | None = None,
) -> ProduceResult | None:
    """One Produce of `batch` to the partition's leader, without the client's retries (a caller
    that keeps several in flight retries them itself, in order); None for acks=0."""
    connection = await cluster.leader(tp)
    version = connection.version(ApiKey.PRODUCE)
    request = _request(version, tp, batch, acks, timeout_s, transactional_id)
    if acks == 0:
        connection.send_without_response(request)
        return None
    response = await connection.send(
        request, timeout_s=timeout_s + cluster.config.request_timeout_s
    )
    (topic,) = response.responses
    (answer,) = topic.partition_responses
    check(answer.error_code, str(tp), getattr(answer, "error_message", None))
    return ProduceResult(
        base_offset=int(answer.base_offset),
        log_append_time_ms=epoch_ms(getattr(answer, "log_append_time", None)),
        log_start_offset=int(getattr(answer, "log_start_offset", -1)),
    )


def _request(
    version: int,
    tp: TopicPartition,
    batch: bytes,
    acks: int,
    timeout_s: float,
    transactional_id: str | None,
) -> Any:
    module = request_module(ApiKey.PRODUCE, version)
    partition = make(module, "PartitionProduceData", index=tp.partition, records=batch)
    topic = make(module, "TopicProduceData", name=tp.topic, partition_data=(partition,))
    return make(
        module,
        "ProduceRequest",
        transactional_id=transactional_id,
        acks=acks,
        timeout=millis(timeout_s),
        topic_data=(topic,),
    )
