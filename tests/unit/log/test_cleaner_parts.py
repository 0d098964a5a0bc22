"""The cleaner's parts on their own: offset map, throttle, batch filter, grouping, config."""

from __future__ import annotations

import math
from typing import Any

import pytest

from brokers.common.clock import ManualClock
from brokers.log.cleaner.batch_filter import (
    FilterContext,
    LastRecord,
    batch_payload,
    filter_batch,
    record_keys,
)
from brokers.log.cleaner.cleaner import SourceSegment
from brokers.log.cleaner.cleaning_pass import group_segments
from brokers.log.cleaner.config import CleanerConfig
from brokers.log.cleaner.offset_map import ENTRY_BYTES, OffsetMap, OffsetMapFullError
from brokers.log.cleaner.throttler import Throttler
from brokers.log.errors import InvalidConfigError
from brokers.records.batch import DELETE_HORIZON_MASK, parse_header, verify_crc
from brokers.records.builder import build_batch, read_batch
from brokers.records.record import Record, decode_records

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000


# -- offset map ----------------------------------------------------------------------------


def test_offset_map_keeps_the_latest_offset_per_key_in_fixed_memory() -> None:
    offsets = OffsetMap(ENTRY_BYTES * 100, load_factor=0.9)
    assert (offsets.slots, offsets.max_entries, offsets.memory_bytes) == (100, 90, 2400)
    assert offsets.get(b"a") == -1
    for offset in range(300):
        offsets.put(b"key-%d" % (offset % 90), offset)
    assert offsets.size == 90 and offsets.latest_offset == 299
    assert [offsets.get(b"key-%d" % k) for k in (0, 89)] == [270, 269]
    assert offsets.get(b"missing") == -1
    with pytest.raises(OffsetMapFullError):
        offsets.put(b"one too many", 300)
    offsets.put(b"key-5", 301)  # an update still fits
    assert offsets.get(b"key-5") == 301 and offsets.utilization == pytest.approx(0.9)

    offsets.clear()
    assert (offsets.size, offsets.latest_offset, offsets.get(b"key-5")) == (0, -1, -1)
    offsets.update_latest_offset(41)
    assert offsets.latest_offset == 41


def test_offset_map_too_small_for_one_key_is_refused() -> None:
    with pytest.raises(ValueError):
        OffsetMap(ENTRY_BYTES)


# -- throttle --------------------------------------------------------------------------------


def test_throttle_sleeps_back_to_the_rate_after_each_period() -> None:
    clock = ManualClock()
    naps: list[float] = []

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        clock.advance(round(seconds * 1000))

    throttler = Throttler(1000, clock=clock, sleep=sleep)
    assert throttler.maybe_throttle(500) == 0  # the period is not over
    clock.advance(400)
    assert throttler.maybe_throttle(1500) == pytest.approx(1.6)  # 2000 B in 0.4 s at 1000 B/s
    assert naps == [pytest.approx(1.6)]
    clock.advance(1000)
    assert throttler.maybe_throttle(900) == 0  # 900 B/s: under the limit
    assert throttler.slept_seconds == pytest.approx(1.6)


def test_unlimited_throttle_never_sleeps() -> None:
    clock = ManualClock()
    throttler = Throttler(math.inf, clock=clock, sleep=lambda s: pytest.fail("slept"))
    clock.advance(1000)
    assert throttler.unlimited and throttler.maybe_throttle(10**12) == 0
    with pytest.raises(ValueError):
        Throttler(0, clock=clock, sleep=lambda s: None)


# -- batch filter ------------------------------------------------------------------------------


def context(offsets: OffsetMap, **overrides: object) -> FilterContext:
    settings: dict[str, object] = {
        "now_ms": NOW, "delete_retention_ms": 1000, "latest_offset": offsets.latest_offset,
        "upper_bound_offset": 10_000, "producer_last_records": {},
    }  # fmt: skip
    settings.update(overrides)
    return FilterContext(**settings)  # type: ignore[arg-type]


