"""A tenant that parks large members in its consumer groups: a JoinGroup's protocol metadata, a
static member's instance id and the assignments a leader sends are held by the group coordinator
for the member's life (up to 30 min without a heartbeat), and Kafka bounds them only by the frame
(here 32 MiB): a few thousand such members would exhaust a broker that every tenant shares.

Defended (`gateway/kafka/filters/member_size.py`): a member holding more than 1 MiB, or a
JoinGroup offering more than 32 protocols, is INVALID_REQUEST and never forwarded; the
connection stays usable and the tenant's real consumer groups work. Real broker and `pier
gateway`, raw JoinGroup v9 / SyncGroup v5 frames, then a confluent-kafka consumer group."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from brokers.wire.entities import make, request_module, response_module
from gateway.kafka.filters.member_size import MAX_MEMBER_BYTES, MAX_PROTOCOLS
from tests.e2e.gateway.sasl_wire import login
from tests.e2e.raw_wire import RawConnection
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
TENANT, TOPIC, GROUP = "acme", "orders", "big-members"
JOIN_GROUP, SYNC_GROUP = 11, 14
INVALID_REQUEST = 42
TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with GatewayStack(Path(tmp_path_factory.mktemp("members"))) as s:
        admin = AdminClient(s.client_config(TENANT))
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            future.result(TIMEOUT_S)
        yield s


def join(wire: RawConnection, protocols: list[tuple[str, bytes]]) -> Any:
    module = request_module(JOIN_GROUP, 9)
    request = make(
        module,
        "JoinGroupRequest",
        group_id=GROUP,
        session_timeout=datetime.timedelta(seconds=30),
        rebalance_timeout=datetime.timedelta(seconds=30),
        member_id="",
        group_instance_id=None,
        protocol_type="connect",
        protocols=tuple(
            make(module, "JoinGroupRequestProtocol", name=name, metadata=metadata)
            for name, metadata in protocols
        ),
        reason=None,
    )
    return wire.call(request, response_module(JOIN_GROUP, 9).JoinGroupResponse, TIMEOUT_S)


def sync(wire: RawConnection, assignment: bytes) -> Any:
    module = request_module(SYNC_GROUP, 5)
    entry = make(module, "SyncGroupRequestAssignment", member_id="m", assignment=assignment)
    request = make(
        module,
        "SyncGroupRequest",
        group_id=GROUP,
        generation_id=1,
        member_id="m",
        group_instance_id=None,
        protocol_type="connect",
        protocol_name="p",
        assignments=(entry,),
    )
    return wire.call(request, response_module(SYNC_GROUP, 5).SyncGroupResponse, TIMEOUT_S)


def test_members_over_the_limit_are_refused_and_real_groups_work(stack: GatewayStack) -> None:
    oversized = b"x" * (MAX_MEMBER_BYTES + 1)
    with login(stack, TENANT) as wire:
        assert join(wire, [("p", oversized)]).error_code == INVALID_REQUEST
        many = [(f"p{i}", b"") for i in range(MAX_PROTOCOLS + 1)]
        assert join(wire, many).error_code == INVALID_REQUEST
        assert sync(wire, oversized).error_code == INVALID_REQUEST
        # The same connection goes on: a member of ordinary size reaches the coordinator
        # (MEMBER_ID_REQUIRED, 79: the first step of every JoinGroup since v4).
        assert join(wire, [("p", b"small")]).error_code == 79
    producer = Producer(stack.client_config(TENANT))
    producer.produce(TOPIC, b"after")
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer(
        {
            **stack.client_config(TENANT),
            "group.id": f"real-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([TOPIC])
    seen: list[bytes] = []
    try:

        def arrived() -> bool:
            seen.extend(m.value() or b"" for m in consumer.consume(10, 0.5) if not m.error())
            return b"after" in seen

        wait_until(arrived, what="a consumer group reads through the gateway", timeout=TIMEOUT_S)
    finally:
        consumer.close()
