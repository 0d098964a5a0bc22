"""Which topics are internal: the ones Kafka itself marks so (`Topic.isInternal`).

Owns the set that Metadata and DescribeTopicPartitions report as `is_internal` and that
DeleteTopics and DeleteRecords refuse. Kafka marks exactly its coordinators' topics; a name that
merely starts with `__` (Pier's own `__usage`, or a user's `__audit`) is an ordinary topic, so
tools and readers that skip internal topics (Spark's Kafka source, `kafka-topics --exclude-internal`)
treat it as Kafka would. Pure; thread-safe.
"""

from __future__ import annotations

from typing import Final

INTERNAL_TOPICS: Final = frozenset(
    {"__consumer_offsets", "__transaction_state", "__share_group_state"}
)


def is_internal(name: str) -> bool:
    """True for a topic Kafka reports as internal."""
    return name in INTERNAL_TOPICS