def stored(records: list[tuple[bytes | None, bytes | None]], **options: Any) -> memoryview:
    options.setdefault("base_timestamp", NOW - 50)
    data = build_batch(
        [Record(i, i * 10, key, value) for i, (key, value) in enumerate(records)], **options
    )
    return memoryview(data)


def map_of(entries: dict[bytes, int], latest: int) -> OffsetMap:
    offsets = OffsetMap(ENTRY_BYTES * 64)
    offsets.clear()
    for key, offset in entries.items():
        offsets.put(key, offset)
    offsets.update_latest_offset(latest)
    return offsets


def test_record_keys_agrees_with_the_full_record_decoder() -> None:
    records = [
        Record(i * 37, i * 1_000_003 - 5_000_000, key, value, headers)
        for i, (key, value, headers) in enumerate([
            (b"a", b"1", ()), (None, b"2", ()), (b"", None, ()), (b"k" * 200, b"v" * 300, ()),
            (b"h", None, (("trace", b"x"), ("none", None))), (b"z" * 70, b"", ()),
        ])
    ]  # fmt: skip
    batch = memoryview(build_batch(records, base_timestamp=NOW, compression=4))
    payload = batch_payload(batch, parse_header(batch), 1 << 20)
    keys = record_keys(payload, len(records))
    assert [(d, k, v) for d, k, v, _, _ in keys] == [
        (r.offset_delta, r.key, r.value is not None) for r in records
    ]
    assert [decode_records(payload[s:e], 1)[0] for _, _, _, s, e in keys] == records


def test_superseded_and_keyless_records_are_removed_fields_kept() -> None:
    batch = stored(
        [(b"a", b"old"), (None, b"no key"), (b"b", b"keep")],
        base_offset=100, compression=3, producer_id=9, producer_epoch=2, base_sequence=40,
        partition_leader_epoch=5,
    )  # fmt: skip
    result = filter_batch(
        batch, parse_header(batch), map_of({b"a": 150}, 200), context(map_of({}, 200))
    )
    assert result.data is not None and result.header is not None
    header, records = read_batch(result.data)
    original = parse_header(batch)
    assert [r.value for r in records] == [b"keep"]
    assert (records[0].offset_delta, records[0].timestamp_delta) == (2, 20)
    fields = "base_offset last_offset_delta producer_id producer_epoch base_sequence"
    for field in [*fields.split(), "partition_leader_epoch", "compression", "base_timestamp"]:
        assert getattr(header, field) == getattr(original, field)
    assert header.max_timestamp == NOW - 50 + 20
    assert (result.records_read, result.records_kept) == (3, 1)


def test_a_batch_keeping_everything_is_copied_byte_for_byte() -> None:
    batch = stored([(b"a", b"1"), (b"b", b"2")], base_offset=10)
    offsets = map_of({b"a": 10, b"b": 11}, 11)
    result = filter_batch(batch, parse_header(batch), offsets, context(offsets))
    assert result.data is batch


def test_tombstones_get_a_delete_horizon_then_go_once_it_passed() -> None:
    batch = stored([(b"gone", None), (b"kept", b"v")], base_offset=0, compression=1)
    offsets = map_of({b"gone": 0, b"kept": 1}, 1)
    first = filter_batch(batch, parse_header(batch), offsets, context(offsets))
    assert first.data is not None
    header, records = read_batch(first.data)
    verify_crc(first.data, 0, header)
    assert header.attributes & DELETE_HORIZON_MASK and header.base_timestamp == NOW + 1000
    original_times = [NOW - 50, NOW - 40]
    assert [header.base_timestamp + r.timestamp_delta for r in records] == original_times
    assert header.max_timestamp == NOW - 40

    again = filter_batch(
        memoryview(first.data), header, offsets, context(offsets, now_ms=NOW + 999)
    )
    assert again.data is first.data or bytes(again.data) == first.data  # type: ignore[arg-type]
    later = filter_batch(
        memoryview(first.data), header, offsets, context(offsets, now_ms=NOW + 1000)
    )
    assert later.data is not None
    kept_header, kept = read_batch(later.data)
    assert [r.key for r in kept] == [b"kept"]
    assert kept_header.base_timestamp == NOW + 1000  # the horizon stays with the batch


