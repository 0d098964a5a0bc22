"""The tenant HTTP API's errors: one exception type, rendered as Confluent's error JSON.

Owns: `ApiError` (HTTP status, Confluent `error_code`, message) and the mapping from Kafka error
codes to it (`from_kafka`). Confluent's REST Proxy answers `{"error_code": <int>, "message": ...}`
with an `error_code` that is the HTTP status, or the status followed by two digits for a finer
cause (40401 topic not found, 40403 consumer instance not found, 42201 invalid embedded data,
…); the v2 API uses the same shape (documented as `application/problem+json`-compatible in
docs/gateway-http.md: `type`/`title` are absent, the pair is the body). Messages never carry a
fleet name (callers pass names through `TenantNamespace.scrub` or use the tenant's own names).
Pure; thread-safe.
"""

from __future__ import annotations

from typing import Any

from brokers.wire.errors import ErrorCode

# Confluent's finer codes (io.confluent.kafkarest.Errors).
TOPIC_NOT_FOUND = 40401
PARTITION_NOT_FOUND = 40402
CONSUMER_INSTANCE_NOT_FOUND = 40403
GROUP_NOT_FOUND = 40404
CONSUMER_FORMAT_MISMATCH = 40601
INVALID_CONSUMER_CONFIG = 42204
CONSUMER_ALREADY_EXISTS = 40902
CONSUMER_ALREADY_SUBSCRIBED = 40903
UNPROCESSABLE = 42201  # bad embedded data, or a request the broker refused as invalid
KAFKA_ERROR = 50002
KAFKA_RETRIABLE = 50003


class ApiError(Exception):
    def __init__(
        self, status: int, message: str, error_code: int | None = None, retry_after_s: int = 0
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code if error_code is not None else status
        self.message = message
        self.retry_after_s = retry_after_s

    def body(self) -> dict[str, Any]:
        return {"error_code": self.error_code, "message": self.message}


_BY_KAFKA: dict[ErrorCode, tuple[int, int]] = {
    ErrorCode.unknown_topic_or_partition: (404, TOPIC_NOT_FOUND),
    ErrorCode.topic_authorization_failed: (403, 403),
    ErrorCode.group_authorization_failed: (403, 403),
    ErrorCode.cluster_authorization_failed: (403, 403),
    ErrorCode.transactional_id_authorization_failed: (403, 403),
    ErrorCode.topic_already_exists: (409, 40002),
    ErrorCode.invalid_topic_exception: (400, 40002),
    ErrorCode.invalid_partitions: (400, 40002),
    ErrorCode.invalid_replication_factor: (400, 40002),
    ErrorCode.invalid_config: (400, 40002),
    ErrorCode.invalid_request: (400, 40002),
    ErrorCode.policy_violation: (400, 40002),
    ErrorCode.message_too_large: (413, 413),
    ErrorCode.record_list_too_large: (413, 413),
    ErrorCode.throttling_quota_exceeded: (429, 429),
    ErrorCode.group_id_not_found: (404, GROUP_NOT_FOUND),
    ErrorCode.non_empty_group: (409, 409),
    ErrorCode.unknown_member_id: (409, 409),
    ErrorCode.illegal_generation: (409, 409),
    ErrorCode.rebalance_in_progress: (409, 409),
    ErrorCode.offset_out_of_range: (416, 416),
}


def from_kafka(code: int, context: str, message: str | None = None) -> ApiError:
    """The HTTP answer for a Kafka error code (`context` names the tenant's resource)."""
    error = ErrorCode(code)
    status, finer = _BY_KAFKA.get(error, (0, 0))
    text = f"{context}: {error.name}" + (f" ({message})" if message else "")
    if status:
        return ApiError(status, text, finer)
    if getattr(error, "retriable", False) or error in (
        ErrorCode.not_leader_or_follower,
        ErrorCode.leader_not_available,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.not_coordinator,
        ErrorCode.request_timed_out,
        ErrorCode.not_enough_replicas,
    ):
        return ApiError(503, text, KAFKA_RETRIABLE, retry_after_s=1)
    return ApiError(500, text, KAFKA_ERROR)


def from_client(error: Exception, context: str) -> ApiError:
    """The HTTP answer for a fleet-client failure (`brokers.client.errors`): a topic the fleet
    does not know is 404, a broker's error code is mapped by `from_kafka`, anything else (no
    broker answered in time) is 503 with `Retry-After`. Messages never carry fleet names."""
    from brokers.client.errors import BrokerResponseError, UnknownTopicError

    if isinstance(error, UnknownTopicError):
        return ApiError(404, f"{context}: topic not found", TOPIC_NOT_FOUND)
    if isinstance(error, BrokerResponseError):
        return from_kafka(error.code, context)
    return ApiError(503, f"the fleet did not answer: {type(error).__name__}", KAFKA_RETRIABLE, 1)
