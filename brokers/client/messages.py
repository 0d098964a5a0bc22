"""Version-specific request construction and response decoding for the client.

Owns: `decode_response` (bounds-checked kio decoding of one response body), and the
timestamp/duration conversions kio's typed fields need. Pure; thread-safe (caches fill
idempotently).

Why the bounds walk on responses too: kio's native reader reserves memory from an array's length
prefix before reading it, so a hostile or corrupt response could abort the process
(`brokers.wire.guard`); the same walk works for any schema.
"""

from __future__ import annotations

import datetime
from functools import cache
from typing import Any

from kio.serial import entity_reader

from brokers.client.errors import ProtocolViolationError
from brokers.wire.entities import has_field, make, request_module
from brokers.wire.guard import check_request_bounds
from brokers.wire.messages import MalformedRequestError, UnknownMessageError, response_schema

__all__ = ["decode_response", "has_field", "make", "request_module"]


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
