"""`pier billing usage --chart`: hours summed over principals and topics, drawn to a PNG."""

from __future__ import annotations

from pathlib import Path

import pytest

from pier.usage_chart import draw, hourly_totals

pytestmark = pytest.mark.unit

ROWS = [
    {"hour": "2026-11-25T10:00:00Z", "bytes_in": 100, "bytes_out": 5, "requests": 2},
    {"hour": "2026-11-25T10:00:00Z", "bytes_in": 50, "bytes_out": 0, "requests": 1},
    {"hour": "2026-11-25T09:00:00Z", "bytes_in": 7, "bytes_out": 70, "requests": 9},
]


def test_hours_are_summed_and_ordered() -> None:
    assert hourly_totals(ROWS) == {
        "2026-11-25T09:00:00Z": {"bytes_in": 7, "bytes_out": 70, "requests": 9},
        "2026-11-25T10:00:00Z": {"bytes_in": 150, "bytes_out": 5, "requests": 3},
    }


def test_the_chart_is_a_png(tmp_path: Path) -> None:
    path = tmp_path / "usage.png"
    draw(ROWS, "acme", path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
