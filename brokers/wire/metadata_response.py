"""Metadata response bodies (API key 3, v0–13; v9+ flexible) written straight from plain values.

Owns: `encode_metadata_response` (head, topics, tail: `encode_metadata_head`, `_topics`, `_tail`),
the body the Metadata handler answers with, and its value types
(`MetadataBroker`, `MetadataTopic`, and per partition a `PartitionRow` tuple). A full Metadata
answer names every partition of the cluster, and kio's path (a dataclass per partition, then its
field-by-field writer) cost about 7 µs a partition: 7 ms of the event loop for 1,000 partitions,
70 ms for 10,000, during which no other client was served (the topic-churn bystander's p99,
docs/benchmarks.md). Here a partition is one struct pack and its three broker lists. Fields by
version, as Kafka's schema: throttle_time_ms from v3; a broker's rack and the controller id, a
topic's is_internal from v1; the cluster id from v2; offline replicas from v5; the leader epoch
from v7; a topic's authorized operations from v8 and the cluster's in v8–10; flexible encoding
from v9; topic ids from v10; a null topic name from v12; the top-level error code in v13. Tests
compare every version byte for byte with kio's encoding. Pure; thread-safe.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from brokers.wire.raw_reader import encode_length, encode_string

# A requested Metadata topic name `<prefix>*` asks for every topic whose name starts with
# `<prefix>` (brokers/handlers/metadata.py): a Pier extension, as `*` is in no legal topic name.
PREFIX_WILDCARD = "*"

LAST_VERSION = 13
FIRST_FLEXIBLE_VERSION = 9
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD_V0 = struct.Struct(">hii")  # error code, partition index, leader
_HEAD_V7 = struct.Struct(">hiii")  # ... leader epoch
_NULL_UUID = bytes(16)
_ONE_BYTE_COUNT = 127  # a compact length of 128 or more takes two bytes


class MetadataBroker(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None


class PartitionRow(NamedTuple):
    """One partition as answered: leader -1 with LEADER_NOT_AVAILABLE when it has none live."""

    error_code: int
    partition_index: int
    leader: int
    leader_epoch: int
    replicas: Sequence[int]
    isr: Sequence[int]
    offline_replicas: Sequence[int]


class MetadataTopic(NamedTuple):
    error_code: int
    name: str | None  # None only for an unknown topic id (v12+ answers a null name)
    topic_id: uuid.UUID | None
    is_internal: bool
    partitions: Sequence[PartitionRow]
    authorized_operations: int


def encode_metadata_response(
    version: int,
    *,
    throttle_ms: int,
    brokers: Iterable[MetadataBroker],
    cluster_id: str | None,
    controller_id: int,
    topics: Sequence[MetadataTopic],
    cluster_authorized_operations: int,
    error_code: int = 0,
) -> bytes:
    """The body of a Metadata response of `version` (0–13)."""
    head = encode_metadata_head(
        version,
        throttle_ms=throttle_ms,
        brokers=brokers,
        cluster_id=cluster_id,
        controller_id=controller_id,
        topic_count=len(topics),
    )
    tail = encode_metadata_tail(version, cluster_authorized_operations, error_code)
    return head + encode_metadata_topics(version, topics) + tail


def encode_metadata_head(
    version: int,
    *,
    throttle_ms: int,
    brokers: Iterable[MetadataBroker],
    cluster_id: str | None,
    controller_id: int,
    topic_count: int,
) -> bytes:
    """What comes before the topics: `encode_metadata_response` is head, topics, tail (a large
    answer's topics can be written a slice at a time, `encode_metadata_topics`)."""
    if not 0 <= version <= LAST_VERSION:
        raise ValueError(f"Metadata v{version} is not encoded here (v0–v{LAST_VERSION})")
    flexible = version >= FIRST_FLEXIBLE_VERSION
    out = bytearray(_I32.pack(throttle_ms) if version >= 3 else b"")
    listed = list(brokers)
    out += encode_length(len(listed), flexible, wide=True)
    for broker in listed:
        out += _I32.pack(broker.node_id) + encode_string(broker.host, flexible)
        out += _I32.pack(broker.port)
        if version >= 1:
            out += encode_string(broker.rack, flexible)
        if flexible:
            out.append(0)
    if version >= 2:
        out += encode_string(cluster_id, flexible)
    if version >= 1:
        out += _I32.pack(controller_id)
    out += encode_length(topic_count, flexible, wide=True)
    return bytes(out)


def encode_metadata_topics(version: int, topics: Iterable[MetadataTopic]) -> bytes:
    """`topics`' entries, in order, as they follow the head."""
    flexible = version >= FIRST_FLEXIBLE_VERSION
    out = bytearray()
    for topic in topics:
        _topic(out, topic, version, flexible)
    return bytes(out)


def encode_metadata_tail(
    version: int, cluster_authorized_operations: int, error_code: int = 0
) -> bytes:
    """What follows the topics."""
    out = bytearray()
    if 8 <= version <= 10:
        out += _I32.pack(cluster_authorized_operations)
    if version >= 13:
        out += _I16.pack(error_code)
    if version >= FIRST_FLEXIBLE_VERSION:
        out.append(0)
    return bytes(out)


def _topic(out: bytearray, topic: MetadataTopic, version: int, flexible: bool) -> None:
    out += _I16.pack(topic.error_code) + encode_string(topic.name, flexible)
    if version >= 10:
        out += topic.topic_id.bytes if topic.topic_id is not None else _NULL_UUID
    if version >= 1:
        out.append(1 if topic.is_internal else 0)
    out += encode_length(len(topic.partitions), flexible, wide=True)
    epochs, offline = version >= 7, version >= 5
    bump = 1 if flexible else 0  # a compact length is the count plus one
    layouts = _LAYOUTS[(epochs, flexible)]
    for row in topic.partitions:
        error, index, leader, epoch, r, i, o = row
        counts: tuple[int, ...] = (len(r), len(i), len(o)) if offline else (len(r), len(i))
        layout = layouts.get(counts)
        if layout is None:
            if flexible and max(counts) >= _ONE_BYTE_COUNT:
                _generic_partition(out, row, epochs, offline, flexible)
                continue
            layout = _partition_layout(epochs, flexible, counts)
            if len(layouts) < _LAYOUTS_MAX:
                layouts[counts] = layout
        # One pack a partition: the head, then each list's length and its ids.
        if epochs:
            out += layout.pack(error, index, leader, epoch, counts[0] + bump, *r,
                               counts[1] + bump, *i, counts[2] + bump, *o)  # fmt: skip
        elif offline:
            out += layout.pack(error, index, leader, counts[0] + bump, *r, counts[1] + bump, *i,
                               counts[2] + bump, *o)  # fmt: skip
        else:
            out += layout.pack(error, index, leader, counts[0] + bump, *r, counts[1] + bump, *i)
    if version >= 8:
        out += _I32.pack(topic.authorized_operations)
    if flexible:
        out.append(0)


# Per (epochs, flexible): the layouts met so far by their lists' lengths, found without a call.
_LAYOUTS: dict[tuple[bool, bool], dict[tuple[int, ...], struct.Struct]] = {
    (epochs, flexible): {} for epochs in (False, True) for flexible in (False, True)
}
_LAYOUTS_MAX = 4096  # the brokers' replica lists' shapes: few; bounded all the same


def _partition_layout(epochs: bool, flexible: bool, counts: tuple[int, ...]) -> struct.Struct:
    """One partition's whole encoding as one struct, for its broker lists' lengths: the fixed
    head, then each list's length (a one-byte compact length when flexible) and its ids, then
    the empty tagged fields (flexible). One pack a partition instead of seven writes."""
    fmt = ">hiii" if epochs else ">hii"
    for count in counts:
        fmt += f"{'B' if flexible else 'i'}{count}i"
    return struct.Struct(fmt + ("x" if flexible else ""))


def _generic_partition(
    out: bytearray, row: PartitionRow, epochs: bool, offline: bool, flexible: bool
) -> None:
    """A partition with a broker list of 127 or more ids (two-byte compact lengths)."""
    if epochs:
        out += _HEAD_V7.pack(row.error_code, row.partition_index, row.leader, row.leader_epoch)
    else:
        out += _HEAD_V0.pack(row.error_code, row.partition_index, row.leader)
    out += _ints(row.replicas, flexible) + _ints(row.isr, flexible)
    if offline:
        out += _ints(row.offline_replicas, flexible)
    if flexible:
        out.append(0)


def _ints(values: Sequence[int], flexible: bool) -> bytes:
    """An array of int32 (broker ids): its length, then the ids."""
    count = len(values)
    return encode_length(count, flexible, wide=True) + struct.pack(f">{count}i", *values)
