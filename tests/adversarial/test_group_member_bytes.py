"""A tenant that parks many members in its consumer groups: each holds up to a MiB of protocol
metadata and a MiB of assignment at its coordinator (`member_size`) for up to 30 min without a
heartbeat, and Kafka bounds only each group's member count (`group.max.size`, unlimited by
default): measured straight through a gateway without the ledger, 100 members of 1 MB metadata
and 1 MB assignment in 100 groups grew the broker's RSS 51 -> 636 MB.

Defended (`gateway/kafka/member_ledger.py`, gateway setting `tenant.max.group.member.bytes`,
here 4 MiB): a JoinGroup that would take the tenant's members past it is GROUP_MAX_SIZE_REACHED
and never forwarded, another tenant's groups are not affected, and a member that leaves frees its
place for the tenant's real consumer group. A member let in by one gateway may not keep itself
alive through another (which would free its place at the first while the broker keeps it): its
Heartbeat, SyncGroup and OffsetCommit there are REBALANCE_IN_PROGRESS until it rejoins there; a
KIP-848 member is described at its coordinator there and charged, or asked to rejoin when it
does not fit.
Real broker and two `pier gateway`s, raw JoinGroup v9 / SyncGroup v5 / Heartbeat v4 /
OffsetCommit v8 / LeaveGroup v5 frames, then confluent-kafka consumer groups."""

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
from infra.gateway import start_gateway
from tests.e2e.gateway.sasl_wire import authenticate, login
from tests.e2e.raw_wire import RawConnection
from tests.gateway_stack import TEST_GATEWAY_SETTINGS, GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
TOPIC = "orders"
JOIN_GROUP, LEAVE_GROUP, SYNC_GROUP, HEARTBEAT, OFFSET_COMMIT = 11, 13, 14, 12, 8
NONE, REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED, GROUP_MAX_SIZE_REACHED = 0, 27, 79, 81
LIMIT = 4 << 20
SETTINGS = {"tenant.max.group.member.bytes": str(LIMIT)}
SIZE = 1_000_000  # four such members fit in LIMIT, a fifth does not
TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with GatewayStack(
        Path(tmp_path_factory.mktemp("member-bytes")),
        broker_config={"group.initial.rebalance.delay.ms": "0"},
        gateway_settings=SETTINGS,
    ) as s:
        for tenant in ("acme", "bolt"):
            admin = AdminClient(s.client_config(tenant))
            for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
                future.result(TIMEOUT_S)
            producer = Producer(s.client_config(tenant))
            producer.produce(TOPIC, b"hello")
            assert producer.flush(TIMEOUT_S) == 0
        yield s


def join(wire: RawConnection, group: str, member_id: str) -> Any:
    module = request_module(JOIN_GROUP, 9)
    protocol = make(module, "JoinGroupRequestProtocol", name="p", metadata=b"x" * SIZE)
    request = make(
        module,
        "JoinGroupRequest",
        group_id=group,
        session_timeout=datetime.timedelta(seconds=60),
        rebalance_timeout=datetime.timedelta(seconds=60),
        member_id=member_id,
        group_instance_id=None,
        protocol_type="connect",
        protocols=(protocol,),
        reason=None,
    )
    return wire.call(request, response_module(JOIN_GROUP, 9).JoinGroupResponse, TIMEOUT_S)


def member(wire: RawConnection, group: str) -> str | None:
    """A member of 1 MB in `group` (the KIP-394 join, then the rejoin); None when refused."""
    first = join(wire, group, "")
    if first.error_code == GROUP_MAX_SIZE_REACHED:
        return None
    assert first.error_code == MEMBER_ID_REQUIRED
    assert join(wire, group, first.member_id).error_code == NONE
    return str(first.member_id)


def leave(wire: RawConnection, group: str, member_id: str) -> Any:
    module = request_module(LEAVE_GROUP, 5)
    identity = make(
        module, "MemberIdentity", member_id=member_id, group_instance_id=None, reason=None
    )
    request = make(module, "LeaveGroupRequest", group_id=group, members=(identity,))
    return wire.call(request, response_module(LEAVE_GROUP, 5).LeaveGroupResponse, TIMEOUT_S)


