"""Consumer group administration: list, describe and delete groups.

Owns: `list_groups` (asks every broker, as Kafka's AdminClient does, since each coordinator knows
only its own groups; the state filter is applied here too, so brokers below ListGroups v4 work),
`describe_groups` and `delete_groups` (each through the group's coordinator, retried when the
coordinator moves or is loading). Runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from brokers.client.assignment import CONSUMER_PROTOCOL, decode_assignment
from brokers.client.cluster import Cluster
from brokers.client.errors import ClientError, check
from brokers.client.messages import make, request_module
from brokers.client.metadata import TopicPartition
from brokers.client.versions import ApiKey

STATES_FILTER_VERSION = 4  # KIP-518


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    state: str  # "" when the broker's ListGroups version does not report it (< v4)
    protocol_type: str


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: tuple[TopicPartition, ...] | None  # None: not a consumer-protocol assignment


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]


async def list_groups(cluster: Cluster, states: Collection[str] = ()) -> list[GroupListing]:
    wanted = {s.lower() for s in states}
    metadata = await cluster.metadata()
    found: dict[str, GroupListing] = {}
    for node_id in sorted(metadata.brokers):

        async def ask(node_id: int = node_id) -> list[GroupListing]:
            return await _list_on(cluster, node_id, tuple(states))

        for listing in await cluster.call(ask):
            if not wanted or listing.state.lower() in wanted:
                found[listing.group_id] = listing
    return sorted(found.values(), key=lambda g: g.group_id)


async def _list_on(cluster: Cluster, node_id: int, states: tuple[str, ...]) -> list[GroupListing]:
    connection = await cluster.node(node_id)
    version = connection.version(ApiKey.LIST_GROUPS)
    module = request_module(ApiKey.LIST_GROUPS, version)
    response = await connection.send(make(module, "ListGroupsRequest", states_filter=states))
    check(response.error_code, f"ListGroups on broker {node_id}")
    return [
        GroupListing(g.group_id, getattr(g, "group_state", ""), g.protocol_type)
        for g in response.groups
    ]


async def describe_groups(
    cluster: Cluster, group_ids: Sequence[str]
) -> dict[str, GroupDescription]:
    described: dict[str, GroupDescription] = {}
    for group_id in group_ids:

        async def ask(group_id: str = group_id) -> GroupDescription:
            return await _describe(cluster, group_id)

        described[group_id] = await cluster.call(ask)
    return described


async def _describe(cluster: Cluster, group_id: str) -> GroupDescription:
    connection = await cluster.coordinator(group_id)
    module = request_module(ApiKey.DESCRIBE_GROUPS, connection.version(ApiKey.DESCRIBE_GROUPS))
    request = make(
        module, "DescribeGroupsRequest", groups=(group_id,), include_authorized_operations=False
    )
    response = await connection.send(request)
    (group,) = response.groups
    check(group.error_code, f"group {group_id}", getattr(group, "error_message", None))
    return GroupDescription(
        group_id=group.group_id,
        state=group.group_state,
        protocol_type=group.protocol_type,
        protocol=group.protocol_data,
        members=tuple(_member(m, group.protocol_type) for m in group.members),
    )


def _member(member: Any, protocol_type: str) -> MemberDescription:
    assignment = None
    if protocol_type == CONSUMER_PROTOCOL:
        decoded = decode_assignment(member.member_assignment)
        assignment = None if decoded is None else tuple(decoded)
    return MemberDescription(
        member_id=member.member_id,
        group_instance_id=getattr(member, "group_instance_id", None),
        client_id=member.client_id,
        client_host=member.client_host,
        assignment=assignment,
    )


async def delete_groups(
    cluster: Cluster, group_ids: Sequence[str]
) -> dict[str, ClientError | None]:
    """{group: None on success, else the error} — one group failing does not stop the others."""
    results: dict[str, ClientError | None] = {}
    for group_id in group_ids:

        async def delete(group_id: str = group_id) -> None:
            await _delete(cluster, group_id)

        try:
            await cluster.call(delete)
            results[group_id] = None
        except ClientError as exc:
            results[group_id] = exc
    return results


async def _delete(cluster: Cluster, group_id: str) -> None:
    connection = await cluster.coordinator(group_id)
    module = request_module(ApiKey.DELETE_GROUPS, connection.version(ApiKey.DELETE_GROUPS))
    response = await connection.send(make(module, "DeleteGroupsRequest", groups_names=(group_id,)))
    for result in response.results:
        check(result.error_code, f"group {result.group_id}")
