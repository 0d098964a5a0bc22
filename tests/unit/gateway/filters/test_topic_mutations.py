"""CreateTopics, DeleteTopics and CreatePartitions through the gateway: names both ways, ACL,
name-length, assignment, config and partition-limit refusals, the strict mutation quota and its
charges, collision messages replaced."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from brokers.wire.entities import make, request_module
from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import create_partitions, create_topics, delete_topics
from tests.unit.gateway.filters.harness import (
    FakeAccess,
    FakeBudget,
    FakeFleet,
    context,
    forwarded,
    replied,
    request,
    response,
    run,
    versions,
)

pytestmark = pytest.mark.unit


def _topic(version: int, name: str, partitions: int = 2, **fields: Any) -> Any:
    fields.setdefault("assignments", ())
    fields.setdefault("configs", ())
    return request(
        create_topics,
        version,
        "CreatableTopic",
        name=name,
        num_partitions=partitions,
        replication_factor=-1,
        **fields,
    )


def _create(version: int, *topics: Any, validate_only: bool = False) -> Any:
    return request(
        create_topics,
        version,
        "CreateTopicsRequest",
        topics=topics,
        timeout=0,
        validate_only=validate_only,
    )


def _created(
    version: int, name: str, code: ErrorCode = ErrorCode.none, message: str | None = None
) -> Any:
    configs: tuple[Any, ...] = ()
    if version >= 5:
        configs = (
            response(
                create_topics,
                version,
                "CreatableTopicConfigs",
                name="retention.ms",
                value="1",
                read_only=False,
                config_source=4,
                is_sensitive=False,
            ),
        )
    return response(
        create_topics,
        version,
        "CreatableTopicResult",
        name=name,
        topic_id=None,
        error_code=code,
        error_message=message,
        topic_config_error_code=0,
        num_partitions=2,
        replication_factor=1,
        configs=configs,
    )


@pytest.mark.parametrize("version", list(versions(create_topics)))
def test_create_topics_refusals_merge_in_order(version: int) -> None:
    budget = FakeBudget()
    ctx = context(
        create_topics,
        version,
        budget=budget,
        fleet=FakeFleet(partitions=90),
        access=FakeAccess(
            denied={("CREATE", "CLUSTER", "kafka-cluster"), ("CREATE", "TOPIC", "no")}
        ),
    )
    cfg = request(create_topics, version, "CreatableTopicConfig", name="log.dirs", value="/x")
    assign = request(
        create_topics, version, "CreatableReplicaAssignment", partition_index=0, broker_ids=(1,)
    )
    req = _create(
        version,
        _topic(version, "a"),
        _topic(version, "no"),
        _topic(version, "x" * 245),
        _topic(version, "m", assignments=(assign,)),
        _topic(version, "c", configs=(cfg,)),
        _topic(version, "big", 9),
        _topic(version, "b", -1),
    )
    outcome = forwarded(asyncio.run(run(create_topics, ctx, req)))
    assert [t.name for t in outcome.request.topics] == ["acme_a", "acme_b"]
    assert budget.charged == 3  # 2 + the default 1
    answer = response(
        create_topics,
        version,
        "CreateTopicsResponse",
        topics=(
            _created(
                version,
                "acme_b",
                ErrorCode.invalid_topic_exception,
                "Topic 'acme_b' collides with existing topic: acme_b_",
            ),
            _created(version, "bolt_z"),
            _created(version, "acme_a"),
        ),
    )
    shown = outcome.on_response(answer).topics
    assert [(t.name, t.error_code) for t in shown] == [
        ("a", ErrorCode.none),
        ("no", ErrorCode.topic_authorization_failed),
        ("x" * 245, ErrorCode.invalid_topic_exception),
        ("m", ErrorCode.invalid_request),
        ("c", ErrorCode.policy_violation),
        ("big", ErrorCode.policy_violation),
        ("b", ErrorCode.invalid_topic_exception),
    ]
    assert "at most 244 characters" in (shown[2].error_message or "")
    assert shown[5].error_message == "tenant partition limit 100 reached: 92 in use, 9 requested"
    assert "acme" not in (shown[6].error_message or "") and "collides" in (
        shown[6].error_message or ""
    )
    if version >= 5:
        assert shown[0].configs[0].config_source == 5  # a broker setting shown as a default


@pytest.mark.parametrize("version", list(versions(create_topics)))
def test_create_topics_refuses_what_the_budget_refuses_and_validate_only_is_free(
    version: int,
) -> None:
    """The budget says when a topic is refused (KIP-599's quota only from v6, the tenant's
    partition pacing on every version: `gateway.throttling.MutationBudgets`); the filter asks it
    on every version."""
    budget = FakeBudget(over=True)
    ctx = context(create_topics, version, budget=budget)
    outcome = asyncio.run(
        run(create_topics, ctx, _create(version, _topic(version, "a"), validate_only=True))
    )
    assert replied(outcome).topics[0].error_code == ErrorCode.throttling_quota_exceeded
    assert budget.charged == 0


def test_create_topics_config_bounds() -> None:
    ctx = context(create_topics, 7)
    big = request(
        create_topics, 7, "CreatableTopicConfig", name="max.message.bytes", value=str(2**21)
    )
    small = request(create_topics, 7, "CreatableTopicConfig", name="retention.ms", value="60000")
    answer = replied(
        asyncio.run(run(create_topics, ctx, _create(7, _topic(7, "a", configs=(small, big)))))
    )
    assert answer.topics[0].error_code == ErrorCode.invalid_config


def _delete_request(version: int, *names: str | None, ids: tuple[uuid.UUID, ...] = ()) -> Any:
    if version < 6:
        return request(delete_topics, version, "DeleteTopicsRequest", topic_names=names, timeout=0)
    module = request_module(delete_topics.API_KEY, version)
    states = [make(module, "DeleteTopicState", name=n, topic_id=None) for n in names]
    states += [make(module, "DeleteTopicState", name=None, topic_id=i) for i in ids]
    return request(delete_topics, version, "DeleteTopicsRequest", topics=tuple(states), timeout=0)


def _deleted_names(forwarded_request: Any) -> list[str | None]:
    if hasattr(forwarded_request, "topic_names"):
        return list(forwarded_request.topic_names)
    return [t.name for t in forwarded_request.topics]


def test_delete_topics_by_id_only_reaches_the_tenants_own_topics() -> None:
    """v6 (KIP-516): acme's id is forwarded as it is; bolt's id and an unknown one are
    UNKNOWN_TOPIC_ID here, with no name, exactly alike."""
    own, foreign, nobody = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    fleet = FakeFleet(topic_counts={"acme_a": 2}, ids={own: "acme_a", foreign: "bolt_x"})
    ctx = context(delete_topics, 6, budget=FakeBudget(), fleet=fleet)
    req = _delete_request(6, ids=(own, foreign, nobody))
    outcome = forwarded(asyncio.run(run(delete_topics, ctx, req)))
    assert [(t.name, t.topic_id) for t in outcome.request.topics] == [(None, own)]
    # One look-up for every id of the request, one for the partition counts: never per topic.
    assert fleet.lookups == [("ids", 3), ("counts", 1)]
    done = response(
        delete_topics, 6, "DeletableTopicResult",
        name="acme_a", topic_id=own, error_code=ErrorCode.none, error_message=None,
    )  # fmt: skip
    shown = outcome.on_response(
        response(delete_topics, 6, "DeleteTopicsResponse", responses=(done,))
    )
    assert [(t.name, t.topic_id, t.error_code) for t in shown.responses] == [
        ("a", own, ErrorCode.none),
        (None, foreign, ErrorCode.unknown_topic_id),
        (None, nobody, ErrorCode.unknown_topic_id),
    ]


@pytest.mark.parametrize("version", list(versions(delete_topics)))
def test_delete_topics(version: int) -> None:
    budget = FakeBudget()
    fleet = FakeFleet(topic_counts={"acme_a": 4})
    ctx = context(
        delete_topics,
        version,
        budget=budget,
        fleet=fleet,
        access=FakeAccess(denied={("DELETE", "TOPIC", "no")}),
    )
    req = _delete_request(version, "a", "no", "b")
    outcome = forwarded(asyncio.run(run(delete_topics, ctx, req)))
    assert _deleted_names(outcome.request) == ["acme_a", "acme_b"]
    assert budget.charged == 5  # 4 + 1 for the topic the fleet cannot count
    assert fleet.lookups == [("counts", 2)]  # both topics' counts in one look-up
    done = [
        response(
            delete_topics,
            version,
            "DeletableTopicResult",
            name=n,
            topic_id=None,
            error_code=ErrorCode.none,
            error_message=None,
        )
        for n in ("acme_b", "bolt_a", "acme_a")
    ]
    shown = outcome.on_response(
        response(delete_topics, version, "DeleteTopicsResponse", responses=tuple(done))
    )
    assert [(t.name, t.error_code) for t in shown.responses] == [
        ("a", ErrorCode.none),
        ("no", ErrorCode.topic_authorization_failed),
        ("b", ErrorCode.none),
    ]
    over = context(delete_topics, version, budget=FakeBudget(over=True))
    outcome_over = asyncio.run(run(delete_topics, over, req))
    assert replied(outcome_over).responses[0].error_code == ErrorCode.throttling_quota_exceeded


@pytest.mark.parametrize("version", list(versions(create_partitions)))
def test_create_partitions(version: int) -> None:
    budget = FakeBudget()
    fleet = FakeFleet(partitions=95, topic_counts={"acme_a": 2, "acme_big": 1})
    ctx = context(
        create_partitions,
        version,
        budget=budget,
        fleet=fleet,
        access=FakeAccess(denied={("ALTER", "TOPIC", "no")}),
    )
    assign = request(create_partitions, version, "CreatePartitionsAssignment", broker_ids=(1,))
    topics = (
        request(
            create_partitions, version, "CreatePartitionsTopic", name="a", count=5, assignments=None
        ),
        request(
            create_partitions,
            version,
            "CreatePartitionsTopic",
            name="no",
            count=5,
            assignments=None,
        ),
        request(
            create_partitions,
            version,
            "CreatePartitionsTopic",
            name="m",
            count=5,
            assignments=(assign,),
        ),
        request(
            create_partitions,
            version,
            "CreatePartitionsTopic",
            name="big",
            count=4,
            assignments=None,
        ),
    )
    req = request(
        create_partitions,
        version,
        "CreatePartitionsRequest",
        topics=topics,
        timeout=0,
        validate_only=False,
    )
    outcome = forwarded(asyncio.run(run(create_partitions, ctx, req)))
    assert [t.name for t in outcome.request.topics] == ["acme_a"]
    assert budget.charged == 3
    results = tuple(
        response(
            create_partitions,
            version,
            "CreatePartitionsTopicResult",
            name=n,
            error_code=ErrorCode.none,
            error_message=None,
        )
        for n in ("bolt_a", "acme_a")
    )
    shown = outcome.on_response(
        response(create_partitions, version, "CreatePartitionsResponse", results=results)
    )
    assert [(t.name, t.error_code) for t in shown.results] == [
        ("a", ErrorCode.none),
        ("no", ErrorCode.topic_authorization_failed),
        ("m", ErrorCode.invalid_request),
        ("big", ErrorCode.policy_violation),
    ]
    assert (
        shown.results[3].error_message
        == "tenant partition limit 100 reached: 98 in use, 3 requested"
    )
    strict = asyncio.run(
        run(
            create_partitions,
            context(create_partitions, version, budget=FakeBudget(over=True)),
            req,
        )
    )
    assert replied(strict).results[0].error_code == ErrorCode.throttling_quota_exceeded
