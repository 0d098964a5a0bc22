"""Counted traffic ids kept as sequence ranges per writer (`billing.rollup.ranges`), against a real
broker, database and Spark: a long run of sequences is stored as one range in the ledger's commit
and its ids are not written to the Parquet id folders; short islands and ids of another shape are;
an island that touches a stored range extends it; replays of either kind count once."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from billing.rollup import frames, ranges
from billing.rollup.ledger import counted_ranges
from billing.rollup.seq_ranges import Range
from infra.stack import BrokerProcess
from tenancy.database import Database
from tenancy.usage import HOUR_MS, USAGE_TOPIC
from tests.integration.billing.helpers import merge, rollups, run, state_dir
from tests.integration.billing.usage_gen import T0, traffic, traffic_totals, write

pytestmark = pytest.mark.integration
NOW = T0 + 10 * HOUR_MS


def _ranges(url: str) -> list[Range]:
    db = Database(url)
    try:
        return sorted(counted_ranges(db, USAGE_TOPIC))
    finally:
        db.dispose()


def _parquet_ids(spark: Any, url: str) -> set[str]:
    root = state_dir(url) / USAGE_TOPIC / "ids"
    files = [str(p) for p in root.glob("*/hour_ms=*/*.parquet")]
    if not files:
        return set()
    return {r.id for r in spark.read.schema("id STRING").parquet(*files).collect()}


def test_sequence_ranges_count_each_id_once(
    spark: Any, usage_broker: BrokerProcess, sqlite_url: str
) -> None:
    long_run = traffic(random.Random(1), ["acme", "globex"], 100, hours=2)  # gw1 0..99
    island = traffic(random.Random(2), ["acme"], 10, first_seq=200, hours=1)  # gw1 200..209
    odd = replace(island[0], id="gw9/inc1/007")  # not a canonical sequence: kept as an id
    write(usage_broker.bootstrap, [*long_run, *island, odd])
    first = run(spark, sqlite_url, usage_broker.bootstrap, NOW)
    assert (first.records, first.duplicates) == (111, 0)
    hour = max(r.start_ms - r.start_ms % HOUR_MS for r in long_run)
    assert _ranges(sqlite_url) == [Range("gw1/inc1", 0, 99, hour)]
    assert _parquet_ids(spark, sqlite_url) == {r.id for r in [*island, odd]}

    touching = traffic(random.Random(3), ["acme"], 6, first_seq=100, hours=1)  # gw1 100..105
    replays = [long_run[5], long_run[99], island[3], odd]
    write(usage_broker.bootstrap, [*touching, *replays])
    second = run(spark, sqlite_url, usage_broker.bootstrap, NOW)
    assert (second.records, second.duplicates) == (len(touching), len(replays))
    assert [(r.writer, r.lo, r.hi) for r in _ranges(sqlite_url)] == [("gw1/inc1", 0, 105)]
    assert _parquet_ids(spark, sqlite_url) == {r.id for r in [*island, odd]}  # nothing new
    expected = merge(traffic_totals([*long_run, *island, odd, *touching]))
    assert rollups(sqlite_url) == expected


def test_split_finds_runs_across_blocks_and_keeps_the_rest_as_ids(spark: Any) -> None:
    """`ranges.split` on rows alone: whole chunks, a gap, a short run across a chunk boundary
    (joined, still short: ids), a short run that touches a stored range, one that touches
    nothing, an id of another shape."""
    seqs = {
        "w/a": [s for s in range(3000) if s != 1500],  # three blocks, one gap
        "w/b": [5],  # alone: stays an id
        "w/c": list(range(1020, 1028)),  # 8 ids across the chunk boundary at 1024: ids
        "w/d": [10, 11],  # short, but touches the stored range w/d 0..9
    }
    rows = [(f"{w}/{s}", 3_600_000) for w, ss in seqs.items() for s in ss] + [("x", 0)]
    counted = ranges.keyed(spark.createDataFrame(rows, "id STRING, hour_ms BIGINT"))
    held = [Range("w/d", 0, 9, 0)]
    written: list[set[str]] = []
    found = ranges.split(spark, counted, held, lambda ids: written.append(_ids(ids)))
    assert [(r.writer, r.lo, r.hi) for r in found] == [
        ("w/a", 0, 1499),
        ("w/a", 1501, 2999),
        ("w/d", 10, 11),
    ]
    assert written == [{"w/b/5", "x", *(f"w/c/{s}" for s in range(1020, 1028))}]
    only_ranged = counted.where("writer = 'w/a'")
    written.clear()
    assert len(ranges.split(spark, only_ranged, [], lambda ids: written.append(_ids(ids)))) == 2
    assert written == [set()]  # every row in a range: nothing to keep as ids


def _ids(frame: Any) -> set[str]:
    return {r.id for r in frame.collect()}


def test_repeats_match_a_count_of_every_id(spark: Any) -> None:
    """`frames.repeats` shuffles only the suspects its chunk masks find; on random rows (ids seen
    once to four times, in chunks with and without repeats, ids of another shape, ids in stored
    ranges and earlier counted ids) it names the same ids, copies kept and rows dropped as a
    plain count of every id."""
    rng = random.Random(7)
    rows: list[tuple[str, int, int]] = []
    for writer in ("w/a", "w/b"):
        for seq in rng.sample(range(2000), 900):
            times = rng.choices([1, 2, 3, 4], weights=[90, 6, 3, 1])[0]
            rows += [(f"{writer}/{seq}", 0, 0)] * times
    rows += [("x/1/01", 0, 0)] * 2 + [("odd", 0, 0), ("w/c/5", 0, 0)]  # 01: not canonical
    rng.shuffle(rows)
    rows = [(i, p, n) for n, (i, p, _) in enumerate(rows)]
    earlier_ids = [f"w/a/{s}" for s in rng.sample(range(2000), 60)] + ["odd", "w/c/9"]
    held = [Range("w/b", 100, 199, 0), Range("w/c", 5, 5, 0)]
    valid = ranges.keyed(
        spark.createDataFrame(rows, "id STRING, kafka_partition INT, kafka_offset BIGINT")
    )
    counted = spark.createDataFrame([(i,) for i in earlier_ids], "id STRING")
    got = {
        r.id: (r.keep, r.dropped)
        for r in frames.repeats(valid, counted, ranges.stored_frame(spark, held)).collect()
    }
    copies: dict[str, list[int]] = {}
    for ident, _, offset in rows:
        copies.setdefault(ident, []).append(offset)

    def old(ident: str) -> bool:
        writer, _, seq = ident.rpartition("/")
        in_range = any(
            h.writer == writer and seq.isdigit() and h.lo <= int(seq) <= h.hi for h in held
        )
        return ident in earlier_ids or (in_range and seq == str(int(seq)))

    expected = {
        ident: (None if old(ident) else min(at), len(at) if old(ident) else len(at) - 1)
        for ident, at in copies.items()
        if len(at) > 1 or old(ident)
    } | {i: (None, 0) for i in earlier_ids if i not in copies}
    assert {i: (None if k is None else int(k), d) for i, (k, d) in got.items()} == expected
    assert sum(1 for at in copies.values() if len(at) > 2) > 10  # triples and more were there


def test_split_from_chunk_masks_matches_split_of_the_unique_rows(spark: Any) -> None:
    """The run reads the ranges to store off `frames.chunk_masks`, the aggregation de-duplication
    made already (`frames.run_masks`: the run's bits, less those counted before), instead of
    aggregating its unique rows again: on random rows (repeats, ids counted before, ids in a
    stored range, short runs, ids of another shape) both find the same ranges, with the same
    newest hours, and keep the same ids."""
    rng = random.Random(11)
    rows: list[tuple[str, int, int, int]] = []
    for writer in ("w/a", "w/b", "w/c"):
        gaps = {*rng.sample(range(3000), 30), *range(1000, 1050), *range(1061, 1100)}
        for seq in (s for s in range(3000) if s not in gaps):  # 1050..1060: a short island
            times = rng.choices([1, 2, 3], weights=[95, 4, 1])[0]
            hour = seq // 500 * HOUR_MS
            rows += [(f"{writer}/{seq}", 0, len(rows) + n, hour) for n in range(times)]
    rows += [("odd", 0, len(rows), 0), ("w/d/7", 0, len(rows) + 1, 0)]
    earlier_ids = [f"w/a/{s}" for s in range(40, 140)] + [
        f"w/c/{s}" for s in rng.sample(range(3000), 50)
    ]
    held = [Range("w/b", 100, 399, 0)]
    schema = "id STRING, kafka_partition INT, kafka_offset BIGINT, hour_ms BIGINT"
    valid = ranges.keyed(spark.createDataFrame(rows, schema))
    counted = spark.createDataFrame([(i,) for i in earlier_ids], "id STRING")
    stored = ranges.stored_frame(spark, held)
    masks = frames.chunk_masks(frames.seen_ids(valid, counted, stored)).persist()
    repeated = frames.repeats(valid, counted, stored, masks).persist()
    unique = frames.unique(valid, repeated)
    plain: list[set[str]] = []
    from_masks: list[set[str]] = []
    expected = ranges.split(spark, unique, held, lambda ids: plain.append(_ids(ids)))
    got = ranges.split(
        spark, unique, held, lambda ids: from_masks.append(_ids(ids)), frames.run_masks(masks)
    )
    assert got == expected
    assert from_masks == plain
    assert not any(r.writer == "w/a" and r.lo <= 139 and r.hi >= 40 for r in got)  # counted
    assert any(r.writer == "w/b" and r.hi == 99 for r in got)  # stops at the stored range
    assert {"odd", "w/d/7", "w/a/1050"} <= plain[0] and len(got) > 20


def test_an_id_with_a_final_newline_is_not_a_traffic_id(spark: Any) -> None:
    """`gw/b/12\\n` is a valid id of its own (ids are only bounded in length): keyed as writer
    `gw/b`, sequence 12, it would count as a copy of `gw/b/12` (Java's `$` matches before a final
    line terminator, and the cast to BIGINT trims it)."""
    ids = ["gw/b/12", "gw/b/12\n", "gw/b/12\r\n", "gw/b/012"]
    frame = spark.createDataFrame([(i,) for i in ids], "id STRING")
    got = {r.id: (r.writer, r.seq) for r in ranges.keyed(frame).collect()}
    assert got == {
        "gw/b/12": ("gw/b", 12),
        "gw/b/12\n": (None, None),
        "gw/b/12\r\n": (None, None),
        "gw/b/012": (None, None),
    }
