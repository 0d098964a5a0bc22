"""What a tenant sees of the fleet's brokers: gateway endpoints instead of broker addresses, no
racks, and authorized-operation bit sets computed from the tenant's ACLs.

Owns: rewriting broker entries (Metadata, DescribeCluster) and single nodes (FindCoordinator) to
`ctx.fleet.endpoint(node_id)`, dropping brokers the gateway has no endpoint for (node ids stay the
fleet's, so a Fetch answer's `preferred_read_replica`, KIP-392, names a broker the tenant reaches
on the gateway's port for it; racks are hidden, the brokers choose by the tenant's `client.rack`,
docs/cluster.md "Racks and follower fetching"); and the
`*_authorized_operations` fields (Kafka's AclOperation bit positions; KIP-430). Pure; runs on the
event loop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from gateway.kafka.filter import FilterContext

CLUSTER_NAME = "kafka-cluster"  # Kafka's single CLUSTER resource
OPERATIONS_OMITTED = -(2**31)  # the schema default: not requested
# AclOperation ids (org.apache.kafka.common.acl.AclOperation)
_OPERATION_BITS = {
    "READ": 3,
    "WRITE": 4,
    "CREATE": 5,
    "DELETE": 6,
    "ALTER": 7,
    "DESCRIBE": 8,
    "CLUSTER_ACTION": 9,
    "DESCRIBE_CONFIGS": 10,
    "ALTER_CONFIGS": 11,
    "IDEMPOTENT_WRITE": 12,
}
TOPIC_OPERATIONS = (
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
)
# CLUSTER_ACTION is the brokers' own: a tenant never holds it.
CLUSTER_OPERATIONS = (
    "CREATE",
    "ALTER",
    "DESCRIBE",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
)


def authorized_operations(
    ctx: FilterContext, resource_type: str, name: str, operations: Iterable[str]
) -> int:
    """The bit set of `operations` the caller may do on one resource."""
    bits = 0
    for operation in operations:
        if ctx.allowed(operation, resource_type, name):
            bits |= 1 << _OPERATION_BITS[operation]
    return bits


def cluster_operations(ctx: FilterContext, wanted: bool) -> int:
    """Kafka's rule: OMITTED unless asked; 0 without DESCRIBE on the cluster."""
    if not wanted:
        return OPERATIONS_OMITTED
    if not ctx.allowed("DESCRIBE", "CLUSTER", CLUSTER_NAME):
        return 0
    return authorized_operations(ctx, "CLUSTER", CLUSTER_NAME, CLUSTER_OPERATIONS)


def brokers(
    ctx: FilterContext, entries: Iterable[Any], id_field: str = "node_id"
) -> tuple[Any, ...]:
    """Broker entries with the gateway's host and port and no rack; brokers the gateway has no
    endpoint for are dropped."""
    result = []
    for entry in entries:
        endpoint = ctx.fleet.endpoint(getattr(entry, id_field))
        if endpoint is None:
            continue
        host, port = endpoint
        changes: dict[str, Any] = {"host": host, "port": port}
        if any(f.name == "rack" for f in dataclasses.fields(entry)):
            changes["rack"] = None
        result.append(dataclasses.replace(entry, **changes))
    return tuple(result)
