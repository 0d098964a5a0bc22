"""Metadata's `<prefix>*` names (a Pier extension, brokers/handlers/metadata.py) against a real
in-process broker: every topic with that prefix and nothing else, at the oldest and newest
versions; a plain name is still answered as Kafka answers it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kio.schema.metadata.v1.request import MetadataRequest as MetadataRequestV1
from kio.schema.metadata.v1.request import MetadataRequestTopic as TopicV1
from kio.schema.metadata.v1.response import MetadataResponse as MetadataResponseV1
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import TopicName

from brokers.client.admin import Admin
from brokers.client.topics import NewTopic
from brokers.wire.errors import ErrorCode
from tests.e2e.raw_wire import RawConnection
from tests.integration.inproc import broker_thread

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
TOPICS = ("acme_a", "acme_b", "acmex", "bolt_a")


def test_a_prefix_pattern_answers_the_topics_with_that_prefix_only(tmp_path: Path) -> None:
    with broker_thread(tmp_path, {"auto.create.topics.enable": "true"}) as broker:

        async def create() -> None:
            async with Admin.for_bootstrap(f"127.0.0.1:{broker.port}") as admin:
                made = await admin.create_topics([NewTopic(n, 2, 1, {}) for n in TOPICS])
                assert set(made.values()) == {None}

        asyncio.run(create())
        with RawConnection("127.0.0.1", broker.port) as connection:

            def names_v12(*asked: str) -> list[tuple[str | None, int]]:
                request = MetadataRequest(
                    topics=tuple(
                        MetadataRequestTopic(name=TopicName(n), topic_id=None) for n in asked
                    ),
                    allow_auto_topic_creation=True,
                    include_topic_authorized_operations=False,
                )
                answer = connection.call(request, MetadataResponse)
                return sorted((t.name, t.error_code) for t in answer.topics)

            assert names_v12("acme_*") == [("acme_a", 0), ("acme_b", 0)]
            assert names_v12("nobody_*") == []  # and nothing was created
            assert names_v12("acme_*", "bolt_a") == [("acme_a", 0), ("acme_b", 0), ("bolt_a", 0)]
            assert names_v12("bad*name") == [("bad*name", ErrorCode.invalid_topic_exception)]
            v1 = MetadataRequestV1(topics=(TopicV1(name=TopicName("acme_*")),))
            answer = connection.call(v1, MetadataResponseV1)
            assert sorted(t.name for t in answer.topics) == ["acme_a", "acme_b"]
            assert all(len(t.partitions) == 2 for t in answer.topics)
            everything = MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
            listed = {t.name for t in connection.call(everything, MetadataResponse).topics}
            assert "nobody_" not in {n[:7] for n in listed if n}  # no topic made by a pattern
