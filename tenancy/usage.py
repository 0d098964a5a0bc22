"""The usage-record contract between the gateway (writer) and billing (reader): `__usage`.

Owns: the two record kinds (a traffic window, a storage sample), their JSON encoding (one UTF-8
object, `v` first, compact, keys in a fixed order so the same record always encodes to the same
bytes), the Kafka key (the record id), the partition (by tenant id, so one tenant's records stay in
order), the id formats, and validation. docs/gateway.md "Usage" is the prose of this module; the
golden files in `tests/golden/usage/` pin the bytes and are read by the gateway's and billing's
tests alike.

Rules a reader can rely on (`decode` refuses anything else with `UsageRecordError`):
- a traffic window lies inside one UTC hour: `start_ms <= end_ms`, and `end_ms` is at most the next
  hour boundary after `start_ms` (a window ending exactly on the boundary belongs to the hour it
  started in);
- counters are non-negative integers (JSON integers, never floats);
- `tenant` matches the tenant-id syntax; `topic` is a tenant topic name without the fleet prefix
  (null in a traffic record for work tied to no topic: connections, metadata, groups);
- `principal` (1–255 characters) and `client_id` (0–255) are printable text: no C0 control
  character, no DEL (the admin API's rule for client ids, and PostgreSQL cannot store NUL), no
  lone surrogate (it has no UTF-8 encoding); a writer makes any client id fit with `fitted_text`;
- the encoded value is at most `MAX_RECORD_BYTES`, so `encode` refuses what `decode` would;
- `id` is unique per record: `<gateway id>/<incarnation>/<sequence>` for traffic, and
  `<sampler id>/<tenant>/<topic>/<partition>/<at_ms>` for storage (the tenant is in it because
  two tenants may both have a topic `orders`), so a retried or replayed record has the same id
  and counts once.
Pure; thread-safe.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from tenancy.ids import TENANT_ID

USAGE_TOPIC: Final = "__usage"
VERSION: Final = 1
DEFAULT_PARTITIONS: Final = 12
RETENTION_MS: Final = 35 * 24 * 3600 * 1000
HOUR_MS: Final = 3600 * 1000
MAX_RECORD_BYTES: Final = 4096  # far above any valid record; a reader refuses larger values
MAX_NAME: Final = 255
TOPIC_CONFIGS: Final = {"cleanup.policy": "delete", "retention.ms": str(RETENTION_MS)}

_WRITER_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")
REPLACEMENT: Final = "\ufffd"


class UsageRecordError(ValueError):
    """A record that does not follow this contract; `reason` says which rule it breaks."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class TrafficRecord:
    """What one gateway saw of one (tenant, principal, client-id, topic) in one flush window."""

    id: str
    tenant: str
    principal: str
    client_id: str
    topic: str | None
    start_ms: int
    end_ms: int
    bytes_in: int = 0
    bytes_out: int = 0
    requests: int = 0
    throttle_ms: int = 0
    connection_ms: int = 0

    kind: ClassVar[str] = "traffic"


@dataclass(frozen=True, slots=True)
class StorageSample:
    """The size of one tenant partition on its leader at `at_ms`."""

    id: str
    tenant: str
    topic: str
    partition: int
    bytes: int
    at_ms: int

    kind: ClassVar[str] = "storage"


UsageRecord = TrafficRecord | StorageSample

_TRAFFIC_COUNTERS: Final = ("bytes_in", "bytes_out", "requests", "throttle_ms", "connection_ms")
_TRAFFIC_FIELDS: Final = (
    "v",
    "id",
    "kind",
    "tenant",
    "topic",
    "principal",
    "client_id",
    "start_ms",
    "end_ms",
    *_TRAFFIC_COUNTERS,
)
_STORAGE_FIELDS: Final = ("v", "id", "kind", "tenant", "topic", "partition", "bytes", "at_ms")


# --- ids and placement ------------------------------------------------------------------------


