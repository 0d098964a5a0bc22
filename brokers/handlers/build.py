"""Building version-specific kio responses from one handler.

Owns: the conversions kio's typed response fields need (throttle durations, timestamps). The
version-spanning constructors `make` / `response_module` live in `brokers.wire.entities` (shared
with the client) and are imported here for handlers. Pure; thread-safe.
"""

from __future__ import annotations

import datetime

from brokers.wire.entities import make, response_module

__all__ = ["make", "response_module", "throttle", "timestamp_or_none"]

NO_THROTTLE = datetime.timedelta(0)


def throttle(ms: int = 0) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms) if ms else NO_THROTTLE


def timestamp_or_none(ms: int) -> datetime.datetime | None:
    """kio's TZAware fields: -1 (no timestamp) is None."""
    if ms < 0:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
