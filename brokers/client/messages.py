"""Version-specific request construction and response decoding for the client.

Owns: `decode_response` (bounds-checked kio decoding of one response body, through a corrected
copy of the few kio schemas that cannot read what Kafka sends), and the timestamp/duration
conversions kio's typed fields need. Pure; thread-safe (caches fill idempotently).

Why the bounds walk on responses too: kio's native reader reserves memory from an array's length
prefix before reading it, so a hostile or corrupt response could abort the process
(`brokers.wire.guard`); the same walk works for any schema.
"""

from __future__ import annotations

import dataclasses
import datetime
from functools import cache
from typing import Any, get_args

from kio.serial import entity_reader
from kio.static.primitive import TZAware

from brokers.client.errors import ProtocolViolationError
from brokers.wire.entities import has_field, make, request_module
from brokers.wire.guard import check_request_bounds
from brokers.wire.messages import MalformedRequestError, UnknownMessageError, response_schema

__all__ = ["decode_response", "has_field", "make", "request_module"]
DESCRIBE_TRANSACTIONS = 65


@cache
def _reader(schema: type) -> Any:
    return entity_reader(schema)


def decode_response(api_key: int, version: int, frame: memoryview, offset: int) -> Any:
    """Decode the response body at `offset`; the body must fill the frame exactly."""
    try:
        schema = _readable_schema(api_key, version)
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


@cache
def _readable_schema(api_key: int, version: int) -> type:
    """kio's response schema, except where kio cannot read what Kafka sends: DescribeTransactions
    v0's TransactionStartTimeMs is -1 before a transactional id's first transaction, which kio's
    (non-nullable) timestamp reader refuses; read through a copy where the field is nullable
    (-1 is None, as kio types Produce's LogAppendTimeMs). Encoding the copy writes None as -1."""
    schema = response_schema(api_key, version)
    if (api_key, version) != (DESCRIBE_TRANSACTIONS, 0):
        return schema
    (states,) = [f.type for f in dataclasses.fields(schema) if f.name == "transaction_states"]
    (state,) = get_args(states)[:1]  # tuple[TransactionState, ...]
    nested = _retyped(state, transaction_start_time=TZAware | None)
    return _retyped(schema, transaction_states=tuple[nested, ...])  # type: ignore[valid-type]


def _retyped(cls: type, **types: Any) -> type:
    """A frozen copy of the kio entity class `cls` with some fields' types replaced."""
    fields = []
    for f in dataclasses.fields(cls):
        keep: dict[str, Any] = {"metadata": f.metadata}
        if f.default is not dataclasses.MISSING:
            keep["default"] = f.default
        if f.default_factory is not dataclasses.MISSING:
            keep["default_factory"] = f.default_factory
        fields.append((f.name, types.get(f.name, f.type), dataclasses.field(**keep)))
    markers = ("__type__", "__version__", "__flexible__", "__api_key__", "__header_schema__")
    namespace = {name: getattr(cls, name) for name in markers}
    return dataclasses.make_dataclass(
        cls.__name__, fields, namespace=namespace, frozen=True, slots=True, kw_only=True
    )


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
