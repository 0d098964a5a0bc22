"""Building version-specific kio responses from one handler.

Owns: the conversions kio's typed response fields need (throttle durations, timestamps) and the
per-topic grouping of per-partition results that many responses share. The
version-spanning constructors `make` / `response_module` live in `brokers.wire.entities` (shared
with the client) and are imported here for handlers. Pure; thread-safe.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from brokers.wire.entities import make, response_module

__all__ = ["by_topic", "make", "response_module", "throttle", "timestamp_or_none"]
T = TypeVar("T")

NO_THROTTLE = datetime.timedelta(0)


def throttle(ms: int = 0) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms) if ms else NO_THROTTLE


def timestamp_or_none(ms: int) -> datetime.datetime | None:
    """kio's TZAware fields: -1 (no timestamp) is None."""
    if ms < 0:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def by_topic(
    outcomes: Iterable[tuple[tuple[str, int], T]], build: Callable[[int, T], Any]
) -> list[tuple[str, tuple[Any, ...]]]:
    """Per-partition outcomes as (topic, built partition entries), both in sorted order."""
    grouped: dict[str, list[Any]] = defaultdict(list)
    for (topic, partition), outcome in sorted(outcomes, key=lambda item: item[0]):
        grouped[topic].append(build(partition, outcome))
    return [(topic, tuple(parts)) for topic, parts in sorted(grouped.items())]
