"""The standalone broker's topic registry: what topics exist, their ids, partition counts, configs.

Owns: creating, deleting, growing and reconfiguring topics when there is no ZooKeeper — persisted
as `pier-topics.json` in the data dir (temp file, fsync, atomic rename), applied to the replica
manager and the metadata cache. In cluster mode the controller plays this part through
ZooKeeper; handlers only see the `TopicAdmin` methods. A topic is created whole or not at all:
the file-descriptor budget is checked before any log is opened (`DescriptorLimitError`,
POLICY_VIOLATION, also for `validate_only`), and should opening a log still fail (EMFILE when
connections took the reserve), the logs this request opened are deleted again and nothing is
persisted (KAFKA_STORAGE_ERROR, naming the open-file limit).

A topic of more than `SYNC_LOGS_UP_TO` partitions is answered once its metadata is registered
and persisted, as Kafka answers once the metadata is committed and its brokers create the logs
afterwards: its logs are created on the event loop in slices of `DEFERRED_SLICE_S` with
`DEFERRED_PAUSE_S` between them for requests, or at once by the first request that looks a
partition up (`ReplicaManager.find`). The descriptor budget counts the descriptor each of those
partitions was promised as taken, and that of an open log whose active segment does not hold its
descriptor now (`_promised`). Should one fail to open, the slices stop and log it, and that
partition's requests get the storage error (Kafka: the partition offline on that broker). At the
next start the registry opens every log of every topic before serving.

Durability off the loop: the registry file's write and fsync, and the log dir's fsync after a
deletion's renames, run on one writer thread in the order they were asked for (the log dir
before the registry that forgets the topic). A `batch()` closed on a running event loop queues
its write and returns; its handler awaits `flushed()` before answering, so an answer still
means on disk, while the loop serves other clients' requests during the fsyncs (a topic churn
stalled every producer on this broker for them). Everything else, and every write outside a
batch, waits for its write as before. The new state is visible to requests from the moment it
is installed, a few fsyncs before the answer (a crash in between keeps a created topic's logs,
which the next start registers as it does any log the registry never saw). Likewise
`create_topic_async` (CreateTopics) has a small topic's new logs made one per loop turn
(`LogManager.prepare`) before it installs the topic, its name reserved meanwhile: another
creation of it, or of a name colliding with it, is refused as if it existed. Runs on the event
loop; not thread-safe (the writer thread touches only files).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import functools
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import orjson

from brokers.common.descriptors import DescriptorBudget, Promised, promised_to
from brokers.log.config import (
    LogConfig,
    validate_remote_storage_change,
    validate_topic_overrides,
)
from brokers.log.errors import LogDirError
from brokers.log.log_manager import background_priority
from brokers.replication.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    PolicyViolationError,
    TopicExistsError,
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
SYNC_LOGS_UP_TO = 100  # partitions of one topic whose logs CreateTopics opens before answering
DEFERRED_CHUNK = 4  # deferred logs created between two looks at the clock
DEFERRED_SLICE_S = 0.005  # of creating deferred logs per event-loop turn
DEFERRED_PAUSE_S = 0.005  # between two slices: the loop serves requests
log = logging.getLogger(__name__)


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
        self._sync_log_dir = False  # a deletion's renames await the log dir's fsync
        self._preparing: dict[str, str] = {}  # names whose logs are being made: unified -> name
        self._installed = 0  # topics installed so far (a name check after an await)
        self._writer: concurrent.futures.ThreadPoolExecutor | None = None
        self._written: concurrent.futures.Future[None] | None = None  # the last write queued
        # Overrides checked and configs built, by the overrides asked for (the broker defaults
        # are fixed for the registry's life): a creation asked for both four times, ~300 µs of
        # the loop; bounded, as tenants choose the overrides.
        self._validated: dict[_Overrides, dict[str, str]] = {}
        self._configs: dict[_Overrides, LogConfig] = {}
        # The loop a slice of deferred log creation is scheduled on (None: none is).
        self._draining: asyncio.AbstractEventLoop | None = None

    # ---- start-up -------------------------------------------------------------------------
    def load(self) -> None:
        stored = json.loads(self._path.read_bytes()) if self._path.exists() else {"topics": {}}
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
                self._save(wait=not _on_event_loop())

    async def flushed(self) -> None:
        """Return once every registry write queued so far is on disk (raises its error)."""
        written = self._written
        if written is None:
            return
        try:
            await asyncio.wrap_future(written)
        finally:  # an error is raised to the requests that awaited it, not to later ones
            if self._written is written:
                self._written = None

    def log_config(self, overrides: Mapping[str, str]) -> LogConfig:
        key = _frozen(overrides)
        config = self._configs.get(key)
        if config is None:
            config = LogConfig.from_properties(overrides, self._broker_defaults)
            _remember(self._configs, key, config)
        return config

    def _overrides(self, configs: Mapping[str, str | None]) -> dict[str, str]:
        """`validate_topic_overrides` of `configs` (a copy of the remembered answer)."""
        key = _frozen(configs)
        overrides = self._validated.get(key)
        if overrides is None:
            overrides = validate_topic_overrides(configs, self._broker_defaults)
            _remember(self._validated, key, overrides)
        return dict(overrides)

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
        descriptors_checked: bool = False,
    ) -> TopicMetadata | None:
        partitions, factor = new_topic_shape(
            name, num_partitions, replication_factor, self._metadata.topics, self._broker_defaults
        )
        _check_collision(name, self._preparing.values())
        self._check_partitions(partitions, existing=0)
        if factor < 1 or factor > len(self._metadata.brokers):
            raise InvalidReplicationFactorError(
                unreachable_replication_factor(factor, len(self._metadata.brokers))
                if factor > 1
                else "Replication factor must be larger than 0."
            )
        overrides = self._overrides(configs)
        self.log_config(overrides)
        if not descriptors_checked:  # (the prepared logs' descriptors are open already)
            self._check_descriptors(partitions, f"topic '{name}'")
        if validate_only:
            return None
        defer = partitions > SYNC_LOGS_UP_TO
        topic = self._install(name, uuid.uuid4(), partitions, overrides, defer=defer)
        self._save()
        if defer:
            self._schedule_deferred()
        return topic

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
        """`create_topic`, with the logs of a topic of up to `SYNC_LOGS_UP_TO` partitions made
        first, one per event-loop turn, so other requests are served in between."""
        create = functools.partial(
            self.create_topic, name, num_partitions, replication_factor, configs,
            assignment=assignment,
        )  # fmt: skip
        create(validate_only=True)  # every check first: nothing is made for a refused topic
        partitions, _ = new_topic_shape(
            name, num_partitions, replication_factor, self._metadata.topics, self._broker_defaults
        )
        if validate_only:
            return None
        if partitions > SYNC_LOGS_UP_TO:  # (no await since the checks: they still hold)
            return create(validate_only=False, descriptors_checked=True)
        config = self.log_config(self._overrides(configs))
        unified, installed = _unified(name), self._installed
        self._preparing[unified] = name
        try:
            await self._replicas.prepare_logs(name, range(partitions), config)
        except Exception as exc:  # the loop's own attempt below reports it as before
            log.info("event=prepare_logs_failed topic=%s error=%r", name, str(exc))
        finally:
            del self._preparing[unified]
        try:
            if self._installed != installed:  # topics came meanwhile: one may collide
                topics = self._metadata.topics
                like = topics.name_like(name)
                _check_collision(name, [o for o in (name, like) if o is not None and o in topics])
            return create(validate_only=False, descriptors_checked=True)
        finally:
            self._replicas.drop_prepared(name)

    def delete_topic(self, name: str) -> None:
        topic = self._require(name)
        for index in list(topic.partitions):
            self._replicas.delete(name, index, sync=False)
        # One fsync for every rename, before the registry forgets the topic (`_save`, on the
        # writer thread): a rename lost in a crash would bring its directory back as a topic
        # the registry never saw.
        self._sync_log_dir = True
        self._partition_count -= len(topic.partitions)
        del self._metadata.topics[name]
        self._save()
        self._metadata.partitions_deleted([(name, index) for index in topic.partitions])

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
        self._check_descriptors(count - existing, f"growing topic '{name}' to {count} partitions")
        if validate_only:
            return
        self._open_logs(name, range(existing, count), self.log_config(topic.configs))
        for index in range(existing, count):
            topic.partitions[index] = self._leader_here(index)
        self._metadata.partition_changes += 1
        self._partition_count += count - existing
        self._save()

    def set_topic_configs(
        self, name: str, configs: Mapping[str, str | None], *, validate_only: bool = False
    ) -> None:
        """Replace a topic's overrides (AlterConfigs) — callers merge for incremental changes."""
        topic = self._require(name)
        overrides = self._overrides(configs)
        validate_remote_storage_change(topic.configs, overrides, self._broker_defaults)
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

    def _check_descriptors(self, partitions: int, what: str) -> None:
        self._descriptors.check(partitions, what, promised=self._promised())

    def _promised(self) -> Promised:
        """What existing partitions were promised but have not opened: a deferred log's
        descriptor, and an open log's that it does not hold now (its active segment made active
        again, until the next read or write; brokers/common/descriptors.py)."""
        return promised_to(
            self._partition_count,
            lambda: (p.log for p in self._replicas.partitions()),
            deferred=self._replicas.deferred_count,
            per_partition=self._descriptors.per_partition,
        )

    def _schedule_deferred(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (a tool or test calling directly): create them now
            self._create_deferred(slice_s=None)
            return
        if self._draining is not loop or loop.is_closed():
            self._draining = loop
            loop.call_soon(self._create_deferred)

    def _create_deferred(self, slice_s: float | None = DEFERRED_SLICE_S) -> None:
        """Create deferred logs for up to `slice_s` seconds of this turn (None: all of them),
        then give the loop `DEFERRED_PAUSE_S` for requests before the next slice."""
        deadline = None if slice_s is None else time.monotonic() + slice_s
        left = self._replicas.deferred_count
        try:
            while left and (deadline is None or time.monotonic() < deadline):
                left = self._replicas.create_deferred(DEFERRED_CHUNK)
        except Exception as exc:  # that partition's next lookup raises it to the caller
            log.error("event=deferred_log_failed error=%r", str(exc))
            left = 0
        self._draining = None
        if left and deadline is not None:
            self._draining = asyncio.get_running_loop()
            self._draining.call_later(DEFERRED_PAUSE_S, self._create_deferred)

    def _install(
        self, name: str, topic_id: uuid.UUID, partitions: int, configs: Mapping[str, str],
        *, defer: bool = False,
    ) -> TopicMetadata:  # fmt: skip
        topic = TopicMetadata(name=name, topic_id=topic_id, partitions={}, configs=dict(configs))
        if defer:
            config = self.log_config(configs)
            for index in range(partitions):
                self._replicas.defer_create(name, index, config)
        else:
            self._open_logs(name, range(partitions), self.log_config(configs))
        for index in range(partitions):
            topic.partitions[index] = self._leader_here(index)
        self._metadata.topics[name] = topic
        self._partition_count += partitions
        self._installed += 1
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

    def _save(self, *, wait: bool = True) -> None:
        """Write the registry (after the log dir's fsync, when a deletion asked for one) on the
        writer thread, behind every earlier write; `wait=False`: `flushed()` awaits it."""
        if self._batch_depth:
            self._dirty = True
            return
        self._dirty = False
        sync_log_dir = self._replicas.sync_log_dir if self._sync_log_dir else None
        self._sync_log_dir = False
        if self._writer is None:
            self._writer = concurrent.futures.ThreadPoolExecutor(
                max_workers=1,
                thread_name_prefix="pier-topics-writer",
                initializer=background_priority,
            )
        # orjson: 16 µs for 100 topics where json's indenting encoder (pure Python) took 610,
        # on the loop at every creation and deletion.
        text = orjson.dumps(self._document(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
        self._written = self._writer.submit(_write_registry, self._path, text, sync_log_dir)
        if wait:
            self._written.result()

    def _document(self) -> dict[str, object]:
        return {
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


_Overrides = tuple[tuple[str, str | None], ...]
_V = TypeVar("_V")
REMEMBERED_MAX = 256  # distinct override sets remembered; then forgotten all at once


def _frozen(configs: Mapping[str, str | None]) -> _Overrides:
    return tuple(sorted(configs.items()))


def _remember(memo: dict[_Overrides, _V], key: _Overrides, value: _V) -> None:
    if len(memo) >= REMEMBERED_MAX:
        memo.clear()
    memo[key] = value


def _unified(name: str) -> str:
    """Kafka refuses names that differ only by '.' vs '_' (they share metric names)."""
    return name.replace(".", "_")


def _check_collision(name: str, others: Iterable[str]) -> None:
    """Refuse `name` when it, or a name colliding with it, is among `others`."""
    unified = _unified(name)
    for other in others:
        if other == name:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        if _unified(other) == unified:
            raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {other}")


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _write_registry(path: Path, text: bytes, sync_log_dir: Callable[[], None] | None) -> None:
    """The writer thread's job: the log dir's fsync first (renames durable before the registry
    forgets their topic), then the registry through a temp file, fsync and rename."""
    if sync_log_dir is not None:
        sync_log_dir()
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _out_of_descriptors(exc: BaseException | None) -> bool:
    """True when EMFILE/ENFILE is the error or its cause (a log layer may wrap the OSError)."""
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
