"""The partitions this broker hosts, their leadership, and the high-watermark checkpoint.

Owns: `ReplicaManager` — partition lookup for produce/fetch, creation and deletion through the
log manager, `replication-offset-checkpoint` (leaders' and followers' high watermarks), and the
controller's orders (Kafka's `becomeLeaderOrFollower` / `stopReplicas`): `apply_leader_and_isr`
makes partitions leaders or followers and starts/stops their fetchers (`FetcherManager`, one per
leader broker); `shrink_isrs` is the periodic ISR check (every replica.lag.time.max.ms / 2, run by
the broker in cluster mode); ISR changes go through the injected `isr_writer`. Appends and high
watermark moves notify `on_append` so parked fetches and acks=all produces wake. Leadership
changes are reported to `on_leadership_change` listeners (the group coordinator follows them).

Deferred leaders (ZooKeeper mode): a partition whose only replica is this broker and that has
no log here yet is led without one (`DeferredLeader`: its config and leadership, ~0.3 KiB instead
of a log's ~10 KiB of objects, three files and a directory); the log is created and made leader,
its epoch checkpoint written as `become_leader` always does, at the partition's first lookup
(`find`/`get`: a produce, fetch, ListOffsets, ...), so nothing that reads a log sees the
difference. With one replica no follower fetches, no ISR changes and nothing is under-replicated;
it holds no data, so a crash loses nothing and a restart defers it again from the controller's
LeaderAndIsr. Followers and leaders with followers create their logs at once, as Kafka does.
The gauges (metrics.py) and DescribeLogDirs (brokers/app/runtime.py) count deferred leaders;
`topic_config_changed` keeps their configs current (brokers/app/zk_mode.py wires it).

Equal leader epochs: a LeaderAndIsr at the partition's current epoch naming the same leader only
refreshes ISR, replicas and znode version (never older than ours) — the controller resending
state after a resync must not restart leadership. Older epochs are refused (fenced).
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import collections
import itertools
import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from brokers.client.config import ClientConfig
from brokers.client.metadata import TopicPartition as FetchedTopicPartition
from brokers.common.clock import Clock
from brokers.log.checkpoints import read_offsets, write_offsets
from brokers.log.config import LogConfig
from brokers.log.errors import InvalidConfigError
from brokers.log.log import Log
from brokers.log.log_manager import LogManager
from brokers.replication.errors import (
    FencedLeaderEpochError,
    StaleControllerEpochError,
    UnknownTopicOrPartitionError,
)
from brokers.replication.fetcher_manager import FetcherManager
from brokers.replication.isr_writer import IsrWriter
from brokers.replication.partition import (
    DEFAULT_REPLICA_LAG_TIME_MAX_MS,
    NO_LEADER,
    LeadershipState,
    Partition,
)
from brokers.replication.replica_state import ReplicaState

HW_CHECKPOINT = "replication-offset-checkpoint"
TopicPartition = tuple[str, int]
# (topic, partition, is_leader, leader_epoch) after a leadership change: Kafka's
# onLeadershipChange callback, through which the group coordinator follows `__consumer_offsets`.
LeadershipListener = Callable[[str, int, bool, int], None]
# (topic, topic id) → the overrides a new log starts with; None: keep the request's copy.
NewLogOverrides = Callable[[str, uuid.UUID], Mapping[str, str] | None]
# (old ISR, new ISR, written?) per ISR write.
IsrUpdateObserver = Callable[[list[int], list[int], bool], None]
log = logging.getLogger(__name__)


@dataclass(slots=True)
class DeferredLeader:
    """A single-replica partition led here whose log is created at its first lookup (its
    leadership state, replicas = ISR = [this broker], is made then: ~0.1 KiB each until)."""

    config: LogConfig
    topic_id: uuid.UUID
    leader_epoch: int
    zk_version: int


@dataclass(frozen=True)
class PartitionStateUpdate:
    """One partition of a LeaderAndIsr request, as the controller decided it."""

    topic: str
    partition: int
    topic_id: uuid.UUID
    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    zk_version: int
    configs: dict[str, str]


class ReplicaManager:
    def __init__(
        self,
        log_manager: LogManager,
        log_dir: Path,
        *,
        node_id: int,
        clock: Clock,
        on_append: Callable[[TopicPartition], None],
        isr_writer: IsrWriter | None = None,
        new_log_overrides: NewLogOverrides | None = None,
        isr_update_observer: IsrUpdateObserver | None = None,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        broker_properties: Mapping[str, str] | None = None,
        client_config: ClientConfig | None = None,
        fetch_backoff_s: float = 1.0,  # replica.fetch.backoff.ms
    ) -> None:
        self._logs = log_manager
        self._checkpoint_path = log_dir / HW_CHECKPOINT
        self._node_id = node_id
        self._clock = clock
        self._on_append = on_append
        self.isr_writer = isr_writer
        # ZooKeeper mode: a new log's topic overrides, read from ZooKeeper as Kafka's
        # Partition.createLog does (the request's copy may predate this broker's metadata).
        self.new_log_overrides = new_log_overrides
        # Metrics hook (brokers/replication/metrics.py): (old ISR, new ISR, written?) per ISR write.
        self.isr_update_observer = isr_update_observer
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._broker_properties = dict(broker_properties or {})
        self.controller_epoch = -1
        self._partitions: dict[TopicPartition, Partition] = {}
        # Registered, log not created yet: standalone's (a config) and deferred leaders.
        self._deferred: dict[TopicPartition, LogConfig | DeferredLeader] = {}
        self._saved_high_watermarks: dict[TopicPartition, int] = {}
        self._leadership_listeners: list[LeadershipListener] = []
        # Registered partitions per topic, and who is told when a topic has none left here.
        self._hosted: collections.Counter[str] = collections.Counter()
        self._topic_gone_listeners: list[Callable[[str], None]] = []
        self.fetchers = FetcherManager(
            node_id=node_id,
            clock=clock,
            on_high_watermark=self._on_follower_high_watermark,
            client_config=client_config,
            backoff_s=fetch_backoff_s,
        )

    def startup(self) -> None:
        self._saved_high_watermarks = read_offsets(self._checkpoint_path)
        for log_ in self._logs.logs():
            self._register(log_)

    def _register(self, log_: Log) -> Partition:
        key = (log_.topic, log_.partition)
        partition = Partition(
            log_,
            node_id=self._node_id,
            clock=self._clock,
            high_watermark=self._saved_high_watermarks.get(key, 0),
            on_high_watermark=lambda p: self._on_append((p.topic, p.index)),
            replica_lag_time_max_ms=self.replica_lag_time_max_ms,
            awaiting_leadership=self.isr_writer is not None,  # ZooKeeper mode: wait for orders
        )
        if key not in self._partitions:
            self._hosted[key[0]] += 1
        self._partitions[key] = partition
        return partition

    def get(self, topic: str, index: int) -> Partition:
        partition = self.find(topic, index)
        if partition is None:
            raise UnknownTopicOrPartitionError(f"{topic}-{index}")
        return partition

    def find(self, topic: str, index: int) -> Partition | None:
        partition = self._partitions.get((topic, index))
        if partition is None and (topic, index) in self._deferred:
            return self._create_deferred_one(topic, index)
        return partition

    def _create_deferred_one(self, topic: str, index: int) -> Partition:
        deferred = self._deferred[(topic, index)]
        if isinstance(deferred, LogConfig):
            return self.create(topic, index, deferred)
        partition = self._register(self._logs.create(topic, index, deferred.config))
        try:
            partition.topic_id = deferred.topic_id.bytes
            partition.isr_change = None if self.isr_writer is None else self._write_isr
            state = LeadershipState(
                self._node_id,
                deferred.leader_epoch,
                [self._node_id],
                [self._node_id],
                deferred.zk_version,
            )
            partition.become_leader(state)  # its epoch checkpoint, as at LeaderAndIsr
        except BaseException:
            self._unregister(topic, index)  # still deferred: the next lookup retries
            raise
        self._deferred.pop((topic, index), None)
        return partition

    def topic_config_changed(self, topic: str, overrides: Mapping[str, str]) -> None:
        """A topic's overrides changed (ZooKeeper's `/config/changes`): its deferred leaders'
        logs will start with them, as its created logs switch to them (Kafka's
        updateTopicConfig). Invalid overrides are ignored, as the topic configs ignore them."""
        deferred = [d for (t, _), d in self._deferred.items() if t == topic]
        leaders = [d for d in deferred if isinstance(d, DeferredLeader)]
        if not leaders:
            return
        try:
            config = LogConfig.from_properties(overrides, self._broker_properties)
        except InvalidConfigError:
            return
        for leader in leaders:
            leader.config = config

    def deferred_leaders(self) -> list[tuple[TopicPartition, DeferredLeader]]:
        """The partitions led here without a log yet (a copy: the metrics thread reads it)."""
        return [(k, d) for k, d in list(self._deferred.items()) if isinstance(d, DeferredLeader)]

    def partitions(self) -> Iterator[Partition]:
        return iter(list(self._partitions.values()))

    def create(self, topic: str, index: int, config: LogConfig) -> Partition:
        existing = self._partitions.get((topic, index))
        if existing is not None:
            return existing
        partition = self._register(self._logs.create(topic, index, config))
        self._deferred.pop((topic, index), None)
        return partition

    async def prepare_logs(self, topic: str, indexes: range, config: LogConfig) -> None:
        """Make a new topic's logs a turn at a time for `create` to take (`LogManager.prepare`);
        `drop_prepared` removes those a failed creation left."""
        await self._logs.prepare(topic, indexes, config)

    def drop_prepared(self, topic: str) -> None:
        self._logs.drop_prepared(topic)

    def defer_create(self, topic: str, index: int, config: LogConfig) -> None:
        """Register a partition whose log is created later: on its first lookup (`find`/`get`)
        or by `create_deferred` — Kafka's brokers likewise create logs after the metadata that
        names them is published. `partitions()` leaves deferred partitions out (no log yet)."""
        if (topic, index) not in self._partitions:
            self._deferred[(topic, index)] = config

    @property
    def deferred_count(self) -> int:
        return len(self._deferred)

    def create_deferred(self, limit: int) -> int:
        """Create up to `limit` deferred logs; returns how many are still deferred. A log that
        fails to open stays deferred (its next lookup raises the error to that caller)."""
        for topic, index in list(itertools.islice(self._deferred, limit)):
            self._create_deferred_one(topic, index)
        return len(self._deferred)

    def delete(self, topic: str, index: int, *, sync: bool = True) -> None:
        """Drop the partition and retire its log (`sync=False`: the caller fsyncs the log dir
        once, `sync_log_dir`, for many partitions)."""
        deferred = self._deferred.pop((topic, index), None)
        if isinstance(deferred, DeferredLeader):
            self._leadership_changed(topic, index, False, deferred.leader_epoch)
        self.fetchers.unfollow(FetchedTopicPartition(topic, index))
        deleted = self._unregister(topic, index)
        if deleted is not None:
            self._logs.delete(topic, index, sync=sync)
            self._leadership_changed(topic, index, False, deleted.leader_epoch)

    def _unregister(self, topic: str, index: int) -> Partition | None:
        """Forget the partition; the topic-gone listeners hear of its topic once no partition of
        it is left here (Kafka's maybeRemoveTopicMetrics)."""
        partition = self._partitions.pop((topic, index), None)
        if partition is None:
            return None
        self._hosted[topic] -= 1
        if self._hosted[topic] <= 0:
            del self._hosted[topic]
            for listener in self._topic_gone_listeners:
                try:
                    listener(topic)
                except Exception as exc:  # a listener's failure must not undo the deletion
                    log.error("event=topic_gone_listener_failed topic=%s error=%r", topic, exc)
        return partition

    def sync_log_dir(self) -> None:
        self._logs.sync_log_dir()

    def on_topic_gone(self, listener: Callable[[str], None]) -> None:
        """Call `listener(topic)` once the last partition of `topic` hosted here is deleted."""
        self._topic_gone_listeners.append(listener)

    def on_leadership_change(self, listener: LeadershipListener) -> None:
        """Call `listener` after each become-leader / become-follower / stop / delete."""
        self._leadership_listeners.append(listener)

    def _leadership_changed(self, topic: str, index: int, is_leader: bool, epoch: int) -> None:
        for listener in self._leadership_listeners:
            try:
                listener(topic, index, is_leader, epoch)
            except Exception as exc:  # a listener's failure must not undo the controller's order
                log.error("leadership listener failed for %s-%d: %r", topic, index, exc)

    def checkpoint_high_watermarks(self) -> None:
        offsets = {key: p.high_watermark for key, p in self._partitions.items()}
        write_offsets(self._checkpoint_path, offsets)

    # -- the controller's orders ----------------------------------------------------------------

    def apply_leader_and_isr(
        self,
        controller_epoch: int,
        updates: list[PartitionStateUpdate],
        leaders: dict[int, tuple[str, int]],
    ) -> dict[TopicPartition, Exception | None]:
        """LeaderAndIsr: per partition None, or the error it was refused with."""
        keys = [(u.topic, u.partition) for u in updates]
        if controller_epoch < self.controller_epoch:
            return {key: StaleControllerEpochError(f"epoch {controller_epoch}") for key in keys}
        self.controller_epoch = controller_epoch
        results: dict[TopicPartition, Exception | None] = {}
        for update in updates:
            try:
                self._apply(update, leaders)
                results[(update.topic, update.partition)] = None
            except Exception as exc:  # one partition's failure does not stop the others
                log.warning("LeaderAndIsr %s-%d: %r", update.topic, update.partition, exc)
                results[(update.topic, update.partition)] = exc
        return results

    def _apply(self, update: PartitionStateUpdate, leaders: Mapping[int, tuple[str, int]]) -> None:
        if self._defer_leader(update):
            return
        partition = self.find(update.topic, update.partition)
        if partition is None:
            partition = self.create(update.topic, update.partition, self._new_log_config(update))
        current = partition.state
        if partition.replicated and update.leader_epoch < current.leader_epoch:
            raise FencedLeaderEpochError(
                f"{update.topic}-{update.partition}: leader epoch {update.leader_epoch} "
                f"is older than {current.leader_epoch}"
            )
        partition.topic_id = update.topic_id.bytes
        partition.isr_change = None if self.isr_writer is None else self._write_isr
        tp = FetchedTopicPartition(update.topic, update.partition)
        same_epoch = partition.replicated and update.leader_epoch == current.leader_epoch
        if same_epoch and update.leader == current.leader_id:
            self._refresh(partition, update)
            if partition.is_leader or self.fetchers.fetcher_for(tp) is not None:
                return
        state = LeadershipState(
            update.leader,
            update.leader_epoch,
            list(update.replicas),
            list(update.isr),
            update.zk_version,
        )
        if update.leader == self._node_id:
            self.fetchers.unfollow(tp)
            partition.become_leader(state)
            self._leadership_changed(update.topic, update.partition, True, update.leader_epoch)
            return
        partition.become_follower(state)
        self._leadership_changed(update.topic, update.partition, False, update.leader_epoch)
        address = leaders.get(update.leader)
        if address is None:  # no leader (or an unknown one): wait for the next LeaderAndIsr
            self.fetchers.unfollow(tp)
            return
        self.fetchers.follow(
            tp,
            partition.log,
            leader=update.leader,
            address=address,
            leader_epoch=update.leader_epoch,
            high_watermark=partition.high_watermark,
        )

    def _new_log_config(self, update: PartitionStateUpdate) -> LogConfig:
        overrides: Mapping[str, str] = update.configs
        found = None
        if self.new_log_overrides is not None:
            found = self.new_log_overrides(update.topic, update.topic_id)
        if found is not None:  # None: unknown now (ZooKeeper away); the request's copy
            overrides = found
        return LogConfig.from_properties(overrides, self._broker_properties)

    def _defer_leader(self, update: PartitionStateUpdate) -> bool:
        """Lead a single-replica partition with no log here yet without creating it (see the
        module docstring); False when the update is applied to a created partition instead."""
        key = (update.topic, update.partition)
        earlier = self._deferred.get(key)
        if (
            self.isr_writer is None  # standalone: its own deferral (defer_create)
            or key in self._partitions
            or isinstance(earlier, LogConfig)
            or update.leader != self._node_id
            or list(update.replicas) != [self._node_id]
        ):
            return False
        if earlier is None:
            config = self._new_log_config(update)
        elif update.leader_epoch < earlier.leader_epoch:
            raise FencedLeaderEpochError(
                f"{update.topic}-{update.partition}: leader epoch {update.leader_epoch} "
                f"is older than {earlier.leader_epoch}"
            )
        elif update.leader_epoch == earlier.leader_epoch:
            # a refresh (see _refresh): the znode version only grows
            earlier.zk_version = max(earlier.zk_version, update.zk_version)
            return True
        else:
            config = earlier.config
        self._deferred[key] = DeferredLeader(
            config, update.topic_id, update.leader_epoch, update.zk_version
        )
        self.fetchers.unfollow(FetchedTopicPartition(update.topic, update.partition))
        self._leadership_changed(update.topic, update.partition, True, update.leader_epoch)
        return True

    @staticmethod
    def _refresh(partition: Partition, update: PartitionStateUpdate) -> None:
        state = partition.state
        if update.zk_version < state.zk_version:
            return
        state.replicas, state.zk_version = list(update.replicas), update.zk_version
        if partition.is_leader:
            partition.replace_isr(list(update.isr))
            for broker_id in update.replicas:
                if broker_id != state.leader_id:
                    partition.followers.setdefault(broker_id, ReplicaState(broker_id))
        else:
            state.isr = list(update.isr)

    def stop_replicas(
        self, partitions: list[TopicPartition], *, delete: bool
    ) -> dict[TopicPartition, Exception | None]:
        """StopReplica: stop fetching; the replica leads nothing (NOT_LEADER_OR_FOLLOWER to
        clients) until a LeaderAndIsr; `delete` also removes the log."""
        results: dict[TopicPartition, Exception | None] = {}
        for topic, index in partitions:
            try:
                self.fetchers.unfollow(FetchedTopicPartition(topic, index))
                if delete:  # before any lookup: a deferred log is never created just to go
                    self.delete(topic, index)
                elif (partition := self.find(topic, index)) is not None:
                    state = partition.state
                    partition.become_follower(
                        LeadershipState(
                            NO_LEADER,
                            state.leader_epoch,
                            state.replicas,
                            state.isr,
                            state.zk_version,
                        )
                    )
                    self._leadership_changed(topic, index, False, state.leader_epoch)
                results[(topic, index)] = None
            except Exception as exc:
                results[(topic, index)] = exc
        return results

    # -- ISR maintenance and follower high watermarks -------------------------------------------

    @property
    def isr_shrink_interval_ms(self) -> int:
        """Kafka schedules isr-expiration at half of replica.lag.time.max.ms."""
        return max(self.replica_lag_time_max_ms // 2, 1)

    async def shrink_isrs(self) -> None:
        now = self._clock.time_ms()
        for partition in self.partitions():
            partition.maybe_shrink_isr(now)

    async def _write_isr(self, partition: Partition, isr: list[int]) -> int | None:
        assert self.isr_writer is not None
        state = partition.state
        old_isr = list(state.isr)
        version: int | None = None
        try:
            version = await self.isr_writer.write_isr(
                partition.topic,
                partition.index,
                state.leader_epoch,
                isr,
                state.zk_version,
                self.controller_epoch,
            )
            return version
        finally:  # Kafka counts a shrink/expand once ZooKeeper took it, a failed update otherwise
            if self.isr_update_observer is not None:
                self.isr_update_observer(old_isr, isr, version is not None)

    def _on_follower_high_watermark(self, tp: FetchedTopicPartition, hw: int) -> None:
        partition = self._partitions.get((tp.topic, tp.partition))
        if partition is not None:
            partition.set_follower_high_watermark(hw)

    async def shutdown(self) -> None:
        """Stop the fetchers (before the logs close)."""
        await self.fetchers.shutdown()
