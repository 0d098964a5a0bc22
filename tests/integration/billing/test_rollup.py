"""Rollups against a real broker and a real database: ground truth to the byte, duplicates once,
re-runs change nothing, a run killed before or after its commit, two concurrent runs, late usage."""

from __future__ import annotations

import random
import shutil
from typing import Any

import pytest
from prometheus_client import REGISTRY

from billing.rollup.ids import StateError
from billing.rollup.ledger import FencedError
from infra.stack import BrokerProcess
from tenancy.usage import HOUR_MS, StorageSample, storage_id
from tests.integration.billing.helpers import merge, rollups, run, state_dir, versions
from tests.integration.billing.usage_gen import (
    T0,
    storage,
    storage_totals,
    traffic,
    traffic_totals,
    write,
)

pytestmark = pytest.mark.integration
NOW = T0 + 10 * HOUR_MS
INTERVAL = 60_000


class Killed(Exception):
    """Stands for the process dying at a hook point."""


def _usage(seed: int) -> tuple[list[Any], list[Any]]:
    rng = random.Random(seed)
    records = traffic(rng, ["acme", "globex", "initech"], 300)
    # Samples every minute, a gap (capped at 2 min), one crossing an hour, and the last ones of
    # `events` recent enough to stay pending at NOW.
    minute = 60_000
    samples = [
        *storage("acme", "orders", 0, [(T0 + i * minute, 1000 * (i + 1)) for i in range(10)]),
        *storage("acme", "orders", 0, [(T0 + 20 * minute, 7 * 2**30)]),
        *storage(
            "acme", "orders", 1, [(T0 + HOUR_MS - 30_000, 5 * 2**40), (T0 + HOUR_MS + 45_000, 3)]
        ),
        *storage("globex", "events", 0, [(NOW - 90_000, 11), (NOW - 30_000, 13)]),
    ]
    return records, samples


def _truth(records: list[Any], samples: list[Any]) -> dict[Any, dict[str, int]]:
    return merge(traffic_totals(records), storage_totals(samples, INTERVAL, NOW))


def test_rollups_equal_independent_totals_and_rerun_changes_nothing(
    spark: Any, usage_broker: BrokerProcess, store_url: str
) -> None:
    records, samples = _usage(11)
    duplicates = records[:15]  # a retry or replay: the same ids again
    write(usage_broker.bootstrap, [*records, *samples, *duplicates, (b"x/y/1", b"\xff\xfe")])
    reason = "value is not UTF-8 JSON: UnicodeDecodeError"
    metric = ("pier_billing_rejected_records_total", {"reason": reason})
    rejected_before = REGISTRY.get_sample_value(*metric) or 0
    report = run(spark, store_url, usage_broker.bootstrap, NOW)
    assert report.records == len(records) + len(samples)
    assert report.duplicates == len(duplicates)
    assert report.rejected == {reason: 1}
    assert REGISTRY.get_sample_value(*metric) == rejected_before + 1
    expected = _truth(records, samples)
    assert rollups(store_url) == expected
    # the last `events` sample is pending (its cap has not passed), so it is not billed yet
    events = expected[("globex", "", "", "events", NOW - HOUR_MS)]
    assert events == {"storage_byte_ms": 11 * 60_000, "partition_ms": 60_000}
    before = versions(store_url)
    again = run(spark, store_url, usage_broker.bootstrap, NOW)
    assert (again.records, again.duplicates, again.rejected) == (0, 0, {})
    assert rollups(store_url) == expected and versions(store_url) == before


@pytest.mark.parametrize("point", ["before_commit", "after_commit"])
def test_a_run_killed_around_its_commit_then_rerun_counts_once(
    spark: Any, usage_broker: BrokerProcess, sqlite_url: str, point: str
) -> None:
    records, samples = _usage(12)
    write(usage_broker.bootstrap, [*records, *samples])

    def die() -> None:
        raise Killed(point)

    with pytest.raises(Killed):
        run(spark, sqlite_url, usage_broker.bootstrap, NOW, **{point: die})
    assert rollups(sqlite_url) == ({} if point == "before_commit" else _truth(records, samples))
    run(spark, sqlite_url, usage_broker.bootstrap, NOW)
    assert rollups(sqlite_url) == _truth(records, samples)


