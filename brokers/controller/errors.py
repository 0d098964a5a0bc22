"""Domain errors of the ZooKeeper registry and controller.

Owns: the exceptions `brokers.controller` raises. They never carry Kafka error codes; the single
mapper in `brokers.handlers.errors` turns them into codes once the controller is wired in.
Plain values; thread-safe.
"""

from __future__ import annotations


class ControllerError(Exception):
    """Base class of every controller/registry error."""


class ZNodeFormatError(ControllerError):
    """A znode's bytes are not the JSON (or integer) Kafka's ZooKeeper mode writes there."""


class ZNodeMissingError(ControllerError):
    """A znode that must exist does not."""


class ZNodeExistsError(ControllerError):
    """A znode could not be created because it already exists."""


class ZNodeVersionError(ControllerError):
    """A conditional update failed: the znode's version moved (someone else wrote it first)."""


class ZooKeeperUnavailableError(ControllerError):
    """The session is lost/closed or ZooKeeper did not answer in time."""


class DuplicateBrokerIdError(ControllerError):
    """Another live broker already holds `/brokers/ids/<id>` (Kafka's NodeExistsException at startup)."""


class InconsistentClusterIdError(ControllerError):
    """The data dir belongs to another cluster than ZooKeeper's `/cluster/id` (Kafka's
    InconsistentClusterIdException at startup): joining would mix two clusters' logs."""


class ControllerMovedError(ControllerError):
    """This broker is not (or no longer) the controller: its epoch was superseded."""


class InvalidReplicationFactorError(ControllerError):
    """The replication factor is < 1 or larger than the number of live brokers."""


class InvalidPartitionsError(ControllerError):
    """The partition count is < 1, or a partition id is out of range."""


class InconsistentRackError(ControllerError):
    """Some brokers have a rack and others do not (Kafka's AdminOperationException)."""


class ReassignmentError(ControllerError):
    """A reassignment request is not valid for the partition's current state."""


class UnknownPartitionError(ControllerError):
    """A partition the controller does not know (no assignment or no state yet)."""


class NoReassignmentInProgressError(ControllerError):
    """A cancellation (null target replicas, KIP-455) for a partition that is not moving."""


class ElectionError(ControllerError):
    """Base of the per-partition outcomes of an ElectLeaders request that elected nobody (KIP-460)."""


class ElectionNotNeededError(ElectionError):
    """The wanted leader already leads (preferred), or the leader is live (unclean)."""


class PreferredLeaderNotAvailableError(ElectionError):
    """The preferred replica is not live or not in the ISR."""


class EligibleLeadersNotAvailableError(ElectionError):
    """No replica may lead under the election's rules (none live and in sync, or none live)."""
