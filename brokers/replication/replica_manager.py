"""The partitions this broker hosts, and the high-watermark checkpoint that outlives restarts.

Owns: `ReplicaManager` — partition lookup for produce/fetch, creation and deletion through the
log manager, `replication-offset-checkpoint`. Appends notify `on_append` so parked fetches wake.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from brokers.clock import Clock
from brokers.log.checkpoints import read_offsets, write_offsets
from brokers.log.config import LogConfig
from brokers.log.log import Log
from brokers.log.log_manager import LogManager
from brokers.replication.errors import UnknownTopicOrPartitionError
from brokers.replication.partition import Partition

HW_CHECKPOINT = "replication-offset-checkpoint"
TopicPartition = tuple[str, int]


class ReplicaManager:
    def __init__(
        self,
        log_manager: LogManager,
        log_dir: Path,
        *,
        node_id: int,
        clock: Clock,
        on_append: Callable[[TopicPartition], None],
    ) -> None:
        self._logs = log_manager
        self._checkpoint_path = log_dir / HW_CHECKPOINT
        self._node_id = node_id
        self._clock = clock
        self._on_append = on_append
        self._partitions: dict[TopicPartition, Partition] = {}
        self._saved_high_watermarks: dict[TopicPartition, int] = {}

    def startup(self) -> None:
        self._saved_high_watermarks = read_offsets(self._checkpoint_path)
        for log in self._logs.logs():
            self._register(log)

    def _register(self, log: Log) -> Partition:
        key = (log.topic, log.partition)
        partition = Partition(
            log,
            node_id=self._node_id,
            clock=self._clock,
            high_watermark=self._saved_high_watermarks.get(key, 0),
            on_high_watermark=lambda p: self._on_append((p.topic, p.index)),
        )
        self._partitions[key] = partition
        return partition

    def get(self, topic: str, index: int) -> Partition:
        partition = self._partitions.get((topic, index))
        if partition is None:
            raise UnknownTopicOrPartitionError(f"{topic}-{index}")
        return partition

    def find(self, topic: str, index: int) -> Partition | None:
        return self._partitions.get((topic, index))

    def partitions(self) -> Iterator[Partition]:
        return iter(list(self._partitions.values()))

    def create(self, topic: str, index: int, config: LogConfig) -> Partition:
        existing = self._partitions.get((topic, index))
        if existing is not None:
            return existing
        return self._register(self._logs.create(topic, index, config))

    def delete(self, topic: str, index: int) -> None:
        if self._partitions.pop((topic, index), None) is not None:
            self._logs.delete(topic, index)

    def checkpoint_high_watermarks(self) -> None:
        offsets = {key: p.high_watermark for key, p in self._partitions.items()}
        write_offsets(self._checkpoint_path, offsets)
