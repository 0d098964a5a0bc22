"""A ZooKeeper-mode cluster of real broker processes whose network links can fail.

Owns: `FaultCluster`, which starts `pier broker` processes (through the `broker_factory` fixture)
each behind two `FaultProxy` links of its own — `link`, in front of its inter-broker endpoint
(`inter.broker.advertised.address`: followers fetching from it and the controller's requests to it
go through it, clients do not), and `zk_link`, its ZooKeeper connection — plus the small client
calls the fault tests share: reading partition state znodes, the active controller, a broker's
metadata, producing one record with a chosen `acks`. Blocking; pytest's main thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kazoo.client import KazooClient

from brokers.client import ClientConfig
from brokers.client.admin import Admin
from brokers.client.cluster import Cluster
from brokers.client.consumer import fetch
from brokers.client.errors import BrokerResponseError
from brokers.client.metadata import ClusterMetadata, TopicPartition
from brokers.client.producer import produce
from brokers.client.topics import NewTopic
from brokers.controller import zk_paths
from brokers.controller.state import LeaderAndIsr
from brokers.controller.state import TopicPartition as ZkTopicPartition
from brokers.records.batch import iter_headers
from brokers.records.builder import build_batch, read_batch
from infra.fault_proxy import FaultProxy, ProxyLoop
from infra.stack import BrokerProcess, free_port
from tests.cluster_probes import BROKER_UNREACHABLE, SETTLE_S, TOPIC_SETTLING, ZNODE_MISSING
from tests.polling import wait_until

# Short timeouts so faults are detected within seconds (Kafka's names).
FAULT_CONFIG = {
    "zookeeper.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "2000",
    "auto.leader.rebalance.enable": "false",
}
CLIENT = ClientConfig(request_timeout_s=10.0, retries=0)


class StartBroker(Protocol):
    def __call__(
        self, *, node_id: int, config: Mapping[str, str], zookeeper: str, port: int
    ) -> BrokerProcess: ...


@dataclass
class FaultBroker:
    process: BrokerProcess
    link: FaultProxy  # inter-broker endpoint
    zk_link: FaultProxy  # this broker's ZooKeeper connection

    @property
    def node_id(self) -> int:
        return self.process.node_id

    @property
    def data_dir(self) -> Path:
        return self.process.data_dir


class FaultCluster:
    def __init__(
        self, proxies: ProxyLoop, start_broker: StartBroker, chroot: str, zk: KazooClient
    ) -> None:
        """`chroot` is `host:port/path` of the ZooKeeper the brokers reach through their proxy."""
        self._proxies = proxies
        self._start_broker = start_broker
        address, self._chroot_path = chroot.split("/", 1)
        host, port = address.rsplit(":", 1)
        self._zookeeper = (host, int(port))
        self.zk = zk  # the test's own session, never proxied
        self.brokers: dict[int, FaultBroker] = {}

    def start(self, node_id: int, config: Mapping[str, str] | None = None) -> FaultBroker:
        port = free_port("127.0.0.1")
        link = self._proxies.proxy(("127.0.0.1", port), name=f"broker-{node_id}-inter-broker")
        zk_link = self._proxies.proxy(self._zookeeper, name=f"broker-{node_id}-zookeeper")
        settings = {
            **FAULT_CONFIG,
            **(config or {}),
            "inter.broker.advertised.address": link.address,
        }
        process = self._start_broker(
            node_id=node_id,
            config=settings,
            zookeeper=f"{zk_link.address}/{self._chroot_path}",
            port=port,
        )
        self.brokers[node_id] = FaultBroker(process, link, zk_link)
        return self.brokers[node_id]

    @property
    def data_dirs(self) -> dict[int, Path]:
        return {n: b.data_dir for n, b in self.brokers.items()}

    # --- ZooKeeper (read directly, not through any proxy) -------------------------------------

    def state(self, topic: str, partition: int) -> LeaderAndIsr:
        path = zk_paths.partition_state_path(ZkTopicPartition(topic, partition))
        data, stat = self.zk.get(path)
        return zk_paths.decode_partition_state(data, stat.version)

    def controller(self) -> int:
        data, _ = self.zk.get(zk_paths.CONTROLLER)
        return zk_paths.decode_controller(data).broker_id

    def controller_epoch(self) -> int:
        data, _ = self.zk.get(zk_paths.CONTROLLER_EPOCH)
        return zk_paths.decode_epoch(data)

    def broker_epoch(self, node_id: int) -> int:
        """The czxid of the broker's registration (KIP-380), -1 when it is not registered."""
        stat = self.zk.exists(zk_paths.broker_path(node_id))
        return -1 if stat is None else int(stat.czxid)

    # --- client calls (client endpoints, never proxied) ---------------------------------------

    def metadata(self, node_id: int) -> ClusterMetadata:
        async def ask() -> ClusterMetadata:
            bootstrap = self.brokers[node_id].process.bootstrap
            async with Admin.for_bootstrap(bootstrap, CLIENT) as admin:
                return await admin.describe_cluster()

        return asyncio.run(ask())

    def create_topic(self, topic: str, partitions: int, configs: Mapping[str, str]) -> None:
        async def create() -> dict[str, Any]:
            bootstrap = next(iter(self.brokers.values())).process.bootstrap
            async with Admin.for_bootstrap(bootstrap) as admin:
                return await admin.create_topics(
                    [NewTopic(topic, partitions, len(self.brokers), dict(configs))]
                )

        assert asyncio.run(create()) == {topic: None}

    def fully_replicated(self, topic: str, partitions: int) -> bool:
        """Every partition has a leader and all brokers in its ISR, in ZooKeeper."""
        expected = sorted(self.brokers)
        for partition in range(partitions):
            state = self.state(topic, partition)
            if state.leader not in expected or sorted(state.isr) != expected:
                return False
        return True

    def produce(self, node_id: int, topic: str, partition: int, value: bytes, acks: int) -> int:
        """One record straight to broker `node_id`'s client endpoint, no retries: the base
        offset, or `BrokerResponseError` with the broker's error code."""

        async def send() -> int:
            bootstrap = self.brokers[node_id].process.bootstrap
            async with Cluster(bootstrap, CLIENT) as cluster:
                batch = build_batch([(None, value)])
                result = await produce(
                    cluster, TopicPartition(topic, partition), batch, acks=acks, timeout_s=5.0
                )
                assert result is not None
                return result.base_offset

        return asyncio.run(send())

    def produce_eventually(
        self, topic: str, partition: int, value: bytes, *, via: int | None = None
    ) -> int:
        """An acks=all record, retried until accepted (leadership or ISR may still be settling);
        sent to broker `via`, else to the leader named in ZooKeeper. Returns its offset."""

        def attempt() -> tuple[int, ...]:  # (offset,) once accepted: offset 0 is an answer too
            node_id = via if via is not None else self.state(topic, partition).leader
            if node_id not in self.brokers:  # -1: no leader while an election is under way
                return ()
            return (self.produce(node_id, topic, partition, value, acks=-1),)

        (offset,) = wait_until(
            attempt,
            what=f"an acks=all record accepted by {topic}-{partition}",
            timeout=SETTLE_S,
            # Refused while the leader or ISR settles (NOT_LEADER_OR_FOLLOWER,
            # NOT_ENOUGH_REPLICAS), not yet in `via`'s metadata (UpdateMetadata still on its
            # way), or sent to a broker that is restarting.
            retry_on=(*TOPIC_SETTLING, *BROKER_UNREACHABLE, *ZNODE_MISSING),
        )
        return offset

    def consume(self, node_id: int, topic: str, partition: int, offset: int) -> list[bytes | None]:
        """The values from `offset` up to the high watermark, read from the leader."""

        async def read() -> list[bytes | None]:
            bootstrap = self.brokers[node_id].process.bootstrap
            async with Cluster(bootstrap, CLIENT) as cluster:
                tp = TopicPartition(topic, partition)
                fetched = (await fetch(cluster, {tp: offset}))[tp]
            values: list[bytes | None] = []
            for pos, _ in iter_headers(fetched.records):
                header, records = read_batch(fetched.records, pos)
                values += [
                    r.value for r in records if header.base_offset + r.offset_delta >= offset
                ]
            return values

        return asyncio.run(read())

    def produce_error(self, node_id: int, topic: str, partition: int, acks: int) -> int | None:
        """The error code a produce gets, None when it succeeds."""
        try:
            self.produce(node_id, topic, partition, b"probe", acks)
        except BrokerResponseError as exc:
            return int(exc.code)
        return None
