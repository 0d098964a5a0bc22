"""One partition replica on this broker: its log plus leadership state (epoch, ISR, high watermark).

Owns: the leader-side append (validate, then append as leader, then advance the high watermark)
and reads bounded by the high watermark for consumers or the log end for followers. Until
replication lands the ISR is this broker alone, so the high watermark follows the log end offset
(DESIGN.md: acks=all means leader-only until then); the fields are here for the cluster issue.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from brokers.clock import Clock
from brokers.log.log import AppendResult, Log, ReadResult
from brokers.records.batch import BatchHeader, iter_headers
from brokers.records.builder import recompress
from brokers.records.compression import CODEC_NAMES
from brokers.records.validate import validate_for_append
from brokers.replication.errors import (
    FencedLeaderEpochError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)

NO_EPOCH = -1


@dataclass(frozen=True, slots=True)
class FetchedData:
    read: ReadResult | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int


@dataclass(slots=True)
class LeadershipState:
    leader_id: int
    leader_epoch: int
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)


class Partition:
    def __init__(
        self,
        log: Log,
        *,
        node_id: int,
        clock: Clock,
        high_watermark: int,
        on_high_watermark: Callable[[Partition], None],
        topic_id: bytes = b"",
    ) -> None:
        self.log = log
        self.topic = log.topic
        self.index = log.partition
        self.topic_id = topic_id
        self._node_id = node_id
        self._clock = clock
        self._on_high_watermark = on_high_watermark
        self.state = LeadershipState(
            leader_id=node_id, leader_epoch=0, replicas=[node_id], isr=[node_id]
        )
        self.high_watermark = min(max(high_watermark, log.log_start_offset), log.log_end_offset)
        # Kafka's makeLeader: a leader whose ISR is itself owns every offset it has, so the
        # checkpoint (possibly stale after kill -9) must not hide records the log recovered.
        self._maybe_advance_high_watermark()

    @property
    def is_leader(self) -> bool:
        return self.state.leader_id == self._node_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    def become_leader(self, state: LeadershipState) -> None:
        self.state = state
        self.log.leader_epoch_cache.assign(state.leader_epoch, self.log.log_end_offset)
        self._maybe_advance_high_watermark()

    def check_epoch(self, requested_epoch: int) -> None:
        """KIP-320: a client's current leader epoch must match ours (-1 skips the check)."""
        if requested_epoch == NO_EPOCH:
            return
        if requested_epoch < self.state.leader_epoch:
            raise FencedLeaderEpochError(f"{self.topic}-{self.index}: epoch {requested_epoch}")
        if requested_epoch > self.state.leader_epoch:
            raise UnknownLeaderEpochError(f"{self.topic}-{self.index}: epoch {requested_epoch}")

    def append_as_leader(self, data: bytes) -> AppendResult:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"{self.topic}-{self.index}")
        config = self.log.config
        batches = validate_for_append(
            data,
            now_ms=self._clock.time_ms(),
            max_message_bytes=config.max_message_bytes,
            timestamp_before_max_ms=config.message_timestamp_before_max_ms,
            timestamp_after_max_ms=config.message_timestamp_after_max_ms,
            requires_keys="compact" in config.cleanup_policy,
        )
        if config.compression_type != "producer":
            data, batches = _to_topic_codec(data, batches, config.compression_type)
        result = self.log.append_as_leader(data, batches, leader_epoch=self.state.leader_epoch)
        self._maybe_advance_high_watermark()
        return result

    def _maybe_advance_high_watermark(self) -> None:
        # With an ISR of one, every appended offset is replicated to the whole ISR.
        if self.state.isr == [self._node_id] and self.high_watermark < self.log.log_end_offset:
            self.high_watermark = self.log.log_end_offset
            self._on_high_watermark(self)

    def read(
        self, offset: int, max_bytes: int, *, for_follower: bool = False, min_one_batch: bool = True
    ) -> FetchedData:
        log = self.log
        max_offset = log.log_end_offset if for_follower else self.high_watermark
        read = log.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch)
        return FetchedData(
            read=read,
            high_watermark=self.high_watermark,
            log_start_offset=log.log_start_offset,
            log_end_offset=log.log_end_offset,
            last_stable_offset=self.high_watermark,
        )

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: -1 means the high watermark; offsets past it are refused by the caller."""
        target = self.high_watermark if offset == -1 else offset
        return self.log.delete_records_before(target)


_TOPIC_CODECS = {name: codec for codec, name in CODEC_NAMES.items()} | {"uncompressed": 0}


def _to_topic_codec(
    data: bytes, batches: list[tuple[int, BatchHeader]], compression_type: str
) -> tuple[bytes, list[tuple[int, BatchHeader]]]:
    """A topic `compression.type` other than `producer` re-encodes batches in that codec, as
    Kafka does; off the default path, since it decodes every record."""
    codec = _TOPIC_CODECS[compression_type]
    if all(header.compression == codec for _, header in batches):
        return data, batches
    view = memoryview(data)
    rebuilt = b"".join(recompress(view[pos : pos + header.size], codec) for pos, header in batches)
    return rebuilt, list(iter_headers(rebuilt))
