"""Domain errors of partition state: who leads, which epoch, whether the partition exists.

Owns: the exceptions of `brokers.replication`; handlers map them to Kafka error codes.
"""


class ReplicationError(Exception):
    pass


class UnknownTopicOrPartitionError(ReplicationError):
    pass


class NotLeaderOrFollowerError(ReplicationError):
    pass


class FencedLeaderEpochError(ReplicationError):
    """The request names an older leader epoch than ours (KIP-320)."""


class UnknownLeaderEpochError(ReplicationError):
    """The request names a newer leader epoch than we know (KIP-320)."""


class NotEnoughReplicasError(ReplicationError):
    pass


class InvalidRequiredAcksError(ReplicationError):
    pass


class TopicExistsError(ReplicationError):
    pass


class InvalidTopicError(ReplicationError):
    pass


class InvalidPartitionsError(ReplicationError):
    pass


class InvalidReplicationFactorError(ReplicationError):
    pass


class InvalidReplicaAssignmentError(ReplicationError):
    pass


class PolicyViolationError(ReplicationError):
    """A request over one of the broker's limits (partitions per topic, per request)."""


class NotEnoughReplicasAfterAppendError(ReplicationError):
    """acks=all: the batch was written, but the ISR shrank below `min.insync.replicas` before
    it was replicated (Kafka's NOT_ENOUGH_REPLICAS_AFTER_APPEND); the producer may retry."""


class StaleControllerEpochError(ReplicationError):
    """A LeaderAndIsr/StopReplica from a controller older than one already heard from."""
