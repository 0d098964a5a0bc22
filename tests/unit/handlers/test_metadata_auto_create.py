"""Metadata's topic auto-creation (`auto.create.topics.enable`): a new topic is created and
answered; one that another broker created while this one's metadata has not learned it yet is
answered LEADER_NOT_AVAILABLE, retriable (Kafka: "possibly another broker created this topic"),
never TOPIC_ALREADY_EXISTS, on which librdkafka fails every queued record of the topic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from brokers.replication.errors import TopicExistsError
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.admin_harness import call, entity, routed, standalone_broker

pytestmark = pytest.mark.unit
VERSION = 12


def metadata(route: Any, name: str) -> Any:
    request = entity(
        3, VERSION, "MetadataRequest",
        topics=(entity(3, VERSION, "MetadataRequestTopic", name=name, topic_id=None),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )  # fmt: skip
    (topic,) = call(route, VERSION, request).topics
    return topic


def test_an_unknown_topic_is_created_and_answered(tmp_path: Path) -> None:
    with standalone_broker(tmp_path) as broker:
        topic = metadata(routed(broker, 3), "prices")
        assert topic.error_code == ErrorCode.none and topic.name == "prices"
        assert len(topic.partitions) == 1


def test_a_topic_another_broker_just_created_is_retriable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with standalone_broker(tmp_path) as broker:

        def created_elsewhere(*_: Any, **__: Any) -> Any:
            raise TopicExistsError("prices")  # the coordination store has it; this cache not yet

        monkeypatch.setattr(broker.topics, "create_topic", created_elsewhere)
        topic = metadata(routed(broker, 3), "prices")
        assert topic.error_code == ErrorCode.leader_not_available
        assert topic.partitions == ()
