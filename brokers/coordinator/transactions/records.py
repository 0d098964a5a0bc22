"""`__transaction_state` records in Kafka's formats (TransactionLogKey / TransactionLogValue).

Owns: encoding and decoding the key (version 0: the transactional id) and the value (version 0,
the classic encoding Kafka writes until `transaction.version` 2; version 1, the flexible one, is
read too, its tagged fields included), byte for byte as Kafka's generated message classes with
`MessageUtil.toVersionPrefixedBytes`. A tombstone (null value) deletes the id. An Empty
transaction is written with a null partition list, as Kafka does. Decoding never raises anything
but `TxnRecordError` (overruns, bad lengths, unknown versions). Pure; thread-safe.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from brokers.coordinator.binary import Reader
from brokers.coordinator.transactions.errors import TxnRecordError
from brokers.wire.primitives import write_uvarint

KEY_VERSION = 0
VALUE_VERSION = 0  # Kafka writes v0 until transaction.version 2 (KIP-890 part 2)
FLEXIBLE_VALUE_VERSION = 1
NO_PRODUCER_ID = -1

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_TAG_PREVIOUS_PRODUCER_ID, _TAG_NEXT_PRODUCER_ID, _TAG_CLIENT_VERSION = 0, 1, 2

Partitions = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """One TransactionLogValue, field for field (`partitions` None: the null array)."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: Partitions | None
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = NO_PRODUCER_ID  # tagged, v1+
    next_producer_id: int = NO_PRODUCER_ID  # tagged, v1+
    client_transaction_version: int = 0  # tagged, v1+


def group_partitions(partitions: Iterable[tuple[str, int]]) -> Partitions:
    """(topic, partition) pairs as the value's [topic, [partition ids]], sorted."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return tuple((topic, tuple(sorted(ids))) for topic, ids in sorted(by_topic.items()))


# ---- encoding ---------------------------------------------------------------------------------


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def encode_value(value: TransactionLogValue, version: int = VALUE_VERSION) -> bytes:
    if version not in (VALUE_VERSION, FLEXIBLE_VALUE_VERSION):
        raise ValueError(f"unknown TransactionLogValue version {version}")
    flexible = version == FLEXIBLE_VALUE_VERSION
    out = bytearray(_I16.pack(version))
    out += _I64.pack(value.producer_id) + _I16.pack(value.producer_epoch)
    out += _I32.pack(value.timeout_ms) + _I8.pack(value.status)
    out += _partitions(value.partitions, flexible)
    out += _I64.pack(value.last_update_ms) + _I64.pack(value.start_ms)
    if flexible:
        out += _tagged_fields(value)
    return bytes(out)


def _string(text: str, flexible: bool = False) -> bytes:
    encoded = text.encode("utf-8")
    size = write_uvarint(len(encoded) + 1) if flexible else _I16.pack(len(encoded))
    return size + encoded


def _partitions(partitions: Partitions | None, flexible: bool) -> bytes:
    if partitions is None:
        return write_uvarint(0) if flexible else _I32.pack(-1)
    out = bytearray(write_uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions)))
    for topic, ids in partitions:
        out += _string(topic, flexible)
        out += write_uvarint(len(ids) + 1) if flexible else _I32.pack(len(ids))
        for partition in ids:
            out += _I32.pack(partition)
        if flexible:
            out += write_uvarint(0)  # no tagged fields
    return bytes(out)


def _tagged_fields(value: TransactionLogValue) -> bytes:
    fields: list[tuple[int, bytes]] = []
    if value.previous_producer_id != NO_PRODUCER_ID:
        fields.append((_TAG_PREVIOUS_PRODUCER_ID, _I64.pack(value.previous_producer_id)))
    if value.next_producer_id != NO_PRODUCER_ID:
        fields.append((_TAG_NEXT_PRODUCER_ID, _I64.pack(value.next_producer_id)))
    if value.client_transaction_version != 0:
        fields.append((_TAG_CLIENT_VERSION, _I16.pack(value.client_transaction_version)))
    out = bytearray(write_uvarint(len(fields)))
    for tag, data in fields:
        out += write_uvarint(tag) + write_uvarint(len(data)) + data
    return bytes(out)


# ---- decoding ---------------------------------------------------------------------------------


def decode_key(data: bytes) -> str | None:
    """The transactional id, or None for a key version this coordinator does not know (Kafka
    skips those: leftovers of an aborted upgrade)."""
    reader = _Reader(data)
    if reader.int16() != KEY_VERSION:
        return None
    return reader.string()


def decode_value(data: bytes | None) -> TransactionLogValue | None:
    """The value, or None for a tombstone."""
    if data is None:
        return None
    reader = _Reader(data)
    version = reader.int16()
    if version not in (VALUE_VERSION, FLEXIBLE_VALUE_VERSION):
        raise TxnRecordError(f"unknown TransactionLogValue version {version}")
    reader.flexible = version == FLEXIBLE_VALUE_VERSION
    producer_id, epoch, timeout_ms = reader.int64(), reader.int16(), reader.int32()
    status = reader.int8()
    partitions = reader.partitions()
    last_update_ms, start_ms = reader.int64(), reader.int64()
    tags = reader.tagged_fields()
    return TransactionLogValue(
        producer_id=producer_id,
        producer_epoch=epoch,
        timeout_ms=timeout_ms,
        status=status,
        partitions=partitions,
        last_update_ms=last_update_ms,
        start_ms=start_ms,
        previous_producer_id=_tag_int(tags, _TAG_PREVIOUS_PRODUCER_ID, _I64, NO_PRODUCER_ID),
        next_producer_id=_tag_int(tags, _TAG_NEXT_PRODUCER_ID, _I64, NO_PRODUCER_ID),
        client_transaction_version=_tag_int(tags, _TAG_CLIENT_VERSION, _I16, 0),
    )


def _tag_int(tags: dict[int, bytes], tag: int, shape: struct.Struct, default: int) -> int:
    data = tags.get(tag)
    if data is None:
        return default
    if len(data) != shape.size:
        raise TxnRecordError(f"tagged field {tag} has {len(data)} bytes, not {shape.size}")
    return int(shape.unpack(data)[0])


class _Reader(Reader):
    error = TxnRecordError

    def partitions(self) -> Partitions | None:
        count = self.nullable_array_length()
        if count < 0:
            return None
        topics = []
        for _ in range(count):
            topic = self.string()
            size = self.nullable_array_length()
            ids = tuple(self.int32() for _ in range(max(size, 0)))
            self.tagged_fields()
            topics.append((topic, ids))
        return tuple(topics)
