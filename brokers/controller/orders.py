"""What the controller's state machines decide: new partition states and the requests to send.

Owns: `LeaderAndIsrOrder`, `StopReplicaOrder`, `UpdateMetadataOrder` (one per destination
broker, before they are batched into LeaderAndIsr / StopReplica / UpdateMetadata requests carrying
the controller epoch and the destination's broker epoch) and `Decision`, the result of one state
machine step. The channel that turns orders into wire requests (Kafka's
`ControllerChannelManager`/`ControllerBrokerRequestBatch`) is not here. Frozen values and a
builder used by one caller at a time; not thread-safe.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from brokers.controller import errors
from brokers.controller.state import LeaderAndIsr, ReplicaAssignment, TopicPartition


class ElectionFailure(enum.Enum):
    """Why a partition got no (new) leader; `as_error` gives the domain error the handlers map."""

    NOT_NEEDED = "election not needed"  # ELECTION_NOT_NEEDED
    NO_ELIGIBLE_LEADER = "no eligible leader"  # ELIGIBLE_LEADERS_NOT_AVAILABLE
    PREFERRED_NOT_AVAILABLE = "preferred leader not available"  # PREFERRED_LEADER_NOT_AVAILABLE
    UNKNOWN_PARTITION = "unknown partition"  # UNKNOWN_TOPIC_OR_PARTITION

    def as_error(self, tp: TopicPartition) -> errors.ControllerError:
        kinds: dict[ElectionFailure, type[errors.ControllerError]] = {
            ElectionFailure.NOT_NEEDED: errors.ElectionNotNeededError,
            ElectionFailure.NO_ELIGIBLE_LEADER: errors.EligibleLeadersNotAvailableError,
            ElectionFailure.PREFERRED_NOT_AVAILABLE: errors.PreferredLeaderNotAvailableError,
            ElectionFailure.UNKNOWN_PARTITION: errors.UnknownPartitionError,
        }
        return kinds[self](f"{tp}: {self.value}")


@dataclass(frozen=True, slots=True)
class LeaderAndIsrOrder:
    broker_id: int
    tp: TopicPartition
    state: LeaderAndIsr
    assignment: ReplicaAssignment
    is_new: bool = False


@dataclass(frozen=True, slots=True)
class StopReplicaOrder:
    broker_id: int
    tp: TopicPartition
    delete: bool
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class UpdateMetadataOrder:
    broker_id: int
    partitions: tuple[TopicPartition, ...]


@dataclass
class Decision:
    """New partition states to write to ZooKeeper (conditionally), then the orders to send."""

    changes: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    leader_and_isr: list[LeaderAndIsrOrder] = field(default_factory=list)
    stop_replica: list[StopReplicaOrder] = field(default_factory=list)
    update_metadata: list[UpdateMetadataOrder] = field(default_factory=list)
    failed: dict[TopicPartition, ElectionFailure] = field(default_factory=dict)

    def merge(self, later: Decision) -> Decision:
        """This decision followed by `later` (later states win; orders keep their order)."""
        failed = {tp: why for tp, why in self.failed.items() if tp not in later.changes}
        return Decision(
            changes={**self.changes, **later.changes},
            leader_and_isr=[*self.leader_and_isr, *later.leader_and_isr],
            stop_replica=[*self.stop_replica, *later.stop_replica],
            update_metadata=[*self.update_metadata, *later.update_metadata],
            failed={**failed, **later.failed},
        )

    def restricted_to(self, partitions: set[TopicPartition]) -> Decision:
        """The part of this decision about `partitions` (what a partial write did write)."""
        metadata = [
            UpdateMetadataOrder(o.broker_id, kept)
            for o in self.update_metadata
            if (kept := tuple(tp for tp in o.partitions if tp in partitions))
        ]
        return Decision(
            changes={tp: s for tp, s in self.changes.items() if tp in partitions},
            leader_and_isr=[o for o in self.leader_and_isr if o.tp in partitions],
            stop_replica=[o for o in self.stop_replica if o.tp in partitions],
            update_metadata=metadata,
        )

    def orders_for(self, broker_id: int) -> list[LeaderAndIsrOrder]:
        return [order for order in self.leader_and_isr if order.broker_id == broker_id]


def metadata_to_all(
    live_brokers: set[int], partitions: set[TopicPartition]
) -> list[UpdateMetadataOrder]:
    """UpdateMetadata for `partitions` to every live broker (each serves metadata for all)."""
    if not partitions:
        return []
    ordered = tuple(sorted(partitions))
    return [UpdateMetadataOrder(broker, ordered) for broker in sorted(live_brokers)]
