"""Handlers: one module per Kafka API, and the route table that maps API keys to them.

`build_route_table(broker)` is the single place a client-facing API is wired; ApiVersions is
derived from the table. (ZooKeeper mode adds the controller's inter-broker routes on top, see
`brokers.app.zk_mode`.) Handlers run on the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from brokers.server.routes import RouteTable

if TYPE_CHECKING:
    from brokers.app.standalone import Broker


def build_route_table(broker: Broker) -> RouteTable:
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

    table = RouteTable()
    for module in (
        produce,
        fetch,
        list_offsets,
        metadata,
        offset_commit,
        offset_fetch,
        find_coordinator,
        join_group,
        heartbeat,
        leave_group,
        sync_group,
        describe_groups,
        list_groups,
        delete_records,
        init_producer_id,
        offset_for_leader_epoch,
        create_topics,
        delete_topics,
        create_partitions,
        describe_configs,
        alter_configs,
        incremental_alter_configs,
        delete_groups,
        offset_delete,
        describe_cluster,
        describe_log_dirs,
        describe_producers,
    ):
        table.add(module.route(broker))
    table.add(api_versions.route(table))
    return table
