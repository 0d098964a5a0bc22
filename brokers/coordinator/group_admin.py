"""Administrative views and removal of groups: DescribeGroups, ListGroups, DeleteGroups.

Owns: `describe_group` (members with their metadata and assignment only while Stable, as Kafka's
group summary), `list_groups` (KIP-518 state filter, case-insensitive), and `delete_groups` (only
Empty groups; tombstones for every offset, pending transactional ones included, and the group
metadata are written before answering).
Functions over a `GroupCoordinator`; run on the event loop; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from brokers.coordinator.errors import (
    CoordinatorLoadInProgressError,
    GroupError,
    GroupIdNotFoundError,
    NonEmptyGroupError,
)
from brokers.coordinator.group import Group, GroupState
from brokers.coordinator.group_coordinator import GroupCoordinator
from brokers.coordinator.group_log import group_entry, offset_entry
from brokers.coordinator.results import GroupSummary, ListedGroup, MemberSummary

S = GroupState


def describe_group(coordinator: GroupCoordinator, group_id: str) -> GroupSummary:
    error = coordinator.check(group_id)
    if error is not None:
        return GroupSummary(group_id, "", "", "", (), error)
    group = coordinator.groups.get(group_id)
    if group is None or group.is_in(S.DEAD):
        not_found = GroupIdNotFoundError(f"Group {group_id} not found.")
        return GroupSummary(group_id, S.DEAD.value, "", "", (), not_found)
    stable = group.is_in(S.STABLE) and group.protocol_name is not None
    protocol = group.protocol_name if stable and group.protocol_name else ""
    members = tuple(
        MemberSummary(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            metadata=m.metadata(protocol) if stable else b"",
            assignment=m.assignment if stable else b"",
        )
        for m in group.members.values()
    )
    return GroupSummary(group_id, group.state.value, group.protocol_type or "", protocol, members)


def list_groups(
    coordinator: GroupCoordinator, states: Iterable[str] = (), prefix: str = ""
) -> tuple[GroupError | None, list[ListedGroup]]:
    """Groups this broker coordinates whose ids start with `prefix`; an empty `states` lists
    every state. The prefix is tested first: a tenant's listing builds its own groups only."""
    wanted = {s.lower() for s in states}
    groups = coordinator.groups
    ids = [i for i in groups if i.startswith(prefix)] if prefix else list(groups)
    listed = [
        ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
        for g in (groups[i] for i in ids)
        if not g.is_in(S.DEAD) and (not wanted or g.state.value.lower() in wanted)
    ]
    error = CoordinatorLoadInProgressError() if coordinator.loading else None
    return error, listed


async def delete_groups(
    coordinator: GroupCoordinator, group_ids: Sequence[str]
) -> list[tuple[str, GroupError | None]]:
    results: list[tuple[str, GroupError | None]] = []
    for group_id in group_ids:
        group = coordinator.groups.get(group_id)
        consumer = coordinator.consumer_groups.groups.get(group_id)  # KIP-848
        if coordinator.check(group_id) is None and consumer is not None:
            if consumer.members:
                results.append((group_id, NonEmptyGroupError(f"Group {group_id} is not empty.")))
                continue
            try:  # its tombstones (KIP-848 records), as Kafka's deletion writes
                await coordinator.consumer_store.delete(group_id)
            except GroupError as exc:
                results.append((group_id, exc))
                continue
            if group is None:
                results.append((group_id, None))
                continue
        error = coordinator.check(group_id) or _deletable(group, group_id)
        if error is None and group is not None:
            error = await _delete(coordinator, group)
        results.append((group_id, error))
    return results


def _deletable(group: Group | None, group_id: str) -> GroupError | None:
    if group is None or group.is_in(S.DEAD):
        return GroupIdNotFoundError(f"Group {group_id} not found.")
    if not group.is_in(S.EMPTY):
        return NonEmptyGroupError(f"Group {group_id} is not empty.")
    return None


async def _delete(coordinator: GroupCoordinator, group: Group) -> GroupError | None:
    # Tombstones for every committed offset and for partitions with only pending transactional
    # offsets (Kafka's deleteAllOffsets): the loader then drops those too.
    doomed = {tp for tp, _ in group.offsets.items()} | group.offsets.txn_partitions()
    entries = [offset_entry(group.group_id, tp, None) for tp in sorted(doomed)]
    entries.append(group_entry(group.group_id, None))
    group.transition_to(S.DEAD, coordinator.clock.time_ms())
    coordinator.groups.pop(group.group_id, None)
    try:
        await coordinator.log.append(group.group_id, entries)
    except GroupError as exc:
        return exc
    return None
