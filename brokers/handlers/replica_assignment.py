"""Manual replica assignments (CreateTopics `assignments`, CreatePartitions `assignments`).

Owns: checking an assignment as Kafka's ReplicationControlManager does (no partition twice,
partitions 0..n-1, no empty or repeated replica list, only registered brokers, one replication
factor throughout), plus the standalone rule: the local topic registry places every replica on
this broker, so there an assignment is valid only when it names exactly this broker; in ZooKeeper
mode the assignment is written as given. Pure checks over the broker's metadata; runs on the
event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from brokers.common.config import BrokerConfig
from brokers.handlers.services import MetadataView
from brokers.replication.errors import InvalidReplicaAssignmentError


class Placement(Protocol):
    """What the checks read: the live brokers, this broker's id, and the mode."""

    @property
    def metadata(self) -> MetadataView: ...

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def zookeeper_mode(self) -> bool: ...


def manual_assignment(broker: Placement, assignments: Sequence[Any]) -> dict[int, list[int]]:
    """A CreateTopics manual assignment, checked: partition index → replicas."""
    seen: dict[int, list[int]] = {}
    factor: int | None = None
    for assignment in assignments:
        index = assignment.partition_index
        if index in seen:
            raise InvalidReplicaAssignmentError(
                f"Found multiple manual partition assignments for partition {index}"
            )
        check_replicas(broker, assignment.broker_ids, factor)
        seen[index] = list(assignment.broker_ids)
        factor = len(assignment.broker_ids)
    if set(seen) != set(range(len(seen))):
        raise InvalidReplicaAssignmentError(
            "partitions should be a consecutive 0-based integer sequence"
        )
    return seen


def check_replicas(broker: Placement, replicas: Sequence[int], factor: int | None) -> None:
    """One partition's manual assignment, as Kafka's validateManualPartitionAssignment, plus
    Pier's standalone rule: without ZooKeeper the only broker that can hold a replica is this one."""
    if not replicas:
        raise InvalidReplicaAssignmentError(
            "The manual partition assignment includes an empty replica list."
        )
    previous = None
    for node in sorted(replicas):
        if node not in broker.metadata.brokers:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes broker {node}, but no such broker "
                "is registered."
            )
        if node == previous:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes the broker {node} more than once."
            )
        previous = node
    if factor is not None and len(replicas) != factor:
        raise InvalidReplicaAssignmentError(
            f"The manual partition assignment includes a partition with {len(replicas)} "
            "replica(s), but this is not consistent with previous partitions, which have "
            f"{factor} replica(s)."
        )
    if not broker.zookeeper_mode and list(replicas) != [broker.config.node_id]:
        raise InvalidReplicaAssignmentError(
            f"This broker places every replica on itself: the assignment must be "
            f"[{broker.config.node_id}]."
        )
