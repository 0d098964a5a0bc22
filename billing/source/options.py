"""The options of the `pier-usage` source, validated once on the driver.

| option | default | meaning |
|---|---|---|
| `bootstrap` | (required) | `host:port[,host:port…]` of the brokers; executors connect themselves |
| `topic` | `__usage` | the usage topic |
| `startingOffsets` | `earliest` | `earliest`, `latest` or JSON `{"<partition>": offset}` (-2 earliest, -1 latest) |
| `endingOffsets` | `latest` | as above; batch reads only |
| `maxRecordsPerPartition` | 200000 | an offset range longer than this is split into several input partitions |
| `arrow` | `true` | hand rows to Spark as Arrow batches (`false`: one tuple per row, slower) |

Option names are case-insensitive (Spark's). Pure; thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from billing.source.offsets import EARLIEST, LATEST, OffsetSpec, SourceOptionError, parse_spec
from tenancy.usage import USAGE_TOPIC

DEFAULT_MAX_RECORDS: Final = 200_000


@dataclass(frozen=True, slots=True)
class SourceOptions:
    bootstrap: str
    topic: str
    starting: OffsetSpec
    ending: OffsetSpec
    max_records_per_partition: int
    arrow: bool = True


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    lower = {str(k).lower(): v for k, v in options.items()}
    bootstrap = lower.get("bootstrap", "").strip()
    if not bootstrap:
        raise SourceOptionError("option bootstrap is required (host:port[,host:port...])")
    text = lower.get("maxrecordsperpartition", str(DEFAULT_MAX_RECORDS))
    if not str(text).isdigit() or int(text) < 1:
        raise SourceOptionError("maxRecordsPerPartition must be a positive integer")
    return SourceOptions(
        bootstrap=bootstrap,
        topic=lower.get("topic", USAGE_TOPIC) or USAGE_TOPIC,
        starting=parse_spec("startingOffsets", lower.get("startingoffsets"), EARLIEST),
        ending=parse_spec("endingOffsets", lower.get("endingoffsets"), LATEST),
        max_records_per_partition=int(text),
        arrow=str(lower.get("arrow", "true")).strip().lower() != "false",
    )