def reads(stack: GatewayStack, tenant: str) -> None:
    """A confluent-kafka consumer group of `tenant` reads its topic."""
    config = {
        **stack.client_config(tenant),
        "group.id": f"real-{uuid.uuid4().hex[:6]}",
        "auto.offset.reset": "earliest",
    }
    consumer = Consumer(config)
    consumer.subscribe([TOPIC])
    try:

        def arrived() -> bool:
            return any(not m.error() for m in consumer.consume(10, 0.5))

        wait_until(arrived, what=f"{tenant}'s consumer group reads", timeout=TIMEOUT_S)
    finally:
        consumer.close()


def test_members_past_the_tenant_s_bytes_are_refused_and_a_leave_frees_a_place(
    stack: GatewayStack,
) -> None:
    with login(stack, "acme") as wire:
        held = {f"g{i}": member(wire, f"g{i}") for i in range(5)}
        assert [g for g, m in held.items() if m is None] == ["g4"], held
        reads(stack, "bolt")  # another tenant's groups are not affected
        left = leave(wire, "g0", held["g0"] or "")
        assert left.error_code == NONE and left.members[0].error_code == NONE
        reads(stack, "acme")  # the place the leave freed takes a real consumer group


def beat(wire: RawConnection, group: str, member_id: str, generation: int) -> int:
    module = request_module(HEARTBEAT, 4)
    request = make(
        module, "HeartbeatRequest", group_id=group, generation_id=generation,
        member_id=member_id, group_instance_id=None,
    )  # fmt: skip
    return int(wire.call(request, response_module(HEARTBEAT, 4).HeartbeatResponse).error_code)


def sync(wire: RawConnection, group: str, member_id: str, generation: int) -> int:
    module = request_module(SYNC_GROUP, 5)
    request = make(
        module, "SyncGroupRequest", group_id=group, generation_id=generation,
        member_id=member_id, group_instance_id=None, protocol_type="connect",
        protocol_name="p", assignments=(),
    )  # fmt: skip
    answer = wire.call(request, response_module(SYNC_GROUP, 5).SyncGroupResponse, TIMEOUT_S)
    return int(answer.error_code)


def commit(wire: RawConnection, group: str, member_id: str, generation: int) -> set[int]:
    module = request_module(OFFSET_COMMIT, 8)
    partition = make(
        module, "OffsetCommitRequestPartition", partition_index=0, committed_offset=0,
        committed_leader_epoch=-1, committed_metadata=None,
    )  # fmt: skip
    topic = make(module, "OffsetCommitRequestTopic", name=TOPIC, partitions=(partition,))
    request = make(
        module, "OffsetCommitRequest", group_id=group, generation_id_or_member_epoch=generation,
        member_id=member_id, group_instance_id=None, topics=(topic,),
    )  # fmt: skip
    answer = wire.call(request, response_module(OFFSET_COMMIT, 8).OffsetCommitResponse)
    return {int(p.error_code) for t in answer.topics for p in t.partitions}


