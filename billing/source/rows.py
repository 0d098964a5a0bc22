"""The rows of the `pier-usage` source: one per `__usage` Kafka record, decoded by the contract.

Owns: `SCHEMA` (a Spark DDL string), `COLUMNS`, and `to_row`. Decoding is `tenancy.usage.decode`'s
(never re-parsed here). A record that breaks the contract is not dropped: it becomes a row whose
`rejected` column holds the reason, with `id` set to its key when the key is UTF-8, and every
usage column null, so the job can count and report it. Traffic rows leave the storage columns
null and the other way round. Pure; thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any, Final

from tenancy.usage import StorageSample, TrafficRecord, UsageRecordError, decode

COLUMNS: Final = (
    ("kafka_partition", "INT"),
    ("kafka_offset", "BIGINT"),
    ("id", "STRING"),
    ("kind", "STRING"),
    ("tenant", "STRING"),
    ("principal", "STRING"),
    ("client_id", "STRING"),
    ("topic", "STRING"),
    ("start_ms", "BIGINT"),
    ("end_ms", "BIGINT"),
    ("bytes_in", "BIGINT"),
    ("bytes_out", "BIGINT"),
    ("requests", "BIGINT"),
    ("throttle_ms", "BIGINT"),
    ("connection_ms", "BIGINT"),
    ("partition", "INT"),
    ("bytes", "BIGINT"),
    ("at_ms", "BIGINT"),
    ("rejected", "STRING"),
)
SCHEMA: Final = ", ".join(f"`{name}` {kind}" for name, kind in COLUMNS)
BATCH_ROWS: Final = 8192
Row = tuple[Any, ...]
_ARROW_TYPES: Final = {"INT": "int32", "BIGINT": "int64", "STRING": "string"}


def arrow_batches(rows: Iterator[Row]) -> Iterator[Any]:
    """`rows` as pyarrow RecordBatches of up to BATCH_ROWS rows, in the schema's column types:
    Spark takes Arrow batches from a Python data source far faster than one tuple at a time."""
    import pyarrow as pa

    schema = pa.schema([(name, _ARROW_TYPES[kind]) for name, kind in COLUMNS])
    batch = list(islice(rows, BATCH_ROWS))
    while batch:
        columns = [list(column) for column in zip(*batch, strict=True)]
        yield pa.RecordBatch.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)], schema=schema
        )
        batch = list(islice(rows, BATCH_ROWS))


def to_row(partition: int, offset: int, key: bytes | None, value: bytes | None) -> Row:
    """The row of the record at (`partition`, `offset`) of `__usage`."""
    try:
        record = decode(key, value)
    except UsageRecordError as exc:
        return _rejected(partition, offset, key, exc.reason)
    if isinstance(record, TrafficRecord):
        return (
            partition, offset, record.id, record.kind, record.tenant, record.principal,
            record.client_id, record.topic, record.start_ms, record.end_ms, record.bytes_in,
            record.bytes_out, record.requests, record.throttle_ms, record.connection_ms,
            None, None, None, None,
        )  # fmt: skip
    assert isinstance(record, StorageSample)
    return (
        partition, offset, record.id, record.kind, record.tenant, None, None, record.topic,
        None, None, None, None, None, None, None, record.partition, record.bytes, record.at_ms,
        None,
    )  # fmt: skip


def _rejected(partition: int, offset: int, key: bytes | None, reason: str) -> Row:
    try:
        record_id = None if key is None else bytes(key).decode("utf-8")
    except UnicodeDecodeError:
        record_id = None
    blanks = (None,) * (len(COLUMNS) - 4)
    return (partition, offset, record_id, *blanks, reason)
