"""The hand-written Metadata response encoder against kio's, byte for byte, on every version
(0–13): brokers with and without racks, topics known and unknown (error, null name, null id),
internal ones, partitions led and leaderless, broker lists of any length (two-byte compact
lengths included), authorized operations, a cluster id or none, a top-level error code."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.wire.entities import make, response_module
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import encode_entity
from brokers.wire.metadata_response import (
    LAST_VERSION,
    MetadataBroker,
    MetadataTopic,
    PartitionRow,
    encode_metadata_response,
)

pytestmark = pytest.mark.unit
VERSIONS = range(LAST_VERSION + 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
NAMES = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x2FF), min_size=1, max_size=140
)
IDS = st.lists(st.integers(-1, 2**31 - 1), max_size=140)

partitions = st.builds(
    PartitionRow,
    st.sampled_from([0, 5, 9]),
    st.integers(0, 2**31 - 1),
    INT32,
    INT32,
    IDS,
    IDS,
    IDS,
)
topics = st.builds(
    MetadataTopic,
    st.sampled_from([0, 3, 100]),
    NAMES,
    st.none() | st.uuids(),
    st.booleans(),
    st.lists(partitions, max_size=4),
    INT32,
)
brokers = st.builds(MetadataBroker, st.integers(0, 2**31 - 1), NAMES, INT32, st.none() | NAMES)


def _kio(version: int, body: dict[str, Any]) -> bytes:
    module = response_module(3, version)
    listed_brokers = tuple(
        make(
            module,
            "MetadataResponseBroker",
            node_id=b.node_id,
            host=b.host,
            port=b.port,
            rack=b.rack,
        )
        for b in body["brokers"]
    )
    listed_topics = tuple(
        make(
            module,
            "MetadataResponseTopic",
            error_code=ErrorCode(t.error_code),
            name=t.name,
            topic_id=t.topic_id,
            is_internal=t.is_internal,
            partitions=tuple(
                make(
                    module,
                    "MetadataResponsePartition",
                    error_code=ErrorCode(p.error_code),
                    partition_index=p.partition_index,
                    leader_id=p.leader,
                    leader_epoch=p.leader_epoch,
                    replica_nodes=tuple(p.replicas),
                    isr_nodes=tuple(p.isr),
                    offline_replicas=tuple(p.offline_replicas),
                )
                for p in t.partitions
            ),
            topic_authorized_operations=t.authorized_operations,
        )
        for t in body["topics"]
    )
    response = make(
        module,
        "MetadataResponse",
        throttle_time=datetime.timedelta(milliseconds=body["throttle_ms"]),
        brokers=listed_brokers,
        cluster_id=body["cluster_id"],
        controller_id=body["controller_id"],
        topics=listed_topics,
        cluster_authorized_operations=body["cluster_authorized_operations"],
        error_code=ErrorCode(body["error_code"]),
    )
    return encode_entity(response)


def _ours(version: int, body: dict[str, Any]) -> bytes:
    return encode_metadata_response(version, **body)


@settings(max_examples=60, deadline=None)
@given(
    version=st.sampled_from(VERSIONS),
    listed_brokers=st.lists(brokers, max_size=3),
    listed_topics=st.lists(topics, max_size=3),
    cluster_id=st.none() | NAMES,
    controller_id=INT32,
    throttle_ms=st.integers(0, 2**31 - 1),
    cluster_ops=INT32,
    error_code=st.sampled_from([0, 41]),
)
def test_every_version_matches_kio_byte_for_byte(
    version: int,
    listed_brokers: list[MetadataBroker],
    listed_topics: list[MetadataTopic],
    cluster_id: str | None,
    controller_id: int,
    throttle_ms: int,
    cluster_ops: int,
    error_code: int,
) -> None:
    body = {
        "throttle_ms": throttle_ms,
        "brokers": listed_brokers,
        "cluster_id": cluster_id,
        "controller_id": controller_id,
        "topics": listed_topics,
        "cluster_authorized_operations": cluster_ops,
        "error_code": error_code,
    }
    assert _ours(version, body) == _kio(version, body)


@pytest.mark.parametrize("version", [12, 13])
def test_an_unknown_topic_id_is_answered_with_a_null_name(version: int) -> None:
    unknown = MetadataTopic(100, None, uuid.uuid4(), False, [], -(2**31))
    body = {
        "throttle_ms": 0,
        "brokers": [MetadataBroker(0, "localhost", 9092, None)],
        "cluster_id": "c",
        "controller_id": 0,
        "topics": [unknown],
        "cluster_authorized_operations": -(2**31),
        "error_code": 0,
    }
    assert _ours(version, body) == _kio(version, body)


def test_a_version_past_the_schema_is_refused() -> None:
    with pytest.raises(ValueError, match="v14"):
        encode_metadata_response(
            14,
            throttle_ms=0,
            brokers=[],
            cluster_id=None,
            controller_id=0,
            topics=[],
            cluster_authorized_operations=0,
        )