def test_two_concurrent_runs_one_commits(
    spark: Any, usage_broker: BrokerProcess, sqlite_url: str
) -> None:
    records, samples = _usage(13)
    write(usage_broker.bootstrap, [*records, *samples])
    run(spark, sqlite_url, usage_broker.bootstrap, NOW)  # a cursor exists: the update is fenced
    more = traffic(random.Random(5), ["acme"], 50, first_seq=10_000)
    write(usage_broker.bootstrap, more)
    winner: list[Any] = []

    def other_run_commits_first() -> None:
        winner.append(run(spark, sqlite_url, usage_broker.bootstrap, NOW))

    with pytest.raises(FencedError, match="another billing run committed"):
        run(spark, sqlite_url, usage_broker.bootstrap, NOW, before_commit=other_run_commits_first)
    assert winner[0].records == len(more)
    assert rollups(sqlite_url) == merge(_truth(records, samples), traffic_totals(more))


def test_first_runs_race_on_an_empty_cursor(
    spark: Any, usage_broker: BrokerProcess, sqlite_url: str
) -> None:
    records, samples = _usage(14)
    write(usage_broker.bootstrap, [*records, *samples])
    with pytest.raises(FencedError):
        run(
            spark, sqlite_url, usage_broker.bootstrap, NOW,
            before_commit=lambda: run(spark, sqlite_url, usage_broker.bootstrap, NOW),
        )  # fmt: skip
    assert rollups(sqlite_url) == _truth(records, samples)


def test_late_usage_adds_to_its_hour_and_replays_count_once(
    spark: Any, usage_broker: BrokerProcess, sqlite_url: str
) -> None:
    records, samples = _usage(15)
    write(usage_broker.bootstrap, [*records, *samples])
    run(spark, sqlite_url, usage_broker.bootstrap, NOW)
    late = traffic(random.Random(6), ["acme", "globex"], 40, gateway="gw2")  # same hours as before
    replayed = records[100:120]  # counted by the first run, written again at later offsets
    write(usage_broker.bootstrap, [*late, *replayed])
    report = run(spark, sqlite_url, usage_broker.bootstrap, NOW)
    assert (report.records, report.duplicates) == (len(late), len(replayed))
    assert rollups(sqlite_url) == merge(_truth(records, samples), traffic_totals(late))


def test_ids_of_a_run_killed_after_its_commit_still_catch_replays(
    spark: Any, usage_broker: BrokerProcess, sqlite_url: str
) -> None:
    """The run dies between its commit and naming its ids' folder: the next run names it, so
    records replayed after the kill still count once; a state folder that is not the one the
    ledger's runs used is refused."""
    records, samples = _usage(17)
    write(usage_broker.bootstrap, [*records, *samples])
    run(spark, sqlite_url, usage_broker.bootstrap, NOW)  # generation 1, named as usual
    more = traffic(random.Random(8), ["acme", "globex"], 60, first_seq=20_000)
    few = traffic(random.Random(9), ["acme"], 5, gateway="gw3")  # too few for a range: Parquet ids
    write(usage_broker.bootstrap, [*more, *few])

    def die() -> None:
        raise Killed("after_commit")

    with pytest.raises(Killed):
        run(spark, sqlite_url, usage_broker.bootstrap, NOW, after_commit=die)
    ids = state_dir(sqlite_url) / "__usage" / "ids"
    assert not (ids / "gen=000000000002").exists()  # the rename never happened
    replayed = [*records[:30], *more[:10], *few[:3]]
    write(usage_broker.bootstrap, replayed)
    report = run(spark, sqlite_url, usage_broker.bootstrap, NOW)
    assert (report.records, report.duplicates) == (0, len(replayed))
    assert (ids / "gen=000000000002").is_dir()
    assert rollups(sqlite_url) == merge(_truth(records, samples), traffic_totals([*more, *few]))
    shutil.rmtree(ids / "gen=000000000003")  # as if --state named another run's folder
    with pytest.raises(StateError, match="no ids of committed run generation 3"):
        run(spark, sqlite_url, usage_broker.bootstrap, NOW)


