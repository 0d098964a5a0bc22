"""Creating `__usage` when it is missing, as the writer starts.

Owns: `ensure_usage_topic`. The topic gets the writer's partition count, replication factor
min(3, live brokers) unless one is given (as `__consumer_offsets` is replicated), and
`tenancy.usage.TOPIC_CONFIGS`. An existing topic is used as it is, and its real partition count
is returned: records must be placed by the count the topic has, not the one configured. Another
gateway (or worker) creating it at the same moment (TOPIC_ALREADY_EXISTS) is fine: its partitions
are then awaited in the metadata for up to `SETTLE_S`, since the broker asked may learn of the
topic a moment after the controller made it. Runs on the event loop.
"""

from __future__ import annotations

import asyncio

from brokers.client import Cluster
from brokers.client.errors import BrokerResponseError
from brokers.client.topics import NewTopic, create_topics
from brokers.wire.errors import ErrorCode
from tenancy.usage import TOPIC_CONFIGS, USAGE_TOPIC

MAX_REPLICATION_FACTOR = 3
SETTLE_S = 30.0  # how long another creator's topic may take to show in the metadata
SETTLE_STEP_S = 0.1


async def ensure_usage_topic(
    cluster: Cluster, partitions: int, replication_factor: int | None
) -> int:
    """The partition count of `__usage`, after creating it if needed."""
    metadata = await cluster.metadata(refresh=True)
    existing = metadata.topics.get(USAGE_TOPIC)
    if existing is not None and existing.partitions:
        return len(existing.partitions)
    factor = replication_factor or min(MAX_REPLICATION_FACTOR, max(1, len(metadata.brokers)))
    wanted = NewTopic(USAGE_TOPIC, partitions, factor, dict(TOPIC_CONFIGS))
    error = (await create_topics(cluster, [wanted]))[USAGE_TOPIC]
    if error is not None:
        if not (
            isinstance(error, BrokerResponseError) and error.code == ErrorCode.topic_already_exists
        ):
            raise error
        return await _created_elsewhere(cluster) or partitions
    return partitions


async def _created_elsewhere(cluster: Cluster) -> int:
    """The partition count of a `__usage` another creator made, once the metadata shows it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_S
    while True:
        metadata = await cluster.metadata(refresh=True)
        existing = metadata.topics.get(USAGE_TOPIC)
        if existing is not None and existing.partitions:
            return len(existing.partitions)
        if loop.time() >= deadline:
            return len(metadata.topic(USAGE_TOPIC).partitions)  # raises UnknownTopicError
        await asyncio.sleep(SETTLE_STEP_S)
