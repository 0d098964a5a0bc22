"""A new log's topic overrides in ZooKeeper mode: read from `/config/topics/<t>` once per topic
id, None while ZooKeeper is away (the LeaderAndIsr request's copy is used), and the cache keeps
only topics the broker still knows."""

from __future__ import annotations

import uuid

import pytest

from brokers.controller import zk_paths
from brokers.controller.errors import ZooKeeperUnavailableError
from brokers.controller.zk_client import Versioned
from brokers.replication.metadata_cache import MetadataCache, TopicMetadata
from brokers.zk.topic_configs import SWEEP_MIN_ENTRIES, TopicConfigs

pytestmark = pytest.mark.unit


class FakeZk:
    def __init__(self) -> None:
        self.configs: dict[str, dict[str, str]] = {}
        self.reads = 0
        self.away = False

    def get_blocking(self, path: str) -> Versioned:
        self.reads += 1
        if self.away:
            raise ZooKeeperUnavailableError("session suspended")
        topic = path.rsplit("/", 1)[1]
        return Versioned(zk_paths.encode_topic_config(self.configs.get(topic, {})), 0, 1, 0)


def make(zk: FakeZk) -> tuple[TopicConfigs, MetadataCache]:
    metadata = MetadataCache(cluster_id="c", controller_id=1)
    configs = TopicConfigs(zk, metadata, None, broker_defaults={})  # type: ignore[arg-type]
    return configs, metadata


def known(metadata: MetadataCache, topic: str, topic_id: uuid.UUID) -> None:
    metadata.topics[topic] = TopicMetadata(topic, topic_id, {}, {})


def test_overrides_are_read_once_per_topic_id() -> None:
    zk = FakeZk()
    zk.configs["t"] = {"retention.ms": "1000"}
    configs, metadata = make(zk)
    topic_id = uuid.uuid4()
    known(metadata, "t", topic_id)
    assert configs.for_new_log("t", topic_id) == {"retention.ms": "1000"}
    assert configs.for_new_log("t", topic_id) == {"retention.ms": "1000"}
    assert zk.reads == 1


def test_zookeeper_away_gives_none_and_caches_nothing() -> None:
    zk = FakeZk()
    configs, metadata = make(zk)
    topic_id = uuid.uuid4()
    known(metadata, "t", topic_id)
    zk.away = True
    assert configs.for_new_log("t", topic_id) is None
    zk.away = False
    zk.configs["t"] = {"cleanup.policy": "compact"}
    assert configs.for_new_log("t", topic_id) == {"cleanup.policy": "compact"}


def test_deleted_topics_leave_the_cache_and_it_stays_bounded() -> None:
    """Swept of deleted topics once it has doubled: never more than twice the live topics (or
    the sweep's floor), and a new topic does not walk every cached one."""
    zk = FakeZk()
    configs, metadata = make(zk)
    first, second = uuid.uuid4(), uuid.uuid4()
    known(metadata, "gone", first)
    configs.for_new_log("gone", first)
    del metadata.topics["gone"]
    known(metadata, "kept", second)
    configs.for_new_log("kept", second)
    assert set(configs._for_new_logs) == {"gone", "kept"}, "below the floor: not swept yet"
    for i in range(5 * SWEEP_MIN_ENTRIES):  # churn: each topic created, then deleted
        topic_id = uuid.uuid4()
        known(metadata, f"t{i}", topic_id)
        configs.for_new_log(f"t{i}", topic_id)
        del metadata.topics[f"t{i}"]
        assert len(configs._for_new_logs) <= SWEEP_MIN_ENTRIES + 1
    assert "gone" not in configs._for_new_logs and "kept" in configs._for_new_logs
