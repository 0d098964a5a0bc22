"""What the remote tier knows of one copied segment (Kafka's RemoteLogSegmentMetadata) and the
records that carry it in `__remote_log_metadata`.

Owns: `RemoteSegment` (id, offsets, max timestamp, size, leader epochs, state), its four states
in Kafka's order (COPY_SEGMENT_STARTED → COPY_SEGMENT_FINISHED → DELETE_SEGMENT_STARTED →
DELETE_SEGMENT_FINISHED), `LogStartEvent` (a DeleteRecords below the local log start, which Kafka
keeps in memory only; Pier records it so a new leader or a restart keeps it), and their record
encoding: key `<topic>-<partition>` (UTF-8), value a JSON object with a `type` and `v` (version).
Kafka's topic-based manager uses its own binary serde; the encoding here is Pier's
(docs/compatibility.md). `metadata_partition` places a partition's events on one metadata
partition, so they stay in order. Pure and immutable; thread-safe.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import zlib
from dataclasses import dataclass

ENCODING_VERSION = 1
MAX_VALUE_BYTES = 64 * 1024  # a segment's event is small; refuse anything bigger when reading


class SegmentState(enum.IntEnum):
    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


class MetadataDecodeError(ValueError):
    """A `__remote_log_metadata` record this version cannot read."""


@dataclass(frozen=True, slots=True)
class RemoteSegment:
    topic: str
    partition: int
    segment_id: str  # 32 hex digits, unique per copy attempt (a retried copy gets a new one)
    start_offset: int
    end_offset: int  # last offset in the segment (inclusive, as Kafka)
    max_timestamp: int
    size_bytes: int
    leader_epochs: tuple[tuple[int, int], ...]  # (epoch, start offset) inside the segment
    broker_id: int
    event_time_ms: int
    state: SegmentState
    topic_id: str = ""  # the topic's id (hex): a topic deleted and created again is another

    def with_state(self, state: SegmentState, now_ms: int) -> RemoteSegment:
        return dataclasses.replace(self, state=state, event_time_ms=now_ms)

    @property
    def object_name(self) -> str:
        """`<topic>-<partition>/<start offset, 20 digits>-<segment id>`: the store's key stem."""
        return f"{self.topic}-{self.partition}/{self.start_offset:020d}-{self.segment_id}"

    @property
    def next_offset(self) -> int:
        return self.end_offset + 1


@dataclass(frozen=True, slots=True)
class LogStartEvent:
    topic: str
    partition: int
    log_start_offset: int
    topic_id: str = ""


MetadataEvent = RemoteSegment | LogStartEvent


def partition_key(topic: str, partition: int) -> bytes:
    return f"{topic}-{partition}".encode()


def metadata_partition(topic: str, partition: int, partitions: int) -> int:
    """Which `__remote_log_metadata` partition holds this partition's events (stable hash)."""
    return zlib.crc32(partition_key(topic, partition)) % partitions


def encode(event: MetadataEvent) -> tuple[bytes, bytes]:
    """(key, value) of the record carrying `event`."""
    if isinstance(event, LogStartEvent):
        body: dict[str, object] = {
            "v": ENCODING_VERSION, "type": "log_start", "offset": event.log_start_offset,
            "tid": event.topic_id,
        }  # fmt: skip
    else:
        body = {
            "v": ENCODING_VERSION, "type": "segment", "id": event.segment_id,
            "start": event.start_offset, "end": event.end_offset,
            "max_timestamp": event.max_timestamp, "size": event.size_bytes,
            "epochs": [list(e) for e in event.leader_epochs], "broker": event.broker_id,
            "time": event.event_time_ms, "state": event.state.name, "tid": event.topic_id,
        }  # fmt: skip
    return partition_key(event.topic, event.partition), json.dumps(body).encode()


def decode(key: bytes, value: bytes) -> MetadataEvent:
    """The event of one record; MetadataDecodeError for anything malformed."""
    try:
        topic, _, index = key.decode().rpartition("-")
        partition = int(index)
        if len(value) > MAX_VALUE_BYTES:
            raise ValueError(f"value of {len(value)} bytes")
        body = json.loads(value)
        if body.get("v") != ENCODING_VERSION:
            raise ValueError(f"version {body.get('v')!r}")
        if body["type"] == "log_start":
            return LogStartEvent(topic, partition, int(body["offset"]), str(body.get("tid", "")))
        return RemoteSegment(
            topic, partition, str(body["id"]), int(body["start"]), int(body["end"]),
            int(body["max_timestamp"]), int(body["size"]),
            tuple((int(e), int(o)) for e, o in body["epochs"]), int(body["broker"]),
            int(body["time"]), SegmentState[body["state"]], str(body.get("tid", "")),
        )  # fmt: skip
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise MetadataDecodeError(f"unreadable remote log metadata record: {exc}") from exc
