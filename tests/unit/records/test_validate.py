"""Leader-side validation: every failure maps to Kafka's error, valid batches pass, bit flips fail.

Every batch's records are walked (per-record validation is always on, as in Kafka)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.records.batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    batch_crc,
    parse_header,
)
from brokers.records.builder import build_batch, simple_batch
from brokers.records.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from brokers.records.errors import (
    CorruptRecordError,
    DecompressedSizeError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
    UnsupportedMagicError,
)
from brokers.records.record import Record
from brokers.records.validate import validate_for_append

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000
HOUR = 3_600_000
LIMITS: dict[str, Any] = {
    "now_ms": NOW,
    "max_message_bytes": 1_000_000,
    "timestamp_before_max_ms": HOUR,
    "timestamp_after_max_ms": HOUR,
    "requires_keys": False,
}


def validate(data: bytes | bytearray, **overrides: Any) -> Any:
    return validate_for_append(data, **{**LIMITS, **overrides})


def batch(count: int = 3, **options: Any) -> bytes:
    options.setdefault("timestamps", [NOW + i for i in range(count)])
    keys = options.pop("keys", [b"k%d" % i for i in range(count)])
    return simple_batch([b"value-%d" % i for i in range(count)], keys=keys, **options)


def patched(data: bytes, **fields: Any) -> bytes:
    """The batch with header fields replaced and a CRC that matches again."""
    header = parse_header(data)._replace(**fields)
    out = bytearray(data)
    HEADER.pack_into(out, 0, *header)
    out[CRC_OFFSET:ATTRIBUTES_OFFSET] = batch_crc(out, 0, len(out)).to_bytes(4)
    return bytes(out)


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_valid_batch_passes(codec: int) -> None:
    data = batch(5, compression=codec, producer_id=4, producer_epoch=0, base_sequence=0)
    assert validate(data) == [(0, parse_header(data))]
    assert validate(data, requires_keys=True) == [(0, parse_header(data))]


def test_no_batch() -> None:
    with pytest.raises(InvalidRecordError):
        validate(b"")


@pytest.mark.parametrize("cut", [1, 16, 17, 60, 61])
def test_truncated_data(cut: int) -> None:
    data = batch()
    with pytest.raises(CorruptRecordError):
        validate(data[:cut] if cut < 61 else data[:-1])


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_other_magic_is_unsupported(magic: int) -> None:
    data = bytearray(batch())
    data[16] = magic
    with pytest.raises(UnsupportedMagicError):
        validate(data)
    # A v0 message set can be shorter than a v2 header; the magic still decides.
    with pytest.raises(UnsupportedMagicError):
        validate(bytes(data[:30]))


def test_batch_length_below_header() -> None:
    data = bytearray(batch(0, timestamps=[]))
    data[8:12] = (HEADER_SIZE - 13).to_bytes(4)
    with pytest.raises(CorruptRecordError, match="minimum"):
        validate(data)


def test_one_batch_per_partition_from_clients() -> None:
    two = batch() + batch()
    with pytest.raises(InvalidRecordError, match="exactly one"):
        validate(two)
    assert [pos for pos, _ in validate(two, origin_client=False)] == [0, len(two) // 2]


def test_client_base_offset_must_be_zero() -> None:
    data = batch(base_offset=10)
    with pytest.raises(InvalidRecordError, match="base offset"):
        validate(data)
    assert validate(data, origin_client=False)


def test_too_large() -> None:
    data = batch()
    assert validate(data, max_message_bytes=len(data))
    with pytest.raises(RecordTooLargeError):
        validate(data, max_message_bytes=len(data) - 1)


def test_size_is_checked_before_crc_as_kafka_does() -> None:
    data = bytearray(batch())
    data[-1] ^= 0xFF
    with pytest.raises(RecordTooLargeError):
        validate(data, max_message_bytes=10)
    with pytest.raises(CorruptRecordError, match="crc"):
        validate(data)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([NONE, GZIP, ZSTD]), st.data())
def test_any_bit_flip_in_the_crc_covered_area_is_caught(codec: int, draw: st.DataObject) -> None:
    data = bytearray(batch(4, compression=codec, producer_id=1, producer_epoch=0, base_sequence=0))
    index = draw.draw(st.integers(CRC_OFFSET, len(data) - 1))
    data[index] ^= 1 << draw.draw(st.integers(0, 7))
    with pytest.raises(CorruptRecordError):
        validate(data)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec(codec: int) -> None:
    with pytest.raises(UnsupportedCompressionError):
        validate(patched(batch(), attributes=codec))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"records_count": 0, "last_offset_delta": -1}, "offset range"),
        ({"records_count": 0}, "count"),
        ({"records_count": -3}, "count"),
        ({"records_count": 4}, "does not match"),
        ({"last_offset_delta": 5}, "does not match"),
    ],
)
def test_count_and_offset_range(fields: dict[str, int], message: str) -> None:
    with pytest.raises(InvalidRecordError, match=message):
        validate(patched(batch(3), **fields))


def test_client_control_batch() -> None:
    data = batch(
        producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True, is_control=True
    )
    with pytest.raises(InvalidRecordError, match="control"):
        validate(data)
    assert validate(data, origin_client=False)


def test_producer_id_needs_a_sequence() -> None:
    with pytest.raises(InvalidRecordError, match="sequence"):
        validate(batch(producer_id=5, producer_epoch=0, base_sequence=-1))
    assert validate(batch(producer_id=-1, producer_epoch=-1, base_sequence=-1))


def test_transactional_batch_needs_a_producer_id() -> None:
    with pytest.raises(InvalidRecordError, match="producer id"):
        validate(batch(is_transactional=True))


@pytest.mark.parametrize(
    ("timestamps", "ok"),
    [
        ([NOW - HOUR, NOW + HOUR], True),  # both window edges are inside
        ([NOW - HOUR - 1, NOW], False),  # base (first record) too old
        ([NOW, NOW + HOUR + 1], False),  # max too far ahead
        ([NOW + HOUR + 1, NOW], False),  # base too far ahead, also the max
    ],
)
def test_create_time_window(timestamps: list[int], ok: bool) -> None:
    data = batch(2, timestamps=timestamps)
    if ok:
        assert validate(data)
    else:
        with pytest.raises(InvalidTimestampError):
            validate(data)


def test_no_timestamp_is_not_range_checked() -> None:
    data = build_batch([(b"k", b"v")])  # base and max timestamp -1
    assert parse_header(data).max_timestamp == -1
    assert validate(data)


def test_log_append_time_from_a_producer() -> None:
    lat_without_time = build_batch([(b"k", b"v")], timestamp_type_log_append=True)
    with pytest.raises(InvalidTimestampError, match="LogAppendTime"):
        validate(lat_without_time)
    lat_with_time = batch(2, timestamp_type_log_append=True)
    assert validate(lat_with_time)  # a CreateTime topic range-checks its max timestamp instead
    with pytest.raises(InvalidTimestampError):
        validate(batch(2, timestamp_type_log_append=True, timestamps=[1, 2]))
    with pytest.raises(InvalidTimestampError, match="LogAppendTime"):
        validate(lat_with_time, log_append_time=True)


def test_log_append_time_topic_ignores_create_times() -> None:
    assert validate(batch(2, timestamps=[1, 2]), log_append_time=True)


@pytest.mark.parametrize("codec", [NONE, SNAPPY, ZSTD])
def test_compacted_topic_requires_keys(codec: int) -> None:
    keyless = batch(3, keys=[b"a", None, b"c"], compression=codec)
    assert validate(keyless)  # a topic that is not compacted takes keyless records
    with pytest.raises(InvalidRecordError, match="key") as refused:
        validate(keyless, requires_keys=True)
    assert refused.value.record_index == 1


@pytest.mark.parametrize("codec", [NONE, GZIP, ZSTD])
def test_every_record_timestamp_is_checked(codec: int) -> None:
    # The header's base and max are fine; the second record is two days old.
    stale = [NOW, NOW - 48 * HOUR, NOW + 5]
    data = batch(3, timestamps=stale, compression=codec)
    header = parse_header(data)
    assert (header.base_timestamp, header.max_timestamp) == (NOW, NOW + 5)
    with pytest.raises(InvalidTimestampError, match="record 1") as refused:
        validate(data)
    assert refused.value.record_index == 1
    assert validate(data, timestamp_before_max_ms=49 * HOUR)


def test_timestamp_error_wins_over_key_error_as_kafka_decides() -> None:
    data = batch(3, keys=[None, b"b", b"c"], timestamps=[NOW, NOW, NOW - 2 * HOUR])
    with pytest.raises(InvalidTimestampError):
        validate(data, requires_keys=True)


def test_garbage_records_under_a_valid_header_are_refused() -> None:
    data = patched(batch(2)[:HEADER_SIZE] + b"\xff" * 20, batch_length=HEADER_SIZE - 12 + 20)
    with pytest.raises(InvalidRecordError, match="invalid record structure"):
        validate(data)


@pytest.mark.parametrize("codec", [NONE, LZ4])
def test_actual_record_count_must_match_header(codec: int) -> None:
    short = patched(batch(2, compression=codec), records_count=3, last_offset_delta=2)
    with pytest.raises(InvalidRecordError, match="premature EOF"):
        validate(short)
    forged = patched(
        batch(1, compression=codec), records_count=2**31 - 1, last_offset_delta=2**31 - 2
    )
    with pytest.raises(InvalidRecordError, match="premature EOF"):
        validate(forged)
    long = patched(batch(3, compression=codec), records_count=2, last_offset_delta=1)
    with pytest.raises(InvalidRecordError, match="still remaining"):
        validate(long)


def test_offset_deltas_must_run_from_zero() -> None:
    gap = build_batch([Record(0, 0, b"k", b"v"), Record(2, 0, b"k", b"v")], last_offset_delta=1)
    with pytest.raises(InvalidRecordError, match="offset delta"):
        validate(gap)


def test_garbage_compressed_payload_is_corrupt() -> None:
    data = patched(
        batch(2)[:HEADER_SIZE] + b"\x00" * 20, batch_length=HEADER_SIZE - 12 + 20, attributes=LZ4
    )
    with pytest.raises(CorruptRecordError):
        validate(data)


def test_decompression_bomb_in_a_compacted_topic() -> None:
    data = simple_batch([bytes(2_000_000)], keys=[b"k"], compression=ZSTD, timestamps=[NOW])
    assert len(data) < 1_000
    with pytest.raises(DecompressedSizeError):
        validate(data, requires_keys=True, max_decompressed_size=1_000_000)
    assert validate(data, requires_keys=True)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.booleans())
def test_random_bytes_raise_only_record_errors(data: bytes, origin_client: bool) -> None:
    with contextlib.suppress(RecordError):
        validate(data, origin_client=origin_client, requires_keys=True)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([NONE, GZIP, SNAPPY, LZ4, ZSTD]), st.data())
def test_mangled_records_under_a_valid_crc_raise_only_record_errors(
    codec: int, draw: st.DataObject
) -> None:
    # Re-sealing the CRC after mangling the payload drives the decompressors and the record
    # decoder over garbage: they may reject it, but only with domain errors.
    data = bytearray(batch(4, compression=codec))
    for _ in range(draw.draw(st.integers(1, 4))):
        index = draw.draw(st.integers(HEADER_SIZE, len(data) - 1))
        data[index] = draw.draw(st.integers(0, 255))
    data[CRC_OFFSET:ATTRIBUTES_OFFSET] = batch_crc(data, 0, len(data)).to_bytes(4)
    with contextlib.suppress(RecordError):
        validate(data, requires_keys=True)
