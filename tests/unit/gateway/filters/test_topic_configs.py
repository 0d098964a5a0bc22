"""The topic configs a tenant may set and their bounds (`topic_configs.refusal`): the allowlist
(POLICY_VIOLATION), and floors where a small value costs the whole fleet (INVALID_CONFIG): a file
per few records (`segment.*`), a compaction pass rewriting a log for every few bytes written
(`min.cleanable.dirty.ratio`, `max.compaction.lag.ms`), frames past the tenant's request size."""

from __future__ import annotations

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters.topic_configs import refusal
from tenancy.domain import DEFAULT_LIMITS

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("segment.bytes", "1048576"),
        ("segment.ms", "600000"),
        ("min.cleanable.dirty.ratio", "0.1"),
        ("min.cleanable.dirty.ratio", " 0.5 "),
        ("min.cleanable.dirty.ratio", "1"),
        ("max.compaction.lag.ms", "21600000"),
        ("max.compaction.lag.ms", "9223372036854775807"),
        ("min.compaction.lag.ms", "0"),  # larger lags only delay passes: no floor
        ("max.message.bytes", "1048576"),
        ("retention.ms", "-1"),  # storage is bounded by the tenant's max_storage_bytes
        ("cleanup.policy", None),  # a DELETE: checked by name only
    ],
)
def test_values_within_the_bounds_are_allowed(name: str, value: str | None) -> None:
    assert refusal([(name, value)], DEFAULT_LIMITS) is None


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("segment.bytes", "1024", "at least 1048576"),
        ("segment.ms", "1", "at least 600000"),
        ("min.cleanable.dirty.ratio", "0.01", "between 0.1 and 1"),
        ("min.cleanable.dirty.ratio", "0", "between 0.1 and 1"),
        ("min.cleanable.dirty.ratio", "nan", "between 0.1 and 1"),
        ("min.cleanable.dirty.ratio", "1.5", "between 0.1 and 1"),
        ("min.cleanable.dirty.ratio", "half", "not a number"),
        ("max.compaction.lag.ms", "1", "at least 21600000"),
        ("max.compaction.lag.ms", "3600000", "at least 21600000"),
        ("max.message.bytes", "104857600", "request size limit"),
    ],
)
def test_values_that_cost_the_fleet_are_invalid_config(name: str, value: str, says: str) -> None:
    found = refusal([("retention.ms", "1000"), (name, value)], DEFAULT_LIMITS)
    assert found is not None
    code, message = found
    assert code == ErrorCode.invalid_config
    assert name in message and says in message


def test_a_config_outside_the_allowlist_is_a_policy_violation() -> None:
    found = refusal([("unclean.leader.election.enable", "true")], DEFAULT_LIMITS)
    assert found is not None and found[0] == ErrorCode.policy_violation
