"""`encode_entity`'s writer writes what kio's writer writes, byte for byte, on every schema.

`brokers.wire.messages._writer` writes an empty tagged-field section as its one byte instead of
kio's buffer per entity; any other difference would be a wrong answer on the wire. Examples of
every request and response schema kio has (hypothesis builds them from the types), plus answers
with nested arrays of the shapes brokers send most.
"""

from __future__ import annotations

import datetime
import io
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.serial import entity_writer
from kio.static.primitive import Records

from brokers.wire.entities import make, response_module
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import encode_entity

pytestmark = pytest.mark.unit


def _schemas() -> list[type]:
    found = []
    for api_key in range(100):
        for version in range(20):
            for load in (load_request_schema, load_response_schema):
                try:
                    found.append(load(api_key, version))
                except KioIndexError:  # no such (api_key, version)
                    continue
    return found


SCHEMAS = _schemas()
st.register_type_strategy(Records, st.binary(max_size=64))  # kio gives none for record bytes


def _kio(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def test_every_schema_is_covered() -> None:
    assert len(SCHEMAS) > 500  # requests and responses of every API version kio knows


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(entity=st.sampled_from(SCHEMAS).flatmap(st.from_type))
def test_every_schema_encodes_as_kio_encodes_it(entity: Any) -> None:
    assert encode_entity(entity) == _kio(entity)


@pytest.mark.parametrize("version", range(2, 10))
def test_an_offset_commit_answer_encodes_as_kio_encodes_it(version: int) -> None:
    module = response_module(8, version)
    partitions = tuple(
        make(module, "OffsetCommitResponsePartition", partition_index=i, error_code=ErrorCode.none)
        for i in range(3)
    )
    topics = tuple(
        make(module, "OffsetCommitResponseTopic", name=name, partitions=partitions)
        for name in ("a", "bb")
    )
    answer = make(
        module, "OffsetCommitResponse", throttle_time=datetime.timedelta(0), topics=topics
    )
    assert encode_entity(answer) == _kio(answer)
