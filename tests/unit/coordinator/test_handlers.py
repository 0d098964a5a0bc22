"""The group APIs' handlers over a real standalone Broker (no listener): every served version's
response must encode and decode losslessly, and carry the coordinator's answer."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from kio.serial import entity_reader

from brokers.app.runtime import Broker
from brokers.app.standalone import build_standalone
from brokers.common.clock import ManualClock
from brokers.common.config import BrokerConfig
from brokers.coordinator.consumer_protocol import encode_subscription
from brokers.coordinator.offsets_topic import OFFSETS_TOPIC
from brokers.server.context import RequestContext
from brokers.server.routes import RouteTable
from brokers.wire.errors import ErrorCode
from brokers.wire.headers import RequestHeader
from brokers.wire.messages import encode_entity
from tests.unit.handlers.admin_harness import entity

pytestmark = pytest.mark.unit
FIND, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST = 10, 11, 12, 13, 14, 15, 16
COMMIT, FETCH, DELETE_GROUPS, OFFSET_DELETE = 8, 9, 42, 47
SUB = encode_subscription(["t"])


@dataclasses.dataclass
class Api:
    broker: Broker
    routes: RouteTable
    clock: ManualClock

    async def call(self, api_key: int, version: int, name: str, **fields: Any) -> Any:
        route = self.routes.get(api_key)
        assert route is not None and route.serves(version)
        request = entity(api_key, version, name, **fields)
        ctx = RequestContext(RequestHeader(api_key, version, 1, "tester"), "10.0.0.1", "c1")
        response: Any = await route.handler(ctx, request)
        assert type(response).__version__ == version
        decoded, _ = entity_reader(type(response))(encode_entity(response), 0)
        assert decoded == response
        return response

    def tick(self, ms: int = 0) -> None:
        self.clock.advance(ms)
        self.broker.groups.coordinator.tick()


@asynccontextmanager
async def api(tmp_path: Path, extra: Mapping[str, str] | None = None) -> AsyncIterator[Api]:
    clock = ManualClock(time_ms=1_700_000_000_000)
    properties = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}
    properties.update(extra or {})
    config = BrokerConfig(data_dir=tmp_path / "data", port=0, properties=properties)
    broker = build_standalone(config, clock=clock)
    broker.log_manager.startup()
    broker.replicas.startup()
    broker.topics.load()
    broker.topics.create_topic("t", 2, 1, {})
    broker.groups.start()
    await broker.groups.loaded()
    try:
        yield Api(broker, broker.routes, clock)
    finally:
        await broker.groups.stop()
        broker.log_manager.shutdown()


def ms(value: int) -> Any:
    import datetime

    return datetime.timedelta(milliseconds=value)


async def join(a: Api, version: int, member_id: str = "", **extra: Any) -> Any:
    protocol = entity(JOIN, version, "JoinGroupRequestProtocol", name="range", metadata=SUB)
    return await a.call(
        JOIN, version, "JoinGroupRequest", group_id="g", session_timeout=ms(10_000),
        rebalance_timeout=ms(20_000), member_id=member_id, group_instance_id=None,
        protocol_type="consumer", protocols=(protocol,), reason=None, **extra,
    )  # fmt: skip


async def joined_member(a: Api, version: int = 9) -> Any:
    member_id = ""
    if version >= 4:  # KIP-394: a first round trip hands out the member id
        first = await join(a, version)
        assert first.error_code == ErrorCode.member_id_required
        member_id = first.member_id
    parked = asyncio.ensure_future(join(a, version, member_id))
    await asyncio.sleep(0)
    a.tick()
    a.tick()
    return await parked


def test_find_coordinator_every_version_and_creates_the_offsets_topic(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with api(tmp_path) as a:
            for version in range(4):
                found = await a.call(FIND, version, "FindCoordinatorRequest", key="g", key_type=0)
                assert (found.error_code, found.node_id) == (ErrorCode.none, 0)
            batch = await a.call(
                FIND, 4, "FindCoordinatorRequest", key_type=0, coordinator_keys=("a", "b")
            )
            assert [c.key for c in batch.coordinators] == ["a", "b"]
            assert all(c.error_code == ErrorCode.none for c in batch.coordinators)
            txn = await a.call(
                FIND, 6, "FindCoordinatorRequest", key_type=1, coordinator_keys=("x",)
            )
            assert (txn.coordinators[0].error_code, txn.coordinators[0].node_id) == (
                ErrorCode.none,
                0,
            )  # key type 1: the leader of the id's __transaction_state partition
            odd = await a.call(FIND, 3, "FindCoordinatorRequest", key="g", key_type=9)
            assert odd.error_code == ErrorCode.invalid_request
            topic = a.broker.metadata.topic(OFFSETS_TOPIC)
            assert topic is not None and len(topic.partitions) == 3 and topic.is_internal
            assert topic.configs["cleanup.policy"] == "compact"
            assert topic.configs["segment.bytes"] == str(100 * 1024 * 1024)

    asyncio.run(scenario())


@pytest.mark.parametrize("version", [0, 3, 4, 6, 7, 9])
def test_join_sync_heartbeat_leave_by_version(tmp_path: Path, version: int) -> None:
    async def scenario() -> None:
        async with api(tmp_path) as a:
            joined = await joined_member(a, version)
            assert joined.error_code == ErrorCode.none and joined.generation_id == 1
            assert joined.leader == joined.member_id and len(joined.members) == 1
            sync_version = min(version, 5)
            assignment = entity(
                SYNC, sync_version, "SyncGroupRequestAssignment",
                member_id=joined.member_id, assignment=b"A",
            )  # fmt: skip
            synced = await a.call(
                SYNC, sync_version, "SyncGroupRequest", group_id="g", generation_id=1,
                member_id=joined.member_id, group_instance_id=None, protocol_type="consumer",
                protocol_name="range", assignments=(assignment,),
            )  # fmt: skip
            assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"A")
            beat_version = min(version, 4)
            beat = await a.call(
                HEARTBEAT, beat_version, "HeartbeatRequest", group_id="g", generation_id=1,
                member_id=joined.member_id, group_instance_id=None,
            )  # fmt: skip
            assert beat.error_code == ErrorCode.none
            leave_version = min(version, 5)
            if leave_version >= 3:
                who = entity(
                    LEAVE, leave_version, "MemberIdentity",
                    member_id=joined.member_id, group_instance_id=None, reason=None,
                )  # fmt: skip
                left = await a.call(
                    LEAVE, leave_version, "LeaveGroupRequest", group_id="g", members=(who,)
                )
                assert [m.error_code for m in left.members] == [ErrorCode.none]
            else:
                left = await a.call(
                    LEAVE,
                    leave_version,
                    "LeaveGroupRequest",
                    group_id="g",
                    member_id=joined.member_id,
                )
            assert left.error_code == ErrorCode.none

    asyncio.run(scenario())


def test_join_errors_use_empty_protocol_strings_before_v7(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with api(tmp_path) as a:
            old = await join(a, 6)
            assert old.error_code == ErrorCode.member_id_required and old.protocol_name == ""
            new = await join(a, 7)
            assert new.protocol_name is None and new.protocol_type is None

    asyncio.run(scenario())


def _commit_topic(version: int, topic: str, partition: int, offset: int) -> Any:
    p = entity(
        COMMIT, version, "OffsetCommitRequestPartition", partition_index=partition,
        committed_offset=offset, committed_leader_epoch=5, committed_metadata="md",
    )  # fmt: skip
    return entity(COMMIT, version, "OffsetCommitRequestTopic", name=topic, partitions=(p,))


@pytest.mark.parametrize("version", [2, 5, 8, 9])
def test_offset_commit_and_fetch(tmp_path: Path, version: int) -> None:
    async def scenario() -> None:
        async with api(tmp_path) as a:
            committed = await a.call(
                COMMIT, version, "OffsetCommitRequest", group_id="s",
                generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                retention_time=ms(-1),
                topics=(_commit_topic(version, "t", 1, 42), _commit_topic(version, "nope", 0, 1)),
            )  # fmt: skip
            codes = [p.error_code for t in committed.topics for p in t.partitions]
            assert codes == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]
            fetch_version = min(version, 7)
            wanted = entity(
                FETCH, fetch_version, "OffsetFetchRequestTopic", name="t", partition_indexes=(0, 1)
            )
            fetched = await a.call(
                FETCH, fetch_version, "OffsetFetchRequest", group_id="s", topics=(wanted,),
                require_stable=True,
            )  # fmt: skip
            offsets = [
                (p.partition_index, p.committed_offset) for p in fetched.topics[0].partitions
            ]
            assert offsets == [(0, -1), (1, 42)]
            if fetch_version >= 5:
                assert fetched.topics[0].partitions[1].committed_leader_epoch == (
                    5 if version >= 6 else -1
                )

    asyncio.run(scenario())


def test_offset_fetch_v1_errors_per_partition_and_v8_groups(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with api(tmp_path) as a:
            wanted = entity(FETCH, 1, "OffsetFetchRequestTopic", name="t", partition_indexes=(0,))
            bad = await a.call(FETCH, 1, "OffsetFetchRequest", group_id="", topics=(wanted,))
            assert bad.topics[0].partitions[0].error_code == ErrorCode.invalid_group_id
            await a.call(
                COMMIT, 9, "OffsetCommitRequest", group_id="x", generation_id_or_member_epoch=-1,
                member_id="", group_instance_id=None, topics=(_commit_topic(9, "t", 0, 7),),
            )  # fmt: skip
            groups = tuple(
                entity(FETCH, 8, "OffsetFetchRequestGroup", group_id=g, topics=None)
                for g in ("x", "y", "")
            )
            many = await a.call(FETCH, 8, "OffsetFetchRequest", groups=groups, require_stable=False)
            assert [g.group_id for g in many.groups] == ["x", "y", ""]
            assert many.groups[0].topics[0].partitions[0].committed_offset == 7
            assert many.groups[1].topics == ()
            assert many.groups[2].error_code == ErrorCode.invalid_group_id
            null_topics = await a.call(FETCH, 2, "OffsetFetchRequest", group_id="x", topics=None)
            assert null_topics.topics[0].name == "t"

    asyncio.run(scenario())


def test_describe_list_delete_and_offset_delete(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with api(tmp_path) as a:
            joined = await joined_member(a)
            await a.call(
                COMMIT, 9, "OffsetCommitRequest", group_id="simple",
                generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                topics=(_commit_topic(9, "t", 0, 3),),
            )  # fmt: skip
            described = await a.call(
                DESCRIBE, 5, "DescribeGroupsRequest", groups=("g", "nobody"),
                include_authorized_operations=True,
            )  # fmt: skip
            g, nobody = described.groups
            assert (g.group_state, g.protocol_type) == ("CompletingRebalance", "consumer")
            assert g.members[0].member_id == joined.member_id
            assert g.members[0].client_host == "/10.0.0.1" and g.members[0].client_id == "tester"
            assert g.authorized_operations != -(2**31)
            assert (nobody.error_code, nobody.group_state) == (ErrorCode.none, "Dead")
            v6 = await a.call(
                DESCRIBE, 6, "DescribeGroupsRequest", groups=("nobody",),
                include_authorized_operations=False,
            )  # fmt: skip
            assert v6.groups[0].error_code == ErrorCode.group_id_not_found
            listed = await a.call(LIST, 4, "ListGroupsRequest", states_filter=("EMPTY",))
            assert [(x.group_id, x.group_state) for x in listed.groups] == [("simple", "Empty")]
            typed = await a.call(
                LIST, 5, "ListGroupsRequest", states_filter=(), types_filter=("consumer",)
            )
            assert typed.groups == ()
            everything = await a.call(LIST, 0, "ListGroupsRequest")
            assert {x.group_id for x in everything.groups} == {"g", "simple"}
            part = entity(OFFSET_DELETE, 0, "OffsetDeleteRequestPartition", partition_index=0)
            topics = tuple(
                entity(OFFSET_DELETE, 0, "OffsetDeleteRequestTopic", name=n, partitions=(part,))
                for n in ("t", "gone")
            )
            deleted = await a.call(
                OFFSET_DELETE, 0, "OffsetDeleteRequest", group_id="simple", topics=topics
            )
            codes = [t.partitions[0].error_code for t in deleted.topics]
            assert codes == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]
            removed = await a.call(
                DELETE_GROUPS, 2, "DeleteGroupsRequest", groups_names=("g", "simple", "nobody")
            )
            assert [r.error_code for r in removed.results] == [
                ErrorCode.non_empty_group,
                ErrorCode.none,
                ErrorCode.group_id_not_found,
            ]

    asyncio.run(scenario())


CONSUMER_HEARTBEAT = 68


@pytest.mark.parametrize("version", [0, 1])
def test_consumer_group_heartbeat_joins_beats_and_leaves_by_version(
    tmp_path: Path, version: int
) -> None:
    """KIP-848 heartbeats of every served version: v0 (Kafka 3.7-3.9's clients) has no
    SubscribedTopicRegex and may leave the member id to the coordinator; v1 names its own."""

    async def scenario() -> None:
        async with api(tmp_path) as a:

            async def beat(member_id: str, epoch: int, names: tuple[str, ...] | None) -> Any:
                return await a.call(
                    CONSUMER_HEARTBEAT, version, "ConsumerGroupHeartbeatRequest",
                    group_id="k", member_id=member_id, member_epoch=epoch, instance_id=None,
                    rack_id=None, rebalance_timeout=ms(30_000), subscribed_topic_names=names,
                    subscribed_topic_regex=None, server_assignor=None,
                    topic_partitions=None if names is None else (),
                )  # fmt: skip

            joined = await beat("" if version == 0 else "member-1", 0, ("t",))
            assert joined.error_code == ErrorCode.none, joined.error_message
            assert joined.member_id and joined.member_epoch >= 1
            again = await beat(joined.member_id, joined.member_epoch, None)
            assert again.error_code == ErrorCode.none
            left = await beat(joined.member_id, -1, None)
            assert left.error_code == ErrorCode.none and left.member_epoch == -1

    asyncio.run(scenario())
