"""ZooKeeper-mode topic admin against a real ZooKeeper: what it writes, what it refuses."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from brokers.common.clock import ManualClock
from brokers.controller import zk_paths
from brokers.controller.zk_client import ZkClient
from brokers.log.config import LogConfig
from brokers.log.log_manager import LogManager
from brokers.replication.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from brokers.replication.metadata_cache import BrokerEndpoint, MetadataCache
from brokers.zk.config_changes import CONFIG_CHANGES
from brokers.zk.topics import ZkTopicAdmin

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def test_topic_admin_writes_kafka_znodes(chroot: str, tmp_path: Path) -> None:
    async def scenario() -> None:
        zk = ZkClient(chroot)
        await zk.start()
        metadata = MetadataCache(cluster_id="c", controller_id=1)
        for b, rack in ((1, "a"), (2, "b"), (3, "c")):
            metadata.brokers[b] = BrokerEndpoint(b, "127.0.0.1", 9000 + b, rack)
        data = tmp_path / "data"
        logs = LogManager(
            data, clock=ManualClock(), default_config=LogConfig.from_properties({}, {})
        )
        admin = ZkTopicAdmin(zk, metadata, logs, broker_defaults={"num.partitions": "2"})

        created = admin.create_topic("orders", -1, 3, {"retention.ms": "1000"})
        assert created is not None and sorted(created.partitions) == [0, 1]
        node = await zk.get(zk_paths.topic_path("orders"))
        topic = zk_paths.decode_topic(node.data)
        assert topic.topic_id == created.topic_id
        for assignment in topic.partitions.values():
            assert sorted(assignment.replicas) == [1, 2, 3]  # RF 3 on three racks
        config = await zk.get(zk_paths.topic_config_path("orders"))
        assert zk_paths.decode_topic_config(config.data) == {"retention.ms": "1000"}

        with pytest.raises(TopicExistsError):
            admin.create_topic("orders", 1, 1, {})
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topic("wide", 1, 4, {})
        assert admin.create_topic("dry", 1, 1, {}, validate_only=True) is None
        assert not await zk.exists(zk_paths.topic_path("dry"))

        admin.create_partitions("orders", 4)
        grown = zk_paths.decode_topic((await zk.get(zk_paths.topic_path("orders"))).data)
        assert sorted(grown.partitions) == [0, 1, 2, 3] and grown.topic_id == created.topic_id
        assert grown.partitions[0] == topic.partitions[0]
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions("orders", 3)

        admin.set_topic_configs("orders", {"retention.ms": "5"})
        config = await zk.get(zk_paths.topic_config_path("orders"))
        assert zk_paths.decode_topic_config(config.data) == {"retention.ms": "5"}

        admin.delete_topic("orders")
        admin.delete_topic("orders")  # a second request while the first is pending is fine
        assert await zk.children(zk_paths.DELETE_TOPICS) == ["orders"]
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topic("missing")
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.set_topic_configs("missing", {})
        await zk.close()

    asyncio.run(scenario())


def test_manual_assignments_are_written_as_given(chroot: str, tmp_path: Path) -> None:
    """CreateTopics / CreatePartitions `assignments` in ZooKeeper mode: the replicas named, in order."""

    async def scenario() -> None:
        zk = ZkClient(chroot)
        await zk.start()
        metadata = MetadataCache(cluster_id="c", controller_id=1)
        for b in (1, 2, 3):
            metadata.brokers[b] = BrokerEndpoint(b, "127.0.0.1", 9000 + b, None)
        data = tmp_path / "data"
        logs = LogManager(
            data, clock=ManualClock(), default_config=LogConfig.from_properties({}, {})
        )
        admin = ZkTopicAdmin(zk, metadata, logs, broker_defaults={})
        admin.create_topic("placed", 2, 2, {}, assignment={0: [3, 1], 1: [2, 3]})
        admin.create_partitions("placed", 3, assignment={2: [1, 2]})
        topic = zk_paths.decode_topic((await zk.get(zk_paths.topic_path("placed"))).data)
        placed = {p: list(a.replicas) for p, a in topic.partitions.items()}
        assert placed == {0: [3, 1], 1: [2, 3], 2: [1, 2]}
        await zk.close()

    asyncio.run(scenario())


def test_a_config_change_is_announced_before_the_call_returns(chroot: str, tmp_path: Path) -> None:
    """Kafka's AdminZkClient writes the /config/changes notice before answering: a failure to
    announce reaches the client instead of leaving the other brokers on the old config. A change
    that changes nothing writes nothing (Kafka writes it anyway; a tenant repeating one would
    otherwise leave a notice per request for 15 minutes)."""

    async def scenario() -> None:
        zk = ZkClient(chroot)
        await zk.start()
        metadata = MetadataCache(cluster_id="c", controller_id=1)
        metadata.brokers[1] = BrokerEndpoint(1, "127.0.0.1", 9001, None)
        data = tmp_path / "data"
        logs = LogManager(
            data, clock=ManualClock(), default_config=LogConfig.from_properties({}, {})
        )
        admin = ZkTopicAdmin(zk, metadata, logs, broker_defaults={})
        admin.create_topic("tuned", 1, 1, {})
        admin.set_topic_configs("tuned", {"retention.ms": "60000"})
        admin.set_topic_configs("tuned", {"retention.ms": "60000"})  # no change: no notice
        observer = KazooClient(hosts=chroot)  # read before this coroutine yields to the loop
        observer.start(10)
        try:
            assert len(observer.get_children(CONFIG_CHANGES)) == 1
        finally:
            observer.stop()
            observer.close()
        await zk.close()

    asyncio.run(scenario())
