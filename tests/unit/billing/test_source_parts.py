"""Pure parts of the `pier-usage` source: offset specs, range splitting, batch cutting, rows."""

from __future__ import annotations

import pytest

from billing.source.kafka import records_in
from billing.source.offsets import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    SourceOptionError,
    offsets_to_json,
    parse_spec,
    split_range,
)
from billing.source.options import parse_options
from billing.source.rows import BATCH_ROWS, COLUMNS, arrow_batches, to_row
from brokers.records.builder import build_batch
from tenancy.usage import StorageSample, encode

pytestmark = pytest.mark.unit


def test_offset_specs() -> None:
    assert parse_spec("s", None, EARLIEST) == OffsetSpec(EARLIEST)
    assert parse_spec("s", "Latest", EARLIEST) == OffsetSpec(LATEST)
    spec = parse_spec("s", '{"1": 5, "0": -2}', LATEST)
    assert spec.for_partition(0) == EARLIEST and spec.for_partition(1) == 5
    assert spec.for_partition(7) == LATEST
    for bad in ("[1]", '{"x": 1}', '{"0": -3}', '{"0": 1.5}', "soon"):
        with pytest.raises(SourceOptionError, match=r"^s: "):
            parse_spec("s", bad, LATEST)
    assert offsets_to_json({10: 1, 2: 3}) == '{"2":3,"10":1}'


def test_options() -> None:
    with pytest.raises(SourceOptionError, match="bootstrap"):
        parse_options({})
    options = parse_options({"BOOTSTRAP": "h:1", "maxrecordsperpartition": "5"})
    assert (options.topic, options.max_records_per_partition) == ("__usage", 5)
    assert options.arrow and not parse_options({"bootstrap": "h:1", "Arrow": "False"}).arrow
    with pytest.raises(SourceOptionError, match="maxRecordsPerPartition"):
        parse_options({"bootstrap": "h:1", "maxRecordsPerPartition": "0"})


def test_split_range() -> None:
    assert split_range(3, 10, 3) == [(3, 6), (6, 9), (9, 10)]
    assert split_range(5, 5, 3) == []


def test_records_in_skips_before_start_stops_at_end_and_ignores_a_cut_batch() -> None:
    first = build_batch([(b"k0", b"v0"), (b"k1", b"v1"), (b"k2", b"v2")], base_offset=10)
    second = build_batch([(b"k3", b"v3"), (b"k4", b"v4")], base_offset=13)
    records, following = records_in(first + second[:-5], 11, 100)
    assert records == [(11, b"k1", b"v1"), (12, b"k2", b"v2")] and following == 13
    records, following = records_in(first + second, 11, 14)
    assert [r[0] for r in records] == [11, 12, 13] and following == 14
    assert records_in(b"", 4, 9) == ([], 4)


def test_arrow_batches_keep_every_row_and_type() -> None:
    sample = StorageSample("s/acme/t/0/5", "acme", "t", 0, 100, 5)
    rows = [to_row(1, i, *encode(sample)) for i in range(BATCH_ROWS + 3)]
    batches = list(arrow_batches(iter(rows)))
    assert [b.num_rows for b in batches] == [BATCH_ROWS, 3]
    assert (
        batches[1].to_pylist()[0]["bytes"] == 100
        and str(batches[0].schema.field("kafka_partition").type) == "int32"
    )
    assert list(arrow_batches(iter([]))) == []


def test_rows() -> None:
    sample = StorageSample("s/acme/t/0/5", "acme", "t", 0, 100, 5)
    row = to_row(2, 9, *encode(sample))
    assert len(row) == len(COLUMNS)
    assert dict(zip([c for c, _ in COLUMNS], row, strict=True))["bytes"] == 100
    rejected = to_row(2, 10, b"s/acme/t/0/6", encode(sample)[1])
    assert rejected[2] == "s/acme/t/0/6" and rejected[-1] == "key does not match the record id"
    assert to_row(0, 0, b"\xff", None)[2:] == (None,) * (len(COLUMNS) - 3) + ("value is null",)