def traffic_id(gateway_id: str, incarnation: str, sequence: int) -> str:
    """`<gateway id>/<incarnation>/<sequence>`; the incarnation is unique per process start."""
    _check_writer_id("gateway_id", gateway_id)
    _check_writer_id("incarnation", incarnation)
    if isinstance(sequence, bool) or not isinstance(sequence, int) or sequence < 0:
        raise UsageRecordError("sequence must be a non-negative integer")
    return f"{gateway_id}/{incarnation}/{sequence}"


def storage_id(sampler_id: str, tenant: str, topic: str, partition: int, at_ms: int) -> str:
    """`<sampler id>/<tenant>/<topic>/<partition>/<at_ms>`: samplers sharing an id and aligning
    `at_ms` to their interval dedupe each other."""
    _check_writer_id("sampler_id", sampler_id)
    return f"{sampler_id}/{tenant}/{topic}/{partition}/{at_ms}"


def partition_for(tenant: str, partitions: int = DEFAULT_PARTITIONS) -> int:
    """The `__usage` partition of a tenant's records: CRC-32 of the tenant id, modulo the count."""
    if partitions < 1:
        raise UsageRecordError("partitions must be at least 1")
    return zlib.crc32(tenant.encode("utf-8")) % partitions


def hour_start(ms: int) -> int:
    """The start of the UTC hour holding `ms`."""
    return ms - ms % HOUR_MS


def window_end_limit(start_ms: int) -> int:
    """The latest `end_ms` a window starting at `start_ms` may have: the next hour boundary."""
    return hour_start(start_ms) + HOUR_MS


def fitted_text(value: str, limit: int = MAX_NAME) -> str:
    """`value` made a valid text field: cut to `limit` characters, each control character, DEL
    and lone surrogate replaced by U+FFFD. Writers pass tenant-controlled text (a client id) through
    it, so no record is refused for what a client sent."""
    value = value[:limit]
    return value if _UNPRINTABLE.search(value) is None else _UNPRINTABLE.sub(REPLACEMENT, value)


def is_topic_name(value: object) -> bool:
    """Whether `value` may stand in a record's `topic` field."""
    return isinstance(value, str) and _TOPIC_NAME.fullmatch(value) is not None


# --- encoding ---------------------------------------------------------------------------------


def encode(record: UsageRecord) -> tuple[bytes, bytes]:
    """(key, value) of the Kafka record: the id, and the JSON object. Validates first."""
    validate(record)
    if isinstance(record, TrafficRecord):
        fields: dict[str, Any] = {"v": VERSION, "id": record.id, "kind": record.kind}
        fields.update(
            tenant=record.tenant,
            topic=record.topic,
            principal=record.principal,
            client_id=record.client_id,
            start_ms=record.start_ms,
            end_ms=record.end_ms,
        )
        fields.update((name, getattr(record, name)) for name in _TRAFFIC_COUNTERS)
    else:
        fields = {"v": VERSION, "id": record.id, "kind": record.kind}
        fields.update(
            tenant=record.tenant,
            topic=record.topic,
            partition=record.partition,
            bytes=record.bytes,
            at_ms=record.at_ms,
        )
    value = json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if len(value) > MAX_RECORD_BYTES:
        raise UsageRecordError(f"value of {len(value)} bytes over {MAX_RECORD_BYTES}")
    return record.id.encode("utf-8"), value


