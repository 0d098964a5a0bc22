"""A coordinator's internal topic over the broker's partitions (`__consumer_offsets`,
`__transaction_state`).

Owns: `InternalTopicSpec` (name, partitions, replication factor and the property that sets it,
topic configs, acks, commit timeout), `TopicErrors` (the coordinator's own exception classes
for the three outcomes a write can have besides success) and `BrokerInternalTopic`, which both
coordinators' topic protocols (`OffsetsTopic`, `StateTopic`) are satisfied by: it creates the
topic on first use, appends as leader and waits until the write is committed, maps partition
errors to the coordinator's errors, and reads a partition back batch by batch up to the log end
seen when the read starts; `LeadershipFollower`, which makes a coordinator load and unload the
partitions this broker leads.

Creation: standalone, the replication factor (and a `min.insync.replicas` in the configs) is
capped by the live brokers, so a single broker works out of the box; in ZooKeeper mode, as
Kafka's createInternalTopic, the topic is refused (not available, the client retries) while
fewer brokers are alive than the factor. A write is committed once the ISR has it (the high
watermark passes it; for acks=-1 also with at least min.insync.replicas in the ISR, else
NOT_ENOUGH_REPLICAS_AFTER_APPEND → not available); leadership lost meanwhile (or regained: a new
term) fails it with not-coordinator, since the record may be truncated. Runs on the event loop;
not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from brokers.common.clock import Clock
from brokers.common.descriptors import DescriptorLimitError
from brokers.controller.errors import ControllerError
from brokers.handlers.services import MetadataView, TopicAdmin
from brokers.log import errors as log_errors
from brokers.log.errors import LogError, StorageError
from brokers.records.batch import iter_headers
from brokers.records.errors import RecordTooLargeError
from brokers.records.prepare import prepare_own_append
from brokers.replication import errors as replication_errors
from brokers.replication.isr import AckOutcome
from brokers.replication.partition import Partition
from brokers.replication.replica_manager import ReplicaManager
from brokers.server.purgatory import Purgatory

log = logging.getLogger("pier.coordinator")
READ_CHUNK_BYTES = 1 << 20
MIN_INSYNC = "min.insync.replicas"


@dataclass(frozen=True, slots=True)
class InternalTopicSpec:
    name: str
    partitions: int
    replication_factor: int
    replication_setting: str  # the property named when too few brokers are alive
    configs: Mapping[str, str] = field(default_factory=dict)
    acks: int = 1  # -1: min.insync.replicas is checked before and after the append
    commit_timeout_s: float = 5.0  # Kafka's offsets.commit.timeout.ms


@dataclass(frozen=True, slots=True)
class TopicErrors:
    """The coordinator's exception classes for a failed write."""

    not_coordinator: type[Exception]  # leadership lost, log closed or failed
    not_available: type[Exception]  # too few replicas, not committed in time, not creatable
    too_large: type[Exception]
    fenced_producer: type[Exception] | None = None  # a transactional batch of a stale epoch


def _append_as_coordinator(replica: Partition, batch: bytes, acks: int) -> int:
    """Kafka's AppendOrigin.COORDINATOR: the client-only batch rules do not apply (a
    TxnOffsetCommit batch carries a producer id without a sequence). The coordinators build
    their batches themselves: only the topic's limits are checked (`prepare_own_append`)."""
    policy = replica.append_policy(acks, origin_client=False)
    return replica.append_prepared(prepare_own_append(batch, policy), acks).last_offset


