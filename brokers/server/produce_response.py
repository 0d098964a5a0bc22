"""Produce response bodies (API key 0, v3–13; v9+ flexible) encoded without kio.

Owns: `PartitionAnswer` (a partition's answer as plain values) and `encode_answers(version,
topics) -> bytes | None`, the encoding of the answer every Produce request gets: struct-packed,
per partition a few fixed-size fields, with no kio dataclass built (building and walking them
was about a ninth of the broker's CPU per one-partition Produce request: 5.8 µs of 51,
docs/benchmarks.md). It takes the answers a leader gives: no `current_leader`, no
`node_endpoints`, and returns None for an answer with record errors, which the caller builds
with kio (`kio_response`) and kio encodes; tests compare the two byte for byte on every version.
Pure; thread-safe.
"""

from __future__ import annotations

import datetime
import struct
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

from brokers.wire.entities import make
from brokers.wire.errors import ErrorCode
from brokers.wire.primitives import write_uvarint

FIRST_VERSION = 3
LAST_VERSION = 13
FIRST_FLEXIBLE_VERSION = 9
FIRST_LOG_START_VERSION = 5
FIRST_RECORD_ERRORS_VERSION = 8
TOPIC_ID_VERSION = 13
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_PARTITION_V3 = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time
_PARTITION_V5 = struct.Struct(">ihqqq")  # ... log_start_offset
_NULL_ID = bytes(16)
_NO_RECORD_ERRORS = b"\x01"  # a compact empty array (length + 1) in v9+; v8 writes int32 0
_NO_TAGS = b"\x00"
_NOT_THROTTLED = bytes(4)  # throttle_time_ms 0


class PartitionAnswer(NamedTuple):
    """One partition's answer; -1 where there is no offset or time."""

    partition_index: int
    error_code: int
    base_offset: int = -1
    log_append_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: tuple[tuple[int, str | None], ...] = ()  # (batch index, message)


class TopicAnswer(NamedTuple):
    name: str
    topic_id: bytes | None  # v13: the 16 bytes of the topic id the request named
    partitions: list[PartitionAnswer]


def encode_answers(version: int, topics: Sequence[TopicAnswer]) -> bytes | None:
    """The body answering `topics`, or None when a partition has record errors (kio's path)."""
    if not FIRST_VERSION <= version <= LAST_VERSION:
        return None
    flexible = version >= FIRST_FLEXIBLE_VERSION
    out = bytearray(_length(len(topics), flexible))
    for name, topic_id, partitions in topics:
        if version >= TOPIC_ID_VERSION:
            out += topic_id or _NULL_ID
        else:
            out += _string(name, flexible)
        out += _length(len(partitions), flexible)
        for answer in partitions:
            if answer.record_errors and version >= FIRST_RECORD_ERRORS_VERSION:
                return None
            out += _partition(answer, version, flexible)
        if flexible:
            out += _NO_TAGS
    out += _NOT_THROTTLED  # a broker never throttles (the gateway does)
    if flexible:
        out += _NO_TAGS  # node_endpoints (v10+) absent: no tagged fields
    return bytes(out)


def _partition(answer: PartitionAnswer, version: int, flexible: bool) -> bytes:
    if version >= FIRST_LOG_START_VERSION:
        fixed = _PARTITION_V5.pack(
            answer.partition_index, answer.error_code, answer.base_offset, answer.log_append_ms,
            answer.log_start_offset,
        )  # fmt: skip
    else:
        fixed = _PARTITION_V3.pack(
            answer.partition_index, answer.error_code, answer.base_offset, answer.log_append_ms
        )
    if version < FIRST_RECORD_ERRORS_VERSION:
        return fixed
    if not flexible:
        return fixed + _I32.pack(0) + _string(answer.error_message, False)
    return fixed + _NO_RECORD_ERRORS + _string(answer.error_message, True) + _NO_TAGS


def kio_response(module: Any, topics: Sequence[TopicAnswer]) -> Any:
    """The same answer as kio's ProduceResponse of `module` (for the answers `encode_answers`
    leaves: record errors)."""
    return make(
        module,
        "ProduceResponse",
        responses=tuple(
            make(
                module,
                "TopicProduceResponse",
                name=name,
                topic_id=uuid.UUID(bytes=topic_id) if topic_id else None,
                partition_responses=tuple(_kio_partition(module, a) for a in partitions),
            )
            for name, topic_id, partitions in topics
        ),
        throttle_time=datetime.timedelta(0),
    )


def _kio_partition(module: Any, answer: PartitionAnswer) -> Any:
    errors = tuple(
        make(module, "BatchIndexAndErrorMessage", batch_index=i, batch_index_error_message=m)
        for i, m in answer.record_errors
        if hasattr(module, "BatchIndexAndErrorMessage")  # v8+
    )
    append_time = answer.log_append_ms
    return make(
        module,
        "PartitionProduceResponse",
        index=answer.partition_index,
        error_code=ErrorCode(answer.error_code),
        base_offset=answer.base_offset,
        log_append_time=None
        if append_time < 0
        else datetime.datetime.fromtimestamp(append_time / 1000, tz=datetime.UTC),
        log_start_offset=answer.log_start_offset,
        record_errors=errors,
        error_message=answer.error_message,
    )


def _length(count: int, flexible: bool) -> bytes:
    return write_uvarint(count + 1) if flexible else _I32.pack(count)


def _string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else _I16.pack(-1)
    encoded = value.encode()
    return (write_uvarint(len(encoded) + 1) if flexible else _I16.pack(len(encoded))) + encoded


def _milliseconds(delta: datetime.timedelta) -> int:
    if not delta:
        return 0  # the usual answer: not throttled
    return round(delta.total_seconds() * 1000)  # as kio's writer rounds
