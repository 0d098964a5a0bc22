"""Records over HTTP: the embedded formats, the default partitioner, and fetched batches as JSON.

Owns: parsing a Confluent v3 produce record (`ProduceRecord`: `partition_id`, `headers` as
`{"name", "value": base64}`, `key` / `value` as `{"type": "BINARY"|"JSON"|"STRING", "data"}`,
`timestamp` in ISO-8601 or epoch ms) into Kafka bytes; Kafka's default partitioner for keyed
records (murmur2 of the key, positive, modulo the partition count — so a key lands where the Java
client and kafka-python put it) and a round robin for records without key or partition; turning
fetched record batches into v2 consumer records in the `binary` (base64), `json` (the bytes parsed
as JSON) or `string` (UTF-8 text) format. Fetched batches are decoded within `PollLimits`
(docs/security.md): a record count (empty records count: bytes alone never bound a batch of
empty records), key + value bytes, and each batch's decompression bounded
(`MAX_DECOMPRESSED_BYTES`); only the records delivered are decoded (those before the poll's
offset are skipped by their length, or from the `Bookmark` the last poll left). Bad input raises
`ApiError` 422/400 with the field it is about. Pure; thread-safe except `RoundRobin` (event loop
only).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from brokers.records.batch import HEADER_SIZE, BatchHeader, iter_headers, verify_crc
from brokers.records.compression import decompress
from brokers.records.errors import (
    CorruptRecordError,
    DecompressedSizeError,
    InvalidRecordError,
    RecordError,
)
from brokers.records.record import decode_records
from brokers.records.varint import read_varint
from gateway.http.errors import UNPROCESSABLE, ApiError

FORMATS = ("binary", "json", "string")
MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024  # one batch, as the brokers' own bound (docs/security.md)
BATCH_TOO_LARGE = 42205
_TYPES = ("BINARY", "JSON", "STRING")
Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(slots=True)  # not frozen: made per streamed record, a frozen __init__ costs more
class Embedded:
    type: str
    data: bytes | None


@dataclass(slots=True)  # not frozen, as Embedded
class ProduceRecord:
    partition: int | None
    key: Embedded | None
    value: Embedded | None
    headers: Headers
    timestamp_ms: int | None


def _bad(message: str) -> ApiError:
    return ApiError(422, message, UNPROCESSABLE)


def embedded(field: str, raw: Any) -> Embedded | None:
    """A `key` / `value` object as bytes (None when absent or its data is null)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _bad(f"{field} must be an object with type and data")
    kind = str(raw.get("type", "JSON" if "data" in raw else "")).upper()
    if kind not in _TYPES:
        raise _bad(f"{field}.type must be one of {', '.join(_TYPES)}")
    data = raw.get("data")
    if data is None:
        return Embedded(kind, None)
    if kind == "BINARY":
        if not isinstance(data, str):
            raise _bad(f"{field}.data must be base64 text for BINARY")
        return Embedded(kind, _base64(field, data))
    if kind == "STRING":
        if not isinstance(data, str):
            raise _bad(f"{field}.data must be a string for STRING")
        return Embedded(kind, data.encode())
    return Embedded(kind, json.dumps(data, separators=(",", ":")).encode())


def _base64(field: str, data: str) -> bytes:
    """Strict base64: `binascii`'s strict mode in C first (no regular expression per value);
    what it refuses goes through `b64decode(validate=True)`, which decides as before."""
    try:
        return binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError):
        pass
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise _bad(f"{field}.data is not valid base64") from None


def _headers(raw: Any) -> Headers:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _bad("headers must be a list of {name, value}")
    out: list[tuple[str, bytes | None]] = []
    for entry in raw:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise _bad("each header needs a name")
        value = entry.get("value")
        if value is None:
            out.append((entry["name"], None))
            continue
        if not isinstance(value, str):
            raise _bad("a header value is base64 text or null")
        try:
            out.append((entry["name"], base64.b64decode(value, validate=True)))
        except (binascii.Error, ValueError):
            raise _bad(f"header {entry['name']!r} is not valid base64") from None
    return tuple(out)


