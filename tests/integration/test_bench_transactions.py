"""The transactions benchmark runs end to end (`--quick`, on Pier) and reports every figure.

No timing thresholds: the numbers depend on the machine and its load. What must hold is that each
run moved every record and measured something (positive rates, one commit latency per
transaction, p50 <= p99 <= max, the two ratios), and that the JSON on stdout is the one written
next to the chart. The quick run starts one broker and moves 15,000 x 1 KiB records four times.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.bench.transactions import PER_TRANSACTION, QUICK_RECORDS, main

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def positive(value: Any) -> bool:
    return isinstance(value, int | float) and value > 0


def check_run(run: dict[str, Any], target: str, phase: str) -> None:
    assert (run["target"], run["phase"]) == (target, phase)
    assert (run["records"], run["record_bytes"]) == (QUICK_RECORDS, 1024)
    assert positive(run["records_per_s"]) and positive(run["mb_per_s"]), run


def test_quick_transactions_benchmark_reports_every_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "transactions.json"
    assert main(["--quick", "--output", str(output)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(output.read_text())
    assert output.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (printed["benchmark"], printed["target"], printed["quick"]) == (
        "transactions",
        "pier",
        True,
    )
    assert printed["records_per_transaction"] == PER_TRANSACTION
    for name in ("idempotent", "transactional"):
        check_run(printed["produce"][name], name, "produce")
    for name in ("read_uncommitted", "read_committed"):
        check_run(printed["consume"][name], name, "consume")
    latency = printed["commit_latency"]
    assert latency["transactions"] == QUICK_RECORDS // PER_TRANSACTION
    assert 0 < latency["p50_ms"] <= latency["p99_ms"] <= latency["max_ms"]
    for ratio in ("ratio_transactional_to_idempotent", "ratio_read_committed_to_read_uncommitted"):
        assert positive(printed[ratio])
    assert positive(printed["environment"]["cpus"])