def decode(key: bytes | None, value: bytes | None) -> UsageRecord:
    """The record of a `__usage` Kafka record; UsageRecordError if it breaks the contract.

    The key, when present, must equal the id inside the value (a mismatch means a writer bug or
    tampering, and would break de-duplication)."""
    if value is None:
        raise UsageRecordError("value is null")
    if len(value) > MAX_RECORD_BYTES:
        raise UsageRecordError(f"value of {len(value)} bytes over {MAX_RECORD_BYTES}")
    try:
        fields = json.loads(bytes(value).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageRecordError(f"value is not UTF-8 JSON: {exc.__class__.__name__}") from None
    record = from_fields(fields)
    if key is not None and bytes(key) != record.id.encode("utf-8"):
        raise UsageRecordError("key does not match the record id")
    return record


def from_fields(fields: object) -> UsageRecord:
    """A record from its decoded JSON object; UsageRecordError if it breaks the contract."""
    if not isinstance(fields, dict):
        raise UsageRecordError("value is not a JSON object")
    if fields.get("v") != VERSION:
        raise UsageRecordError(f"unknown version {fields.get('v')!r}")
    kind = fields.get("kind")
    expected = _TRAFFIC_FIELDS if kind == "traffic" else _STORAGE_FIELDS
    if kind not in ("traffic", "storage"):
        raise UsageRecordError(f"unknown kind {kind!r}")
    if set(fields) != set(expected):
        missing = sorted(set(expected) - set(fields))
        extra = sorted(set(fields) - set(expected))
        raise UsageRecordError(f"{kind} record fields: missing {missing}, unexpected {extra}")
    arguments = {name: fields[name] for name in expected if name not in ("v", "kind")}
    record: UsageRecord = (
        TrafficRecord(**arguments) if kind == "traffic" else StorageSample(**arguments)
    )
    validate(record)
    return record


# --- validation -------------------------------------------------------------------------------


def validate(record: UsageRecord) -> None:
    """Raise UsageRecordError unless `record` follows the contract (see the module docstring)."""
    _check_text("id", record.id, MAX_NAME * 2)
    _check_tenant(record.tenant)
    if isinstance(record, TrafficRecord):
        _validate_traffic(record)
    elif isinstance(record, StorageSample):
        _validate_storage(record)
    else:
        raise UsageRecordError(f"not a usage record: {type(record).__name__}")


def _validate_traffic(record: TrafficRecord) -> None:
    _check_text("principal", record.principal, MAX_NAME)
    _check_printable("principal", record.principal)
    if not isinstance(record.client_id, str) or len(record.client_id) > MAX_NAME:
        raise UsageRecordError(f"client_id must be a string of at most {MAX_NAME} characters")
    _check_printable("client_id", record.client_id)
    if record.topic is not None:
        _check_topic(record.topic)
    if record.id.count("/") != 2:
        raise UsageRecordError("traffic id must be <gateway id>/<incarnation>/<sequence>")
    for name in ("start_ms", "end_ms", *_TRAFFIC_COUNTERS):
        _check_count(name, getattr(record, name))
    if record.end_ms < record.start_ms:
        raise UsageRecordError("end_ms before start_ms")
    if record.end_ms > window_end_limit(record.start_ms):
        raise UsageRecordError("window crosses an hour boundary")


def _validate_storage(record: StorageSample) -> None:
    _check_topic(record.topic)
    for name in ("partition", "bytes", "at_ms"):
        _check_count(name, getattr(record, name))
    suffix = f"/{record.tenant}/{record.topic}/{record.partition}/{record.at_ms}"
    if not record.id.endswith(suffix) or record.id.count("/") != 4:
        raise UsageRecordError(
            "storage id must be <sampler id>/<tenant>/<topic>/<partition>/<at_ms>"
        )


def _check_tenant(tenant: object) -> None:
    if not isinstance(tenant, str) or TENANT_ID.fullmatch(tenant) is None:
        raise UsageRecordError("tenant must match [a-z][a-z0-9-]{2,15}")


def _check_topic(topic: object) -> None:
    if not is_topic_name(topic):
        raise UsageRecordError("topic must be 1-249 characters of [A-Za-z0-9._-]")


def _check_printable(name: str, value: str) -> None:
    if _UNPRINTABLE.search(value) is not None:
        raise UsageRecordError(f"{name} must not hold control characters, DEL or lone surrogates")


def _check_text(name: str, value: object, limit: int) -> None:
    if not isinstance(value, str) or not 0 < len(value) <= limit:
        raise UsageRecordError(f"{name} must be a non-empty string of at most {limit} characters")


def _check_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageRecordError(f"{name} must be a non-negative integer")


def _check_writer_id(name: str, value: object) -> None:
    if not isinstance(value, str) or _WRITER_ID.fullmatch(value) is None:
        raise UsageRecordError(f"{name} must be 1-64 characters of [A-Za-z0-9._-]")
