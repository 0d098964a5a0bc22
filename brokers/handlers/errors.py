"""The one place domain exceptions become Kafka error codes (errors are data at the protocol edge).

Owns: `error_code_for(exc)`. Known domain errors map by class (most specific first, via the MRO);
anything else is UNKNOWN_SERVER_ERROR plus one structured log line without a stack trace.
Pure; thread-safe.
"""

from __future__ import annotations

import logging

from brokers.common.descriptors import DescriptorLimitError
from brokers.controller import ControllerMovedError
from brokers.coordinator import errors as group_errors
from brokers.handlers.control_fence import StaleBrokerEpochError
from brokers.log import errors as log_errors
from brokers.records import errors as record_errors
from brokers.replication import errors as replication_errors
from brokers.wire.errors import ErrorCode

log = logging.getLogger("pier.handlers")

_CODES: dict[type[BaseException], ErrorCode] = {
    record_errors.CorruptRecordError: ErrorCode.corrupt_message,
    record_errors.InvalidRecordError: ErrorCode.invalid_record,
    # Produce v3+ carries only magic v2; Kafka's ProduceRequest.validateRecords says INVALID_RECORD
    record_errors.UnsupportedMagicError: ErrorCode.invalid_record,
    record_errors.RecordTooLargeError: ErrorCode.message_too_large,
    record_errors.InvalidTimestampError: ErrorCode.invalid_timestamp,
    record_errors.UnsupportedCompressionError: ErrorCode.unsupported_compression_type,
    log_errors.OffsetOutOfRangeError: ErrorCode.offset_out_of_range,
    log_errors.OutOfOrderSequenceError: ErrorCode.out_of_order_sequence_number,
    log_errors.InvalidProducerEpochError: ErrorCode.invalid_producer_epoch,
    log_errors.DuplicateSequenceError: ErrorCode.duplicate_sequence_number,
    log_errors.LogDirError: ErrorCode.kafka_storage_error,
    # disk full, I/O error: the write was undone or the log is offline (docs/storage-errors.md)
    log_errors.StorageError: ErrorCode.kafka_storage_error,
    log_errors.InvalidConfigError: ErrorCode.invalid_config,
    replication_errors.UnknownTopicOrPartitionError: ErrorCode.unknown_topic_or_partition,
    replication_errors.NotLeaderOrFollowerError: ErrorCode.not_leader_or_follower,
    replication_errors.FencedLeaderEpochError: ErrorCode.fenced_leader_epoch,
    replication_errors.UnknownLeaderEpochError: ErrorCode.unknown_leader_epoch,
    replication_errors.NotEnoughReplicasError: ErrorCode.not_enough_replicas,
    replication_errors.InvalidRequiredAcksError: ErrorCode.invalid_required_acks,
    replication_errors.TopicExistsError: ErrorCode.topic_already_exists,
    replication_errors.InvalidTopicError: ErrorCode.invalid_topic_exception,
    replication_errors.InvalidPartitionsError: ErrorCode.invalid_partitions,
    replication_errors.InvalidReplicationFactorError: ErrorCode.invalid_replication_factor,
    replication_errors.InvalidReplicaAssignmentError: ErrorCode.invalid_replica_assignment,
    replication_errors.PolicyViolationError: ErrorCode.policy_violation,
}


def error_code_for(exc: BaseException) -> ErrorCode:
    for cls in type(exc).__mro__:
        code = _CODES.get(cls)
        if code is not None:
            return code
    log.error("event=unexpected_error type=%s error=%r", type(exc).__name__, str(exc))
    return ErrorCode.unknown_server_error


def error_message_for(exc: BaseException) -> str | None:
    """The message Kafka puts beside the code where the schema has one (e.g. CreateTopics)."""
    if error_code_for(exc) is ErrorCode.unknown_server_error:
        return "Unexpected server error"  # never leak internals
    return str(exc) or None


# ---- errors raised by the admin handlers themselves (protocol-level checks) ------------------
class InvalidRequestError(Exception):
    """A well-formed request Kafka refuses item by item: duplicates, conflicting fields, limits."""


class UnknownTopicIdError(Exception):
    """A topic id (KIP-516) that names no topic here."""


class TopicAuthorizationError(Exception):
    """An operation this broker never permits on a topic, e.g. deleting an internal topic."""


_CODES[InvalidRequestError] = ErrorCode.invalid_request
_CODES[UnknownTopicIdError] = ErrorCode.unknown_topic_id
_CODES[TopicAuthorizationError] = ErrorCode.topic_authorization_failed


