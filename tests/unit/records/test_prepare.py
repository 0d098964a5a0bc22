"""The leader's prepare step: where the work runs, re-encoding and its size limit, the caps, and
Kafka's rewrite of a batch's max timestamp."""

from __future__ import annotations

import random
from typing import Any

import pytest

from brokers.records.batch import HEADER_SIZE, parse_header, verify_crc
from brokers.records.builder import read_batch, reseal, simple_batch
from brokers.records.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from brokers.records.errors import (
    DecompressedSizeError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)
from brokers.records.prepare import (
    INLINE_COMPRESSED_BYTES,
    INLINE_RECORDS_BYTES,
    NeedsWorker,
    PreparedAppend,
    prepare_append,
)
from brokers.records.record import Record, encode_records
from brokers.records.snappy_framing import XERIAL_HEADER, xerial_block
from brokers.records.validate import AppendPolicy
from infra.bench.bomb import bomb_batch

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000
HOUR = 3_600_000
MAX_MESSAGE_BYTES = 1_048_588


def policy(**overrides: Any) -> AppendPolicy:
    fields: dict[str, Any] = {"now_ms": NOW, "max_message_bytes": MAX_MESSAGE_BYTES}
    return AppendPolicy(**(fields | overrides))


def batch(count: int = 3, value_size: int = 8, **options: Any) -> bytes:
    options.setdefault("timestamps", [NOW + i for i in range(count)])
    rng = random.Random(count)
    values = [rng.randbytes(value_size) for _ in range(count)]
    return simple_batch(values, keys=[b"k%d" % i for i in range(count)], **options)


def prepare(data: bytes, inline: bool = False, **overrides: Any) -> PreparedAppend:
    return prepare_append(data, policy(**overrides), inline=inline)


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_a_valid_batch_is_appended_as_it_came(codec: int) -> None:
    data = batch(5, compression=codec)
    prepared = prepare(data, inline=True)
    assert prepared.data is data
    assert prepared.batches == [(0, parse_header(data))]


