"""The stream's one-pass path (`billing.rollup.one_pass`): a micro-batch of plain traffic and
storage samples is rolled up by one aggregation and counts exactly as the exact path would (the
exact path, run over the same records into another store, is the oracle); a batch with a repeated
traffic id, a replay of a counted one (in a stored range or among the ids kept in Parquet) or a
malformed record goes the exact way and still counts each record once. Micro-batches are made as the
stream makes them (`stream._roll_up_batch` over Spark's Kafka source, end offsets known), on the
session's Spark and a real broker."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any

import pytest

from billing.rollup import ledger
from billing.rollup.job import RunOptions, RunReport
from billing.rollup.stream import _roll_up_batch
from billing.rollup.sums import PendingSample
from billing.source import kafka
from billing.source.offsets import LATEST, OffsetSpec
from billing.source.usage import read_usage
from brokers.client import Cluster
from infra.stack import BrokerProcess
from tenancy.database import Database
from tenancy.store import TenantStore
from tenancy.usage import HOUR_MS, USAGE_TOPIC, StorageSample, UsageRecord, storage_id
from tests.integration.billing.helpers import merge, rollups
from tests.integration.billing.usage_gen import (
    storage,
    storage_totals,
    traffic,
    traffic_totals,
    write,
)

pytestmark = pytest.mark.integration
TENANTS = ["acme", "globex", "initech"]
NOW = int(time.time() * 1000)
BASE_MS = NOW - NOW % HOUR_MS - 2 * HOUR_MS  # recent: ranges and ids older than retention go


def _latest(bootstrap: str) -> dict[int, int]:
    async def go() -> dict[int, int]:
        async with Cluster(bootstrap) as cluster:
            partitions = await kafka.partitions_of(cluster, USAGE_TOPIC)
            return await kafka.resolve(cluster, USAGE_TOPIC, OffsetSpec(LATEST), partitions)

    return asyncio.run(go())


class Batches:
    """Micro-batches from the ledger's offsets to the latest, rolled up as the stream does (`exact`:
    as it does when the batch's end offsets are not known, always the exact way)."""

    def __init__(self, spark: Any, url: str, bootstrap: str, state: Path, exact: bool) -> None:
        self.spark, self.url, self.bootstrap, self.state = spark, url, bootstrap, state
        self.exact = exact
        self.db = Database(url)

    def next(self, until_ms: int | None = None) -> RunReport:
        options = RunOptions(self.bootstrap, self.state, until_ms=until_ms)
        cursor = ledger.read_cursor(self.db, USAGE_TOPIC)
        start = dict(cursor.offsets) if cursor else {}
        end = _latest(self.bootstrap)
        begin = {p: start.get(p, 0) for p in end}
        records = read_usage(self.spark, self.bootstrap, USAGE_TOPIC, begin, end)
        return _roll_up_batch(self.spark, self.db, options, records, None if self.exact else end)


@pytest.fixture
def batches(spark: Any, usage_broker: BrokerProcess, sqlite_url: str, tmp_path: Path) -> Any:
    made = Batches(spark, sqlite_url, usage_broker.bootstrap, tmp_path / "state", exact=False)
    yield made
    made.db.dispose()


@pytest.fixture
def oracle(spark: Any, usage_broker: BrokerProcess, tmp_path: Path) -> Any:
    """The same micro-batches into another store, the exact way."""
    url = f"sqlite:///{tmp_path / 'oracle.db'}"
    with TenantStore.open(url) as store:
        store.upgrade()
    made = Batches(spark, url, usage_broker.bootstrap, tmp_path / "oracle-state", exact=True)
    yield made
    made.db.dispose()


def _one_pass(report: RunReport) -> bool:
    return "digest" in report.seconds


def test_plain_traffic_is_rolled_up_in_one_pass(batches: Batches) -> None:
    rng = random.Random(7)
    first = traffic(rng, TENANTS, 300, base_ms=BASE_MS)
    second = traffic(rng, TENANTS, 200, first_seq=300, base_ms=BASE_MS)
    write(batches.bootstrap, first)
    report = batches.next()
    assert _one_pass(report), report
    assert (report.records, report.duplicates, report.rejected) == (300, 0, {})
    assert rollups(batches.url) == merge(traffic_totals(first))
    write(batches.bootstrap, second)
    assert _one_pass(again := batches.next()), again
    assert rollups(batches.url) == merge(traffic_totals([*first, *second]))
    held = ledger.counted_ranges(batches.db, USAGE_TOPIC)
    assert [(r.writer, r.lo, r.hi) for r in held] == [("gw1/inc1", 0, 499)]
    third = traffic(rng, TENANTS, 100, first_seq=1_000, base_ms=BASE_MS)
    write(batches.bootstrap, [*third, first[5]])  # an id a stored range holds, again
    _exact(batches.next(), duplicates=1)
    assert rollups(batches.url) == merge(traffic_totals([*first, *second, *third]))


@pytest.mark.slow
def test_repeats_replays_and_malformed_records_go_the_exact_way(batches: Batches) -> None:
    rng = random.Random(8)
    first = traffic(rng, TENANTS, 300, base_ms=BASE_MS)
    write(batches.bootstrap, first)
    assert _one_pass(batches.next())
    replayed = traffic(rng, TENANTS, 100, first_seq=1_000, base_ms=BASE_MS)
    write(batches.bootstrap, [*replayed, first[5]])  # an id a stored range holds, again
    _exact(batches.next(), duplicates=1)
    repeated = traffic(rng, TENANTS, 50, first_seq=2_000, base_ms=BASE_MS)
    write(batches.bootstrap, [*repeated, repeated[3]])  # an id twice in one batch
    _exact(batches.next(), duplicates=1)
    odd = traffic(rng, TENANTS, 40, first_seq=3_000, base_ms=BASE_MS)
    write(batches.bootstrap, [*odd, (b"gw1/inc1/9", b'{"v": 1')])
    report = _exact(batches.next(), duplicates=0)
    assert sum(report.rejected.values()) == 1, report
    assert rollups(batches.url) == merge(traffic_totals([*first, *replayed, *repeated, *odd]))


