"""Counted sequence ranges of traffic usage ids, as plain values.

Owns: `Range` (a writer — a traffic id's `<gateway id>/<incarnation>` — and an inclusive run of
sequence numbers of it that were counted, with the newest UTC hour of a record in it) and `merge`
(the union of ranges, overlapping or adjacent ones joined). The Spark side is
`billing.rollup.ranges`; the ledger stores them. Plain values; thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class Range:
    writer: str
    lo: int
    hi: int  # inclusive
    hour_ms: int  # the newest UTC hour of a record in the range (for expiry)


def merge(ranges: Iterable[Range]) -> list[Range]:
    """The union of `ranges`, per writer, overlapping or adjacent ones joined, sorted."""
    out: list[Range] = []
    for item in sorted(ranges):
        last = out[-1] if out else None
        if last is not None and last.writer == item.writer and item.lo <= last.hi + 1:
            out[-1] = Range(
                last.writer, last.lo, max(last.hi, item.hi), max(last.hour_ms, item.hour_ms)
            )
        else:
            out.append(item)
    return out