class BrokerInternalTopic:
    def __init__(
        self,
        spec: InternalTopicSpec,
        errors: TopicErrors,
        *,
        metadata: MetadataView,
        topics: TopicAdmin,
        replicas: ReplicaManager,
        purgatory: Purgatory,
        clock: Clock,
        zookeeper_mode: bool,
    ) -> None:
        self.spec = spec
        self._errors = errors
        self._metadata = metadata
        self._topics = topics
        self._replicas = replicas
        self._purgatory = purgatory
        self._clock = clock
        self._zookeeper_mode = zookeeper_mode

    def partition_count(self) -> int:
        topic = self._metadata.topic(self.spec.name)
        return len(topic.partitions) if topic is not None else self.spec.partitions

    def ensure_created(self) -> None:
        """Create the topic on first use; `not_available` when it cannot be (yet)."""
        name = self.spec.name
        if self._metadata.topic(name) is not None:
            return
        replication = self._replication_factor()
        configs: dict[str, str | None] = dict(self.spec.configs)
        if not self._zookeeper_mode and MIN_INSYNC in configs:
            configs[MIN_INSYNC] = str(min(int(configs[MIN_INSYNC] or 1), replication))
        with contextlib.suppress(replication_errors.TopicExistsError):
            try:
                self._topics.create_topic(name, self.spec.partitions, replication, configs)
            except ControllerError as exc:  # ZooKeeper unreachable: FindCoordinator retries
                raise self._errors.not_available(str(exc)) from exc
            except (DescriptorLimitError, StorageError) as exc:
                # Out of open files (or a disk fault) creating the internal topic: the client
                # retries FindCoordinator, as Kafka's answer while the topic cannot be created.
                raise self._errors.not_available(f"{name} cannot be created: {exc}") from exc
            log.info(
                "event=internal_topic_created topic=%s partitions=%d replication_factor=%d",
                name,
                self.partition_count(),
                replication,
            )

    def _replication_factor(self) -> int:
        wanted = self.spec.replication_factor
        alive = len(self._metadata.brokers)
        if not self._zookeeper_mode:
            return min(wanted, alive)
        if alive < wanted:  # Kafka's createInternalTopic refuses rather than under-replicate
            raise self._errors.not_available(
                f"{self.spec.name} needs {wanted} live brokers "
                f"({self.spec.replication_setting}), {alive} alive"
            )
        return wanted

    async def append(self, partition: int, batch: bytes) -> int:
        last_offset, uncommitted = self.start_append(partition, batch)
        if uncommitted is not None:
            await uncommitted
        return last_offset

    def start_append(
        self, partition: int, batch: bytes
    ) -> tuple[int, Coroutine[Any, Any, None] | None]:
        """Append `batch` as leader now; its last offset and, unless the ISR has it already,
        what to await until it does (raising as `append`). Errors of the append itself raise
        here, at once."""
        errors = self._errors
        try:
            self.ensure_created()
            replica = self._replicas.get(self.spec.name, partition)
            term = replica.leadership_term
            last_offset = _append_as_coordinator(replica, batch, self.spec.acks)
        except log_errors.InvalidProducerEpochError as exc:
            raise (errors.fenced_producer or errors.not_coordinator)(str(exc)) from exc
        except (replication_errors.NotLeaderOrFollowerError, LogError) as exc:
            raise errors.not_coordinator(str(exc)) from exc
        except RecordTooLargeError as exc:
            raise errors.too_large(str(exc)) from exc
        except replication_errors.ReplicationError as exc:
            raise errors.not_available(str(exc)) from exc
        if self._outcome(replica, last_offset) is AckOutcome.DONE:  # the leader is the ISR
            return last_offset, None
        return last_offset, self._committed(replica, term, last_offset)

    async def _committed(self, replica: Partition, term: int, last_offset: int) -> None:
        """acks=all for coordinator writes: answer only once the ISR has the batch. Leadership
        lost meanwhile (even if regained) fails it; an epoch bump while leading (an ISR change)
        does not, as Kafka's delayed produce."""
        clock = self._clock
        deadline = clock.monotonic() + self.spec.commit_timeout_s
        key = (replica.topic, replica.index)
        where = f"{self.spec.name}-{replica.index}"
        while True:
            if not replica.is_leader or replica.leadership_term != term:
                raise self._errors.not_coordinator(f"{where}: leadership moved")
            outcome = self._outcome(replica, last_offset)
            if outcome is AckOutcome.DONE:
                return
            if outcome is AckOutcome.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
                raise self._errors.not_available(f"{where}: ISR below min.insync.replicas")
            remaining = deadline - clock.monotonic()
            if remaining <= 0:
                raise self._errors.not_available(f"{where} not committed")
            await self._purgatory.wait([key], remaining)

    def _outcome(self, replica: Partition, last_offset: int) -> AckOutcome:
        if self.spec.acks == -1:
            return replica.acks_all_outcome(last_offset + 1)
        return AckOutcome.DONE if replica.high_watermark > last_offset else AckOutcome.PENDING

    def read_batches(self, partition: int, from_offset: int) -> Iterator[bytes]:
        replica = self._replicas.find(self.spec.name, partition)
        if replica is None:
            return
        log_ = replica.log
        offset = max(from_offset, log_.log_start_offset)
        end = log_.log_end_offset  # while loading nothing is appended: the coordinator refuses
        while offset < end:
            read = log_.read(offset, READ_CHUNK_BYTES, max_offset=end)
            if read.region is None or read.next_offset <= offset:
                return
            data = read.region.read()
            for position, header in iter_headers(data):
                yield data[position : position + header.size]
            offset = read.next_offset

    def high_watermark(self, partition: int) -> int:
        replica = self._replicas.find(self.spec.name, partition)
        return -1 if replica is None else replica.high_watermark


class PartitionCoordinator(Protocol):
    """What `LeadershipFollower` drives: the group or the transaction coordinator."""

    async def load_partitions(self, partitions: Iterable[int]) -> None: ...

    def on_election(self, partition: int, leader_epoch: int) -> None: ...

    def on_resignation(self, partition: int, leader_epoch: int | None = None) -> None: ...

    async def wait_loaded(self) -> None: ...


class LeadershipFollower:
    """A coordinator following the leadership of its internal topic's partitions (Kafka's
    `onLeadershipChange` → `onElection` / `onResignation`): standalone, `start` loads every
    partition (this broker leads them all); in ZooKeeper mode nothing is the coordinator's until
    a LeaderAndIsr makes this broker leader of a partition, and becoming a follower or a
    stopped/deleted replica unloads it."""

    def __init__(
        self,
        topic: str,
        coordinator: PartitionCoordinator,
        replicas: ReplicaManager,
        *,
        zookeeper_mode: bool,
        event: str,
    ) -> None:
        self._topic = topic
        self._coordinator = coordinator
        self._zookeeper_mode = zookeeper_mode
        self._event = event
        self._loading: asyncio.Task[None] | None = None
        replicas.on_leadership_change(self._on_leadership_change)

    def start(self, partition_count: int) -> None:
        if self._zookeeper_mode:
            return
        loads = self._coordinator.load_partitions(range(partition_count))
        self._loading = asyncio.ensure_future(loads)

    def _on_leadership_change(
        self, topic: str, partition: int, is_leader: bool, leader_epoch: int
    ) -> None:
        if topic != self._topic:
            return
        log.info(
            "event=%s partition=%d leader=%s epoch=%d",
            self._event,
            partition,
            is_leader,
            leader_epoch,
        )
        if is_leader:
            self._coordinator.on_election(partition, leader_epoch)
        else:
            self._coordinator.on_resignation(partition, leader_epoch)

    async def stop(self) -> None:
        """Cancel the start-up load (the coordinator's own shutdown follows)."""
        if self._loading is not None and not self._loading.done():
            self._loading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loading

    async def loaded(self) -> None:
        """Until the start-up load and any load begun since finished (tests, benchmarks)."""
        if self._loading is not None:
            await asyncio.shield(self._loading)
        await self._coordinator.wait_loaded()
