"""KIP-848 consumer group records in `__consumer_offsets`, byte-compatible with Kafka 4.1.

Owns: encoding and decoding of the coordinator records Kafka's group coordinator writes for
consumer groups. A key is its record type as int16 (Kafka's "version" slot, which is the
`apiKey` of the coordinator-key schema) and then the group id (and member id) as classic
strings; a value is int16 version 0 and a flexible (KIP-482) body:
- 3 ConsumerGroupMetadata: the group epoch (the 4.1 MetadataHash tag is left out: default 0);
- 4 ConsumerGroupPartitionMetadata: each subscribed topic's id, name and partition count, as
  Kafka 4.0 wrote it (4.1 replaced it by the hash; 4.1 still reads it). Pier keeps writing it:
  it is how a loaded group maps the topic ids of its assignments back to names;
- 5 ConsumerGroupMemberMetadata: instance/rack/client ids, subscription, rebalance timeout,
  server assignor, and for a classic member of a mixed group the tagged ClassicMemberMetadata
  (tag 0: its session timeout and supported protocols, name and metadata bytes);
- 6 ConsumerGroupTargetAssignmentMetadata: the assignment epoch;
- 7 ConsumerGroupTargetAssignmentMember: a member's target partitions by topic id;
- 8 ConsumerGroupCurrentMemberAssignment: member epoch, previous epoch, state, the partitions
  it owns and those pending revocation.
A None value is a tombstone. Pure; thread-safe.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from brokers.coordinator.binary import Reader, Writer
from brokers.coordinator.errors import GroupRecordError

GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 6, 7, 8
GROUP_KEYS = (GROUP_METADATA, PARTITION_METADATA, TARGET_METADATA)
MEMBER_KEYS = (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)
VALUE_VERSION = 0
# Kafka's MemberState byte values (org.apache.kafka.coordinator.group.modern.MemberState)
STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS = 0, 1, 2
TopicIdPartitions = dict[uuid.UUID, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    record_type: int
    group_id: str
    member_id: str | None = None  # types 5, 7 and 8


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None  # tag 0: classic members of a mixed group


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]  # (name, metadata), preference order


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: TopicIdPartitions
    pending_revocation: TopicIdPartitions


# ---- keys ----------------------------------------------------------------------------------
def encode_key(key: ConsumerKey) -> bytes:
    writer = Writer().int16(key.record_type).string(key.group_id)
    if key.record_type in MEMBER_KEYS:
        writer.string(key.member_id or "")
    return writer.build()


def decode_consumer_key(data: bytes) -> ConsumerKey | None:
    """The key of a consumer group record; None for other record types."""
    reader = Reader(data)
    record_type = reader.int16()
    if record_type in GROUP_KEYS:
        return ConsumerKey(record_type, reader.string())
    if record_type in MEMBER_KEYS:
        return ConsumerKey(record_type, reader.string(), reader.string())
    return None


# ---- flexible values -----------------------------------------------------------------------
class _FlexWriter:
    """The flexible encoding's primitives that `binary.Writer` (classic only) lacks."""

    def __init__(self, *, versioned: bool = True) -> None:
        """`versioned`: a record value (starts with its int16 version); else a nested struct."""
        self.out = bytearray(Writer().int16(VALUE_VERSION).build() if versioned else b"")

    def uvarint(self, value: int) -> _FlexWriter:
        while value >= 0x80:
            self.out.append((value & 0x7F) | 0x80)
            value >>= 7
        self.out.append(value)
        return self

    def raw(self, data: bytes) -> _FlexWriter:
        self.out += data
        return self

    def string(self, value: str | None) -> _FlexWriter:
        if value is None:
            return self.uvarint(0)
        encoded = value.encode("utf-8")
        return self.uvarint(len(encoded) + 1).raw(encoded)

    def partitions(self, topics: TopicIdPartitions) -> _FlexWriter:
        self.uvarint(len(topics) + 1)
        for topic_id in sorted(topics):
            self.raw(topic_id.bytes).uvarint(len(topics[topic_id]) + 1)
            for partition in topics[topic_id]:
                self.raw(partition.to_bytes(4, "big", signed=True))
            self.uvarint(0)  # the struct's tagged fields
        return self

    def bytes_(self, value: bytes) -> _FlexWriter:
        return self.uvarint(len(value) + 1).raw(value)

    def build(self, tags: Mapping[int, bytes] | None = None) -> bytes:
        """The value's tagged fields (ascending tags, as Kafka), and the value."""
        self.uvarint(len(tags or {}))
        for tag, data in sorted((tags or {}).items()):
            self.uvarint(tag).uvarint(len(data)).raw(data)
        return bytes(self.out)


def _reader(data: bytes, name: str) -> Reader:
    version = Reader(data).int16()
    if version != VALUE_VERSION:
        raise GroupRecordError(f"unknown {name} version {version}")
    return Reader(data[2:], flexible=True)


def _uuid(reader: Reader) -> uuid.UUID:
    high, low = reader.int64(), reader.int64()
    return uuid.UUID(int=((high & (2**64 - 1)) << 64) | (low & (2**64 - 1)))


def _read_partitions(reader: Reader) -> TopicIdPartitions:
    topics: TopicIdPartitions = {}
    for _ in range(reader.array_length()):
        topic_id = _uuid(reader)
        topics[topic_id] = tuple(reader.int32() for _ in range(reader.array_length()))
        reader.tagged_fields()
    return topics