def test_a_member_let_in_by_one_gateway_rejoins_before_another_keeps_it_alive(
    stack: GatewayStack, tmp_path: Path
) -> None:
    assert stack.broker is not None
    other = start_gateway(
        tmp_path / "other-gateway",
        stack.broker.bootstrap,
        stack.db_url,
        node_ids=[stack.broker.node_id],
        properties={**TEST_GATEWAY_SETTINGS, **SETTINGS},
    )
    try:
        with login(stack, "acme") as here, RawConnection(other.host, other.port) as there:
            there.api_versions()
            authenticate(there, stack.credentials["acme"])
            first = join(here, "roaming", "")
            assert first.error_code == MEMBER_ID_REQUIRED
            member_id = first.member_id
            joined = join(here, "roaming", member_id)
            assert joined.error_code == NONE
            generation = joined.generation_id
            assert sync(here, "roaming", member_id, generation) == NONE
            assert beat(here, "roaming", member_id, generation) == NONE
            assert beat(there, "roaming", member_id, generation) == REBALANCE_IN_PROGRESS
            assert sync(there, "roaming", member_id, generation) == REBALANCE_IN_PROGRESS
            assert commit(there, "roaming", member_id, generation) == {REBALANCE_IN_PROGRESS}
            rejoined = join(there, "roaming", member_id)  # charged at the other gateway now
            assert rejoined.error_code == NONE
            assert sync(there, "roaming", member_id, rejoined.generation_id) == NONE
            assert beat(there, "roaming", member_id, rejoined.generation_id) == NONE
            assert commit(there, "roaming", member_id, rejoined.generation_id) == {NONE}
    finally:
        other.stop()


CONSUMER_HEARTBEAT = 68
UNKNOWN_MEMBER_ID = 25


def consumer_beat(
    wire: RawConnection, group: str, member_id: str, epoch: int, names: tuple[str, ...] | None
) -> Any:
    """A KIP-848 ConsumerGroupHeartbeat v0 (epoch 0 joins; names None: unchanged)."""
    request = make(
        request_module(CONSUMER_HEARTBEAT, 0),
        "ConsumerGroupHeartbeatRequest",
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=60),
        subscribed_topic_names=names,
        server_assignor=None,
        topic_partitions=None if names is None else (),
    )
    answer = response_module(CONSUMER_HEARTBEAT, 0).ConsumerGroupHeartbeatResponse
    return wire.call(request, answer, TIMEOUT_S)


def test_a_kip_848_member_moving_to_another_gateway_is_charged_there_if_it_fits(
    stack: GatewayStack, tmp_path: Path
) -> None:
    """A KIP-848 member's heartbeats reaching a gateway process it did not join through (a
    restart, another worker) are not asked to rejoin (which would cost it its partitions): that
    gateway describes the member at its coordinator and charges it from then on, if the tenant
    has room there; one that does not fit is asked to rejoin (UNKNOWN_MEMBER_ID) as before."""
    assert stack.broker is not None
    gateways = [
        start_gateway(
            tmp_path / name,
            stack.broker.bootstrap,
            stack.db_url,
            node_ids=[stack.broker.node_id],
            properties={**TEST_GATEWAY_SETTINGS, **SETTINGS},
        )
        for name in ("a", "b")
    ]
    try:
        with (
            RawConnection(gateways[0].host, gateways[0].port) as here,
            RawConnection(gateways[1].host, gateways[1].port) as there,
        ):
            for wire in (here, there):
                wire.api_versions()
                authenticate(wire, stack.credentials["acme"])
            big = tuple(f"{i:04d}".ljust(200, "t") for i in range(1000))  # ≈ 330 KB charged
            joined = {
                name: consumer_beat(here, f"k-{name}", "", 0, names)
                for name, names in (("small", (TOPIC,)), ("big", big))
            }
            assert {name: a.error_code for name, a in joined.items()} == {"small": 0, "big": 0}
            for i in range(4):  # four 1 MB members: the other gateway has ~190 KB left
                assert member(there, f"full-{i}") is not None
            small, large = joined["small"], joined["big"]
            moved = consumer_beat(there, "k-small", small.member_id, small.member_epoch, None)
            assert moved.error_code == NONE, "described at its coordinator and charged here"
            again = consumer_beat(there, "k-small", small.member_id, moved.member_epoch, None)
            assert again.error_code == NONE
            refused = consumer_beat(there, "k-big", large.member_id, large.member_epoch, None)
            assert refused.error_code == UNKNOWN_MEMBER_ID, "no room for it there: it rejoins"
            stays = consumer_beat(here, "k-big", large.member_id, large.member_epoch, None)
            assert stays.error_code == NONE, "where it joined it beats on"
    finally:
        for gateway in gateways:
            gateway.stop()
