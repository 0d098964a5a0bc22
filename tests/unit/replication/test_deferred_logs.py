"""A wide topic is answered before its logs exist (issue 25: creating 5,000 partitions at Kafka's
pace), and its logs then come into being: on the event loop in slices, or at once when a request
looks a partition up; deleting it before then leaves nothing behind; a restart opens them all.
A topic of up to `SYNC_LOGS_UP_TO` partitions still has every log before the answer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from brokers.replication.local_topics import SYNC_LOGS_UP_TO, LocalTopicRegistry
from brokers.wire.errors import ErrorCode
from tests.polling import wait_until_async
from tests.unit.handlers.admin_harness import standalone_broker
from tests.unit.handlers.test_descriptor_limit import create, log_dirs

pytestmark = pytest.mark.unit
WIDE = SYNC_LOGS_UP_TO + 50


def test_a_wide_topic_is_led_at_once_and_its_logs_follow(tmp_path: Path) -> None:
    with standalone_broker(tmp_path) as broker:
        assert create(broker, "narrow", SYNC_LOGS_UP_TO).error_code == ErrorCode.none
        assert len(log_dirs(tmp_path, "narrow")) == SYNC_LOGS_UP_TO  # before the answer
        assert create(broker, "wide", WIDE).error_code == ErrorCode.none
        topic = broker.metadata.topics["wide"]
        assert len(topic.partitions) == WIDE and all(
            p.leader == 0 for p in topic.partitions.values()
        )
        assert broker.replicas.deferred_count > 0  # answered before every log was created
        # A lookup creates the log it asks for at once.
        last = broker.replicas.get("wide", WIDE - 1)
        assert last.log.directory.is_dir() and last.log.log_end_offset == 0

        async def all_created() -> bool:
            return broker.replicas.deferred_count == 0

        async def drain() -> None:  # the registry's slices run on the loop that serves requests
            broker.topics.create_topic("other", WIDE, 1, {})
            await wait_until_async(all_created, what="every deferred log created", timeout=60)

        asyncio.run(drain())
        assert len(log_dirs(tmp_path, "wide")) == WIDE
        assert len(log_dirs(tmp_path, "other")) == WIDE
        assert all(broker.replicas.find("wide", i) is not None for i in range(WIDE))


def test_deleting_or_restarting_before_the_logs_exist(tmp_path: Path) -> None:
    with standalone_broker(tmp_path) as broker:
        assert create(broker, "gone", WIDE).error_code == ErrorCode.none
        assert create(broker, "kept", WIDE).error_code == ErrorCode.none
        broker.topics.delete_topic("gone")
        assert broker.replicas.find("gone", WIDE - 1) is None
        assert all(name.endswith("-delete") for name in log_dirs(tmp_path, "gone"))
        assert 0 < broker.replicas.deferred_count <= WIDE  # only "kept" is still waiting
        # A restart (a new registry over the same data dir) opens every log of every topic.
        restarted = LocalTopicRegistry(
            tmp_path / "data", broker.replicas, broker.metadata, node_id=0, broker_defaults={}
        )
        broker.metadata.topics.clear()
        restarted.load()
        assert len(broker.metadata.topics["kept"].partitions) == WIDE
        assert "gone" not in broker.metadata.topics
        assert broker.replicas.deferred_count == 0
        assert len(log_dirs(tmp_path, "kept")) == WIDE
