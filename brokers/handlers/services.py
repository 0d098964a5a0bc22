"""What a handler may use: the narrow services the composition roots hand to `route(...)`.

Owns: the protocols a handler sees instead of the broker — the replica side (`Replicas`: a
partition by name; `AppendWaiter`: park until an append or high-watermark move), the log
directory (`LogDirs`), topic administration (`TopicAdmin`: the standalone registry or the
ZooKeeper admin), the metadata view (`MetadataView`), the group side (`GroupService`: the
coordinator and its offsets topic), the transaction side (`TransactionService`: the
transaction coordinator and `__transaction_state`), producer ids (`ProducerIdSource`) — and
`HandlerServices`, the one bundle `brokers.handlers.build_route_table` takes apart so that each
route receives only the services it uses. Static settings (`BrokerConfig`), the clock (`Clock`) and the per-topic
counters (`BrokerTopicMetrics`) are plain values of lower layers and passed as they are.

Which handler gets what (the route table's wiring, `brokers.handlers.build_route_table`):
| handler                                  | services                                      |
| produce                                  | replicas, purgatory, clock, topic_metrics, txn_verifier |
| fetch                                    | replicas, purgatory, clock, topic_metrics, config |
| list_offsets, offset_for_leader_epoch    | replicas                                      |
| delete_records                           | metadata, replicas                            |
| metadata                                 | config, metadata, topics                      |
| describe_cluster                         | metadata                                      |
| describe_topic_partitions                | config, metadata                              |
| create_topics, create_partitions         | config, metadata, topics, zookeeper_mode      |
| delete_topics, describe_configs          | config, metadata, topics                      |
| alter_configs, incremental_alter_configs | config, metadata, topics                      |
| describe_log_dirs                        | log_dirs                                      |
| init_producer_id                         | producer_ids, transactions                    |
| find_coordinator                         | groups, transactions, metadata                |
| add_partitions/add_offsets_to_txn, end_txn | transactions (add_partitions: + metadata)   |
| describe/list_transactions               | transactions                                  |
| offset_commit, offset_delete             | groups, metadata                              |
| txn_offset_commit                        | groups, metadata, txn_verifier                |
| write_txn_markers (inter-broker)         | replicas, purgatory, clock, groups (the marker callback) |
| join/sync/heartbeat/leave/list/describe/delete groups, offset_fetch | groups             |
| api_versions                             | the route table itself                        |
ZooKeeper mode's control and controller routes are added by `brokers.app.zk_mode` (fence,
metadata cache, replica manager, controller). Protocols only; no state. Thread-safety is that of
the objects behind them (all live on the broker's event loop).
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from brokers.common.clock import Clock
from brokers.common.config import BrokerConfig
from brokers.coordinator.group_coordinator import GroupCoordinator
from brokers.coordinator.transactions.coordinator import TransactionCoordinator
from brokers.handlers.topic_metrics import BrokerTopicMetrics
from brokers.replication.metadata_cache import BrokerEndpoint, PartitionMetadata, TopicMetadata
from brokers.replication.partition import Partition
from brokers.tiered.remote_log_manager import RemoteLogManager
from brokers.wire.errors import ErrorCode


class Replicas(Protocol):
    """The partitions this broker hosts (the replica manager)."""

    def get(self, topic: str, index: int) -> Partition:
        """The partition, or UnknownTopicOrPartitionError."""
        ...

    def find(self, topic: str, index: int) -> Partition | None: ...


class AppendWaiter(Protocol):
    """Parks a request until one of `keys` (topic, partition) sees an append or a high-watermark
    move, or `timeout` seconds pass (the purgatory)."""

    async def wait(self, keys: Iterable[Hashable], timeout: float) -> bool: ...


class HostedLog(Protocol):
    """What DescribeLogDirs reports of one partition's log."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def size_bytes(self) -> int: ...


class LogDirs(Protocol):
    """The log directory and the partitions' logs in it (the log manager's, and an empty one for
    each partition led before its log is created: brokers/app/runtime.py's `HostedLogs`)."""

    @property
    def log_dir(self) -> Path: ...

    def logs(self) -> Iterable[HostedLog]: ...


