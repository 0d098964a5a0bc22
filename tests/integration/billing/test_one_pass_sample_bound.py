"""The one-pass digest bounds a micro-batch's storage samples before it collects them
(`billing.rollup.one_pass.MAX_SAMPLES`, driver memory): a batch with more sample ids has them
counted in the aggregation's job, their rows never reach the driver, and the stream rolls it up
the exact way, each record once. The bound is lowered for the test (the real one: 100,000 ids)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from billing.rollup import frames, one_pass
from infra.stack import BrokerProcess
from tenancy.usage import encode
from tests.integration.billing.helpers import merge, rollups
from tests.integration.billing.test_stream_one_pass import BASE_MS, NOW, TENANTS, Batches
from tests.integration.billing.usage_gen import (
    storage,
    storage_totals,
    traffic,
    traffic_totals,
    write,
)

pytestmark = pytest.mark.integration
BOUND = 5
T = NOW - NOW % 60_000 - 10 * 60_000


def samples(count: int) -> list[Any]:
    """One sample each of `count` partitions, one minute."""
    return [s for p in range(count) for s in storage("acme", "orders", p, [(T, 1_000 + p)])]


def test_an_oversize_batch_is_counted_not_collected(spark: Any, monkeypatch: Any) -> None:
    records = [*traffic(random.Random(3), TENANTS, 100, base_ms=BASE_MS), *samples(3 * BOUND)]
    rows = [(0, offset, *encode(r)) for offset, r in enumerate(records)]
    batch = spark.createDataFrame(rows, "partition INT, offset BIGINT, key BINARY, value BINARY")
    stage, _ = frames.checked(batch)
    monkeypatch.setattr(one_pass, "MAX_SAMPLES", BOUND)
    found = one_pass.digest(stage)
    assert found.oversize == 3 * BOUND
    assert (found.samples, found.sums, found.chunks) == ({}, {}, {})
    monkeypatch.setattr(one_pass, "MAX_SAMPLES", 3 * BOUND)
    found = one_pass.digest(stage)
    assert (found.oversize, len(found.samples), found.valid) == (0, 3 * BOUND, 100)


def test_the_stream_rolls_an_oversize_batch_up_the_exact_way(
    spark: Any, usage_broker: BrokerProcess, sqlite_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr(one_pass, "MAX_SAMPLES", BOUND)
    batches = Batches(spark, sqlite_url, usage_broker.bootstrap, tmp_path / "state", exact=False)
    try:
        plain = traffic(random.Random(4), TENANTS, 100, base_ms=BASE_MS)
        sampled = samples(BOUND + 1)
        write(batches.bootstrap, [*plain, *sampled])
        report = batches.next(until_ms := T + 200_000)
        assert "digest" not in report.seconds, report  # declined: the exact path
        assert (report.records, report.duplicates) == (100 + BOUND + 1, 0), report
        expected = merge(traffic_totals(plain), storage_totals(sampled, 60_000, until_ms))
        assert rollups(batches.url) == expected
    finally:
        batches.db.dispose()
