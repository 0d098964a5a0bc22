"""The two fleet calls the HTTP producer's idempotent pipeline makes (`gateway.http.batcher`).

Owns: `produce_once` (one Produce of a built batch to the partition's leader, acks=all, without
the client's retries: the pipeline keeps up to five in flight and retries them itself, in order,
so a retry can never overtake an earlier batch) and `init_producer_id` (InitProducerId without a
transactional id: a fresh idempotent producer id at epoch 0). Runs on the event loop.
"""

from __future__ import annotations

from brokers.client import Cluster
from brokers.client.idempotent_producer import new_producer_id
from brokers.client.metadata import TopicPartition
from brokers.client.producer import ProduceResult, produce
from brokers.client.producer import produce_once as produce_attempt

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
    result = await produce_attempt(cluster, tp, batch, ACKS_ALL, TIMEOUT_S)
    assert result is not None  # acks=all always answers
    return result


async def init_producer_id(cluster: Cluster) -> tuple[int, int]:
    """A new idempotent producer id and its epoch (retried as the client retries)."""
    return await cluster.call(lambda: new_producer_id(cluster))
