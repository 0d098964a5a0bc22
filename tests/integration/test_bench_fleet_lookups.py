"""`infra.bench.fleet_lookups` keeps working: a small fleet, every row measured and written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.bench.fleet_lookups import main

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
ROWS = (
    "metadata_all_topics",
    "metadata_20_unknown_ids",
    "metadata_16_unknown_names",
    "create_topic",
)


def test_the_bench_measures_every_lookup_on_a_small_fleet(tmp_path: Path) -> None:
    out = tmp_path / "fleet.json"
    main(["--topics", "3", "--partitions", "2", "--repetitions", "2", "--out", str(out)])
    doc = json.loads(out.read_text())
    assert doc["fleet_partitions"] == 6
    for row in ROWS:
        assert doc[row]["median_ms"] > 0 and doc[row]["max_ms"] >= doc[row]["median_ms"], row
