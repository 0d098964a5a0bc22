"""A scripted exchange of the request versions that name topics by id (KIP-516: Produce v13, Fetch
v13–18) and Metadata v13, sent raw to one system, for the differential test to run on Pier and on
Apache Kafka 4.1.1 and compare (issue 27 items 4, 5).

Owns: `topic_id_observations(bootstrap, topic)`, a list of (step, observation) holding only what
both systems must agree on (error code names, offsets, record bytes' sizes, whether an id is set;
never the ids themselves, which each system assigns): the ApiVersions ranges of Produce, Fetch
and Metadata; Metadata v13 by name; Produce v13 by the topic's id, by an id nobody has and to a
partition the topic lacks; every Fetch version from 13 to 18 by id (records, offsets), by an id
nobody has, at a partition the topic lacks and with a leader epoch from the future. Blocking; one
call per system.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Sequence
from typing import Any

from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.api_versions.v4.response import ApiVersionsResponse
from kio.schema.metadata.v13.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v13.response import MetadataResponse
from kio.schema.types import TopicName

from brokers.records.builder import simple_batch
from brokers.wire.entities import make, request_module, response_module
from brokers.wire.errors import ErrorCode
from tests.e2e.raw_wire import RawConnection

PRODUCE, FETCH, METADATA = 0, 1, 3
FETCH_BY_ID = range(13, 19)
BASE_TIMESTAMP_MS = 1_700_000_000_000
Observation = tuple[str, Any]


class _Script:
    def __init__(self, wire: RawConnection, topic: str) -> None:
        self.wire, self.topic = wire, topic
        self.seen: list[Observation] = []

    def note(self, step: str, value: Any) -> None:
        self.seen.append((step, value))

    def ranges(self) -> None:
        request = ApiVersionsRequest(client_software_name="pier-test", client_software_version="1")
        response = self.wire.call(request, ApiVersionsResponse)
        found = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
        }
        self.note("ApiVersions ranges", {key: found.get(key) for key in (PRODUCE, FETCH, METADATA)})

    def metadata(self) -> uuid.UUID:
        request = MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=TopicName(self.topic)),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        response = self.wire.call(request, MetadataResponse)
        (topic,) = response.topics
        self.note(
            "Metadata v13 by name",
            (
                ErrorCode(response.error_code).name,
                ErrorCode(topic.error_code).name,
                len(topic.partitions),
                topic.topic_id is not None and topic.topic_id.int != 0,
            ),
        )
        assert topic.topic_id is not None
        return uuid.UUID(bytes=topic.topic_id.bytes)

    def produce(self, topic_id: uuid.UUID, partition: int, value: bytes) -> tuple[str, int]:
        module = request_module(PRODUCE, 13)
        batch = simple_batch([value], timestamps=[BASE_TIMESTAMP_MS])
        data = make(module, "PartitionProduceData", index=partition, records=batch)
        request = make(
            module,
            "ProduceRequest",
            acks=-1,
            timeout=datetime.timedelta(seconds=10),
            topic_data=(
                make(module, "TopicProduceData", topic_id=topic_id, partition_data=(data,)),
            ),
        )
        response = self.wire.call(request, response_module(PRODUCE, 13).ProduceResponse)
        (topic,) = response.responses
        assert topic.topic_id == topic_id, topic
        (answer,) = topic.partition_responses
        return ErrorCode(answer.error_code).name, int(answer.base_offset)

    def fetch(
        self, version: int, topic_id: uuid.UUID, partition: int = 0, epoch: int = -1
    ) -> tuple[Any, ...]:
        module = request_module(FETCH, version)
        wanted = make(
            module,
            "FetchPartition",
            partition=partition,
            current_leader_epoch=epoch,
            fetch_offset=0,
            partition_max_bytes=1 << 20,
        )
        request = make(
            module,
            "FetchRequest",
            max_wait=datetime.timedelta(milliseconds=10),
            min_bytes=1,
            topics=(make(module, "FetchTopic", topic_id=topic_id, partitions=(wanted,)),),
            forgotten_topics_data=(),
        )
        response = self.wire.call(request, response_module(FETCH, version).FetchResponse)
        (topic,) = response.responses
        (answer,) = topic.partitions
        return (
            ErrorCode(response.error_code).name,
            topic.topic_id == topic_id,
            ErrorCode(answer.error_code).name,
            int(answer.high_watermark),
            int(answer.last_stable_offset),
            int(answer.log_start_offset),
            len(answer.records or b""),
        )


def topic_id_observations(bootstrap: str, topic: str) -> Sequence[Observation]:
    """The script's observations on one system (the topic exists with 2 partitions)."""
    host, port = bootstrap.rsplit(":", 1)
    with RawConnection(host, int(port), timeout=30.0) as wire:
        s = _Script(wire, topic)
        s.ranges()
        topic_id = s.metadata()
        nobody = uuid.uuid4()
        s.note("Produce v13 by id", s.produce(topic_id, 0, b"by-id"))
        s.note("Produce v13 by id again", s.produce(topic_id, 0, b"again"))
        s.note("Produce v13 by an unknown id", s.produce(nobody, 0, b"lost"))
        s.note("Produce v13 to a missing partition", s.produce(topic_id, 7, b"lost"))
        for version in FETCH_BY_ID:
            s.note(f"Fetch v{version} by id", s.fetch(version, topic_id))
            s.note(f"Fetch v{version} by an unknown id", s.fetch(version, nobody))
        s.note("Fetch v18 of a missing partition", s.fetch(18, topic_id, partition=7))
        s.note("Fetch v18 with a future leader epoch", s.fetch(18, topic_id, epoch=5))
        return s.seen
