"""The HTTP edge of the policy stage: every produce refusal the policy can give maps to one
problem JSON (status, Confluent-style code), as the Kafka edge maps it to one error code."""

from __future__ import annotations

import pytest

from brokers.wire.errors import ErrorCode
from gateway.http.produce import _PROBLEMS, _problem
from gateway.policy import Reason, Refusal

pytestmark = pytest.mark.unit


def test_every_reason_has_a_problem() -> None:
    assert set(_PROBLEMS) == set(Reason)


@pytest.mark.parametrize(
    ("refusal", "status", "code", "says"),
    [
        (Refusal(Reason.INVALID_NAME, ErrorCode.invalid_topic_exception, "Topic name is illegal"),
         400, 40002, "'nl\\n': Topic name is illegal"),
        (Refusal(Reason.NOT_AUTHORIZED, ErrorCode.topic_authorization_failed), 403, 40301,
         "not authorized to WRITE topic 'nl\\n'"),
        (Refusal(Reason.TOO_LARGE, ErrorCode.message_too_large, "request of 9 bytes"), 413, 41301,
         "request of 9 bytes"),
        (Refusal(Reason.STORAGE_FULL, ErrorCode.policy_violation, "storage limit reached"), 403,
         40302, "storage limit reached"),
    ],
)  # fmt: skip
def test_refusal_to_problem(refusal: Refusal, status: int, code: int, says: str) -> None:
    problem = _problem(refusal, "nl\n")
    assert (problem.status, problem.body()["error_code"]) == (status, code)
    assert says in problem.body()["message"]
