"""The dispatcher's OffsetCommit response encoder against kio's, byte for byte, on every served
version (v2–9): no topics, one partition, many partitions and topics with errors, a topic name
whose compact length takes two varint bytes, a non-ASCII name, a throttle; None (kio's path) for a
version it does not take."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from brokers.server.offset_commit_response import encode_offset_commit_response
from brokers.wire.entities import make, response_module
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import encode_entity

pytestmark = pytest.mark.unit
VERSIONS = range(2, 10)


def _response(version: int, topics: list[tuple[str, list[tuple[int, int]]]], throttle: int) -> Any:
    module = response_module(8, version)
    entries = tuple(
        make(
            module,
            "OffsetCommitResponseTopic",
            name=name,
            partitions=tuple(
                make(module, "OffsetCommitResponsePartition", partition_index=i, error_code=code)
                for i, code in parts
            ),
        )
        for name, parts in topics
    )
    return make(
        module,
        "OffsetCommitResponse",
        throttle_time=datetime.timedelta(milliseconds=throttle),
        topics=entries,
    )


def _answers(version: int) -> list[Any]:
    ok, unknown = ErrorCode.none, ErrorCode.unknown_topic_or_partition
    return [
        _response(version, [], 0),
        _response(version, [("cost", [(0, ok)])], 0),
        _response(version, [("cost", [(0, ok)])], 1250),
        _response(
            version,
            [
                ("orders", [(i, ok) for i in range(70)]),
                ("t" * 200, [(7, ErrorCode.offset_metadata_too_large)]),
                ("é-topic", [(1, unknown), (2_000_000_000, ErrorCode.illegal_generation)]),
                ("empty", []),
            ],
            0,
        ),
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_encoder_writes_kios_bytes(version: int) -> None:
    for answer in _answers(version):
        assert encode_offset_commit_response(answer) == encode_entity(answer)


def test_a_version_outside_its_range_is_left_to_kio() -> None:
    v10 = response_module(8, 10)  # topics by id: not served yet
    answer = make(v10, "OffsetCommitResponse", throttle_time=datetime.timedelta(0), topics=())
    assert encode_offset_commit_response(answer) is None
