"""Topic administration in ZooKeeper mode: the `TopicAdmin` the handlers call as `broker.topics`.

Owns: `ZkTopicAdmin`, with `LocalTopicRegistry`'s methods, writing what Kafka's `AdminZkClient`
writes instead of touching logs: `/config/topics/<t>` then `/brokers/topics/<t>` (a rack-aware
assignment and a new topic id) for creation, `/admin/delete_topics/<t>` for deletion, a grown
assignment (conditional on the znode version) for CreatePartitions, `/config/topics/<t>` and a
`/config/changes` notification for config changes (Kafka's `AdminZkClient.changeTopicConfig`).
The controller's watches do the rest: partition states, LeaderAndIsr, UpdateMetadata (logs are
created on the replicas by LeaderAndIsr), and every broker's `ConfigChangeListener` applies a
config change to its logs. A topic queued for deletion keeps its znodes until every replica has
deleted its log: creating it again is TOPIC_ALREADY_EXISTS ("marked for deletion") and growing it
INVALID_TOPIC_EXCEPTION, as in Kafka. `topic_overrides` reads a topic's overrides from ZooKeeper
(what DescribeConfigs and IncrementalAlterConfigs start from, as Kafka's ZkConfigRepository).
Live brokers and their racks come from this broker's metadata cache (kept by UpdateMetadata).
Partition counts are capped as the standalone registry caps them (`TopicLimits`: per topic, and
per broker as far as the metadata cache knows): POLICY_VIOLATION beyond them. So is the open-file
limit, before anything is written (a topic is created whole or not at all): each broker given new
replicas must have descriptors for them. This broker's budget is exact; another broker's is
estimated from it — the same limit (a homogeneous fleet, as Kafka's KIP-578 assumes), less what
the partitions the metadata cache places there hold beyond this broker's own.
Errors are the replication package's, as the standalone registry raises, so the handlers' mapper
answers the same codes. The handlers' `TopicAdmin` interface is synchronous, so each call waits
for its ZooKeeper round trips on the event loop thread (admin requests are rare and each write is
one round trip; the produce/fetch path never comes here); the change notification is written
before the answer, so a failure to announce is reported to the client, and this broker applies
the change at once. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import Counter
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from typing import TypeVar

from brokers.common.descriptors import DescriptorBudget, promised_to
from brokers.controller import zk_paths
from brokers.controller.assignment import assign_replicas
from brokers.controller.errors import (
    InconsistentRackError,
    ZNodeExistsError,
    ZNodeFormatError,
    ZNodeMissingError,
    ZNodeVersionError,
    ZooKeeperUnavailableError,
)
from brokers.controller.errors import InvalidPartitionsError as AssignPartitionsError
from brokers.controller.errors import InvalidReplicationFactorError as AssignFactorError
from brokers.controller.state import ReplicaAssignment
from brokers.controller.zk_client import (
    ANY_VERSION,
    BLOCKING_TIMEOUT_S,
    CreateOp,
    SetOp,
    ZkClient,
)
from brokers.log.config import (
    LogConfig,
    validate_remote_storage_change,
    validate_topic_overrides,
)
from brokers.log.log_manager import LogManager
from brokers.replication.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    PolicyViolationError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from brokers.replication.local_topics import TopicLimits
from brokers.replication.metadata_cache import MetadataCache, PartitionMetadata, TopicMetadata
from brokers.replication.topic_names import check_partition_growth, new_topic_shape
from brokers.zk.config_changes import notify_topic_change_blocking
from brokers.zk.topic_configs import TopicConfigs

log = logging.getLogger("pier.zk_topics")
T = TypeVar("T")


class ZkTopicAdmin:
    def __init__(
        self,
        zk: ZkClient,
        metadata: MetadataCache,
        logs: LogManager,
        *,
        broker_defaults: Mapping[str, str],
        configs: TopicConfigs | None = None,
        limits: TopicLimits | None = None,
        descriptors: DescriptorBudget | None = None,
    ) -> None:
        self._zk = zk
        self._limits = limits or TopicLimits()
        self._descriptors = descriptors or DescriptorBudget()
        self._metadata = metadata
        self._logs = logs
        self._broker_defaults = dict(broker_defaults)
        self.configs = configs or TopicConfigs(zk, metadata, logs, broker_defaults=broker_defaults)
        self._creating: dict[str, asyncio.Future[None]] = {}  # creations awaiting ZooKeeper
        self._parents_made = False

    def load(self) -> None:
        """Nothing to load: the controller's UpdateMetadata fills the metadata cache."""

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        yield  # every write is its own ZooKeeper operation; nothing to defer

    async def flushed(self) -> None:
        """Nothing pending: each ZooKeeper write was acknowledged when it returned."""

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
        """`create_topic` with its ZooKeeper round trips awaited (each within
        `BLOCKING_TIMEOUT_S`): the loop serves every other request meanwhile (a request of 100
        topics held it ~0.4 s in blocking reads and writes, `validate_only` ones included). The
        config and the topic are written in one transaction, so a creation that loses a race
        for the name changes nothing; a second creation of a name this broker is creating waits
        for the first's outcome."""
        placed, overrides = self._checked(
            name, num_partitions, replication_factor, configs, assignment
        )
        if validate_only:
            await self._check_absent_async(name)
            return None
        while (earlier := self._creating.get(name)) is not None:
            await asyncio.shield(earlier)
        done = self._creating[name] = asyncio.get_running_loop().create_future()
        try:
            await self._check_absent_async(name)
            topic_id = uuid.uuid4()
            await self._write_topic_async(name, _assignment(topic_id, placed), overrides)
        finally:
            del self._creating[name]
            done.set_result(None)
        return _created(name, topic_id, placed, overrides)

    async def _check_absent_async(self, name: str) -> None:
        if await _within(self._zk.exists(zk_paths.delete_topic_path(name))):
            raise TopicExistsError(f"Topic '{name}' is marked for deletion.")
        if await _within(self._zk.exists(zk_paths.topic_path(name))):
            raise TopicExistsError(f"Topic '{name}' already exists.")

    async def _write_topic_async(
        self, name: str, assignment: bytes, overrides: Mapping[str, str]
    ) -> None:
        """The topic's config and assignment in one ZooKeeper transaction (a config left by an
        earlier topic of the name is replaced in it)."""
        if not self._parents_made:
            for parent in (zk_paths.CONFIG_TOPICS, zk_paths.BROKER_TOPICS):
                await _within(self._zk.ensure_path(parent))
            self._parents_made = True
        config_path = zk_paths.topic_config_path(name)
        config = zk_paths.encode_topic_config(overrides)
        topic = CreateOp(zk_paths.topic_path(name), assignment)
        try:
            await _within(self._zk.multi([CreateOp(config_path, config), topic]))
            return
        except ZNodeExistsError:
            if await _within(self._zk.exists(zk_paths.topic_path(name))):
                raise TopicExistsError(f"Topic '{name}' already exists.") from None
        try:
            await _within(self._zk.multi([SetOp(config_path, config, ANY_VERSION), topic]))
        except ZNodeExistsError:
            raise TopicExistsError(f"Topic '{name}' already exists.") from None

    def log_config(self, overrides: Mapping[str, str]) -> LogConfig:
        return LogConfig.from_properties(overrides, self._broker_defaults)

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
        placed, overrides = self._checked(
            name, num_partitions, replication_factor, configs, assignment
        )
        if name in self._creating:  # awaiting ZooKeeper in `create_topic_async`
            raise TopicExistsError(f"Topic '{name}' already exists.")
        self._check_absent(name)
        if validate_only:
            return None
        topic_id = uuid.uuid4()
        try:
            self._write_config(name, overrides)
            self._zk.create_blocking(zk_paths.topic_path(name), _assignment(topic_id, placed))
        except ZNodeExistsError:
            raise TopicExistsError(f"Topic '{name}' already exists.") from None
        return _created(name, topic_id, placed, overrides)

    def _checked(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
        assignment: Mapping[int, Sequence[int]] | None,
    ) -> tuple[dict[int, list[int]], dict[str, str]]:
        """A new topic's checks that need no ZooKeeper: its placement and overrides."""
        partitions, factor = new_topic_shape(
            name, num_partitions, replication_factor, self._metadata.topics, self._broker_defaults
        )
        self._check_topic_size(len(assignment) if assignment is not None else partitions)
        placed = (
            {p: list(r) for p, r in assignment.items()}
            if assignment is not None
            else self._assign(partitions, factor, start_partition=0)
        )
        self._check_broker_load(placed)
        self._check_descriptors(placed, f"topic '{name}'")
        overrides = validate_topic_overrides(configs, self._broker_defaults)
        self.log_config(overrides)
        return placed, overrides

    def delete_topic(self, name: str) -> None:
        self._read_assignment(name)  # UNKNOWN_TOPIC_OR_PARTITION if there is no such topic
        with contextlib.suppress(ZNodeExistsError):  # already being deleted
            self._zk.create_blocking(zk_paths.delete_topic_path(name), b"")

    def create_partitions(
        self,
        name: str,
        count: int,
        *,
        validate_only: bool = False,
        assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> None:
        current, version = self._read_assignment(name)
        if self._marked_for_deletion(name):
            raise InvalidTopicError(f"The topic '{name}' is queued for deletion.")
        existing = len(current.partitions)
        check_partition_growth(name, existing, count)
        self._check_topic_size(count)
        factor = len(current.partitions[0].replicas) if 0 in current.partitions else 1
        added = (
            {p: list(r) for p, r in assignment.items()}
            if assignment is not None
            else self._assign(count - existing, factor, start_partition=existing)
        )
        self._check_broker_load(added)
        self._check_descriptors(added, f"growing topic '{name}' to {count} partitions")
        if validate_only:
            return
        grown = dict(current.partitions)
        grown.update({p: ReplicaAssignment(tuple(r)) for p, r in added.items()})
        body = zk_paths.encode_topic(zk_paths.TopicAssignment(current.topic_id, grown))
        try:
            self._zk.set_blocking(zk_paths.topic_path(name), body, version)
        except ZNodeVersionError:
            raise InvalidPartitionsError(f"Topic '{name}' changed meanwhile; retry.") from None

    def set_topic_configs(
        self, name: str, configs: Mapping[str, str | None], *, validate_only: bool = False
    ) -> None:
        self._read_assignment(name)
        overrides = validate_topic_overrides(configs, self._broker_defaults)
        previous = self.topic_overrides(name)
        validate_remote_storage_change(previous, overrides, self._broker_defaults)
        self.log_config(overrides)
        if validate_only or overrides == previous:
            return  # nothing changes: no write, and no notice every broker would act on
        self._write_config(name, overrides)
        self._notify(name)
        self.configs.apply(name, overrides)

    async def read_overrides(
        self, names: Sequence[str], in_flight: int
    ) -> dict[str, dict[str, str] | Exception]:
        """Each topic's overrides as ZooKeeper holds them, `in_flight` reads awaited at once and
        each batch within `BLOCKING_TIMEOUT_S`; a read that failed is its error."""
        read: dict[str, dict[str, str] | Exception] = {}
        for start in range(0, len(names), in_flight):
            chunk = names[start : start + in_flight]
            try:
                async with asyncio.timeout(BLOCKING_TIMEOUT_S):
                    answers = await asyncio.gather(
                        *(self.configs.read(n) for n in chunk), return_exceptions=True
                    )
            except TimeoutError:
                late = ZooKeeperUnavailableError("ZooKeeper did not answer in time")
                answers = [late] * len(chunk)
            for name, answer in zip(chunk, answers, strict=True):
                if isinstance(answer, BaseException) and not isinstance(answer, Exception):
                    raise answer  # cancelled: the request ends, not one resource
                read[name] = answer
        return read

    def topic_overrides(self, name: str) -> dict[str, str]:
        """The topic's overrides as ZooKeeper holds them now."""
        return self.configs.read_blocking(name)

    # ---- internals ------------------------------------------------------------------------

    def _check_topic_size(self, count: int) -> None:
        """The standalone registry's per-topic cap, checked before placing replicas: one
        request must not write an unbounded topic znode nor an unbounded controller decision."""
        if count > self._limits.max_partitions_per_topic:
            raise PolicyViolationError(
                f"{count} partitions exceed the limit of "
                f"{self._limits.max_partitions_per_topic} per topic"
            )

    def _check_broker_load(self, added: Mapping[int, Sequence[int]]) -> None:
        """The standalone registry's per-broker cap, for each broker given new replicas (its
        current load is what this broker's metadata cache knows)."""
        held = self._metadata.replica_load()
        load = Counter(b for replicas in added.values() for b in replicas)
        for b in load:
            load[b] += held.get(b, 0)
        over = sorted(b for b in load if load[b] > self._limits.max_partitions_per_broker)
        if over:
            raise PolicyViolationError(
                f"broker {over[0]} would hold {load[over[0]]} partitions, over its limit of "
                f"{self._limits.max_partitions_per_broker}"
            )

    def _check_descriptors(self, added: Mapping[int, Sequence[int]], what: str) -> None:
        """Each broker given new replicas must have the descriptors for them (module doc)."""
        if self._descriptors.read_limit() is None:
            return
        wanted = Counter(b for replicas in added.values() for b in replicas)
        held = self._metadata.replica_load()
        logs = list(self._logs.logs())
        held_here = len(logs)
        needed = max((wanted[b] + held.get(b, 0) - held_here for b in wanted), default=0)
        # What a log does not hold now (its active segment's descriptor, after a follower's
        # truncation, until its next read or write) is promised to it (common/descriptors.py).
        per = self._descriptors.per_partition
        unwritten = promised_to(held_here, lambda: logs, per_partition=per)
        here = self._descriptors.partitions_available(at_least=needed, promised=unwritten)
        if here is None:
            return
        for broker in sorted(wanted):
            available = max(0, here + held_here - held[broker])
            where = f"{what} on broker {broker}"
            self._descriptors.check(wanted[broker], where, available=available)

    def _assign(
        self, partitions: int, factor: int, *, start_partition: int
    ) -> dict[int, list[int]]:
        racks = {b: e.rack for b, e in self._metadata.brokers.items()}
        try:
            return assign_replicas(racks, partitions, factor, start_partition=start_partition)
        except AssignPartitionsError as exc:
            raise InvalidPartitionsError(str(exc)) from None
        except AssignFactorError as exc:
            raise InvalidReplicationFactorError(str(exc)) from None
        except InconsistentRackError as exc:
            raise InvalidReplicaAssignmentError(str(exc)) from None

    def _check_absent(self, name: str) -> None:
        """Kafka's AdminZkClient.validateTopicCreate: no topic, nor one still being deleted."""
        if self._marked_for_deletion(name):
            raise TopicExistsError(f"Topic '{name}' is marked for deletion.")
        if self._zk_exists(zk_paths.topic_path(name)):
            raise TopicExistsError(f"Topic '{name}' already exists.")

    def _marked_for_deletion(self, name: str) -> bool:
        return self._zk_exists(zk_paths.delete_topic_path(name))

    def _zk_exists(self, path: str) -> bool:
        try:
            self._zk.get_blocking(path)
        except ZNodeMissingError:
            return False
        return True

    def _notify(self, name: str) -> None:
        notify_topic_change_blocking(self._zk, name)

    def _read_assignment(self, name: str) -> tuple[zk_paths.TopicAssignment, int]:
        try:
            node = self._zk.get_blocking(zk_paths.topic_path(name))
        except (ZNodeMissingError, ZNodeFormatError):
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.") from None
        return zk_paths.decode_topic(node.data), node.version

    def _write_config(self, name: str, overrides: Mapping[str, str]) -> None:
        data = zk_paths.encode_topic_config(overrides)
        try:
            self._zk.create_blocking(zk_paths.topic_config_path(name), data)
        except ZNodeExistsError:
            self._zk.set_blocking(zk_paths.topic_config_path(name), data, -1)


def _assignment(topic_id: uuid.UUID, placed: Mapping[int, Sequence[int]]) -> bytes:
    replicas = {p: ReplicaAssignment(tuple(r)) for p, r in placed.items()}
    return zk_paths.encode_topic(zk_paths.TopicAssignment(topic_id, replicas))


def _created(
    name: str,
    topic_id: uuid.UUID,
    placed: Mapping[int, Sequence[int]],
    overrides: Mapping[str, str],
) -> TopicMetadata:
    return TopicMetadata(
        name,
        topic_id,
        {p: PartitionMetadata(p, -1, 0, list(r), []) for p, r in placed.items()},
        dict(overrides),
    )


async def _within(pending: Awaitable[T]) -> T:
    """A ZooKeeper call awaited as the blocking ones wait: at most `BLOCKING_TIMEOUT_S` (kazoo
    holds a call made while disconnected until it reconnects)."""
    try:
        async with asyncio.timeout(BLOCKING_TIMEOUT_S):
            return await pending
    except TimeoutError:
        raise ZooKeeperUnavailableError("ZooKeeper did not answer in time") from None