def test_late_usage_after_a_final_invoice_is_an_adjustment(
    spark: Any, usage_broker: BrokerProcess, sqlite_url: str
) -> None:
    from datetime import UTC, datetime
    from decimal import Decimal

    from billing.invoice.issue import issue
    from tenancy.domain import Plan, PlanDimension, PlanTier
    from tenancy.models import InvoiceRow
    from tenancy.store import TenantStore

    records, samples = _usage(16)
    write(usage_broker.bootstrap, [*records, *samples])
    run(spark, sqlite_url, usage_broker.bootstrap, NOW)
    late = traffic(random.Random(7), ["acme"], 25, gateway="gw3")  # January, after the invoice
    with TenantStore.open(sqlite_url) as store:
        tiers = (PlanTier(None, Decimal("0.08")),)
        store.put_plan(
            Plan("p", "EUR", {"ingress_gib": PlanDimension(Decimal(0), tiers)}), actor="t"
        )
        store.create_tenant(display_name="A", plan="p", tenant_id="acme", actor="t")
        issue(store, "2026-01", tenant="acme", now=datetime(2026, 2, 5, tzinfo=UTC))
        with store.database.read() as session:
            final = session.get(InvoiceRow, "acme-2026-01")
            assert final is not None and final.status == "final"
            document = final.document
        write(usage_broker.bootstrap, late)
        run(spark, sqlite_url, usage_broker.bootstrap, NOW)
        issue(store, "2026-01", tenant="acme", now=datetime(2026, 2, 6, tzinfo=UTC))
        issue(store, "2026-02", tenant="acme", now=datetime(2026, 2, 6, tzinfo=UTC))
        with store.database.read() as session:
            again = session.get(InvoiceRow, "acme-2026-01")
            assert again is not None and again.document == document
            february = store.invoice("acme", "acme-2026-02")
    [adjustment] = [line for line in february["lines"] if line["kind"] == "adjustment"]
    late_bytes = sum(r.bytes_in for r in late if r.tenant == "acme")
    assert adjustment["for_period"] == "2026-01" and adjustment["measure"] == str(late_bytes)
    before = sum(r.bytes_in for r in records if r.tenant == "acme")
    price = Decimal("0.08") / 2**30
    expected = (price * (before + late_bytes)).quantize(Decimal("0.01")) - (
        price * before
    ).quantize(Decimal("0.01"))
    assert Decimal(adjustment["amount"]) == expected


def test_two_samplers_of_one_partition_hold_its_time_once_and_count_late_twice(
    spark: Any, usage_broker: BrokerProcess, sqlite_url: str
) -> None:
    """Storage samples come out of the run's one sums aggregation (`frames.grouped_sums`), a row
    per distinct (partition, time, size): two samplers that sample a partition at the same time
    and size count as two records but hold its time once, and a late sample from each counts
    twice as late."""
    minute = 60_000
    points = [(NOW - (8 - i) * minute, 100 * (i + 1)) for i in range(6)]  # newest: NOW - 3 min
    first = storage("acme", "orders", 0, points)
    second = [
        StorageSample(storage_id("s2", s.tenant, s.topic, s.partition, s.at_ms), s.tenant,
                      s.topic, s.partition, s.bytes, s.at_ms)
        for s in first[:3]
    ]  # fmt: skip
    write(usage_broker.bootstrap, [*first, *second])
    report = run(spark, sqlite_url, usage_broker.bootstrap, NOW)
    assert (report.records, report.duplicates, report.late_samples) == (9, 0, 0)
    assert rollups(sqlite_url) == storage_totals(first, INTERVAL, NOW)
    at = NOW - 4 * minute - 30_000  # before the pending sample (NOW - 3 min): late
    late = [
        StorageSample(storage_id(sampler, "acme", "orders", 0, at), "acme", "orders", 0, 5, at)
        for sampler in ("s1", "s2")
    ]
    write(usage_broker.bootstrap, late)
    again = run(spark, sqlite_url, usage_broker.bootstrap, NOW)
    assert (again.records, again.late_samples) == (2, 2)
    assert rollups(sqlite_url) == storage_totals(first, INTERVAL, NOW)
