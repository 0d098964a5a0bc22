"""The partition limit as the filters reserve it: refusals in order with the running count, a store
that cannot be asked refuses every creation (fail closed), settling counts only what the broker
created (nothing for validate_only), deletions give partitions back, and Metadata auto-creation
reserves only the topics the fleet lacks."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import (
    create_partitions,
    create_topics,
    delete_topics,
    metadata,
    partition_limit,
)
from tests.unit.gateway.filters.harness import (
    FakeFleet,
    FakePartitions,
    context,
    forwarded,
    replied,
    request,
    response,
    run,
)

pytestmark = pytest.mark.unit
V = 7  # CreateTopics


def _create(*sizes: int, validate_only: bool = False) -> Any:
    topics = tuple(
        request(
            create_topics,
            V,
            "CreatableTopic",
            name=f"t{i}",
            num_partitions=size,
            replication_factor=-1,
            assignments=(),
            configs=(),
        )
        for i, size in enumerate(sizes)
    )
    return request(
        create_topics,
        V,
        "CreateTopicsRequest",
        topics=topics,
        timeout=0,
        validate_only=validate_only,
    )


def _result(name: str, code: ErrorCode = ErrorCode.none) -> Any:
    return response(
        create_topics,
        V,
        "CreatableTopicResult",
        name=name,
        topic_id=None,
        error_code=code,
        error_message=None,
        topic_config_error_code=0,
        num_partitions=-1,
        replication_factor=-1,
        configs=(),
    )


def test_refusals_name_the_running_count_and_only_created_partitions_are_settled() -> None:
    fleet = FakeFleet(partitions=2)
    ledger = FakePartitions(fleet, limit=6)
    ctx = context(create_topics, V, fleet=fleet, partitions=ledger)
    outcome = forwarded(asyncio.run(run(create_topics, ctx, _create(3, 2, 1))))
    assert [t.name for t in outcome.request.topics] == ["acme_t0", "acme_t2"]
    answer = response(
        create_topics,
        V,
        "CreateTopicsResponse",
        topics=(_result("acme_t0"), _result("acme_t2", ErrorCode.topic_already_exists)),
    )
    shown = outcome.on_response(answer).topics
    assert [(t.name, t.error_code) for t in shown] == [
        ("t0", ErrorCode.none),
        ("t1", ErrorCode.policy_violation),
        ("t2", ErrorCode.topic_already_exists),
    ]
    assert shown[1].error_message == "tenant partition limit 6 reached: 5 in use, 2 requested"
    assert ledger.settled == [3]  # t2 was refused by the broker: its partition goes back


def test_validate_only_settles_nothing() -> None:
    ledger = FakePartitions(FakeFleet())
    ctx = context(create_topics, V, partitions=ledger)
    outcome = forwarded(asyncio.run(run(create_topics, ctx, _create(2, validate_only=True))))
    answer = response(create_topics, V, "CreateTopicsResponse", topics=(_result("acme_t0"),))
    outcome.on_response(answer)
    assert ledger.settled == [0]


@pytest.mark.parametrize("ledger", ["down", "missing"])
def test_without_the_store_nothing_is_created(ledger: str) -> None:
    fleet = FakeFleet()
    partitions = FakePartitions(fleet, unavailable=True)
    ctx = context(create_topics, V, fleet=fleet, partitions=partitions)
    if ledger == "missing":
        ctx.partitions = None
    shown = replied(asyncio.run(run(create_topics, ctx, _create(1)))).topics
    assert [(t.name, t.error_code) for t in shown] == [("t0", ErrorCode.unknown_server_error)]
    grow = request(
        create_partitions,
        3,
        "CreatePartitionsRequest",
        topics=(
            request(
                create_partitions, 3, "CreatePartitionsTopic", name="a", count=4, assignments=None
            ),
        ),
        timeout=0,
        validate_only=False,
    )
    ctx = context(create_partitions, 3, fleet=fleet, partitions=partitions)
    if ledger == "missing":
        ctx.partitions = None
    results = replied(asyncio.run(run(create_partitions, ctx, grow))).results
    assert [(r.name, r.error_code) for r in results] == [("a", ErrorCode.unknown_server_error)]


def test_deleted_topics_give_their_partitions_back() -> None:
    fleet = FakeFleet(topic_counts={"acme_a": 3, "acme_b": 2})
    ledger = FakePartitions(fleet)
    ctx = context(delete_topics, 5, fleet=fleet, partitions=ledger)
    req = request(delete_topics, 5, "DeleteTopicsRequest", topic_names=("a", "b"), timeout=0)
    outcome = forwarded(asyncio.run(run(delete_topics, ctx, req)))
    results = tuple(
        response(
            delete_topics,
            5,
            "DeletableTopicResult",
            name=name,
            error_code=code,
            error_message=None,
        )
        for name, code in (("acme_a", ErrorCode.none), ("acme_b", ErrorCode.request_timed_out))
    )
    outcome.on_response(response(delete_topics, 5, "DeleteTopicsResponse", responses=results))
    assert ledger.released == [3]


def test_metadata_auto_creation_reserves_only_the_missing_topics() -> None:
    fleet = FakeFleet(partitions=98, topic_counts={"acme_old": 4})
    ledger = FakePartitions(fleet)
    ctx = context(metadata, 9, fleet=fleet, partitions=ledger)
    topics = tuple(
        request(metadata, 9, "MetadataRequestTopic", name=n, topic_id=None) for n in ("old", "new")
    )
    req = request(
        metadata,
        9,
        "MetadataRequest",
        topics=topics,
        allow_auto_topic_creation=True,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    outcome = forwarded(asyncio.run(run(metadata, ctx, req)))
    assert outcome.request.allow_auto_topic_creation is True
    assert ledger.reserved == 1  # "old" exists: only "new" (one default partition) is reserved
    full = FakePartitions(FakeFleet(partitions=100))
    ctx = context(metadata, 9, fleet=full.fleet, partitions=full)
    outcome = forwarded(asyncio.run(run(metadata, ctx, req)))
    assert outcome.request.allow_auto_topic_creation is False


def _fail_after_forward(module: Any, ctx: Any, req: Any) -> None:
    """Forward `req`, then fail it (the answer never comes), and let the settlement run."""

    async def go() -> None:
        outcome = forwarded(await run(module, ctx, req))
        outcome.on_failure()
        while partition_limit._settling:
            await asyncio.gather(*list(partition_limit._settling))

    asyncio.run(go())


def test_an_answer_that_never_comes_settles_with_what_the_fleet_shows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(partition_limit, "DEFAULT_FAILURE_GRACE_S", 0.0)
    fleet = FakeFleet()
    ledger = FakePartitions(fleet, limit=10)
    ctx = context(create_topics, V, fleet=fleet, partitions=ledger)
    _fail_after_forward(create_topics, ctx, _create(3, 2))
    assert ledger.settled == [0]  # nothing was created: every partition goes back at once
    fleet.topic_counts["acme_t1"] = 2  # this time the broker made t1 before it went away
    _fail_after_forward(create_topics, ctx, _create(3, 2))
    assert ledger.settled == [0, 2]
    topics = tuple(
        request(metadata, 9, "MetadataRequestTopic", name=n, topic_id=None) for n in ("m1", "m2")
    )
    auto = request(
        metadata,
        9,
        "MetadataRequest",
        topics=topics,
        allow_auto_topic_creation=True,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    fresh = FakePartitions(fleet)
    _fail_after_forward(metadata, context(metadata, 9, fleet=fleet, partitions=fresh), auto)
    assert fresh.settled == [0]


def test_the_failure_settlement_waits_for_the_requests_own_deadline() -> None:
    assert partition_limit.grace_s(timedelta(seconds=2)) == 2.0
    assert partition_limit.grace_s(timedelta(minutes=5)) == partition_limit.MAX_FAILURE_GRACE_S
    assert partition_limit.grace_s(0) == partition_limit.DEFAULT_FAILURE_GRACE_S
    assert partition_limit.grace_s(None) == partition_limit.DEFAULT_FAILURE_GRACE_S
