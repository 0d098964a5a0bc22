"""Domain errors of the group coordinator: membership, generations, offsets, ownership.

Owns: the exceptions raised (or carried in results) by `brokers.coordinator`. They never carry
Kafka error codes; `brokers.handlers.errors` maps each class to one. Pure; thread-safe.
"""


class GroupError(Exception):
    """Base of every group coordinator error."""


class CoordinatorNotAvailableError(GroupError):
    """The group is being removed or the offsets topic cannot take writes; retry FindCoordinator."""


class CoordinatorLoadInProgressError(GroupError):
    """The group's `__consumer_offsets` partition is still being read back."""


class NotCoordinatorError(GroupError):
    """This broker does not lead the group's `__consumer_offsets` partition."""


class InvalidGroupIdError(GroupError):
    pass


class UnknownMemberIdError(GroupError):
    pass


class IllegalGenerationError(GroupError):
    pass


class InconsistentGroupProtocolError(GroupError):
    """Protocol type or names that the group's current members cannot agree with."""


class InvalidSessionTimeoutError(GroupError):
    """Outside `group.min.session.timeout.ms`..`group.max.session.timeout.ms`."""


class RebalanceInProgressError(GroupError):
    pass


class MemberIdRequiredError(GroupError):
    """KIP-394: a new dynamic member must rejoin with the member id it was just given."""


class FencedInstanceIdError(GroupError):
    """KIP-345: another member now owns this `group.instance.id`."""


class GroupMaxSizeReachedError(GroupError):
    pass


class OffsetMetadataTooLargeError(GroupError):
    """Commit metadata longer than `offset.metadata.max.bytes`."""


class InvalidCommitOffsetSizeError(GroupError):
    """The commit's records are too large for the offsets topic."""


class GroupSubscribedToTopicError(GroupError):
    """OffsetDelete of a topic the group's members still subscribe to."""


class NonEmptyGroupError(GroupError):
    pass


class GroupIdNotFoundError(GroupError):
    pass


class UnstableOffsetCommitError(GroupError):
    """require_stable: a commit for the partition is still being written."""


class InvalidProducerEpochError(GroupError):
    """TxnOffsetCommit from a producer epoch older than the one the offsets partition has seen
    (the log's producer-state check fenced it; Kafka passes INVALID_PRODUCER_EPOCH through)."""


class InvalidProducerIdMappingError(GroupError):
    """TxnOffsetCommit without a producer id: its offsets could never be completed by a marker."""


class GroupRecordError(GroupError):
    """A `__consumer_offsets` key or value that does not parse (a corrupt or unknown format)."""


class GroupConfigError(ValueError):
    """A group or offsets setting that cannot be used; the broker refuses to start."""


# ---- KIP-848 consumer groups ---------------------------------------------------------------
class FencedMemberEpochError(GroupError):
    """FENCED_MEMBER_EPOCH: the member's epoch is not the coordinator's; it must rejoin."""


class StaleMemberEpochError(GroupError):
    """STALE_MEMBER_EPOCH: an offset commit/fetch with an epoch that is not the member's."""


class UnreleasedInstanceIdError(GroupError):
    """UNRELEASED_INSTANCE_ID: a static member joins with an instance id another member holds."""


class UnsupportedAssignorError(GroupError):
    """UNSUPPORTED_ASSIGNOR: a server assignor not in `group.consumer.assignors`."""
