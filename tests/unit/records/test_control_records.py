"""End-transaction marker batches: Kafka's exact bytes, round trips, CRC, refused shapes."""

from __future__ import annotations

import struct

import pytest
from aiokafka.record import default_records as aiokafka_records
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.records.batch import NO_SEQUENCE, parse_header, verify_crc
from brokers.records.builder import build_batch, read_batch, simple_batch
from brokers.records.control import (
    ABORT,
    COMMIT,
    EndTxnMarker,
    build_marker_batch,
    read_marker,
)
from brokers.records.errors import CorruptRecordError, InvalidRecordError
from brokers.records.record import Record

pytestmark = pytest.mark.unit

TS = 1_700_000_000_123
# Kafka 4.1.1 `MemoryRecords.withEndTransactionMarker(0, TS, -1, 4242, (short) 7,
# new EndTransactionMarker(type, 13))`, printed by a 10-line Java program against kafka-clients.
KAFKA_COMMIT = bytes.fromhex(
    "000000000000000000000042ffffffff021c91908e0030000000000000018bcfe5687b0000018bcfe5687b"
    "00000000000010920007ffffffff000000012000000008000000010c00000000000d00"
)
KAFKA_ABORT = bytes.fromhex(
    "000000000000000000000042ffffffff02e8af46c60030000000000000018bcfe5687b0000018bcfe5687b"
    "00000000000010920007ffffffff000000012000000008000000000c00000000000d00"
)


@pytest.mark.parametrize(("commit", "kafka"), [(True, KAFKA_COMMIT), (False, KAFKA_ABORT)])
def test_bytes_equal_kafkas(commit: bool, kafka: bytes) -> None:
    ours = build_marker_batch(4242, 7, EndTxnMarker(commit, 13), timestamp_ms=TS)
    assert ours == kafka
    assert read_marker(kafka) == EndTxnMarker(commit, 13)


def test_header_fields_and_record_layout() -> None:
    batch = build_marker_batch(99, 3, EndTxnMarker(False, 2**31 - 1), timestamp_ms=TS)
    header, records = read_batch(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch) == (99, 3)
    assert header.base_sequence == NO_SEQUENCE
    assert (header.records_count, header.last_offset_delta, header.compression) == (1, 0, 0)
    assert header.base_timestamp == header.max_timestamp == TS
    assert not header.is_log_append_time
    assert records == [Record(0, 0, struct.pack(">hh", 0, ABORT), struct.pack(">hi", 0, 2**31 - 1))]


@settings(max_examples=50, deadline=None)
@given(
    st.integers(0, 2**63 - 1), st.integers(0, 2**15 - 1), st.booleans(),
    st.integers(-(2**31), 2**31 - 1), st.integers(0, 2**42),
)  # fmt: skip
def test_round_trip_and_crc(pid: int, epoch: int, commit: bool, coordinator: int, ts: int) -> None:
    batch = build_marker_batch(pid, epoch, EndTxnMarker(commit, coordinator), timestamp_ms=ts)
    verify_crc(batch, 0, parse_header(batch))
    assert read_marker(batch) == EndTxnMarker(commit, coordinator)


def test_a_client_library_reads_it_as_a_valid_control_batch() -> None:
    batch = build_marker_batch(4242, 7, EndTxnMarker(True, 5), timestamp_ms=TS)
    reader = aiokafka_records._DefaultRecordBatchPy(bytearray(batch))
    assert reader.validate_crc()
    assert reader.is_control_batch and reader.is_transactional
    (record,) = list(reader)
    assert (record.key, record.value) == (struct.pack(">hh", 0, COMMIT), struct.pack(">hi", 0, 5))


def test_a_batch_built_by_the_builder_is_read() -> None:
    key, value = struct.pack(">hh", 0, COMMIT), struct.pack(">hi", 0, 8)
    batch = build_batch(
        [(key, value)], base_offset=77, producer_id=5, producer_epoch=1, is_transactional=True,
        is_control=True, partition_leader_epoch=4,
    )  # fmt: skip
    assert read_marker(batch) == EndTxnMarker(True, 8)


def test_newer_versions_are_read_as_version_0() -> None:
    key, value = struct.pack(">hhi", 1, ABORT, 0), struct.pack(">hiq", 3, 6, 0)
    batch = build_batch([(key, value)], is_control=True, is_transactional=True)
    assert read_marker(batch) == EndTxnMarker(False, 6)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (struct.pack(">hh", 0, 2), struct.pack(">hi", 0, 1), "not a transaction marker"),
        (struct.pack(">hh", -1, 1), struct.pack(">hi", 0, 1), "key version"),
        (b"\x00\x00", struct.pack(">hi", 0, 1), "key of 2 bytes"),
        (None, struct.pack(">hi", 0, 1), "key of 0 bytes"),
        (struct.pack(">hh", 0, 1), b"\x00\x00\x00", "value of 3 bytes"),
        (struct.pack(">hh", 0, 1), None, "value of 0 bytes"),
        (struct.pack(">hh", 0, 0), struct.pack(">hi", -2, 1), "marker version"),
    ],
)
def test_malformed_markers_are_refused(
    key: bytes | None, value: bytes | None, message: str
) -> None:
    batch = build_batch([(key, value)], is_control=True, is_transactional=True)
    with pytest.raises(InvalidRecordError, match=message):
        read_marker(batch)


def test_not_a_control_batch_or_empty_or_corrupt() -> None:
    with pytest.raises(InvalidRecordError, match="not a control batch"):
        read_marker(simple_batch([b"v"], is_transactional=True))
    with pytest.raises(InvalidRecordError, match="no record"):
        read_marker(build_batch([], is_control=True, is_transactional=True))
    corrupt = bytearray(build_marker_batch(1, 0, EndTxnMarker(True, 0), timestamp_ms=TS))
    corrupt[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="corrupt"):
        read_marker(corrupt)
