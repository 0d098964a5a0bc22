"""Valid seed requests for every API and hypothesis strategies that mutate them.

Owns: `seed_request(api_key, version)` — a well-formed request built from kio's schema classes with
every field at a plain value (zero numbers, empty or short strings, one element per nested array,
so the mutations reach nested structures) — and `mutated_payloads`, which flips, overwrites,
truncates and inserts bytes, including int32 windows set to huge or negative lengths (what a
hostile client would send as an array count or string length). Pure; thread-safe.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

from hypothesis import strategies as st
from kio.index import KioIndexError, load_request_schema
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
)

from tests.e2e.raw_wire import request_bytes

_PLAIN: dict[str, Any] = {
    "bool": False,
    "bytes": b"",
    "float64": 0.0,
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "records": None,
    "string": "fuzz",
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "uuid": uuid.UUID(int=0),
}
HOSTILE_INT32 = (b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", b"\x00\x10\x00\x00")


def plain_entity(cls: Any) -> Any:
    """An instance of a kio entity with every field that has no default set to a plain value."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.default is not dataclasses.MISSING or field.name.startswith("__"):
            continue
        kind = classify_field(field)
        if isinstance(kind, EntityField):
            values[field.name] = plain_entity(kind.type_)
        elif isinstance(kind, EntityTupleField):
            values[field.name] = (plain_entity(kind.type_),)
        elif isinstance(kind, PrimitiveTupleField):
            values[field.name] = (_PLAIN[get_schema_field_type(field)],)
        else:
            assert isinstance(kind, PrimitiveField)
            values[field.name] = _PLAIN[get_schema_field_type(field)]
    return cls(**values)


def has_schema(api_key: int, version: int) -> bool:
    """kio knows this request version (Produce v0–2, for one, it does not)."""
    try:
        load_request_schema(api_key, version)
    except KioIndexError:  # UnknownAPIKey, UnknownEntity (e.g. Produce v0-2)
        return False
    return True


def seed_request(api_key: int, version: int, correlation_id: int = 7) -> bytes:
    """Header + body of a well-formed request (no size prefix) that expects an answer."""
    entity = plain_entity(load_request_schema(api_key, version))
    if hasattr(entity, "acks"):
        entity = dataclasses.replace(entity, acks=1)  # acks=0 would get no response at all
    return request_bytes(entity, correlation_id)


@st.composite
def _mutation(draw: st.DrawFn, payload: bytes) -> bytes:
    size = len(payload)
    if size == 0:
        return draw(st.binary(min_size=1, max_size=64))
    at = draw(st.integers(0, size - 1))
    kind = draw(st.sampled_from(["flip", "overwrite", "hostile", "truncate", "insert", "append"]))
    if kind == "flip":
        bit = draw(st.integers(0, 7))
        return payload[:at] + bytes([payload[at] ^ (1 << bit)]) + payload[at + 1 :]
    if kind == "overwrite":
        chunk = draw(st.binary(min_size=1, max_size=8))
        return payload[:at] + chunk + payload[at + len(chunk) :]
    if kind == "hostile":
        return payload[:at] + draw(st.sampled_from(HOSTILE_INT32)) + payload[at + 4 :]
    if kind == "truncate":
        return payload[:at]
    if kind == "insert":
        return payload[:at] + draw(st.binary(min_size=1, max_size=16)) + payload[at:]
    return payload + draw(st.binary(min_size=1, max_size=64))


@st.composite
def mutated_payloads(draw: st.DrawFn, payload: bytes) -> bytes:
    """`payload` after one to three mutations (may end shorter than a request header)."""
    for _ in range(draw(st.integers(1, 3))):
        payload = draw(_mutation(payload))
    return payload
