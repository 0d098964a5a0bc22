"""Offset specs of `__usage`: `earliest`, `latest`, or JSON `{"<partition>": offset}`.

Owns: `OffsetSpec` (what the rollup asks `billing.source.kafka` to resolve), parsing a spec's text,
and the canonical JSON of resolved offsets (the rollup ledger stores it). In a JSON spec, -2 means
earliest and -1 latest, as in Spark's Kafka source. Pure; thread-safe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

EARLIEST: Final = -2
LATEST: Final = -1


class SourceOptionError(ValueError):
    """An offset spec is malformed; the message names the option."""


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """`default` applies to partitions not listed in `explicit` (EARLIEST or LATEST)."""

    default: int
    explicit: tuple[tuple[int, int], ...] = ()

    def for_partition(self, partition: int) -> int:
        return dict(self.explicit).get(partition, self.default)


def parse_spec(name: str, text: str | None, default: int) -> OffsetSpec:
    if text is None or text.strip() == "":
        return OffsetSpec(default)
    word = text.strip().lower()
    if word == "earliest":
        return OffsetSpec(EARLIEST)
    if word == "latest":
        return OffsetSpec(LATEST)
    try:
        return OffsetSpec(default, tuple(sorted(offsets_from_json(text).items())))
    except ValueError as exc:
        raise SourceOptionError(f"{name}: {exc}") from None


def offsets_from_json(text: str) -> dict[int, int]:
    """`{"0": 12, "3": -2}` → {0: 12, 3: -2}; ValueError if it is anything else."""
    try:
        raw = json.loads(text)
    except ValueError:
        raise ValueError(
            'not "earliest", "latest" or a JSON object {"partition": offset}'
        ) from None
    if not isinstance(raw, dict):
        raise ValueError('expected a JSON object {"partition": offset}')
    offsets: dict[int, int] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key.isdigit():
            raise ValueError(f"partition {key!r} is not a non-negative integer")
        if isinstance(value, bool) or not isinstance(value, int) or value < EARLIEST:
            raise ValueError(f"offset of partition {key} must be an integer >= -2")
        offsets[int(key)] = value
    return offsets


def offsets_to_json(offsets: dict[int, int]) -> str:
    """The canonical JSON of resolved offsets: partitions as strings, in numeric order."""
    return json.dumps({str(p): offsets[p] for p in sorted(offsets)}, separators=(",", ":"))
