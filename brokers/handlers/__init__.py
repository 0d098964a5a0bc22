"""Handlers: one module per Kafka API, and the route table that maps API keys to them.

`build_route_table(services)` is the single place a client-facing API is wired: each handler's
`route(...)` gets only the services it uses (see `brokers.handlers.services`), never the broker.
ApiVersions is derived from the table. (ZooKeeper mode adds the controller's inter-broker routes
on top, in its composition root `brokers.app.zk_mode`.) Handlers run on the event loop.
"""

from __future__ import annotations

from brokers.handlers import (
    alter_configs,
    api_versions,
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
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sync_group,
)
from brokers.handlers.services import HandlerServices
from brokers.server.routes import Route, RouteTable


def client_routes(s: HandlerServices) -> list[Route]:
    """The client-facing APIs, each wired to what it uses."""
    return [
        produce.route(s.replicas, s.purgatory, s.clock, s.topic_metrics),
        fetch.route(s.replicas, s.purgatory, s.clock, s.topic_metrics, s.config),
        list_offsets.route(s.replicas),
        metadata.route(s.config, s.metadata, s.topics),
        offset_commit.route(s.groups, s.metadata),
        offset_fetch.route(s.groups),
        find_coordinator.route(s.groups, s.metadata),
        join_group.route(s.groups),
        heartbeat.route(s.groups),
        leave_group.route(s.groups),
        sync_group.route(s.groups),
        describe_groups.route(s.groups),
        list_groups.route(s.groups),
        delete_records.route(s.metadata, s.replicas),
        init_producer_id.route(s.producer_ids),
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
    ]


def build_route_table(services: HandlerServices, extra: list[Route] | None = None) -> RouteTable:
    """The client routes plus `extra` (ZooKeeper mode's control and controller APIs), then
    ApiVersions, which advertises exactly what the table holds."""
    table = RouteTable()
    for route in [*client_routes(services), *(extra or [])]:
        table.add(route)
    table.add(api_versions.route(table))
    return table
