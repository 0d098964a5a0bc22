"""What the cluster benchmark reads about the fleet: leaders from ZooKeeper and from Metadata.

Owns: `ClusterView`, a kazoo session on the benchmark's ZooKeeper plus a confluent-kafka
`AdminClient`, answering the questions the phases poll on: who leads a partition and which
replicas are in sync (Metadata, as a client sees it), which partitions have a live leader in
ZooKeeper (the controller's own record, `/brokers/topics/<t>/partitions/<p>/state`), whether a
broker's ephemeral `/brokers/ids/<id>` still exists, and which broker is the controller. Also
`poll_until`, the one deadline-bounded polling loop every phase uses. Blocking; one view per
thread (kazoo and librdkafka handles are thread-safe, but the view keeps no state worth sharing).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import Any, TypeVar

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kazoo.client import KazooClient

from brokers.controller import zk_paths
from brokers.controller.state import TopicPartition

T = TypeVar("T")
POLL_INTERVAL_S = 0.02  # finer than any interval we report to two decimals
REQUEST_TIMEOUT_S = 5.0


class Timeout(RuntimeError):
    """A polled condition was not reached before its deadline."""


def poll_until(check: Callable[[], T | None], timeout: float, what: str) -> T:
    """Call `check` until it returns something other than None/False; errors count as "not yet"."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if result is not None and result is not False:
                return result
        except Exception:  # a broker mid-restart or a dead connection: ask again
            pass
        if time.monotonic() > deadline:
            raise Timeout(f"{what}: not reached in {timeout:g} s")
        time.sleep(POLL_INTERVAL_S)


class ClusterView:
    def __init__(self, bootstrap: str, zookeeper: str) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.zk = KazooClient(hosts=zookeeper)
        self.zk.start(timeout=15)

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()

    def wait_for_brokers(self, count: int, timeout: float = 60.0) -> None:
        """Until Metadata lists `count` brokers: a broker answers before it has registered."""

        def listed() -> bool:
            return len(self.admin.list_topics(timeout=REQUEST_TIMEOUT_S).brokers) == count

        poll_until(listed, timeout, f"{count} brokers registered")

    def create_topic(
        self, name: str, partitions: int, replication: int, configs: dict[str, str] | None = None
    ) -> None:
        topic = NewTopic(name, partitions, replication, config=configs or {})
        for future in self.admin.create_topics([topic], operation_timeout=60).values():
            future.result(timeout=120)

    def metadata(self, topic: str) -> Any:
        """Metadata for `topic` from whichever live broker librdkafka asks."""
        cluster = self.admin.list_topics(topic, timeout=REQUEST_TIMEOUT_S)
        found = cluster.topics[topic]
        if found.error is not None:
            raise RuntimeError(f"metadata of {topic}: {found.error}")
        return found

    def controller(self) -> int:
        return int(self.admin.list_topics(timeout=REQUEST_TIMEOUT_S).controller_id)

    def leader_of(self, topic: str, partition: int) -> int:
        """The leader Metadata names; -1 while there is none."""
        return int(self.metadata(topic).partitions[partition].leader)

    def leader_with_full_isr(self, topic: str, partition: int, replicas: int) -> int | None:
        """The partition's leader once every replica is in sync (Metadata), else None."""
        state = self.metadata(topic).partitions[partition]
        in_sync = state.leader >= 0 and len(state.isrs) == replicas and not state.error
        return int(state.leader) if in_sync else None

    def zk_leaders(self, topic: str, partitions: int) -> list[int]:
        """Leader per partition from the controller's znodes; -1 where none (or not yet written)."""
        paths = [zk_paths.partition_state_path(TopicPartition(topic, p)) for p in range(partitions)]
        replies = [self.zk.get_async(path) for path in paths]
        leaders = []
        for reply in replies:
            try:
                data, _stat = reply.get(timeout=REQUEST_TIMEOUT_S)
            except Exception:  # NoNodeError before the controller has written the state
                leaders.append(-1)
                continue
            leaders.append(zk_paths.decode_partition_state(data).leader)
        return leaders

    def all_led_in_zk(self, topic: str, partitions: int, excluding: Collection[int] = ()) -> bool:
        return all(
            leader >= 0 and leader not in excluding for leader in self.zk_leaders(topic, partitions)
        )

    def all_led_in_metadata(
        self, topic: str, partitions: int, excluding: Collection[int] = ()
    ) -> bool:
        found = self.metadata(topic).partitions
        return len(found) == partitions and all(
            p.leader >= 0 and p.leader not in excluding and not p.error for p in found.values()
        )

    def registered(self, node_id: int) -> bool:
        return self.zk.exists(zk_paths.broker_path(node_id)) is not None
