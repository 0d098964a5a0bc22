"""How the coordinator reaches `__consumer_offsets`, and which partition holds a group.

Owns: the `OffsetsTopic` protocol (implemented by `brokers.app.groups` over the broker's
partitions, so this package never imports replication) and `partition_for`, Kafka's placement:
`Utils.abs(groupId.hashCode()) % partitions` with Java's String.hashCode over UTF-16 code units.
Pure; thread-safe.
"""

from __future__ import annotations

import functools
from collections.abc import Coroutine, Iterator
from typing import Any, Protocol

OFFSETS_TOPIC = "__consumer_offsets"
_INT32_MIN = -(2**31)


class OffsetsTopic(Protocol):
    """The offsets topic as the coordinator needs it. Appends must apply in call order."""

    def partition_count(self) -> int:
        """Partitions of the topic (the configured count until it exists)."""
        ...

    async def append(self, partition: int, batch: bytes) -> int:
        """Append one batch as leader once it is committed; returns its last offset.

        Raises NotCoordinatorError / CoordinatorNotAvailableError / InvalidCommitOffsetSizeError,
        and InvalidProducerEpochError for a transactional batch of a fenced producer epoch.
        """
        ...

    def start_append(
        self, partition: int, batch: bytes
    ) -> tuple[int, Coroutine[Any, Any, None] | None]:
        """`append`'s two halves: append now (its errors raise here) and return the last offset
        with, unless the batch is committed already, what to await until it is (raising as
        `append`). Appends started one after another apply in that order."""
        ...

    def read_batches(self, partition: int, from_offset: int) -> Iterator[bytes]:
        """Every stored batch from `from_offset` to the log end, one batch per item."""
        ...

    def high_watermark(self, partition: int) -> int: ...


def java_string_hashcode(text: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + … over UTF-16 code units, as a signed int32."""
    units = text.encode("utf-16-be", "surrogatepass")
    value = 0
    for i in range(0, len(units), 2):
        value = (value * 31 + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


# Ids longer than this are hashed each time: a client names any ids it likes (FindCoordinator v4 takes
# many keys of any length), so the cache holds at most 4,096 ids of this size (about 1 MiB).
_CACHED_ID_CHARS = 255


def partition_for(group_id: str, partitions: int) -> int:
    """The `__consumer_offsets` (or `__transaction_state`) partition of an id, as Kafka computes it.
    Cached for ids of ordinary length: every OffsetCommit asks, and the hash walks the id in Python."""
    if len(group_id) <= _CACHED_ID_CHARS:
        return _cached_partition_for(group_id, partitions)
    return _partition_for(group_id, partitions)


def _partition_for(group_id: str, partitions: int) -> int:
    hashcode = java_string_hashcode(group_id)
    positive = 0 if hashcode == _INT32_MIN else abs(hashcode)  # Kafka's Utils.abs
    return positive % partitions


_cached_partition_for = functools.lru_cache(maxsize=4096)(_partition_for)