def test_inline_takes_what_is_cheap_and_hands_on_the_rest() -> None:
    small = batch(100)
    assert prepare(small, inline=True).data is small
    large = batch(INLINE_RECORDS_BYTES // 100 + 100, value_size=100)
    assert len(large) > INLINE_RECORDS_BYTES
    with pytest.raises(NeedsWorker):
        prepare(large, inline=True, max_message_bytes=4 * MAX_MESSAGE_BYTES)
    assert prepare(large, max_message_bytes=4 * MAX_MESSAGE_BYTES).data is large
    uncompressed = batch(2000, value_size=64, compression=NONE)
    assert prepare(uncompressed, inline=True).data is uncompressed
    incompressible = batch(2000, value_size=64, compression=LZ4)
    assert len(incompressible) > INLINE_COMPRESSED_BYTES
    with pytest.raises(NeedsWorker):
        prepare(incompressible, inline=True)


def test_a_small_batch_that_expands_leaves_the_loop() -> None:
    bomb = simple_batch([bytes(1_000_000)], keys=[b"k"], timestamps=[NOW], compression=GZIP)
    assert len(bomb) < INLINE_COMPRESSED_BYTES
    with pytest.raises(NeedsWorker):
        prepare(bomb, inline=True)
    assert prepare(bomb).data is bomb


def test_many_snappy_blocks_leave_the_loop() -> None:
    # Each xerial block is a Python step: a small batch of many tiny blocks is not cheap.
    records = encode_records([Record(i, 0, b"k", b"v%d" % i) for i in range(40)])
    body = XERIAL_HEADER + b"".join(
        xerial_block(records[i : i + 20]) for i in range(0, len(records), 20)
    )
    header = parse_header(batch(40, compression=SNAPPY, timestamps=[NOW] * 40))
    tiny_blocks = reseal(header, body, compression=SNAPPY, max_timestamp=NOW)
    assert len(tiny_blocks) < INLINE_COMPRESSED_BYTES
    with pytest.raises(NeedsWorker):
        prepare(tiny_blocks, inline=True)
    assert prepare(tiny_blocks).data is tiny_blocks


def test_refusals_come_before_the_hop() -> None:
    data = bytearray(batch(3))
    data[-1] ^= 1
    with pytest.raises(Exception, match="crc"):
        prepare(bytes(data), inline=True)


@pytest.mark.parametrize(("source", "target"), [(ZSTD, LZ4), (NONE, GZIP), (SNAPPY, NONE)])
def test_reencoding_keeps_records_and_header_fields(source: int, target: int) -> None:
    data = batch(50, compression=source, producer_id=7, producer_epoch=2, base_sequence=10)
    with pytest.raises(NeedsWorker):
        prepare(data, inline=True, target_codec=target)
    prepared = prepare(data, target_codec=target, compression_level=1 if target else None)
    (pos, header), original = prepared.batches[0], parse_header(data)
    assert header.compression == target
    verify_crc(prepared.data, pos, header)
    same = ("producer_id", "producer_epoch", "base_sequence", "records_count", "max_timestamp")
    assert [getattr(header, f) for f in same] == [getattr(original, f) for f in same]
    assert read_batch(prepared.data)[1] == read_batch(data)[1]


def test_reencoding_past_max_message_bytes_is_too_large() -> None:
    bomb = bomb_batch(200_000, NOW)
    assert len(bomb) < 200_000
    with pytest.raises(RecordTooLargeError, match=r"re-encoded uncompressed exceeds max\.message"):
        prepare(bomb, target_codec=NONE)
    # Repeats 200 KB apart: zstd's window sees them, gzip's 32 KiB one does not.
    value = random.Random(3).randbytes(200_000) * 5
    far_repeats = simple_batch([value], keys=[b"k"], timestamps=[NOW], compression=ZSTD)
    assert len(far_repeats) < 300_000
    with pytest.raises(RecordTooLargeError, match=r"re-encoded as gzip exceeds max\.message"):
        prepare(far_repeats, target_codec=GZIP, max_message_bytes=300_000)


def test_decompressed_size_cap() -> None:
    data = simple_batch([bytes(3_000_000)], keys=[b"k"], timestamps=[NOW], compression=ZSTD)
    assert prepare(data).data is data
    with pytest.raises(DecompressedSizeError, match=r"pier\.batch\.max\.decompressed\.bytes"):
        prepare(data, max_decompressed_bytes=2_000_000)


def test_record_count_cap_after_the_walk_proves_the_count() -> None:
    data = batch(20, compression=LZ4)
    assert prepare(data, max_records=20).data is data
    with pytest.raises(RecordTooLargeError, match=r"pier\.batch\.max\.records"):
        prepare(data, max_records=19)
    # A forged count past the cap is what Kafka says it is: a premature end of records.
    one = parse_header(batch(1))
    forged = reseal(
        one._replace(records_count=2**31 - 1, last_offset_delta=2**31 - 2),
        batch(1)[HEADER_SIZE:],
        compression=NONE,
        max_timestamp=one.max_timestamp,
    )
    with pytest.raises(InvalidRecordError, match="premature EOF"):
        prepare(forged, inline=True)


def test_a_one_million_record_bomb_on_a_compacted_topic_is_checked_and_stored() -> None:
    bomb = bomb_batch(1_000_000, NOW)
    prepared = prepare(bomb, requires_keys=True)
    assert prepared.data is bomb
    with pytest.raises(RecordTooLargeError):
        prepare(bomb, requires_keys=True, max_records=999_999)


def test_forged_max_timestamp_is_rewritten_as_kafka_does() -> None:
    data = batch(3, timestamps=[NOW, NOW + 7, NOW + 3], max_timestamp=NOW + HOUR - 1)
    prepared = prepare(data)
    (pos, header), original = prepared.batches[0], parse_header(data)
    assert original.max_timestamp == NOW + HOUR - 1
    assert header.max_timestamp == NOW + 7
    verify_crc(prepared.data, pos, header)
    assert read_batch(prepared.data)[1] == read_batch(data)[1]
    assert prepare(data, log_append_time=True).data is data  # the log stamps LogAppendTime


def test_per_record_timestamps_are_checked_on_every_path() -> None:
    stale = batch(3, timestamps=[NOW, NOW - 48 * HOUR, NOW], compression=ZSTD)
    for inline in (True, False):
        with pytest.raises(InvalidTimestampError):
            prepare(stale, inline=inline, timestamp_before_max_ms=HOUR)
    assert prepare(stale, log_append_time=True).data is stale


def test_keyless_record_refused_on_compacted_topics_even_when_reencoding() -> None:
    keyless = simple_batch([b"a", b"b"], keys=[b"k", None], timestamps=[NOW, NOW])
    with pytest.raises(InvalidRecordError, match="without key"):
        prepare(keyless, requires_keys=True, target_codec=ZSTD)
