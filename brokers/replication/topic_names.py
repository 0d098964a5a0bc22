"""Topic name rules, as Kafka's `Topic.validate`: 1–249 chars of [a-zA-Z0-9._-], not "." or "..".

Owns: `validate_topic_name`, and the checks CreateTopics and CreatePartitions share between the
standalone and ZooKeeper topic admins. Pure; thread-safe.
"""

from __future__ import annotations

import re
from collections.abc import Container, Mapping

from brokers.replication.errors import InvalidPartitionsError, InvalidTopicError, TopicExistsError

MAX_NAME_LENGTH = 249
# fullmatch, never `^…$` with match: `$` also matches before a final newline, so "nl\n" would pass.
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str | None) -> str:
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in {".", ".."}:
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(f"Topic name is longer than {MAX_NAME_LENGTH} characters")
    if _LEGAL.fullmatch(name) is None:
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return name


def new_topic_shape(
    name: str,
    num_partitions: int,
    replication_factor: int,
    existing: Container[str],
    broker_defaults: Mapping[str, str],
) -> tuple[int, int]:
    """CreateTopics' common checks: a legal, unused name; -1 means the broker's default
    (`num.partitions`, `default.replication.factor`). Returns (partitions, replication factor)."""
    validate_topic_name(name)
    if name in existing:
        raise TopicExistsError(f"Topic '{name}' already exists.")
    if num_partitions == -1:
        num_partitions = int(broker_defaults.get("num.partitions", 1))
    if replication_factor == -1:
        replication_factor = int(broker_defaults.get("default.replication.factor", 1))
    return num_partitions, replication_factor


def check_partition_growth(topic: str, existing: int, requested: int) -> None:
    """CreatePartitions only grows a topic (Kafka 4's messages for a shrink and a no-op)."""
    if requested < existing:
        raise InvalidPartitionsError(
            f"The topic {topic} currently has {existing} partition(s); {requested} would not be "
            "an increase."
        )
    if requested == existing:
        raise InvalidPartitionsError(f"Topic already has {existing} partition(s).")


def unreachable_replication_factor(factor: int, brokers: int) -> str:
    """Kafka 4's message for a replication factor above the registered brokers."""
    return (
        f"Unable to replicate the partition {factor} time(s): The target replication factor of "
        f"{factor} cannot be reached because only {brokers} broker(s) are registered."
    )
