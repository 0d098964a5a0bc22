"""The standalone broker's topic registry: what topics exist, their ids, partition counts, configs.

Owns: creating, deleting, growing and reconfiguring topics when there is no ZooKeeper — persisted
as `pier-topics.json` in the data dir (temp file, fsync, atomic rename), applied to the replica
manager and the metadata cache. In cluster mode the controller plays this part through
ZooKeeper; handlers only see the `TopicAdmin` methods. A topic is created whole or not at all:
the file-descriptor budget is checked before any log is opened (`DescriptorLimitError`,
POLICY_VIOLATION, also for `validate_only`), and should opening a log still fail (EMFILE when
connections took the reserve), the logs this request opened are deleted again and nothing is
persisted (KAFKA_STORAGE_ERROR, naming the open-file limit). Runs on the event loop; not
thread-safe.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from brokers.common.descriptors import DescriptorBudget
from brokers.log.config import LogConfig, validate_topic_overrides
from brokers.log.errors import LogDirError
from brokers.replication.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    PolicyViolationError,
    UnknownTopicOrPartitionError,
)
from brokers.replication.metadata_cache import MetadataCache, PartitionMetadata, TopicMetadata
from brokers.replication.replica_manager import ReplicaManager
from brokers.replication.topic_names import (
    check_partition_growth,
    new_topic_shape,
    unreachable_replication_factor,
)

REGISTRY_FILE = "pier-topics.json"


@dataclass(frozen=True, slots=True)
class TopicLimits:
    max_partitions_per_topic: int = 10_000
    max_partitions_per_broker: int = 50_000


class LocalTopicRegistry:
    def __init__(
        self,
        data_dir: Path,
        replicas: ReplicaManager,
        metadata: MetadataCache,
        *,
        node_id: int,
        broker_defaults: Mapping[str, str],
        limits: TopicLimits | None = None,
        descriptors: DescriptorBudget | None = None,
    ) -> None:
        self._path = data_dir / REGISTRY_FILE
        self._replicas = replicas
        self._metadata = metadata
        self._node_id = node_id
        self._broker_defaults = dict(broker_defaults)
        self._limits = limits or TopicLimits()
        self._descriptors = descriptors or DescriptorBudget()
        self._partition_count = 0
        self._batch_depth = 0
        self._dirty = False

    # ---- start-up -------------------------------------------------------------------------
    def load(self) -> None:
        stored = json.loads(self._path.read_text()) if self._path.exists() else {"topics": {}}
        for name, entry in stored["topics"].items():
            self._install(name, uuid.UUID(entry["id"]), int(entry["partitions"]), entry["configs"])
        for partition in self._replicas.partitions():  # logs on disk the registry never saw
            if partition.topic not in self._metadata.topics:
                count = 1 + max(
                    p.index for p in self._replicas.partitions() if p.topic == partition.topic
                )
                self._install(partition.topic, uuid.uuid4(), count, {})
        self._save()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Defer the registry write to the end of a multi-topic request (one fsync, not n)."""
        self._batch_depth += 1
        try:
            yield
        finally:
            self._batch_depth -= 1
            if self._batch_depth == 0 and self._dirty:
                self._save()

    def log_config(self, overrides: Mapping[str, str]) -> LogConfig:
        return LogConfig.from_properties(overrides, self._broker_defaults)

    # ---- TopicAdmin -----------------------------------------------------------------------
    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
        *,
        validate_only: bool = False,
        assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> TopicMetadata | None:
        partitions, factor = new_topic_shape(
            name, num_partitions, replication_factor, self._metadata.topics, self._broker_defaults
        )
        self._check_partitions(partitions, existing=0)
        if factor < 1 or factor > len(self._metadata.brokers):
            raise InvalidReplicationFactorError(
                unreachable_replication_factor(factor, len(self._metadata.brokers))
                if factor > 1
                else "Replication factor must be larger than 0."
            )
        overrides = validate_topic_overrides(configs, self._broker_defaults)
        self.log_config(overrides)
        self._descriptors.check(partitions, f"topic '{name}'")
        if validate_only:
            return None
        topic = self._install(name, uuid.uuid4(), partitions, overrides)
        self._save()
        return topic

    def delete_topic(self, name: str) -> None:
        topic = self._require(name)
        for index in list(topic.partitions):
            self._replicas.delete(name, index)
        self._partition_count -= len(topic.partitions)
        del self._metadata.topics[name]
        self._save()

    def create_partitions(
        self,
        name: str,
        count: int,
        *,
        validate_only: bool = False,
        assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> None:
        topic = self._require(name)
        existing = len(topic.partitions)
        check_partition_growth(name, existing, count)
        self._check_partitions(count, existing=existing)
        self._descriptors.check(count - existing, f"growing topic '{name}' to {count} partitions")
        if validate_only:
            return
        self._open_logs(name, range(existing, count), self.log_config(topic.configs))
        for index in range(existing, count):
            topic.partitions[index] = self._leader_here(index)
        self._partition_count += count - existing
        self._save()

    def set_topic_configs(
        self, name: str, configs: Mapping[str, str | None], *, validate_only: bool = False
    ) -> None:
        """Replace a topic's overrides (AlterConfigs) — callers merge for incremental changes."""
        topic = self._require(name)
        overrides = validate_topic_overrides(configs, self._broker_defaults)
        config = self.log_config(overrides)
        if validate_only:
            return
        topic.configs = overrides
        for index in topic.partitions:
            self._replicas.get(name, index).log.update_config(config)
        self._save()

    # ---- internals ------------------------------------------------------------------------
    def _require(self, name: str) -> TopicMetadata:
        topic = self._metadata.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        return topic

    def _check_partitions(self, count: int, *, existing: int) -> None:
        if count < 1:
            raise InvalidPartitionsError("Number of partitions must be larger than 0.")
        if count > self._limits.max_partitions_per_topic:
            raise PolicyViolationError(
                f"{count} partitions exceed the limit of {self._limits.max_partitions_per_topic} per topic"
            )
        total = self._partition_count - existing + count
        if total > self._limits.max_partitions_per_broker:
            raise PolicyViolationError(
                f"the broker would hold {total} partitions, over its limit of "
                f"{self._limits.max_partitions_per_broker}"
            )

    def _leader_here(self, index: int) -> PartitionMetadata:
        node = self._node_id
        return PartitionMetadata(
            index=index, leader=node, leader_epoch=0, replicas=[node], isr=[node]
        )

    def _install(
        self, name: str, topic_id: uuid.UUID, partitions: int, configs: Mapping[str, str]
    ) -> TopicMetadata:
        topic = TopicMetadata(name=name, topic_id=topic_id, partitions={}, configs=dict(configs))
        self._open_logs(name, range(partitions), self.log_config(configs))
        for index in range(partitions):
            topic.partitions[index] = self._leader_here(index)
        self._metadata.topics[name] = topic
        self._partition_count += partitions
        return topic

    def _open_logs(self, name: str, indexes: range, config: LogConfig) -> None:
        """Open (creating where needed) the partitions' logs — all of them, or, on a failure,
        none of those this call created."""
        created: list[int] = []
        index = indexes.start
        try:
            for index in indexes:
                if self._replicas.find(name, index) is None:
                    created.append(index)
                self._replicas.create(name, index, config).log.update_config(config)
        except Exception as exc:
            for undone in created:
                with contextlib.suppress(Exception):  # best effort: the first error is the story
                    self._replicas.delete(name, undone)
            if self._replicas.find(name, index) is None:
                # The log that failed to open left its directory; at the next start it would
                # come back as a partition the registry never saw.
                shutil.rmtree(self._path.parent / f"{name}-{index}", ignore_errors=True)
            if _out_of_descriptors(exc):
                raise LogDirError(
                    f"the broker ran out of file descriptors (open-file limit "
                    f"{self._descriptors.read_limit()}) opening partition {index} of topic "
                    f"'{name}'; none of the {len(indexes)} partitions was created"
                ) from None
            raise

    def _save(self) -> None:
        if self._batch_depth:
            self._dirty = True
            return
        self._dirty = False
        document = {
            "version": 1,
            "topics": {
                t.name: {
                    "id": str(t.topic_id),
                    "partitions": len(t.partitions),
                    "configs": t.configs,
                }
                for t in self._metadata.topics.values()
            },
        }
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as handle:
            json.dump(document, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self._path)


def _out_of_descriptors(exc: BaseException | None) -> bool:
    """True when EMFILE/ENFILE is the error or its cause (a log layer may wrap the OSError)."""
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
