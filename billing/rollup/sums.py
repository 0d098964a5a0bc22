"""What a rollup run hands the ledger: per-key sums, storage state, counts.

Owns: `RollupKey`, `Sums` (the additive measures of one tenant/principal/client-id/topic/hour),
`PendingSample`, `Cursor` and `RunOutput`. Storage rows use principal and client_id "" and traffic
records with no topic use topic "" (topic names are never empty). Plain values; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from decimal import Decimal

from billing.rollup.seq_ranges import Range

TRAFFIC_MEASURES = ("bytes_in", "bytes_out", "requests", "throttle_ms", "connection_ms")


@dataclass(frozen=True, slots=True, order=True)
class RollupKey:
    tenant: str
    principal: str
    client_id: str
    topic: str
    hour_ms: int


@dataclass(slots=True)
class Sums:
    bytes_in: int = 0
    bytes_out: int = 0
    requests: int = 0
    throttle_ms: int = 0
    connection_ms: int = 0
    partition_ms: int = 0
    storage_byte_ms: Decimal = Decimal(0)
    records: int = 0

    def add(self, other: Sums) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass(frozen=True, slots=True)
class PendingSample:
    tenant: str
    topic: str
    partition: int
    at_ms: int
    bytes: int
    settled: bool


@dataclass(frozen=True, slots=True)
class Cursor:
    generation: int
    offsets: dict[int, int]


@dataclass
class RunOutput:
    topic: str
    start: Cursor | None
    start_offsets: dict[int, int]
    end_offsets: dict[int, int]
    until_ms: int
    rollups: dict[RollupKey, Sums] = field(default_factory=dict)
    pending: list[PendingSample] = field(default_factory=list)
    records: int = 0
    duplicates: int = 0
    rejected: int = 0
    late_samples: int = 0
    ranges: list[Range] = field(default_factory=list)  # counted sequence ranges to merge
