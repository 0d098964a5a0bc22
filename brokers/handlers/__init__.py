"""Handlers: one module per Kafka API, and the route table that maps API keys to them.

`build_route_table(services)` is the single place a client-facing API is wired: each handler's
`route(...)` gets only the services it uses (see `brokers.handlers.services`), never the broker.
ApiVersions is derived from the table. (ZooKeeper mode adds the controller's inter-broker routes
on top, in its composition root `brokers.app.zk_mode`.) Handlers run on the event loop.
"""

from __future__ import annotations

from brokers.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_topic_partitions,
    describe_transactions,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sync_group,
    txn_offset_commit,
    write_txn_markers,
)
from brokers.handlers.services import HandlerServices
from brokers.replication.txn_markers import TxnCompletion
from brokers.server.routes import Route, RouteTable


def client_routes(s: HandlerServices) -> list[Route]:
    """The client-facing APIs, each wired to what it uses."""
    return [
        produce.route(
            s.replicas, s.purgatory, s.clock, s.topic_metrics, s.txn_verifier, s.metadata
        ),
        fetch.route(
            s.replicas, s.purgatory, s.clock, s.topic_metrics, s.config, s.metadata, s.tiered
        ),
        list_offsets.route(s.replicas, s.tiered),
        metadata.route(s.config, s.metadata, s.topics),
        offset_commit.route(s.groups, s.metadata),
        offset_fetch.route(s.groups),
        consumer_group_heartbeat.route(s.groups, s.metadata),
        consumer_group_describe.route(s.groups, s.metadata),
        txn_offset_commit.route(s.groups, s.metadata, s.txn_verifier),
        find_coordinator.route(s.groups, s.metadata, s.transactions),
        join_group.route(s.groups, s.metadata),
        heartbeat.route(s.groups),
        leave_group.route(s.groups),
        sync_group.route(s.groups),
        describe_groups.route(s.groups),
        list_groups.route(s.groups),
        delete_records.route(s.metadata, s.replicas, s.tiered),
        init_producer_id.route(s.producer_ids, s.transactions),
        add_partitions_to_txn.route(s.transactions),
        add_offsets_to_txn.route(s.transactions),
        end_txn.route(s.transactions),
        describe_transactions.route(s.transactions),
        list_transactions.route(s.transactions),
        offset_for_leader_epoch.route(s.replicas),
        create_topics.route(s.config, s.metadata, s.topics, s.zookeeper_mode),
        delete_topics.route(s.config, s.metadata, s.topics),
        create_partitions.route(s.config, s.metadata, s.topics, s.zookeeper_mode),
        describe_configs.route(s.config, s.metadata, s.topics),
        alter_configs.route(s.config, s.metadata, s.topics),
        incremental_alter_configs.route(s.config, s.metadata, s.topics),
        delete_groups.route(s.groups),
        offset_delete.route(s.groups, s.metadata),
        describe_cluster.route(s.metadata),
        describe_log_dirs.route(s.log_dirs),
        describe_producers.route(s.replicas, s.metadata),
        describe_topic_partitions.route(s.config, s.metadata),
        # inter-broker (the transaction coordinator's markers); the gateway never forwards it
        write_txn_markers.route(
            s.replicas, s.purgatory, s.clock, on_offsets_marker=_offsets_marker(s)
        ),
    ]


def _offsets_marker(s: HandlerServices) -> TxnCompletion:
    """A committed marker on a `__consumer_offsets` partition, for the group coordinator."""

    def complete(offsets_partition: int, producer_id: int, commit: bool) -> None:
        s.groups.coordinator.complete_transaction(offsets_partition, producer_id, commit)

    return complete


def build_route_table(services: HandlerServices, extra: list[Route] | None = None) -> RouteTable:
    """The client routes plus `extra` (ZooKeeper mode's control and controller APIs), then
    ApiVersions, which advertises exactly what the table holds."""
    table = RouteTable()
    for route in [*client_routes(services), *(extra or [])]:
        table.add(route)
    transaction_version = services.transactions.coordinator.config.transaction_version
    if services.txn_verifier is None:  # no leader can add partitions for a TV2 producer
        transaction_version = min(transaction_version, 1)
    table.add(api_versions.route(table, {api_versions.TRANSACTION_VERSION: transaction_version}))
    return table
