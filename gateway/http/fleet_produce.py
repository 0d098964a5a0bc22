"""The two fleet calls the HTTP producer's idempotent pipeline makes (`gateway.http.batcher`).

Owns: `produce_once` (one Produce of a built batch to the partition's leader, acks=all, without
the client's retries: the pipeline keeps up to five in flight and retries them itself, in order,
so a retry can never overtake an earlier batch) and `init_producer_id` (InitProducerId without a
transactional id: a fresh idempotent producer id at epoch 0). Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.client import Cluster
from brokers.client.errors import check
from brokers.client.messages import epoch_ms, make, millis, request_module
from brokers.client.metadata import TopicPartition
from brokers.client.producer import ProduceResult, produce
from brokers.client.versions import ApiKey

ACKS_ALL = -1
TIMEOUT_S = 30.0  # the Produce request's timeout (Kafka's request.timeout.ms default)


async def send(cluster: Cluster, tp: TopicPartition, batch: bytes, retry: bool) -> ProduceResult:
    """Append `batch` to `tp` with acks=all: once, or with the client's retries."""
    if retry:
        result = await produce(cluster, tp, batch, acks=ACKS_ALL, timeout_s=TIMEOUT_S)
        assert result is not None  # acks=all always answers
        return result
    return await produce_once(cluster, tp, batch)


async def produce_once(cluster: Cluster, tp: TopicPartition, batch: bytes) -> ProduceResult:
    connection = await cluster.leader(tp)
    module = request_module(ApiKey.PRODUCE, connection.version(ApiKey.PRODUCE))
    partition = make(module, "PartitionProduceData", index=tp.partition, records=batch)
    topic = make(module, "TopicProduceData", name=tp.topic, partition_data=(partition,))
    request = make(
        module,
        "ProduceRequest",
        transactional_id=None,
        acks=ACKS_ALL,
        timeout=millis(TIMEOUT_S),
        topic_data=(topic,),
    )
    response: Any = await connection.send(
        request, timeout_s=TIMEOUT_S + cluster.config.request_timeout_s
    )
    (answer_topic,) = response.responses
    (answer,) = answer_topic.partition_responses
    check(answer.error_code, str(tp), getattr(answer, "error_message", None))
    return ProduceResult(
        base_offset=int(answer.base_offset),
        log_append_time_ms=epoch_ms(getattr(answer, "log_append_time", None)),
        log_start_offset=int(getattr(answer, "log_start_offset", -1)),
    )


async def init_producer_id(cluster: Cluster) -> tuple[int, int]:
    """A new idempotent producer id and its epoch (retried as the client retries)."""

    async def attempt() -> tuple[int, int]:
        connection = await cluster.any_connection()
        module = request_module(
            ApiKey.INIT_PRODUCER_ID, connection.version(ApiKey.INIT_PRODUCER_ID)
        )
        request = make(
            module,
            "InitProducerIdRequest",
            transactional_id=None,
            transaction_timeout=millis(60.0),
            producer_id=-1,
            producer_epoch=-1,
        )
        response: Any = await connection.send(request)
        check(response.error_code, "InitProducerId")
        return int(response.producer_id), int(response.producer_epoch)

    return await cluster.call(attempt)
