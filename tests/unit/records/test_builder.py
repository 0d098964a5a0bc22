"""Building and reading whole batches: round trips, header fields, CRC, recompression, LAT."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.records.batch import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    batch_crc,
    iter_headers,
    parse_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    verify_crc,
)
from brokers.records.builder import (
    build_batch,
    build_entries_batch,
    read_batch,
    recompress,
    simple_batch,
    simple_records,
)
from brokers.records.compression import CODEC_NAMES, SNAPPY, ZSTD
from brokers.records.errors import CorruptRecordError, UnsupportedMagicError
from brokers.records.record import Record
from brokers.records.segment_dump import decode_log_segment
from tests.unit.records.strategies import record_lists

pytestmark = pytest.mark.unit

CODECS = sorted(CODEC_NAMES)
producer_fields = st.fixed_dictionaries(
    {
        "base_offset": st.integers(0, 2**62),
        "producer_id": st.integers(-1, 2**62),
        "producer_epoch": st.integers(-1, 2**15 - 1),
        "base_sequence": st.integers(-1, 2**31 - 1),
        "is_transactional": st.booleans(),
        "partition_leader_epoch": st.integers(-1, 2**31 - 1),
        "timestamp_type_log_append": st.booleans(),
        "base_timestamp": st.integers(0, 2**41),
    }
)


@settings(max_examples=80, deadline=None)
@given(record_lists(), st.sampled_from(CODECS), producer_fields)
def test_build_read_round_trip(records: list[Record], codec: int, fields: dict[str, Any]) -> None:
    batch = build_batch(records, compression=codec, **fields)
    header, decoded = read_batch(batch)
    assert decoded == records
    assert header.size == len(batch)
    assert header.compression == codec
    assert header.records_count == len(records)
    assert header.last_offset_delta == (len(records) - 1 if records else 0)
    assert header.base_offset == fields["base_offset"]
    assert header.producer_id == fields["producer_id"]
    assert header.producer_epoch == fields["producer_epoch"]
    assert header.base_sequence == fields["base_sequence"]
    assert header.is_transactional == fields["is_transactional"]
    assert header.is_log_append_time == fields["timestamp_type_log_append"]
    assert header.partition_leader_epoch == fields["partition_leader_epoch"]
    assert header.base_timestamp == fields["base_timestamp"]
    expected_max = (
        fields["base_timestamp"] + max(r.timestamp_delta for r in records) if records else -1
    )
    assert header.max_timestamp == expected_max
    assert not header.is_control
    verify_crc(batch, 0, header)
    assert batch_crc(batch, 0, len(batch)) == header.crc


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.tuples(record_lists(max_size=5), st.sampled_from(CODECS)), min_size=1, max_size=5)
)
def test_iter_headers_over_concatenated_batches(batches: list[tuple[list[Record], int]]) -> None:
    built = [
        build_batch(recs, compression=codec, base_offset=i * 100)
        for i, (recs, codec) in enumerate(batches)
    ]
    log = b"".join(built)
    found = list(iter_headers(log))
    assert [pos for pos, _ in found] == [sum(map(len, built[:i])) for i in range(len(built))]
    for (pos, header), (recs, codec) in zip(found, batches, strict=True):
        assert header.compression == codec
        assert read_batch(log, pos) == (header, recs)


@settings(max_examples=60, deadline=None)
@given(
    entries=st.lists(
        st.tuples(st.binary(max_size=40), st.none() | st.binary(max_size=40)),
        min_size=1,
        max_size=8,
    ),
    timestamp=st.integers(-1, 2**62),
)
def test_entries_batch_is_build_batchs_bytes(
    entries: list[tuple[bytes, bytes | None]], timestamp: int
) -> None:
    assert build_entries_batch(entries, timestamp) == build_batch(entries, base_timestamp=timestamp)


def test_entries_batch_with_lengths_past_the_varint_table() -> None:
    entries = [(b"k" * 20_000, b"v" * 70_000), (b"", None)] + [(b"x", b"y")] * 3
    assert build_entries_batch(entries, 5) == build_batch(entries, base_timestamp=5)


def test_tuples_and_control_flag() -> None:
    batch = build_batch(
        [(b"k", b"v"), (None, b"w", [("h", b"1")])], is_control=True, base_timestamp=5
    )
    header, records = read_batch(batch)
    assert header.is_control
    assert records == [Record(0, 0, b"k", b"v"), Record(1, 0, None, b"w", (("h", b"1"),))]
    with pytest.raises(ValueError, match="tuple"):
        build_batch([(b"k",)])


def test_empty_batch_keeps_its_offset_range() -> None:
    batch = build_batch([], last_offset_delta=9, producer_id=7, producer_epoch=0, base_sequence=3)
    header, records = read_batch(batch)
    assert records == []
    assert header.records_count == 0 and header.last_offset_delta == 9
    assert header.size == HEADER_SIZE
    assert header.max_timestamp == -1


def test_simple_batch_takes_timestamps_as_absolute() -> None:
    batch = simple_batch([b"a", None], keys=[b"k1", b"k2"], timestamps=[1000, 990])
    header, records = read_batch(batch)
    assert header.base_timestamp == 1000 and header.max_timestamp == 1000
    assert [header.base_timestamp + r.timestamp_delta for r in records] == [1000, 990]
    assert [r.key for r in records] == [b"k1", b"k2"]
    assert simple_records([b"x"]) == [Record(0, 0, None, b"x")]


@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("target", CODECS)
def test_recompress_keeps_everything_but_the_codec(source: int, target: int) -> None:
    original = simple_batch(
        [b"value %d" % i * 20 for i in range(50)], keys=[b"k%d" % i for i in range(50)],
        timestamps=list(range(10_000, 10_050)), compression=source, base_offset=77, producer_id=3,
        producer_epoch=2, base_sequence=40, is_transactional=True, partition_leader_epoch=4,
    )  # fmt: skip
    before, records = read_batch(original)
    after, rebuilt = read_batch(recompress(original, target))
    assert rebuilt == records
    assert after.compression == target
    fields = ("base_offset", "partition_leader_epoch", "last_offset_delta", "base_timestamp",
              "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "records_count")  # fmt: skip
    assert [getattr(after, f) for f in fields] == [getattr(before, f) for f in fields]
    assert after.attributes & ~0x07 == before.attributes & ~0x07


def test_set_log_append_time_fixes_crc() -> None:
    buf = bytearray(simple_batch([b"a", b"b"], timestamps=[1, 2], compression=ZSTD))
    set_log_append_time(buf, 0, 123_456)
    header, records = read_batch(buf)
    assert header.is_log_append_time
    assert header.max_timestamp == 123_456
    assert header.compression == ZSTD
    assert len(records) == 2


def test_set_log_append_time_at_a_position() -> None:
    first = simple_batch([b"a"])
    log = bytearray(first + simple_batch([b"b"], compression=SNAPPY))
    set_log_append_time(log, len(first), 42)
    (_, h1), (_, h2) = iter_headers(log)
    assert not h1.is_log_append_time
    assert h2.is_log_append_time and h2.max_timestamp == 42
    verify_crc(log, len(first), h2)


def test_rewriting_offset_and_epoch_keeps_crc_valid() -> None:
    buf = bytearray(simple_batch([b"a", b"b"]))
    set_base_offset(buf, 0, 1_000)
    set_partition_leader_epoch(buf, 0, 7)
    header, _ = read_batch(buf)
    assert (header.base_offset, header.partition_leader_epoch) == (1_000, 7)


def test_read_batch_errors() -> None:
    batch = bytearray(simple_batch([b"abc"]))
    with pytest.raises(CorruptRecordError):
        read_batch(batch[:-1])
    batch[ATTRIBUTES_OFFSET + 5] ^= 1
    with pytest.raises(CorruptRecordError, match="crc"):
        read_batch(batch)
    batch[16] = 1
    with pytest.raises(UnsupportedMagicError):
        read_batch(batch)


def test_decode_log_segment(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(
        simple_batch([b"a"], base_offset=0) + simple_batch([b"b", b"c"], base_offset=1)
    )
    decoded = decode_log_segment(path)
    assert [(h.base_offset, [r.value for r in recs]) for h, recs in decoded] == [
        (0, [b"a"]),
        (1, [b"b", b"c"]),
    ]
    assert parse_header(path.read_bytes()).records_count == 1
