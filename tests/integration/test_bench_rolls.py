"""`infra.bench.rolls` keeps working: on a fresh broker the rolling topic rolls a segment per MiB
while the quiet producer is measured, and every row is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.bench.rolls import ROWS, SEGMENT_BYTES, main

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_the_bench_rolls_the_noisy_topic_and_measures_the_quiet_one(tmp_path: Path) -> None:
    out = tmp_path / "rolls.json"
    assert main(["--short", "--no-kafka", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    (run,) = doc["runs"]["pier"]
    assert run["noisy_failures"] == {}
    acked_bytes = run["noisy_mb_s"] * 1e6  # about one second's worth at least
    assert run["segments"] >= max(2, int(acked_bytes // SEGMENT_BYTES) // 2)
    assert run["alone"]["count"] > 0 and run["during"]["count"] > 0
    assert set(doc["rows"]) == {name for name, _ in ROWS}
    assert out.with_suffix(".png").stat().st_size > 0
