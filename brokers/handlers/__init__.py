"""Handlers: one module per Kafka API, and the route table that maps API keys to them.

`build_route_table(broker)` is the single place an API is wired; ApiVersions is derived from the
table. Handlers run on the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from brokers.server.routes import RouteTable

if TYPE_CHECKING:
    from brokers.broker import Broker


def build_route_table(broker: Broker) -> RouteTable:
    from brokers.handlers import api_versions, metadata, produce

    table = RouteTable()
    for module in (metadata, produce):
        table.add(module.route(broker))
    for optional in _optional_routes(broker):
        table.add(optional)
    table.add(api_versions.route(table))
    return table


def _optional_routes(broker: Broker) -> list:  # type: ignore[type-arg]
    """Routes from handler modules present in this checkout (filled in as modules land)."""
    import importlib

    routes = []
    for name in (
        "fetch",
        "list_offsets",
        "create_topics",
        "delete_topics",
        "create_partitions",
        "describe_configs",
        "alter_configs",
        "incremental_alter_configs",
        "delete_records",
        "describe_cluster",
        "offset_for_leader_epoch",
        "init_producer_id",
        "find_coordinator",
        "join_group",
        "sync_group",
        "heartbeat",
        "leave_group",
        "offset_commit",
        "offset_fetch",
        "offset_delete",
        "describe_groups",
        "list_groups",
        "delete_groups",
    ):
        try:
            module = importlib.import_module(f"brokers.handlers.{name}")
        except ModuleNotFoundError:
            continue
        routes.append(module.route(broker))
    return routes
