"""Writing group state to `__consumer_offsets`: one batch per operation, in the group's partition.

Owns: `GroupLog` — turns offset commits, group metadata and their tombstones into records
(formats in `group_records`), builds one uncompressed v2 batch per operation (CreateTime = now,
no producer id, as Kafka's coordinator writes them) and appends it to
`partition_for(group_id)` through the `OffsetsTopic`. An operation's records share one batch, so
a multi-partition commit is all-or-nothing; `append` answers the log offset of the first record
(the rest follow one by one), which orders commits as the log does.

The batches of one loop turn for one partition go to the log in one append (consumers that commit
after every batch they read, as OMB's do, commit many times a turn, all into their group's
partition): each `append` queues its batch and awaits a future; the first of the turn schedules
the flush, a plain callback, for the loop's next turn, and the flush appends the queued batches
in call order — consecutive plain batches together (up to `_RUN_BYTES`), a transactional one alone
(the log checks its producer epoch) — each append made at once, so the log keeps call order. Every
batch's caller gets its own offsets once its append is committed, or that append's error (a
combined append fails or succeeds whole: its batches are the coordinator's own, valid, and within
`max.message.bytes` each). An append the ISR has at once (a leader alone in its ISR) is settled in
the flush itself; only one still to be replicated waits in a task. Per commit that costs one
future, no task: OffsetCommit is, at OMB's rates, a third of the requests a broker serves.

A transactional offset commit (TxnOffsetCommit) is one batch carrying the producer's id and
epoch with the transactional flag set, so the log's producer state fences an older epoch and the
transaction's marker later closes it. Its base sequence is -1 (no sequence): Kafka's coordinator
writes 0 but appends with origin COORDINATOR, which skips the sequence check; our log has no
append origin and skips that check (and duplicate detection) only for batches without a sequence.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from brokers.common.clock import Clock
from brokers.coordinator.group_records import (
    GroupMetadataRecord,
    OffsetAndMetadata,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from brokers.coordinator.offsets_topic import OffsetsTopic, partition_for
from brokers.records.batch import NO_SEQUENCE
from brokers.records.builder import build_batch, build_entries_batch

Entry = tuple[bytes, bytes | None]  # key, value (None: tombstone)
TopicPartition = tuple[str, int]
NO_OFFSET = -1
_RUN_BYTES = 256 * 1024  # plain batches appended together at most (a larger one goes alone)


@dataclass(frozen=True, slots=True)
class TxnProducer:
    """The transactional producer a TxnOffsetCommit writes for."""

    producer_id: int
    producer_epoch: int


@dataclass
class _Run:
    """Batches appended together; each caller's future gets its batch's last offset."""

    alone: bool
    batches: list[bytes] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    futures: list[asyncio.Future[int]] = field(default_factory=list)
    size: int = 0

    def add(self, batch: bytes, count: int, future: asyncio.Future[int]) -> None:
        self.batches.append(batch)
        self.counts.append(count)
        self.futures.append(future)
        self.size += len(batch)

    def settle(self, last_offset: int) -> None:
        """The run's batches end at `last_offset`, one after the other. Callers resume in the order
        they appended (a turn's commit and delete of one group update the cache as the log has them)."""
        offset = last_offset - sum(self.counts)
        for future, count in zip(self.futures, self.counts, strict=True):
            offset += count
            if not future.done():
                future.set_result(offset)

    def fail(self, error: BaseException) -> None:
        for future in self.futures:
            if not future.done():
                future.set_exception(error)


class GroupLog:
    def __init__(self, topic: OffsetsTopic, clock: Clock) -> None:
        self.topic = topic
        self._clock = clock
        self.appends = 0  # `append` calls
        self.log_appends = 0  # appends to the topic (fewer: a turn's batches go together)
        self._queued: dict[int, list[_Run]] = {}  # partition -> runs waiting for the flush
        self._committing: set[asyncio.Task[None]] = set()  # runs awaiting the ISR

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.topic.partition_count())

    async def append(
        self, group_id: str, entries: Sequence[Entry], *, producer: TxnProducer | None = None
    ) -> int:
        """Append `entries` as one batch once committed; the first record's offset (-1: none).

        `producer` makes it a transactional batch of that producer id and epoch."""
        if not entries:
            return NO_OFFSET
        now = self._clock.time_ms()
        if producer is None:
            batch = build_entries_batch(entries, now)
        else:
            batch = build_batch(
                list(entries),
                base_timestamp=now,
                producer_id=producer.producer_id,
                producer_epoch=producer.producer_epoch,
                base_sequence=NO_SEQUENCE,
                is_transactional=True,
            )
        self.appends += 1
        future = self._queue(
            self.partition_for(group_id), batch, len(entries), producer is not None
        )
        last_offset = await future
        return last_offset - (len(entries) - 1)

    def _queue(self, partition: int, batch: bytes, count: int, alone: bool) -> asyncio.Future[int]:
        loop = asyncio.get_running_loop()
        runs = self._queued.get(partition)
        if runs is None:
            runs = self._queued[partition] = []
            loop.call_soon(self._flush, partition)  # on the loop's next turn: no task, no await
        last = runs[-1] if runs else None
        if last is None or alone or last.alone or last.size + len(batch) > _RUN_BYTES:
            last = _Run(alone)
            runs.append(last)
        future: asyncio.Future[int] = loop.create_future()
        last.add(batch, count, future)
        return future

    def _flush(self, partition: int) -> None:
        """Append the partition's queued runs, in order, each at once (a later turn's flush
        runs after this one: the log keeps call order). A run the ISR already has is settled
        here; one still to be replicated waits in a task."""
        for run in self._queued.pop(partition, []):
            self._append_run(partition, run)

    def _append_run(self, partition: int, run: _Run) -> None:
        payload = run.batches[0] if len(run.batches) == 1 else b"".join(run.batches)
        self.log_appends += 1
        try:
            last_offset, uncommitted = self.topic.start_append(partition, payload)
        except Exception as exc:  # the topic's errors reach every caller of the run
            run.fail(exc)
            return
        if uncommitted is None:
            run.settle(last_offset)
            return
        task = asyncio.ensure_future(self._settle_committed(run, last_offset, uncommitted))
        self._committing.add(task)
        task.add_done_callback(self._committing.discard)

    async def _settle_committed(
        self, run: _Run, last_offset: int, uncommitted: Coroutine[Any, Any, None]
    ) -> None:
        try:
            await uncommitted
        except asyncio.CancelledError:
            for future in run.futures:
                future.cancel()
            raise
        except Exception as exc:
            run.fail(exc)
            return
        run.settle(last_offset)

    async def store_group(self, group_id: str, record: GroupMetadataRecord) -> None:
        """`GroupStore`: the group's metadata after a rebalance or a static member's return."""
        await self.append(group_id, [group_entry(group_id, record)])


def group_entry(group_id: str, record: GroupMetadataRecord | None) -> Entry:
    value = None if record is None else encode_group_metadata_value(record)
    return encode_group_metadata_key(group_id), value


def offset_entry(group_id: str, tp: TopicPartition, value: OffsetAndMetadata | None) -> Entry:
    encoded = None if value is None else encode_offset_commit_value(value)
    return encode_offset_commit_key(group_id, tp[0], tp[1]), encoded


def offset_tombstones(group_id: str, tps: Iterable[TopicPartition]) -> list[Entry]:
    return [offset_entry(group_id, tp, None) for tp in tps]