class TopicDeletionDisabledError(Exception):
    """`delete.topic.enable=false` on this broker (TOPIC_DELETION_DISABLED, DeleteTopics v3+)."""


_CODES[TopicDeletionDisabledError] = ErrorCode.topic_deletion_disabled


# ---- the group coordinator (brokers.coordinator.errors) ------------------------------------
_CODES.update(
    {
        group_errors.CoordinatorNotAvailableError: ErrorCode.coordinator_not_available,
        group_errors.CoordinatorLoadInProgressError: ErrorCode.coordinator_load_in_progress,
        group_errors.NotCoordinatorError: ErrorCode.not_coordinator,
        group_errors.InvalidGroupIdError: ErrorCode.invalid_group_id,
        group_errors.UnknownMemberIdError: ErrorCode.unknown_member_id,
        group_errors.FencedMemberEpochError: ErrorCode.fenced_member_epoch,
        group_errors.StaleMemberEpochError: ErrorCode.stale_member_epoch,
        group_errors.UnsupportedAssignorError: ErrorCode.unsupported_assignor,
        group_errors.UnreleasedInstanceIdError: ErrorCode.unreleased_instance_id,
        group_errors.IllegalGenerationError: ErrorCode.illegal_generation,
        group_errors.InconsistentGroupProtocolError: ErrorCode.inconsistent_group_protocol,
        group_errors.InvalidSessionTimeoutError: ErrorCode.invalid_session_timeout,
        group_errors.RebalanceInProgressError: ErrorCode.rebalance_in_progress,
        group_errors.MemberIdRequiredError: ErrorCode.member_id_required,
        group_errors.FencedInstanceIdError: ErrorCode.fenced_instance_id,
        group_errors.GroupMaxSizeReachedError: ErrorCode.group_max_size_reached,
        group_errors.OffsetMetadataTooLargeError: ErrorCode.offset_metadata_too_large,
        group_errors.InvalidCommitOffsetSizeError: ErrorCode.invalid_commit_offset_size,
        group_errors.GroupSubscribedToTopicError: ErrorCode.group_subscribed_to_topic,
        group_errors.NonEmptyGroupError: ErrorCode.non_empty_group,
        group_errors.GroupIdNotFoundError: ErrorCode.group_id_not_found,
        group_errors.UnstableOffsetCommitError: ErrorCode.unstable_offset_commit,
        group_errors.InvalidProducerEpochError: ErrorCode.invalid_producer_epoch,
        group_errors.InvalidProducerIdMappingError: ErrorCode.invalid_producer_id_mapping,
    }
)


# ---- replication wiring (issue 4) ------------------------------------------------------------
_CODES[replication_errors.NotEnoughReplicasAfterAppendError] = (
    ErrorCode.not_enough_replicas_after_append
)
_CODES[replication_errors.StaleControllerEpochError] = ErrorCode.stale_controller_epoch


# ---- controller fencing (issue 4) ---------------------------------------------------------------
_CODES[StaleBrokerEpochError] = ErrorCode.stale_broker_epoch
_CODES[ControllerMovedError] = ErrorCode.not_controller


# ---- leadership operations: ElectLeaders, partition reassignments (issue 4) --------------------
def _leadership_codes() -> None:
    from brokers import controller

    _CODES.update(
        {
            controller.ElectionNotNeededError: ErrorCode.election_not_needed,
            controller.PreferredLeaderNotAvailableError: ErrorCode.preferred_leader_not_available,
            controller.EligibleLeadersNotAvailableError: ErrorCode.eligible_leaders_not_available,
            controller.UnknownPartitionError: ErrorCode.unknown_topic_or_partition,
            controller.ReassignmentError: ErrorCode.invalid_replica_assignment,
            controller.NoReassignmentInProgressError: ErrorCode.no_reassignment_in_progress,
            controller.BrokerNotAvailableError: ErrorCode.broker_not_available,
        }
    )


_leadership_codes()


# ---- the open-file limit (issue 13) ------------------------------------------------------------
# Kafka's controller answers a request too large to carry out with POLICY_VIOLATION; the message
# names the limit and how many partitions it still allows.
_CODES[DescriptorLimitError] = ErrorCode.policy_violation


# ---- transactions (issue 14) -------------------------------------------------------------------
_CODES[log_errors.InvalidTxnStateError] = ErrorCode.invalid_txn_state
_CODES[log_errors.TransactionCoordinatorFencedError] = ErrorCode.transaction_coordinator_fenced
