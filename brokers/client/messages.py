"""Version-specific request construction and response decoding for the client.

Owns: `make` (build a class of a kio request module from keyword fields, dropping the fields that
version lacks, so each builder writes the newest field set once and serves every version in
`CLIENT_VERSIONS`), `decode_response` (bounds-checked kio decoding of one response body), and the
timestamp/duration conversions kio's typed fields need. Pure; thread-safe (caches fill
idempotently).

Why the bounds walk on responses too: kio's native reader reserves memory from an array's length
prefix before reading it, so a hostile or corrupt response could abort the process
(`brokers.wire.guard`); the same walk works for any schema.
"""

from __future__ import annotations

import dataclasses
import datetime
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
from kio.serial import entity_reader
from kio.static.constants import EntityType

from brokers.client.errors import ProtocolViolationError
from brokers.wire.guard import check_request_bounds
from brokers.wire.messages import MalformedRequestError, UnknownMessageError, response_schema


@cache
def request_module(api_key: int, version: int) -> ModuleType:
    return load_payload_module(api_key, version, EntityType.request)


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def make(module: ModuleType, name: str, /, **fields: Any) -> Any:
    """Instantiate `module.name` with the keyword fields that class has; others are dropped."""
    cls = getattr(module, name)
    names = _field_names(cls)
    return cls(**{k: v for k, v in fields.items() if k in names})


def has_field(module: ModuleType, name: str, field: str) -> bool:
    return field in _field_names(getattr(module, name))


@cache
def _reader(schema: type) -> Any:
    return entity_reader(schema)


def decode_response(api_key: int, version: int, frame: memoryview, offset: int) -> Any:
    """Decode the response body at `offset`; the body must fill the frame exactly."""
    try:
        schema = response_schema(api_key, version)
        check_request_bounds(schema, frame, offset)
        entity, size = _reader(schema)(frame, offset)
    except MalformedRequestError:  # the guard's wording is about requests; this is a response
        raise ProtocolViolationError(
            f"api {api_key} v{version} response truncated: a length runs past the frame"
        ) from None
    except UnknownMessageError as exc:
        raise ProtocolViolationError(str(exc)) from None
    except Exception as exc:  # kio raises BufferUnderflow, ValueError (unknown error code), …
        raise ProtocolViolationError(
            f"api {api_key} v{version} response does not decode: {exc.__class__.__name__}"
        ) from None
    if offset + size != len(frame):
        raise ProtocolViolationError(
            f"api {api_key} v{version} response has {len(frame) - offset - size} trailing bytes"
        )
    return entity


def decode_data(schema: type, data: bytes, offset: int) -> Any:
    """Decode a non-message kio entity (e.g. a consumer protocol assignment); None if it does not
    fit the schema — such blobs come from other clients and must never break the caller."""
    view = memoryview(data)
    try:
        check_request_bounds(schema, view, offset)
        entity, _size = _reader(schema)(view, offset)
    except Exception:
        return None
    return entity


def millis(duration_s: float) -> datetime.timedelta:
    """kio's int32 millisecond durations (timeouts, max wait) are timedeltas."""
    return datetime.timedelta(milliseconds=round(duration_s * 1000))


def epoch_ms(value: datetime.datetime | None) -> int:
    """kio's TZAware timestamps back to Kafka's epoch milliseconds (-1 for none)."""
    if value is None:
        return -1
    return round(value.timestamp() * 1000)