def _timestamp(raw: Any) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw
    if isinstance(raw, str):
        try:
            moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise _bad("timestamp must be ISO-8601 or epoch milliseconds") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return int(moment.timestamp() * 1000)
    raise _bad("timestamp must be ISO-8601 or epoch milliseconds")


def produce_record(raw: Any) -> ProduceRecord:
    if not isinstance(raw, dict):
        raise _bad("a record is a JSON object")
    partition = raw.get("partition_id")
    if partition is not None and (
        not isinstance(partition, int) or isinstance(partition, bool) or partition < 0
    ):
        raise _bad("partition_id must be a non-negative integer")
    return ProduceRecord(
        partition,
        embedded("key", raw.get("key")),
        embedded("value", raw.get("value")),
        _headers(raw.get("headers")),
        _timestamp(raw.get("timestamp")),
    )


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2` (seed 0x9747b28c), as a signed 32-bit int."""
    length = len(data)
    m, r = 0x5BD1E995, 24
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def key_partition(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class RoundRobin:
    """The next partition per topic; at most `MAX_TOPICS` topics are remembered (then every
    count starts again at 0: topics come and go all day)."""

    MAX_TOPICS = 10_000

    def __init__(self) -> None:
        self._next: dict[str, int] = {}

    def partition(self, topic: str, partitions: int) -> int:
        value = self._next.get(topic)
        if value is None:
            if len(self._next) >= self.MAX_TOPICS:
                self._next.clear()
            value = 0
        self._next[topic] = value + 1
        return value % partitions


def choose_partition(
    record: ProduceRecord, topic: str, partitions: int, round_robin: RoundRobin
) -> int:
    if record.partition is not None:
        return record.partition
    if record.key is not None and record.key.data is not None:
        return key_partition(record.key.data, partitions)
    return round_robin.partition(topic, partitions)


_SECOND: tuple[int, str] = (-1, "")  # the last second formatted, and its text


def iso_ms(ms: int) -> str:
    """`ms` as `datetime.isoformat` writes it in UTC, with "Z" (micro-second digits, none when
    the millisecond is 0); the date and time of the second are formatted once per second."""
    global _SECOND
    second, millis = divmod(ms, 1000)
    last, text = _SECOND
    if second != last:
        text = datetime.fromtimestamp(second, UTC).isoformat().removesuffix("+00:00")
        _SECOND = (second, text)  # one tuple: a reader on another thread sees a whole pair
    return f"{text}.{millis:03d}000Z" if millis else text + "Z"


# -- consuming --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Fetched:
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Headers


@dataclass(frozen=True, slots=True)
class PollLimits:
    """What one poll may decode: records (empty ones count), key + value bytes (the first record
    is always taken, as Kafka's `fetch.max.bytes`), and the decompressed size of one batch."""

    max_records: int
    max_bytes: int
    max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES


@dataclass(frozen=True, slots=True)
class Bookmark:
    """Where the record after the last one delivered starts in its batch's decompressed payload:
    the next poll of the same batch (same base offset and CRC) goes on from there instead of
    walking every record before it again."""

    base_offset: int
    crc: int
    index: int
    pos: int


@dataclass(slots=True)
class Polled:
    records: list[Fetched]
    used_bytes: int  # key + value bytes of `records`
    bookmark: Bookmark | None  # set when the last batch read has records left


def fetched_records(
    records: bytes, start: int, limits: PollLimits, bookmark: Bookmark | None = None
) -> Polled:
    """The records of whole batches at or after offset `start` (control batches and a partial
    last batch skipped), at most `limits.max_records` and `limits.max_bytes`; each batch's
    decompression bounded by `limits.max_decompressed_bytes` (422 beyond, a corrupt batch 502)."""
    polled = Polled([], 0, None)
    view = memoryview(records)
    for pos, header in _whole_batches(view):
        if header.next_offset <= start or header.is_control:
            continue
        if len(polled.records) >= limits.max_records or polled.used_bytes >= limits.max_bytes:
            break
        try:
            _read_batch(view, pos, header, max(start, header.base_offset), limits, bookmark, polled)
        except DecompressedSizeError:
            raise ApiError(
                422,
                f"the batch at offset {header.base_offset} decompresses beyond "
                f"{limits.max_decompressed_bytes} bytes: read it over the Kafka protocol",
                BATCH_TOO_LARGE,
            ) from None
        except RecordError as exc:
            raise ApiError(
                502, f"the batch at offset {header.base_offset} is unreadable: {exc}", 50201
            ) from None
        if polled.bookmark is not None:  # stopped inside this batch
            break
    return polled


def _read_batch(
    view: memoryview,
    pos: int,
    header: BatchHeader,
    start: int,
    limits: PollLimits,
    bookmark: Bookmark | None,
    polled: Polled,
) -> None:
    """Decode the records of one batch from offset `start` into `polled`, within the limits.
    Offset deltas are record indexes (the brokers refuse batches where they are not)."""
    verify_crc(view, pos, header)
    body = view[pos + HEADER_SIZE : pos + header.size]
    payload = decompress(header.compression, body, limits.max_decompressed_bytes)
    count = header.records_count
    index, at = 0, 0
    if (
        bookmark is not None
        and (bookmark.base_offset, bookmark.crc) == (header.base_offset, header.crc)
        and bookmark.index <= start - header.base_offset
    ):
        index, at = bookmark.index, bookmark.pos
    while index < min(start - header.base_offset, count):
        at = _record_end(payload, at)
        index += 1
    take = min(count - index, limits.max_records - len(polled.records))
    ends = []
    begin = at
    for _ in range(take):
        at = _record_end(payload, at)
        ends.append(at)
    items = decode_records(payload[begin:at], take)
    kept = 0
    for item in items:
        size = len(item.key or b"") + len(item.value or b"")
        if polled.records and polled.used_bytes + size > limits.max_bytes:
            break
        stamp = header.max_timestamp
        if not header.is_log_append_time:
            stamp = header.base_timestamp + item.timestamp_delta
        offset = header.base_offset + item.offset_delta
        polled.records.append(Fetched(offset, stamp, item.key, item.value, tuple(item.headers)))
        polled.used_bytes += size
        kept += 1
    if index + kept < count:
        position = ends[kept - 1] if kept else begin
        polled.bookmark = Bookmark(header.base_offset, header.crc, index + kept, position)


def _record_end(payload: bytes, pos: int) -> int:
    """Where the record at `pos` ends (its length varint read, the rest skipped)."""
    length, pos = read_varint(payload, pos)
    if length < 0 or pos + length > len(payload):
        raise InvalidRecordError(f"record length {length} at {pos} overruns the batch")
    return pos + length


def next_offset(records: bytes, start: int) -> int:
    """The offset after the last whole batch (control batches included), or `start`."""
    last = start
    for _pos, header in _whole_batches(memoryview(records)):
        last = max(last, header.next_offset)
    return last


def _whole_batches(view: memoryview) -> list[tuple[int, BatchHeader]]:
    """The whole batches of a fetch answer; a broker cuts the last one at its size limit."""
    found: list[tuple[int, BatchHeader]] = []
    batches = iter_headers(view)
    while True:
        try:
            found.append(next(batches))
        except (StopIteration, CorruptRecordError, ValueError):
            return found


def encode_value(fmt: str, data: bytes | None, where: str, *, part: str) -> Any:
    """One part (`part`: "key" or "value") of the record at `where` in the consumer's format;
    422 naming the part and the record when the json format meets bytes that are not JSON."""
    if data is None:
        return None
    if fmt == "binary":
        return base64.b64encode(data).decode()
    if fmt == "string":
        return data.decode("utf-8", errors="replace")
    try:
        return json.loads(data)
    except ValueError:
        raise ApiError(
            422,
            f"the {part} of the record at {where} is not JSON:"
            " consume it with the binary or string format",
            42203,
        ) from None


def encode_headers(headers: Headers) -> list[dict[str, Any]]:
    return [
        {"name": name, "value": None if value is None else base64.b64encode(value).decode()}
        for name, value in headers
    ]
