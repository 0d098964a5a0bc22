"""Records inside a v2 batch: the `Record` value and the codec of a batch's (uncompressed) payload.

Owns: `Record`, `decode_records(payload, count)`, `encode_records(records)`. Layout per record
(KIP-98, seed "log format"): length varint | attributes int8 | timestampDelta varlong |
offsetDelta varint | keyLength varint | key | valueLength varint | value | headerCount varint |
(headerKeyLength varint | headerKey utf-8 | headerValueLength varint | headerValue)*.
Length -1 means null. Off the hot path (compaction, transactions, deep validation, tests), so this
is plain Python kept tight: fields read inline, one-byte varints on a fast path.
Header keys that are not UTF-8 decode with surrogate escapes, so re-encoding is lossless.
Malformed records raise InvalidRecordError, as Kafka's DefaultRecord.readFrom does
("Found invalid record structure"). Pure functions; thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from typing_extensions import Buffer

from brokers.records.errors import InvalidRecordError
from brokers.records.varint import read_varint, read_varlong, write_varint

Headers = tuple[tuple[str, bytes | None], ...]
_VarintReader = Callable[[bytes, int], tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Record:
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    attributes: int = 0


def decode_records(payload: Buffer, count: int) -> list[Record]:
    """Decode exactly `count` records filling `payload`; InvalidRecordError otherwise."""
    buf = payload if isinstance(payload, bytes) else bytes(payload)
    if count < 0:
        raise InvalidRecordError(f"negative record count {count}")
    records: list[Record] = []
    append = records.append
    pos = 0
    try:
        for _ in range(count):
            record, pos = _decode_one(buf, pos)
            append(record)
    except IndexError as exc:  # ran off the end of the payload
        raise InvalidRecordError("record truncated") from exc
    if pos != len(buf):
        raise InvalidRecordError(
            f"incorrect declared batch size: {len(buf) - pos} bytes left after {count} records"
        )
    return records


def _decode_one(
    buf: bytes, pos: int, read_varint: _VarintReader = read_varint, record: type[Record] = Record
) -> tuple[Record, int]:
    # Hot loop of compaction and deep validation: varints go through read_varint, whose one-byte
    # case is cheap, and fields are read inline rather than through helpers.
    length, pos = read_varint(buf, pos)
    end = pos + length
    if length < 0 or end > len(buf):
        raise InvalidRecordError(f"record length {length} at {pos} overruns the batch")
    attributes = buf[pos]
    timestamp_delta, pos = read_varlong(buf, pos + 1)
    offset_delta, pos = read_varint(buf, pos)
    size, pos = read_varint(buf, pos)
    key = buf[pos : pos + size] if size >= 0 else None  # Kafka reads any negative length as null
    if size > 0:
        pos += size
    size, pos = read_varint(buf, pos)
    value = buf[pos : pos + size] if size >= 0 else None
    if size > 0:
        pos += size
    if buf[pos] == 0:  # zigzag(0): no headers, the usual case
        headers: Headers = ()
        pos += 1
    else:
        headers, pos = _read_headers(buf, pos, end)
    if pos != end:
        raise InvalidRecordError(f"record declared {length} bytes but used {length + pos - end}")
    return record(offset_delta, timestamp_delta, key, value, headers, attributes), pos


def _read_bytes(buf: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    size, pos = read_varint(buf, pos)
    if size < 0:
        return None, pos
    if pos + size > end:
        raise InvalidRecordError(f"field of {size} bytes at {pos} overruns its record")
    return buf[pos : pos + size], pos + size


def _read_headers(buf: bytes, pos: int, end: int) -> tuple[Headers, int]:
    count, pos = read_varint(buf, pos)
    if count == 0:
        return (), pos
    if count < 0 or count > end - pos:
        raise InvalidRecordError(f"invalid number of record headers {count}")
    headers = []
    for _ in range(count):
        raw_key, pos = _read_bytes(buf, pos, end)
        if raw_key is None:
            raise InvalidRecordError("null header key")
        value, pos = _read_bytes(buf, pos, end)
        headers.append((raw_key.decode("utf-8", "surrogateescape"), value))
    return tuple(headers), pos


def encode_records(records: Iterable[Record]) -> bytes:
    """Encode records back to back, the uncompressed payload of a v2 batch."""
    out = bytearray()
    body = bytearray()
    for record in records:
        body.clear()
        body.append(record.attributes & 0xFF)
        write_varint(body, record.timestamp_delta)
        write_varint(body, record.offset_delta)
        _write_bytes(body, record.key)
        _write_bytes(body, record.value)
        write_varint(body, len(record.headers))
        for key, value in record.headers:
            _write_bytes(body, key.encode("utf-8", "surrogateescape"))
            _write_bytes(body, value)
        write_varint(out, len(body))
        out += body
    return bytes(out)


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(1)  # zigzag(-1)
        return
    write_varint(out, len(data))
    out += data
