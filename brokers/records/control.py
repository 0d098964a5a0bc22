"""Control batches: the end-transaction markers a transaction coordinator writes (KIP-98).

Owns: `EndTxnMarker`, `build_marker_batch` (one v2 batch, transactional and control, no
sequence) and `read_marker` (the control record of one whole control batch). Byte layout, as
Kafka's `ControlRecordType` / `EndTransactionMarker` / `MemoryRecords.withEndTransactionMarker`:

    record key   = version int16 (0) | type int16 (ABORT 0, COMMIT 1)
    record value = version int16 (0) | coordinator_epoch int32

The batch has the producer's id and epoch, base sequence -1, one record at offset delta 0 with
timestamp delta 0, base and max timestamp = the marker's timestamp, CreateTime, no compression.
Reading follows Kafka: a key or value version below 0 is corruption, a newer version is read as
version 0 (fields are only ever added), other control types (KRaft's) are not markers.
Control batches are rare (one per transaction and partition), so this is plain Python.
Pure functions; thread-safe.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from typing_extensions import Buffer

from brokers.records.builder import build_batch, read_batch
from brokers.records.errors import InvalidRecordError
from brokers.records.record import Record

ABORT, COMMIT = 0, 1  # control record key type (ControlRecordType)
CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0
_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    commit: bool
    coordinator_epoch: int
    # KIP-890 part 2: 2 for a transaction version 2 marker (WriteTxnMarkers v2), whose epoch must
    # be strictly above the producer's at the leader; never written to the log
    transaction_version: int = field(default=0, compare=False)

    @property
    def control_type(self) -> int:
        return COMMIT if self.commit else ABORT


def marker_record(marker: EndTxnMarker) -> Record:
    """The one record of a marker batch (offset delta 0, timestamp delta 0)."""
    key = _KEY.pack(CONTROL_KEY_VERSION, marker.control_type)
    value = _VALUE.pack(MARKER_VALUE_VERSION, marker.coordinator_epoch)
    return Record(0, 0, key, value)


def build_marker_batch(
    producer_id: int, producer_epoch: int, marker: EndTxnMarker, *, timestamp_ms: int
) -> bytes:
    """One v2 control batch holding `marker` (offsets and leader epoch are the log's to assign)."""
    return build_batch(
        [marker_record(marker)], producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=-1, is_transactional=True, is_control=True, base_timestamp=timestamp_ms,
    )  # fmt: skip


def read_marker(batch: Buffer) -> EndTxnMarker:
    """The end-transaction marker of one whole control batch (CRC checked).

    Raises CorruptRecordError for bytes that are not a valid batch, InvalidRecordError for a
    batch that is not a control batch, holds no record, or whose record is not a COMMIT/ABORT
    marker."""
    header, records = read_batch(batch)
    if not header.is_control:
        raise InvalidRecordError(f"batch at offset {header.base_offset} is not a control batch")
    if not records:
        raise InvalidRecordError(f"control batch at offset {header.base_offset} has no record")
    return marker_of(records[0])


def marker_of(record: Record) -> EndTxnMarker:
    """Decode a control record's key and value (Kafka's EndTransactionMarker.deserialize)."""
    control_type = control_type_of(record)
    if control_type not in (ABORT, COMMIT):
        raise InvalidRecordError(f"control record type {control_type} is not a transaction marker")
    value = record.value
    if value is None or len(value) < _VALUE.size:
        size = 0 if value is None else len(value)
        raise InvalidRecordError(f"end transaction marker value of {size} bytes; at least 6")
    version, coordinator_epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise InvalidRecordError(f"invalid end transaction marker version {version}")
    return EndTxnMarker(control_type == COMMIT, coordinator_epoch)


def control_type_of(record: Record) -> int:
    """The type of a control record's key (Kafka's ControlRecordType.parseTypeId)."""
    key = record.key
    if key is None or len(key) < _KEY.size:
        size = 0 if key is None else len(key)
        raise InvalidRecordError(f"control record key of {size} bytes; at least 4")
    version, control_type = _KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"invalid control record key version {version}")
    return int(control_type)
