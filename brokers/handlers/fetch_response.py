"""Hand-written Fetch response encoder (v4–18) that leaves record data in the segment files.

Why not kio: its writer would need the records as bytes in memory. Here the body is a list of
parts in which each partition's records are a file region, so the connection can sendfile them
(docs/design.md, "Fetch"). From v13 a topic is written as its 16-byte id instead of its name;
from v16 a partition with a known leader (`leaders`) carries the tagged `current_leader` and the
answer the tagged `node_endpoints` of those leaders (KIP-951). Pure; thread-safe.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from brokers.replication.metadata_cache import BrokerEndpoint
from brokers.server.response import FileSegment, Part, RawResponse
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import write_uvarint

FIRST_FLEXIBLE_VERSION = 12
TOPIC_ID_VERSION = 13
CURRENT_LEADER_VERSION = 16
_CURRENT_LEADER_TAG = 1  # partition tagged field
_NODE_ENDPOINTS_TAG = 0  # response tagged field
_LEADER = struct.Struct(">ii")  # leader id, leader epoch
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")  # producer id, first offset
_TOP = struct.Struct(">ihi")  # throttle, error, session id (v7+)


@dataclass(frozen=True, slots=True)
class PartitionData:
    index: int
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileSegment | None = None
    # read_committed: (producer id, first offset) of each aborted transaction in `records`;
    # None: none listed (null for read_uncommitted, empty for read_committed)
    aborted: Sequence[tuple[int, int]] | None = None
    # v11+ (KIP-392): the follower the consumer should fetch this partition from; -1: none
    preferred_read_replica: int = -1

    @property
    def records_size(self) -> int:
        return 0 if self.records is None else self.records.size


@dataclass(frozen=True, slots=True)
class TopicData:
    name: str
    partitions: list[PartitionData]
    topic_id: bytes = b""  # 16 bytes, written from v13 (b"": the zero id)


@dataclass(frozen=True, slots=True)
class LeaderEndpoint:
    """v16+: a partition's current leader and epoch, and the leader's endpoint if known."""

    leader_id: int
    leader_epoch: int
    endpoint: BrokerEndpoint | None


def encode_fetch_response(
    version: int,
    topics: list[TopicData],
    *,
    throttle_ms: int = 0,
    error: ErrorCode = ErrorCode.none,
    session_id: int = 0,
    read_committed: bool = False,
    leaders: dict[tuple[str, int], LeaderEndpoint] | None = None,
) -> RawResponse:
    flexible = version >= FIRST_FLEXIBLE_VERSION
    by_id = version >= TOPIC_ID_VERSION
    if version < CURRENT_LEADER_VERSION:
        leaders = None
    out = bytearray(_I32.pack(throttle_ms))
    if version >= 7:
        out += _I16.pack(error) + _I32.pack(session_id)
    out += _array_length(len(topics), flexible)
    parts: list[Part] = []
    for topic in topics:
        if by_id:
            out += topic.topic_id or bytes(16)
        else:
            name = topic.name.encode()
            out += (write_uvarint(len(name) + 1) if flexible else _I16.pack(len(name))) + name
        out += _array_length(len(topic.partitions), flexible)
        for partition in topic.partitions:
            _partition_head(out, partition, version, flexible, read_committed)
            if partition.records is not None and partition.records.size > 0:
                parts.append(bytes(out))
                parts.append(partition.records)
                out = bytearray()
            if flexible:
                leader = leaders.get((topic.name, partition.index)) if leaders else None
                out += _partition_tags(leader)
        if flexible:
            out += b"\x00"  # topic tagged fields
    if flexible:
        out += _node_endpoints(leaders)
    parts.append(bytes(out))
    return RawResponse(parts)


def _partition_tags(leader: LeaderEndpoint | None) -> bytes:
    if leader is None:
        return b"\x00"
    body = _LEADER.pack(leader.leader_id, leader.leader_epoch) + b"\x00"
    return b"\x01" + write_uvarint(_CURRENT_LEADER_TAG) + write_uvarint(len(body)) + body


def _node_endpoints(leaders: dict[tuple[str, int], LeaderEndpoint] | None) -> bytes:
    """The response's tagged fields: v16+'s node endpoints of the leaders named, if any."""
    endpoints = {
        leader.endpoint.node_id: leader.endpoint
        for leader in (leaders or {}).values()
        if leader.endpoint is not None
    }
    if not endpoints:
        return b"\x00"
    body = bytearray(write_uvarint(len(endpoints) + 1))
    for node in sorted(endpoints.values(), key=lambda e: e.node_id):
        host = node.host.encode()
        body += _I32.pack(node.node_id) + write_uvarint(len(host) + 1) + host
        body += _I32.pack(node.port)
        rack = None if node.rack is None else node.rack.encode()
        body += b"\x00" if rack is None else write_uvarint(len(rack) + 1) + rack
        body += b"\x00"  # endpoint tagged fields
    return b"\x01" + write_uvarint(_NODE_ENDPOINTS_TAG) + write_uvarint(len(body)) + bytes(body)


def _array_length(count: int, flexible: bool) -> bytes:
    return write_uvarint(count + 1) if flexible else _I32.pack(count)


def _partition_head(
    out: bytearray, p: PartitionData, version: int, flexible: bool, read_committed: bool
) -> None:
    out += _PARTITION_HEAD.pack(p.index, p.error, p.high_watermark, p.last_stable_offset)
    if version >= 5:
        out += _I64.pack(p.log_start_offset)
    _aborted_transactions(out, p.aborted, flexible, read_committed)
    if version >= 11:
        out += _I32.pack(p.preferred_read_replica)
    size = p.records_size
    out += write_uvarint(size + 1) if flexible else _I32.pack(size)


def _aborted_transactions(
    out: bytearray, aborted: Sequence[tuple[int, int]] | None, flexible: bool, read_committed: bool
) -> None:
    """Null for read_uncommitted (as Kafka), else the list (empty on errors or no data)."""
    if aborted is None and not read_committed:
        out += b"\x00" if flexible else _I32.pack(-1)
        return
    entries = aborted or ()
    out += _array_length(len(entries), flexible)
    for producer_id, first_offset in entries:
        out += _ABORTED.pack(producer_id, first_offset)
        if flexible:
            out += b"\x00"  # aborted transaction tagged fields
