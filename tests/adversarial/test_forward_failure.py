"""A creation whose broker answer never comes gives its partitions back without waiting 120 s.

Issue 21's leftover: a partition reservation (made in the tenant store before a CreateTopics is
forwarded: tests/adversarial/test_limits.py) was settled only by the broker's answer, so when
that answer never came — the broker stopped, the connection died, the client gave up — the
tenant's partitions stayed reserved until `partition.reservation.timeout.ms` (120 s): a tenant
at its limit could create nothing meanwhile. Defended (docs/security.md, "Limits and quotas"):
`Forward.on_failure` settles the reservation once the request's own timeout has passed, with
what the fleet shows was created. Checked against a real gateway, broker and tenant store: the
broker is stopped (SIGSTOP) while a kafka-python admin client's CreateTopics is in flight, the
client times out and goes away, the reservation is given back while the broker is still stopped;
the broker is then killed (it never makes the topic) and restarted, and the tenant, at its limit
again only if the reservation were still held, creates a topic of the same size at once.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tenancy.domain import DEFAULT_LIMITS
from tenancy.reservations import PartitionAllocation
from tests.gateway_stack import OPERATOR, GatewayStack
from tests.polling import wait_until

LIMIT = 3
RESERVATION_TIMEOUT_S = 120  # partition.reservation.timeout.ms's default: never waited for here
GIVEN_BACK_WITHIN_S = 40  # the request's 2 s timeout + the fleet check's 10 s + slack


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[GatewayStack]:
    with GatewayStack(tmp_path / "forward-failure") as started:
        with started.store() as store:
            store.update_tenant(
                "acme",
                limits=dataclasses.replace(DEFAULT_LIMITS, max_partitions=LIMIT),
                actor=OPERATOR,
            )
        yield started


def _create(stack: GatewayStack, name: str, partitions: int) -> None:
    admin = AdminClient(stack.client_config("acme"))
    futures = admin.create_topics([NewTopic(name, partitions)], operation_timeout=10)
    futures[name].result(timeout=30)


def _allocation(stack: GatewayStack) -> PartitionAllocation:
    with stack.store() as store:
        allocation = store.partition_allocation("acme")
    assert allocation is not None
    return allocation


def test_a_creation_the_broker_never_answers_gives_its_partitions_back(
    stack: GatewayStack,
) -> None:
    assert stack.broker is not None
    _create(stack, "first", 1)
    wait_until(
        lambda: _allocation(stack).in_use == 1, what="the first topic is settled", timeout=30
    )
    admin = AdminClient(stack.client_config("acme"))
    admin.list_topics(timeout=10)  # the controller is known while the broker still answers
    os.kill(stack.broker.pid, signal.SIGSTOP)
    try:
        lost = admin.create_topics([NewTopic("lost", 2)], operation_timeout=2, request_timeout=3)[
            "lost"
        ]
        with pytest.raises(KafkaException):  # the broker never answers: the client times out
            lost.result(timeout=30)
        del admin, lost  # and goes away (its connections close)
        gc.collect()
        assert _allocation(stack).reserved == 2, "the creation's partitions were reserved"
        wait_until(  # given back while the broker is still stopped, long before 120 s
            lambda: _allocation(stack).in_use == 1,
            what="the unanswered creation's partitions given back",
            timeout=GIVEN_BACK_WITHIN_S,
        )
        assert GIVEN_BACK_WITHIN_S < RESERVATION_TIMEOUT_S
    finally:
        stack.broker.kill()  # SIGKILL ends a stopped process too: it never makes "lost"
    stack.broker.restart()

    def created_again() -> bool:  # at its limit (1 + 2 + 2 > 3) if "lost" were still held
        try:
            _create(stack, "again", 2)
        except Exception as exc:
            assert "limit" not in str(exc), exc  # POLICY_VIOLATION: the reservation was held
            return False
        return True

    wait_until(created_again, what="the tenant creates again after the restart", timeout=60)
    assert _allocation(stack).in_use == LIMIT
