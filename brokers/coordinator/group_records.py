"""The `__consumer_offsets` record formats, byte-compatible with Kafka's classic coordinator.

Owns: encoding and decoding of record keys and values, so Kafka tooling can read our log:
- key version 0/1 `OffsetCommitKey` (group, topic, partition), version 2 `GroupMetadataKey`
  (group); other key versions belong to KIP-848/share groups and are reported as None;
- `OffsetCommitValue` v0–v4 read; written as v3 (with leader epoch), or v1 when a v2–v4 commit
  carried a retention time (its explicit expire timestamp), as Kafka does;
- `GroupMetadataValue` v0–v4 read; written as v3 (with group instance ids, KIP-345).
A None value is a tombstone. Pure; thread-safe.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from brokers.coordinator.binary import Reader, Writer
from brokers.coordinator.errors import GroupRecordError

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
FIRST_FLEXIBLE_VALUE_VERSION = 4
NO_LEADER_EPOCH = -1
_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_KEY_HEAD = struct.Struct(">hh")  # key version, group length
_VALUE_V1_HEAD = struct.Struct(">hq")  # version, offset
_VALUE_V3_HEAD = struct.Struct(">hqi")  # version, offset, leader epoch
_TWO_I64 = struct.Struct(">qq")  # commit and expire timestamps


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberRecord, ...]


# ---- keys ----------------------------------------------------------------------------------
def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """One per committed partition, on every OffsetCommit: struct-packed, not through `Writer`."""
    name, topic_name = group.encode("utf-8"), topic.encode("utf-8")
    head = _KEY_HEAD.pack(OFFSET_COMMIT_KEY_VERSION, len(name))
    return b"".join((head, name, _I16.pack(len(topic_name)), topic_name, _I32.pack(partition)))


def encode_group_metadata_key(group: str) -> bytes:
    return Writer().int16(GROUP_METADATA_KEY_VERSION).string(group).build()


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    reader = Reader(data)
    version = reader.int16()
    if version in (0, 1):
        return OffsetCommitKey(reader.string(), reader.string(), reader.int32())
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(reader.string())
    return None


# ---- offset commit values ------------------------------------------------------------------
def encode_offset_commit_value(value: OffsetAndMetadata) -> bytes:
    """v1 with an explicit expiry, else v3 (struct-packed: one per committed partition)."""
    metadata = value.metadata.encode("utf-8")
    size = _I16.pack(len(metadata))
    if value.expire_timestamp_ms is not None:
        head = _VALUE_V1_HEAD.pack(1, value.offset)
        tail = _TWO_I64.pack(value.commit_timestamp_ms, value.expire_timestamp_ms)
        return b"".join((head, size, metadata, tail))
    head = _VALUE_V3_HEAD.pack(3, value.offset, value.leader_epoch)
    return b"".join((head, size, metadata, _I64.pack(value.commit_timestamp_ms)))


def decode_offset_commit_value(data: bytes) -> OffsetAndMetadata:
    version = Reader(data).int16()
    if not 0 <= version <= FIRST_FLEXIBLE_VALUE_VERSION:
        raise GroupRecordError(f"unknown OffsetCommitValue version {version}")
    reader = Reader(data[2:], flexible=version >= FIRST_FLEXIBLE_VALUE_VERSION)
    offset = reader.int64()
    epoch = reader.int32() if version >= 3 else NO_LEADER_EPOCH
    metadata = reader.string()
    committed = reader.int64()
    expire = reader.int64() if version == 1 else -1
    reader.tagged_fields()
    return OffsetAndMetadata(offset, epoch, metadata, committed, expire if expire >= 0 else None)


# ---- group metadata values -----------------------------------------------------------------
def encode_group_metadata_value(value: GroupMetadataRecord) -> bytes:
    writer = Writer().int16(3).string(value.protocol_type).int32(value.generation)
    writer.nullable_string(value.protocol).nullable_string(value.leader)
    writer.int64(value.current_state_timestamp_ms).int32(len(value.members))
    for m in value.members:
        writer.string(m.member_id).nullable_string(m.group_instance_id)
        writer.string(m.client_id).string(m.client_host)
        writer.int32(m.rebalance_timeout_ms).int32(m.session_timeout_ms)
        writer.bytes_(m.subscription).bytes_(m.assignment)
    return writer.build()


def decode_group_metadata_value(data: bytes) -> GroupMetadataRecord:
    version = Reader(data).int16()
    if not 0 <= version <= FIRST_FLEXIBLE_VALUE_VERSION:
        raise GroupRecordError(f"unknown GroupMetadataValue version {version}")
    reader = Reader(data[2:], flexible=version >= FIRST_FLEXIBLE_VALUE_VERSION)
    protocol_type = reader.string()
    generation = reader.int32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    timestamp = reader.int64() if version >= 2 else -1
    members = tuple(_member(reader, version) for _ in range(reader.array_length()))
    reader.tagged_fields()
    return GroupMetadataRecord(protocol_type, generation, protocol, leader, timestamp, members)


def _member(reader: Reader, version: int) -> MemberRecord:
    member_id = reader.string()
    instance_id = reader.nullable_string() if version >= 3 else None
    client_id = reader.string()
    client_host = reader.string()
    rebalance_timeout = reader.int32() if version >= 1 else -1
    session_timeout = reader.int32()
    if rebalance_timeout < 0:  # v0 had none: Kafka uses the session timeout in its place
        rebalance_timeout = session_timeout
    subscription = reader.bytes_()
    assignment = reader.bytes_()
    reader.tagged_fields()
    return MemberRecord(
        member_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout,
        subscription, assignment,
    )  # fmt: skip