def encode_group_metadata(epoch: int) -> bytes:
    return _FlexWriter().raw(Writer().int32(epoch).build()).build()


def decode_group_metadata(data: bytes) -> int:
    reader = _reader(data, "ConsumerGroupMetadataValue")
    epoch = reader.int32()
    reader.tagged_fields()
    return epoch


def encode_partition_metadata(topics: list[TopicMetadata]) -> bytes:
    writer = _FlexWriter().uvarint(len(topics) + 1)
    for topic in topics:
        writer.raw(topic.topic_id.bytes).string(topic.name)
        writer.raw(Writer().int32(topic.partitions).build()).uvarint(1).uvarint(0)
    return writer.build()  # uvarint(1): the deprecated, empty PartitionMetadata array


def decode_partition_metadata(data: bytes) -> list[TopicMetadata]:
    reader = _reader(data, "ConsumerGroupPartitionMetadataValue")
    topics = []
    for _ in range(reader.array_length()):
        topic_id, name, count = _uuid(reader), reader.string(), reader.int32()
        for _ in range(reader.array_length()):  # partition → racks: not used after 4.0
            reader.int32()
            for _ in range(reader.array_length()):
                reader.string()
            reader.tagged_fields()
        reader.tagged_fields()
        topics.append(TopicMetadata(topic_id, name, count))
    reader.tagged_fields()
    return topics


def encode_member_metadata(value: MemberMetadata) -> bytes:
    writer = _FlexWriter().string(value.instance_id).string(value.rack_id)
    writer.string(value.client_id).string(value.client_host)
    writer.uvarint(len(value.subscribed_topic_names) + 1)
    for name in value.subscribed_topic_names:
        writer.string(name)
    writer.string(value.subscribed_topic_regex)
    writer.raw(Writer().int32(value.rebalance_timeout_ms).build())
    writer.string(value.server_assignor)
    classic = value.classic
    return writer.build(None if classic is None else {0: _encode_classic(classic)})


def _encode_classic(classic: ClassicMemberMetadata) -> bytes:
    """The tag's data: a nullable struct's presence (uvarint 1, as Kafka's generated code writes
    a tagged nullable struct), then SessionTimeoutMs, SupportedProtocols and tagged fields."""
    writer = _FlexWriter(versioned=False).uvarint(1)
    writer.raw(Writer().int32(classic.session_timeout_ms).build())
    writer.uvarint(len(classic.supported_protocols) + 1)
    for name, metadata in classic.supported_protocols:
        writer.string(name).bytes_(metadata).uvarint(0)
    return bytes(writer.uvarint(0).out)


def _decode_classic(data: bytes) -> ClassicMemberMetadata | None:
    reader = Reader(data, flexible=True)
    if reader.uvarint() == 0:  # written as null
        return None
    session_timeout = reader.int32()
    protocols = []
    for _ in range(reader.array_length()):
        protocols.append((reader.string(), reader.bytes_()))
        reader.tagged_fields()
    reader.tagged_fields()
    return ClassicMemberMetadata(session_timeout, tuple(protocols))


def decode_member_metadata(data: bytes) -> MemberMetadata:
    reader = _reader(data, "ConsumerGroupMemberMetadataValue")
    instance_id, rack_id = reader.nullable_string(), reader.nullable_string()
    client_id, client_host = reader.string(), reader.string()
    names = tuple(reader.string() for _ in range(reader.array_length()))
    regex = reader.nullable_string()
    rebalance_timeout = reader.int32()
    assignor = reader.nullable_string()
    classic = reader.tagged_fields().get(0)  # ClassicMemberMetadata: a mixed group's classic one
    return MemberMetadata(
        instance_id, rack_id, client_id, client_host, names, regex, rebalance_timeout, assignor,
        None if classic is None else _decode_classic(classic),
    )  # fmt: skip


def encode_target_metadata(assignment_epoch: int) -> bytes:
    return encode_group_metadata(assignment_epoch)  # the same shape: one int32


def decode_target_metadata(data: bytes) -> int:
    return decode_group_metadata(data)


def encode_target_member(partitions: TopicIdPartitions) -> bytes:
    return _FlexWriter().partitions(partitions).build()


def decode_target_member(data: bytes) -> TopicIdPartitions:
    reader = _reader(data, "ConsumerGroupTargetAssignmentMemberValue")
    topics = _read_partitions(reader)
    reader.tagged_fields()
    return topics


def encode_current_assignment(value: CurrentAssignment) -> bytes:
    epochs = Writer().int32(value.member_epoch).int32(value.previous_member_epoch).build()
    writer = _FlexWriter().raw(epochs).raw(value.state.to_bytes(1, "big", signed=True))
    return writer.partitions(value.assigned).partitions(value.pending_revocation).build()


def decode_current_assignment(data: bytes) -> CurrentAssignment:
    reader = _reader(data, "ConsumerGroupCurrentMemberAssignmentValue")
    epoch, previous, state = reader.int32(), reader.int32(), reader.int8()
    assigned, pending = _read_partitions(reader), _read_partitions(reader)
    reader.tagged_fields()
    return CurrentAssignment(epoch, previous, state, assigned, pending)


def sorted_partitions(topics: Mapping[uuid.UUID, set[int]]) -> TopicIdPartitions:
    return {t: tuple(sorted(parts)) for t, parts in topics.items() if parts}