def test_emptied_batches_go_unless_they_hold_producer_state_or_the_round_end() -> None:
    batch = stored([(b"a", b"1")], base_offset=5, producer_id=3, producer_epoch=1, base_sequence=7)
    header = parse_header(batch)
    offsets = map_of({b"a": 9}, 9)
    assert filter_batch(batch, header, offsets, context(offsets)).data is None
    for ctx in (
        context(offsets, producer_last_records={3: LastRecord(5, 1)}),
        context(offsets, upper_bound_offset=6),
    ):
        result = filter_batch(batch, header, offsets, ctx)
        assert result.header is not None and result.header.records_count == 0
        assert (result.header.base_offset, result.header.last_offset) == (5, 5)
        assert (result.header.producer_id, result.header.base_sequence) == (3, 7)


def test_an_empty_batch_goes_once_its_producer_moved_on() -> None:
    empty = memoryview(
        build_batch([], base_offset=5, last_offset_delta=2, producer_id=3, producer_epoch=0)
    )
    offsets = map_of({b"a": 9}, 9)
    result = filter_batch(empty, parse_header(empty), offsets, context(offsets))
    assert result.data is None
    still_last = context(offsets, producer_last_records={3: LastRecord(7, 0)})
    kept = filter_batch(empty, parse_header(empty), offsets, still_last)
    assert kept.data is not None and bytes(kept.data) == bytes(empty)


def test_control_batches_and_batches_past_the_map_are_kept_whole() -> None:
    offsets = map_of({b"a": 50}, 50)
    control = stored([(b"\x00\x00\x00\x00", b"marker")], base_offset=1, is_control=True)
    later = stored([(b"a", None)], base_offset=51)
    for batch in (control, later):
        assert filter_batch(batch, parse_header(batch), offsets, context(offsets)).data is batch


# -- grouping and config -----------------------------------------------------------------------


def source(base: int, next_base: int, size: int, index: int = 0) -> SourceSegment:
    return SourceSegment(base, next_base, -1, size, index, index, 0)


def test_grouping_follows_segment_and_index_size_limits() -> None:
    segments = [source(0, 10, 400), source(10, 20, 400), source(20, 30, 300), source(30, 40, 500)]
    groups = group_segments(segments, max_size=1100, max_index_size=100)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10, 20], [30]]
    indexed = [source(0, 10, 1, 60), source(10, 20, 1, 60)]
    assert len(group_segments(indexed, max_size=1100, max_index_size=100)) == 2
    far = [source(0, 10, 1), source(2**31, 2**31 + 10, 1)]
    assert len(group_segments(far, max_size=1100, max_index_size=100)) == 2


def test_cleaner_config_reads_kafka_broker_properties() -> None:
    config = CleanerConfig.from_properties({
        "log.cleaner.dedupe.buffer.size": "1048576", "log.cleaner.io.max.bytes.per.second": "5e6",
        "log.cleaner.enable": "false", "log.cleaner.backoff.ms": "100", "unrelated": "x",
    })  # fmt: skip
    assert (config.dedupe_buffer_size, config.io_max_bytes_per_second) == (1048576, 5e6)
    assert (config.enable, config.backoff_ms, config.io_buffer_size) == (False, 100, 512 * 1024)
    assert CleanerConfig().io_max_bytes_per_second == math.inf
    for name, value in (
        ("log.cleaner.dedupe.buffer.size", "-1"),
        ("log.cleaner.enable", "yes"),
        ("log.cleaner.io.buffer.load.factor", "1.5"),
    ):
        with pytest.raises(InvalidConfigError) as raised:
            CleanerConfig.from_properties({name: value})
        assert raised.value.name == name
