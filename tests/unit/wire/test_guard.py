"""The bounds walk accepts real requests and refuses lengths that overrun the body."""

import datetime
import io
import struct
import uuid

import pytest
from kio.schema.create_topics.v7 import request as create_topics
from kio.schema.fetch.v12 import request as fetch
from kio.schema.metadata.v12 import request as metadata
from kio.schema.produce.v9 import request as produce
from kio.serial import entity_writer

from brokers.wire.guard import check_request_bounds
from brokers.wire.messages import MalformedRequestError, decode_request

pytestmark = pytest.mark.unit


def _encode(entity: object) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)  # type: ignore[arg-type]
    return buffer.getvalue()


REQUESTS = [
    produce.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            produce.TopicProduceData(
                name="t",
                partition_data=(produce.PartitionProduceData(index=0, records=b"x" * 300),),
            ),
        ),
    ),
    fetch.FetchRequest(
        cluster_id="cluster",  # a tagged field
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        topics=(
            fetch.FetchTopic(
                topic="t",
                partitions=(
                    fetch.FetchPartition(partition=0, fetch_offset=5, partition_max_bytes=1024),
                ),
            ),
        ),
        forgotten_topics_data=(),
    ),
    metadata.MetadataRequest(
        topics=(metadata.MetadataRequestTopic(topic_id=uuid.uuid4(), name="t"),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    ),
    create_topics.CreateTopicsRequest(
        topics=(
            create_topics.CreatableTopic(
                name="t",
                num_partitions=3,
                replication_factor=1,
                assignments=(),
                configs=(create_topics.CreatableTopicConfig(name="retention.ms", value="1000"),),
            ),
        ),
        timeout=datetime.timedelta(seconds=1),
        validate_only=False,
    ),
]


@pytest.mark.parametrize("request_entity", REQUESTS, ids=lambda r: type(r).__name__)
def test_real_requests_pass_and_every_truncation_fails(request_entity: object) -> None:
    body = _encode(request_entity)
    schema = type(request_entity)
    check_request_bounds(schema, memoryview(body), 0)
    assert (
        decode_request(schema.__api_key__, schema.__version__, memoryview(body), 0)
        == request_entity
    )
    for cut in range(len(body)):
        with pytest.raises(MalformedRequestError):
            check_request_bounds(schema, memoryview(body[:cut]), 0)


def test_a_huge_compact_array_count_is_refused_before_kio_allocates() -> None:
    # AlterConfigs v2: resources is a compact array; ~800M elements claimed in 5 bytes would make
    # kio's native reader reserve ~100 GB and abort the process.
    body = b"\x81\xd4\xe9\xab\x30" + b"\x00" * 20
    with pytest.raises(MalformedRequestError):
        decode_request(33, 2, memoryview(body), 0)


def test_a_huge_int32_array_count_is_refused() -> None:
    with pytest.raises(MalformedRequestError):
        decode_request(3, 1, memoryview(struct.pack(">i", 100_000_000)), 0)
