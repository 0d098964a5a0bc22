"""The cleaner's broker settings: Kafka's `log.cleaner.*` (one cleaner per log dir here).

Owns: `CleanerConfig`, immutable, with Kafka's defaults, read from broker properties by their Kafka
names and validated when loaded (a bad value raises InvalidConfigError naming the property).
Topic-level compaction settings (min/max.compaction.lag.ms, delete.retention.ms,
min.cleanable.dirty.ratio, with their log.cleaner.* broker synonyms) live in LogConfig.
Pure values; thread-safe.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from brokers.log.errors import InvalidConfigError


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """Kafka's broker settings for the cleaner (one cleaner thread per log dir here)."""

    enable: bool = True  # log.cleaner.enable
    dedupe_buffer_size: int = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size
    io_buffer_size: int = 512 * 1024  # log.cleaner.io.buffer.size
    io_buffer_load_factor: float = 0.9  # log.cleaner.io.buffer.load.factor
    io_max_bytes_per_second: float = math.inf  # log.cleaner.io.max.bytes.per.second
    backoff_ms: int = 15000  # log.cleaner.backoff.ms

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> CleanerConfig:
        """Broker properties by Kafka name; raises InvalidConfigError on a bad value."""
        values: dict[str, Any] = {}
        for field, (name, parse, low, high) in _PROPERTIES.items():
            raw = properties.get(name)
            if raw is None:
                continue
            try:
                value = parse(raw.strip())
            except ValueError:
                raise InvalidConfigError(name, f"Invalid value {raw} for {name}") from None
            if isinstance(value, float | int) and not low <= value <= high:
                raise InvalidConfigError(
                    name, f"Invalid value {raw} for configuration {name}: not in [{low}, {high}]"
                )
            values[field] = value
        return cls(**values)


def _parse_bool(raw: str) -> bool:
    if raw.lower() not in ("true", "false"):
        raise ValueError(raw)
    return raw.lower() == "true"


_INT_MAX = 2**31 - 1
_PROPERTIES: dict[str, tuple[str, Callable[[str], object], float, float]] = {
    "enable": ("log.cleaner.enable", _parse_bool, 0, 1),
    "dedupe_buffer_size": ("log.cleaner.dedupe.buffer.size", int, 1024, 2**63 - 1),
    "io_buffer_size": ("log.cleaner.io.buffer.size", int, 1024, _INT_MAX),  # Kafka: >= 0
    "io_buffer_load_factor": ("log.cleaner.io.buffer.load.factor", float, 0.01, 0.99),
    "io_max_bytes_per_second": ("log.cleaner.io.max.bytes.per.second", float, 1, math.inf),
    "backoff_ms": ("log.cleaner.backoff.ms", int, 0, 2**63 - 1),
}
