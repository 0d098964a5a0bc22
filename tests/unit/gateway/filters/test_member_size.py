"""A group member's state at its coordinator is bounded (`gateway/kafka/filters/member_size.py`):
JoinGroup protocols and instance id, a SyncGroup assignment and a KIP-848 subscription over 1 MiB,
or more than 32 protocols, are INVALID_REQUEST and never forwarded; at the limit they pass."""

from __future__ import annotations

import asyncio
import datetime
from dataclasses import replace
from typing import Any

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import consumer_group_heartbeat, join_group, sync_group
from gateway.kafka.filters.consumer_protocol import Subscription, build_subscription
from gateway.kafka.filters.member_size import (
    MAX_MEMBER_BYTES,
    MAX_PROTOCOLS,
    TOPIC_OVERHEAD_BYTES,
    join_group_charge,
    join_group_refusal,
)
from tests.unit.gateway.filters.harness import context, forwarded, replied, request, run
from tests.unit.gateway.filters.test_join_group import _join
from tests.unit.gateway.filters.test_sync_group import _sync

pytestmark = pytest.mark.unit
NAME = len("range")


def outcome(module: Any, version: int, req: Any) -> Any:
    return asyncio.run(run(module, context(module, version), req))


@pytest.mark.parametrize("version", [0, 5, 9])
def test_join_group_members_are_held_to_the_limit(version: int) -> None:
    at_limit = _join(version, "connect", b"x" * (MAX_MEMBER_BYTES - NAME))
    assert forwarded(outcome(join_group, version, at_limit)).request.group_id == "acme_g"
    over = _join(version, "connect", b"x" * (MAX_MEMBER_BYTES - NAME + 1))
    assert replied(outcome(join_group, version, over)).error_code == ErrorCode.invalid_request


def test_join_group_counts_the_instance_id_and_every_protocol() -> None:
    half: Any = _join(9, "connect", b"x" * (MAX_MEMBER_BYTES // 2 - NAME))
    two = replace(half, protocols=half.protocols * 2)
    forwarded(outcome(join_group, 9, two))
    static = replace(two, group_instance_id="i")
    assert replied(outcome(join_group, 9, static)).error_code == ErrorCode.invalid_request
    one: Any = _join(9, "connect", b"")
    many = replace(one, protocols=one.protocols * (MAX_PROTOCOLS + 1))
    assert replied(outcome(join_group, 9, many)).error_code == ErrorCode.invalid_request
    forwarded(outcome(join_group, 9, replace(many, protocols=many.protocols[:MAX_PROTOCOLS])))


@pytest.mark.parametrize("version", [0, 5])
def test_sync_group_assignments_are_held_to_the_limit(version: int) -> None:
    forwarded(outcome(sync_group, version, _sync(version, b"x" * MAX_MEMBER_BYTES, "connect")))
    over = _sync(version, b"x" * (MAX_MEMBER_BYTES + 1), "connect")
    assert replied(outcome(sync_group, version, over)).error_code == ErrorCode.invalid_request


def heartbeat(version: int, names: tuple[str, ...], rack: str | None = None) -> Any:
    return request(
        consumer_group_heartbeat,
        version,
        "ConsumerGroupHeartbeatRequest",
        group_id="g",
        member_id="m",
        member_epoch=0,
        instance_id=None,
        rack_id=rack,
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=names,
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=(),
    )


@pytest.mark.parametrize("version", [0, 1])
def test_a_kip_848_subscription_is_held_to_the_limit(version: int) -> None:
    # 1 MiB once each name carries the tenant's prefix (the coordinator's bytes)
    names = tuple("t" * (1024 - len("acme_")) for _ in range(MAX_MEMBER_BYTES // 1024))
    sent = forwarded(outcome(consumer_group_heartbeat, version, heartbeat(version, names)))
    assert len(sent.request.subscribed_topic_names) == len(names)
    answer = replied(outcome(consumer_group_heartbeat, version, heartbeat(version, names, "r")))
    assert answer.error_code == ErrorCode.invalid_request
    assert answer.error_message == (
        f"a member's group state of {MAX_MEMBER_BYTES + 1} bytes, more than {MAX_MEMBER_BYTES}"
    )


def _consumer_join(topics: tuple[str, ...]) -> Any:
    metadata = build_subscription(Subscription(0, topics, None, (), -1, None, b""))
    return _join(9, "consumer", metadata)


def test_a_join_is_measured_as_forwarded_with_the_tenant_s_prefixes() -> None:
    # 80,000 names of one character: 240 KB from the client, 640 KB with "acme_" each
    small = _consumer_join(tuple(str(i % 10) for i in range(80_000)))
    forwarded(outcome(join_group, 9, small))
    many = _consumer_join(tuple(str(i % 10) for i in range(200_000)))  # 600 KB -> 1.6 MB
    assert join_group_refusal(many) is None, "under the limit as the client sent it"
    assert replied(outcome(join_group, 9, many)).error_code == ErrorCode.invalid_request


def test_each_subscribed_topic_is_charged_its_overhead() -> None:
    sent = forwarded(outcome(join_group, 9, _consumer_join(("a", "b", "c"))))
    charge = join_group_charge(sent.request, "app")
    protocols = sum(len(p.name) + len(p.metadata) for p in sent.request.protocols)
    assert charge["join"] == protocols + 3 * TOPIC_OVERHEAD_BYTES
    assert charge["ids"] == len("m-1") + 3 * len("app")
