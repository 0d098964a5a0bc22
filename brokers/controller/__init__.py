"""The ZooKeeper-mode controller package; this module is its public surface for other components.

Handlers reach the controller only through these names (the layout table forbids importing its
submodules): `control_api`, the wire schemas of LeaderAndIsr / StopReplica / UpdateMetadata /
ControlledShutdown, the value types the controller's request methods take and return
(`TopicPartition`, `ReplicaAssignment`), the listener names brokers register (client and
inter-broker), and the errors a handler must tell apart (elections,
reassignments). Importing it loads no kazoo code.
"""

from brokers.controller import requests as control_api
from brokers.controller.errors import (
    ControllerError,
    ControllerMovedError,
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    NoReassignmentInProgressError,
    PreferredLeaderNotAvailableError,
    ReassignmentError,
    UnknownPartitionError,
)
from brokers.controller.state import ReplicaAssignment, TopicPartition
from brokers.controller.zk_paths import CLIENT_LISTENER, INTER_BROKER_LISTENER


class BrokerEpochMismatchError(ControllerError):
    """A request from an earlier registration of a broker (its broker epoch is stale, KIP-380)."""


class BrokerNotAvailableError(ControllerError):
    """The broker asking is not registered as live (Kafka's BrokerNotAvailableException)."""


__all__ = [
    "CLIENT_LISTENER",
    "INTER_BROKER_LISTENER",
    "BrokerEpochMismatchError",
    "BrokerNotAvailableError",
    "ControllerError",
    "ControllerMovedError",
    "ElectionNotNeededError",
    "EligibleLeadersNotAvailableError",
    "NoReassignmentInProgressError",
    "PreferredLeaderNotAvailableError",
    "ReassignmentError",
    "ReplicaAssignment",
    "TopicPartition",
    "UnknownPartitionError",
    "control_api",
]
