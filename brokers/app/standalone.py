"""The composition root of a standalone broker: every part built once, in order, given what it uses.

Owns: `build_standalone`, the only place a broker without ZooKeeper is assembled — metrics
registry and request purgatory, the log manager, the metadata cache (this broker alone, its
cluster id read from or written to `meta.properties`), the replica manager, the local topic
registry (every replica on this broker), producer ids from a block file, the group coordinator
over `__consumer_offsets` and the transaction coordinator over `__transaction_state` (both in
`runtime.assemble`), and the route table built from the handlers' narrow services. The
result is a `brokers.app.runtime.Broker`, whose `start`/`stop` run the shared lifecycle.
`isr_writer` is for in-process replication tests only (a test playing the controller); a real
cluster is built by `brokers.app.zk_mode.build_zk_broker`. Called before the event loop serves;
the built broker runs on one event loop and is not thread-safe.
"""

from __future__ import annotations

import uuid

from prometheus_client import CollectorRegistry

from brokers.app.runtime import (
    Broker,
    CoreParts,
    assemble,
    log_manager_for,
    metadata_cache_for,
    register_storage_metrics,
)
from brokers.common.clock import SYSTEM_CLOCK, Clock
from brokers.common.config import BrokerConfig
from brokers.coordinator.producer_ids import FileBlockStore, ProducerIdManager
from brokers.handlers.topic_metrics import BrokerTopicMetrics
from brokers.log.meta_properties import read_cluster_id, write_cluster_id
from brokers.replication.isr_writer import IsrWriter
from brokers.replication.local_topics import LocalTopicRegistry
from brokers.replication.metrics import IsrChangeCounters
from brokers.replication.replica_manager import ReplicaManager
from brokers.server.metrics import ServerMetrics
from brokers.server.purgatory import Purgatory

__all__ = ["Broker", "build_standalone"]


def build_standalone(
    config: BrokerConfig,
    *,
    clock: Clock = SYSTEM_CLOCK,
    registry: CollectorRegistry | None = None,
    isr_writer: IsrWriter | None = None,
) -> Broker:
    config.validate()
    registry = registry or CollectorRegistry()
    purgatory = Purgatory()
    topic_metrics = BrokerTopicMetrics(registry)
    server_metrics = ServerMetrics(registry)
    log_manager = log_manager_for(config, clock)
    cluster_id = read_cluster_id(config.data_dir) or write_cluster_id(
        config.data_dir, uuid.uuid4().hex[:22]
    )
    metadata = metadata_cache_for(config, cluster_id)
    replicas = ReplicaManager(
        log_manager,
        config.data_dir,
        node_id=config.node_id,
        clock=clock,
        on_append=purgatory.notify,
        isr_writer=isr_writer,
        isr_update_observer=IsrChangeCounters(registry).record,
        replica_lag_time_max_ms=config.replica_lag_time_max_ms,
        broker_properties=config.properties,  # broker defaults of logs LeaderAndIsr creates
    )
    register_storage_metrics(registry, log_manager, replicas)
    replicas.on_topic_gone(topic_metrics.forget)  # a deleted topic's series go with it
    topics = LocalTopicRegistry(
        config.data_dir,
        replicas,
        metadata,
        node_id=config.node_id,
        broker_defaults=config.properties,
    )
    producer_ids = ProducerIdManager(FileBlockStore(config.data_dir / "pier-producer-id-block"))
    core = CoreParts(
        config, clock, registry, purgatory, server_metrics, topic_metrics, log_manager, metadata,
        replicas,
    )  # fmt: skip
    return assemble(core, topics, producer_ids, zookeeper_mode=False)
