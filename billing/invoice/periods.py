"""Billing periods: UTC calendar months named `YYYY-MM`. Pure; thread-safe."""

from __future__ import annotations

import re
from datetime import UTC, datetime

_PERIOD = re.compile(r"(\d{4})-(0[1-9]|1[0-2])")


class PeriodError(ValueError):
    pass


def bounds(period: str) -> tuple[datetime, datetime]:
    """[first instant, first instant of the next month) of `period`, aware UTC."""
    match = _PERIOD.fullmatch(period)
    if match is None:
        raise PeriodError(f"period {period!r} is not YYYY-MM")
    year, month = int(match.group(1)), int(match.group(2))
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def bounds_ms(period: str) -> tuple[int, int]:
    start, end = bounds(period)
    return int(start.timestamp() * 1000), int(end.timestamp() * 1000)