class TopicAdmin(Protocol):
    """Creating, growing, deleting and configuring topics: the standalone registry or, in
    ZooKeeper mode, the admin that writes Kafka's znodes."""

    def batch(self) -> AbstractContextManager[None]: ...

    async def flushed(self) -> None:
        """Return once the writes of every batch closed so far are durable (a handler awaits
        it before answering: the standalone registry fsyncs on a writer thread)."""

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
        *,
        validate_only: bool = False,
        assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> TopicMetadata | None: ...

    async def create_topic_async(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
        *,
        validate_only: bool = False,
        assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> TopicMetadata | None:
        """`create_topic` for CreateTopics: the standalone registry makes a small topic's logs
        first, a log per event-loop turn."""

    def create_partitions(
        self,
        name: str,
        count: int,
        *,
        validate_only: bool = False,
        assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> None: ...

    def delete_topic(self, name: str) -> None: ...

    def set_topic_configs(
        self, name: str, configs: Mapping[str, str | None], *, validate_only: bool = False
    ) -> None: ...


class MetadataView(Protocol):
    """This broker's view of the cluster (the metadata cache), read by handlers."""

    @property
    def cluster_id(self) -> str: ...

    @property
    def controller_id(self) -> int: ...

    @property
    def brokers(self) -> Mapping[int, BrokerEndpoint]: ...

    @property
    def topics(self) -> Mapping[str, TopicMetadata]: ...

    def topic(self, name: str) -> TopicMetadata | None: ...

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None: ...

    def topics_with_prefix(self, prefix: str) -> Iterator[TopicMetadata]: ...

    def sorted_topic_names(self) -> Sequence[str]: ...

    def topic_name_like(self, name: str) -> str | None: ...

    def replica_load(self) -> Mapping[int, int]: ...

    def partition(self, topic: str, index: int) -> PartitionMetadata | None: ...


class OffsetsTopicAdmin(Protocol):
    def ensure_created(self) -> None:
        """Create `__consumer_offsets` on first use (coordinator errors when it cannot be)."""
        ...


class GroupService(Protocol):
    """The group coordinator and the offsets topic it keeps its state in."""

    @property
    def coordinator(self) -> GroupCoordinator: ...

    @property
    def topic(self) -> OffsetsTopicAdmin: ...


class StateTopicAdmin(Protocol):
    def ensure_created(self) -> None:
        """Create `__transaction_state` on first use (StateTopicError when it cannot be)."""
        ...


class TransactionService(Protocol):
    """The transaction coordinator and the state topic it keeps transactional ids in."""

    @property
    def coordinator(self) -> TransactionCoordinator: ...

    @property
    def topic(self) -> StateTopicAdmin: ...


class TxnVerifier(Protocol):
    """KIP-890 part 1: asks the transaction coordinator (AddPartitionsToTxn v4 verify_only)
    whether partitions are in the producer's ongoing transaction at that epoch."""

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[tuple[str, int]],
        *,
        add: bool = False,
    ) -> dict[tuple[str, int], ErrorCode]:
        """The coordinator's code per partition; COORDINATOR_NOT_AVAILABLE / NETWORK_EXCEPTION
        when it cannot be asked. `add` (KIP-890 part 2, a TV2 producer): add the partitions
        to the transaction rather than only verify them."""
        ...


class ProducerIdSource(Protocol):
    def next_producer_id(self) -> int: ...


@dataclass(frozen=True, slots=True)
class HandlerServices:
    """Every service some handler uses; `build_route_table` gives each route its part."""

    config: BrokerConfig
    clock: Clock
    metadata: MetadataView
    replicas: Replicas
    purgatory: AppendWaiter
    topics: TopicAdmin
    groups: GroupService
    transactions: TransactionService
    producer_ids: ProducerIdSource
    log_dirs: LogDirs
    topic_metrics: BrokerTopicMetrics
    zookeeper_mode: bool  # replicas may go to other brokers (else every replica is this broker)
    txn_verifier: TxnVerifier | None = None  # None: transaction.partition.verification.enable=false
    tiered: RemoteLogManager | None = None  # None: remote.log.storage.system.enable=false