def test_ids_kept_in_parquet_are_checked(batches: Batches) -> None:
    """Short runs of sequences counted the exact way stay ids in Parquet, not ranges: a plain
    batch replaying one of them must not count it again."""
    rng = random.Random(9)
    scattered = [
        r
        for r in traffic(rng, TENANTS, 120, base_ms=BASE_MS)
        if int(r.id.rsplit("/", 1)[1]) % 3 == 0
    ]
    write(batches.bootstrap, [*scattered, (b"k", b"not json")])  # the exact path: ids, no ranges
    _exact(batches.next(), duplicates=0)
    assert ledger.counted_ranges(batches.db, USAGE_TOPIC) == []
    fresh = traffic(rng, TENANTS, 100, first_seq=1_000, base_ms=BASE_MS)
    write(batches.bootstrap, [*fresh, scattered[4]])
    _exact(batches.next(), duplicates=1)
    more = traffic(rng, TENANTS, 100, first_seq=2_000, base_ms=BASE_MS)
    write(batches.bootstrap, more)
    assert _one_pass(report := batches.next()), report  # ids of these hours, none of its own
    assert rollups(batches.url) == merge(traffic_totals([*scattered, *fresh, *more]))


def test_a_batch_with_storage_samples_is_rolled_up_in_one_pass(batches: Batches) -> None:
    """What a gateway writes: traffic and a storage sample per partition and interval (one twice,
    as a retried write: its first copy counts). One pass, and the store holds the traffic and the
    byte-hours computed independently of billing's code."""
    rng = random.Random(12)
    t = NOW - NOW % 60_000 - 10 * 60_000
    samples = [
        *storage("acme", "orders", 0, [(t, 1_000), (t + 60_000, 2_000), (t + 120_000, 4_000)]),
        *storage("globex", "events", 3, [(t, 5_000)]),
    ]
    retried = StorageSample(samples[1].id, "acme", "orders", 0, 9_999, t + 60_000)
    plain = traffic(rng, TENANTS, 200, base_ms=BASE_MS)
    write(batches.bootstrap, [*plain, *samples, retried])
    report = batches.next(until_ms := t + 200_000)
    assert _one_pass(report), report
    assert _counts(report) == (204, 1, 0)
    expected = merge(traffic_totals(plain), storage_totals(samples, 60_000, until_ms))
    assert rollups(batches.url) == expected


@pytest.mark.slow
def test_storage_samples_count_in_the_one_pass_as_the_exact_path_counts_them(
    batches: Batches, oracle: Batches
) -> None:
    """Samples kept, a sample id twice in a batch (its first copy counts), one counted by an
    earlier batch (a duplicate), a late one (another sampler's, older than the partition's
    pending sample), pending samples credited when due, with samples in the batch and without:
    every batch one pass, and the store, the pending samples and the counts the exact path's."""
    rng = random.Random(11)
    t = NOW - NOW % 60_000 - 10 * 60_000
    acme = storage("acme", "orders", 0, [(t, 1_000), (t + 60_000, 2_000)])
    globex = storage("globex", "events", 1, [(t, 5_000)])
    again = StorageSample(acme[1].id, "acme", "orders", 0, 9_999, t + 60_000)  # later copy
    late = StorageSample(storage_id("s2", "acme", "orders", 0, t + 30_000), "acme", "orders", 0,
                         7_000, t + 30_000)  # fmt: skip
    fresh = storage("acme", "orders", 0, [(t + 120_000, 3_000)])
    steps: list[tuple[list[UsageRecord], int]] = [
        ([*traffic(rng, TENANTS, 200, base_ms=BASE_MS), *acme, *globex, again], t + 90_000),
        ([*traffic(rng, TENANTS, 100, first_seq=1_000, base_ms=BASE_MS), acme[0], late, *fresh],
         t + 150_000),
        ([*traffic(rng, TENANTS, 50, first_seq=2_000, base_ms=BASE_MS)], t + 300_000),
    ]  # fmt: skip
    counts = []
    for records, until_ms in steps:
        write(batches.bootstrap, records)
        one, exact = batches.next(until_ms), oracle.next(until_ms)
        assert _one_pass(one) and not _one_pass(exact), (one, exact)
        counts.append(_counts(one))
        assert counts[-1] == _counts(exact)
        assert rollups(batches.url) == rollups(oracle.url)
        assert _pending(batches) == _pending(oracle)
    assert counts == [(203, 1, 0), (102, 1, 1), (50, 0, 0)]
    storage_rows = [k for k, v in rollups(batches.url).items() if v.get("storage_byte_ms")]
    assert {(k[0], k[3]) for k in storage_rows} == {("acme", "orders"), ("globex", "events")}


def _pending(batches: Batches) -> list[PendingSample]:
    return sorted(ledger.pending_samples(batches.db), key=repr)


def _counts(report: RunReport) -> tuple[int, int, int]:
    return report.records, report.duplicates, report.late_samples


def _exact(report: RunReport, *, duplicates: int) -> RunReport:
    assert not _one_pass(report), report
    assert report.duplicates == duplicates, report
    return report
