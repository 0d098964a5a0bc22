"""KIP-848 groups persisted in `__consumer_offsets` (`consumer_group_records`, `consumer_group_store`,
the loader): the records' bytes, and a second coordinator reading the log back carries on with the
same group epoch, member epochs and assignments; leaving members and deleted groups leave tombstones."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.common.clock import ManualClock
from brokers.coordinator import consumer_group_migration as mixed
from brokers.coordinator import consumer_group_records as rec
from brokers.coordinator.config import GroupConfig
from brokers.coordinator.consumer_group import HeartbeatRequest, HeartbeatResult, Partitions
from brokers.coordinator.consumer_protocol import encode_subscription
from brokers.coordinator.errors import GroupRecordError, NotCoordinatorError
from brokers.coordinator.group import GroupState
from brokers.coordinator.group_admin import delete_groups
from brokers.coordinator.group_coordinator import GroupCoordinator
from brokers.coordinator.offset_store import CommitRequest, OffsetCommit
from tests.unit.coordinator.harness import MemoryOffsetsTopic

TOPIC = "t"
TOPIC_ID = uuid.UUID("0b5ad0f1-7d4e-4c3a-9e6f-1a2b3c4d5e6f")
COUNTS = {TOPIC: 4}
IDS = {TOPIC: TOPIC_ID}


def coordinator(topic: MemoryOffsetsTopic, clock: ManualClock) -> GroupCoordinator:
    config = GroupConfig(consumer_session_timeout_ms=3_000, consumer_heartbeat_interval_ms=500)
    return GroupCoordinator(config, topic, clock)


async def started(topic: MemoryOffsetsTopic, clock: ManualClock) -> GroupCoordinator:
    c = coordinator(topic, clock)
    await c.load_partitions(range(topic.partitions))
    return c


async def beat(
    c: GroupCoordinator, member: str, epoch: int, owned: Partitions | None, **kw: object
) -> HeartbeatResult:
    topics = (TOPIC,) if epoch == 0 else None
    request = HeartbeatRequest("g", member, epoch, topics, None, owned, client_id="cl", **kw)  # type: ignore[arg-type]
    result = c.consumer_groups.heartbeat(request, COUNTS.get)
    return await c.consumer_store.persist(result, "g", IDS.get)


def consumer_records(topic: MemoryOffsetsTopic) -> list[tuple[rec.ConsumerKey, bytes | None]]:
    out = []
    for key, value in topic.records(topic_partition(topic)):
        parsed = rec.decode_consumer_key(key or b"")
        if parsed is not None:
            out.append((parsed, value))
    return out


def topic_partition(topic: MemoryOffsetsTopic) -> int:
    return coordinator(topic, ManualClock()).partition_for("g")


def test_value_bytes_match_kafkas_schemas() -> None:
    # int16 version 0, then the flexible body; an empty tagged-field section ends each struct
    assert rec.encode_group_metadata(5) == bytes.fromhex("00000000000500")
    key = rec.encode_key(rec.ConsumerKey(rec.CURRENT_ASSIGNMENT, "g", "m"))
    assert key == bytes.fromhex("00080001") + b"g" + bytes.fromhex("0001") + b"m"
    current = rec.CurrentAssignment(3, 2, rec.UNREVOKED_PARTITIONS, {TOPIC_ID: (0, 1)}, {})
    encoded = rec.encode_current_assignment(current)
    assert encoded == (
        bytes.fromhex("000000000003000000020102")
        + TOPIC_ID.bytes
        + bytes.fromhex("030000000000000001000100")
    )
    assert rec.decode_current_assignment(encoded) == current
    meta = rec.MemberMetadata("i", None, "cl", "/h", ("a", "b"), None, 30_000, "uniform")
    assert rec.decode_member_metadata(rec.encode_member_metadata(meta)) == meta
    classic = rec.ClassicMemberMetadata(45_000, (("range", b"\x00\x01"),))
    with_classic = rec.encode_member_metadata(
        rec.MemberMetadata(None, None, "", "", (), None, -1, None, classic)
    )  # tagged field 0: SessionTimeoutMs, [Name, Metadata, tags], tags
    body = bytes.fromhex("010000afc8") + b"\x02\x06range\x03\x00\x01\x00\x00"
    assert (
        with_classic
        == bytes.fromhex("0000000001010100ffffffff00") + b"\x01\x00" + bytes([len(body)]) + body
    )
    assert rec.decode_member_metadata(with_classic).classic == classic
    topics = [rec.TopicMetadata(TOPIC_ID, TOPIC, 4)]
    assert rec.decode_partition_metadata(rec.encode_partition_metadata(topics)) == topics
    target: rec.TopicIdPartitions = {TOPIC_ID: (2, 3)}
    assert rec.decode_target_member(rec.encode_target_member(target)) == target


ids = st.uuids()
parts = st.lists(st.integers(0, 2**31 - 1), max_size=4).map(tuple)
names = st.text(max_size=8)
opt = st.none() | names


@settings(max_examples=60, deadline=None)
@given(
    st.builds(
        rec.MemberMetadata,
        opt,
        opt,
        names,
        names,
        st.lists(names).map(tuple),
        opt,
        st.integers(-1, 2**31 - 1),
        opt,
        st.none()
        | st.builds(
            rec.ClassicMemberMetadata,
            st.integers(-1, 2**31 - 1),
            st.lists(st.tuples(names, st.binary(max_size=8)), max_size=3).map(tuple),
        ),
    ),
    st.builds(
        rec.CurrentAssignment,
        st.integers(-2, 99),
        st.integers(-2, 99),
        st.sampled_from([0, 1, 2]),
        st.dictionaries(ids, parts),
        st.dictionaries(ids, parts),
    ),
    st.lists(st.builds(rec.TopicMetadata, ids, names, st.integers(0, 10_000)), max_size=3),
)
def test_values_round_trip(
    meta: rec.MemberMetadata, current: rec.CurrentAssignment, topics: list[rec.TopicMetadata]
) -> None:
    assert rec.decode_member_metadata(rec.encode_member_metadata(meta)) == meta
    assert rec.decode_current_assignment(rec.encode_current_assignment(current)) == current
    assert rec.decode_partition_metadata(rec.encode_partition_metadata(topics)) == topics


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_garbage_raises_the_record_error_only(data: bytes) -> None:
    decoders = (
        rec.decode_consumer_key, rec.decode_group_metadata, rec.decode_partition_metadata,
        rec.decode_member_metadata, rec.decode_target_member, rec.decode_current_assignment,
    )  # fmt: skip
    for decode in decoders:
        with contextlib.suppress(GroupRecordError):  # anything else fails the test
            decode(data)


def test_a_new_coordinator_carries_on_with_the_same_epochs_and_assignments() -> None:
    async def scenario() -> None:
        topic, clock = MemoryOffsetsTopic(), ManualClock()
        first = await started(topic, clock)
        a = await beat(first, "a", 0, {})
        b = await beat(first, "b", 0, {})
        a = await beat(first, "a", a.member_epoch, {TOPIC: {0, 1}})  # revokes 2, 3
        b = await beat(first, "b", b.member_epoch, {})
        group = first.consumer_groups.groups["g"]
        assert group.state == "Stable" and group.epoch == 2
        # heartbeats re-encode only their member's records: the result is the full image
        assert first.consumer_store.written["g"] == first.consumer_store.image(group)
        before = {m.member_id: (m.epoch, m.assigned) for m in group.members.values()}

        second = await started(topic, clock)  # the failover: the log read back
        loaded = second.consumer_groups.groups["g"]
        assert (loaded.epoch, loaded.target_epoch, loaded.state) == (2, 2, "Stable")
        assert {m.member_id: (m.epoch, m.assigned) for m in loaded.members.values()} == before
        again = await beat(second, "a", a.member_epoch, {TOPIC: {0, 1}})
        assert again.error is None and again.member_epoch == a.member_epoch
        assert again.assignment is None  # unchanged: what the old coordinator sent
        assert loaded.members["a"].sent == {TOPIC: {0, 1}}  # ConsumerGroupDescribe's view
        assert loaded.epoch == 2  # no rebalance
        appended = len(topic.logs[first.partition_for("g")])
        await beat(second, "a", a.member_epoch, None)
        assert len(topic.logs[first.partition_for("g")]) == appended  # nothing changed: no write

    asyncio.run(scenario())


def test_a_leaving_member_and_a_deleted_group_leave_tombstones() -> None:
    async def scenario() -> None:
        topic, clock = MemoryOffsetsTopic(), ManualClock()
        c = await started(topic, clock)
        a = await beat(c, "a", 0, {})
        await beat(c, "b", 0, {})
        await beat(c, "a", -1, a.assignment)
        gone = [(k.record_type, k.member_id) for k, v in consumer_records(topic) if v is None]
        assert gone == [(8, "a"), (7, "a"), (5, "a")]
        assert set((await started(topic, clock)).consumer_groups.groups["g"].members) == {"b"}

        await beat(c, "b", -1, None)
        assert await delete_groups(c, ["g"]) == [("g", None)]
        tail = [(k.record_type, v) for k, v in consumer_records(topic)][-3:]
        assert tail == [(4, None), (6, None), (3, None)]
        assert "g" not in (await started(topic, clock)).consumer_groups.groups

    asyncio.run(scenario())


def test_a_failed_write_answers_the_error_and_the_next_write_repairs_the_log() -> None:
    async def scenario() -> None:
        topic, clock = MemoryOffsetsTopic(), ManualClock()
        c = await started(topic, clock)
        a = await beat(c, "a", 0, {})
        topic.fail_with = NotCoordinatorError("moved")
        b = await beat(c, "b", 0, {})
        assert isinstance(b.error, NotCoordinatorError)
        topic.fail_with = None
        await beat(c, "a", a.member_epoch, a.assignment)
        loaded = (await started(topic, clock)).consumer_groups.groups["g"]
        assert set(loaded.members) == {"a", "b"} and loaded.epoch == 2

    asyncio.run(scenario())


def test_a_session_timeout_is_written_by_the_timer() -> None:
    async def scenario() -> None:
        topic, clock = MemoryOffsetsTopic(), ManualClock()
        c = await started(topic, clock)
        await beat(c, "a", 0, {})
        clock.advance(4_000)
        c.tick()
        await c.consumer_store.drain()
        loaded = (await started(topic, clock)).consumer_groups.groups["g"]
        assert loaded.members == {} and loaded.epoch == 2

    asyncio.run(scenario())


def test_a_static_member_away_at_the_failover_is_replaced_by_the_new_coordinator() -> None:
    async def scenario() -> None:
        topic, clock = MemoryOffsetsTopic(), ManualClock()
        first = await started(topic, clock)
        a = await beat(first, "a", 0, {}, instance_id="ia")
        a = await beat(first, "a", a.member_epoch, a.assignment, instance_id="ia")
        left = await beat(first, "a", -2, None, instance_id="ia")
        assert left.member_epoch == -2
        second = await started(topic, clock)
        loaded = second.consumer_groups.groups["g"]
        assert loaded.members["a"].epoch == -2 and loaded.epoch == 1
        back = await beat(second, "a2", 0, {}, instance_id="ia")
        assert back.error is None and back.member_epoch == 1
        assert back.assignment == {TOPIC: {0, 1, 2, 3}} and loaded.epoch == 1
        gone = [(k.record_type, k.member_id) for k, v in consumer_records(topic) if v is None]
        assert gone == [(8, "a"), (7, "a"), (5, "a")]

    asyncio.run(scenario())


def test_an_empty_group_without_offsets_is_deleted_with_the_offset_expiry() -> None:
    async def scenario() -> None:
        topic, clock = MemoryOffsetsTopic(), ManualClock()
        c = await started(topic, clock)
        a = await beat(c, "a", 0, {})
        await beat(c, "a", a.member_epoch, a.assignment)
        assert await c.expire_offsets() == 0  # a member: kept
        commit = CommitRequest("g", "a", None, a.member_epoch, [OffsetCommit(TOPIC, 0, 5)])
        assert [e for _, e in await c.commit_offsets(commit)] == [None]
        await beat(c, "a", -1, a.assignment)
        assert await c.expire_offsets() == 0  # empty, with offsets: kept
        clock.advance(8 * 24 * 3600 * 1000)  # past offsets.retention.minutes (7 days)
        assert await c.expire_offsets() == 2  # the offsets' holder, then the consumer group
        assert "g" not in c.consumer_groups.groups
        tail = [(k.record_type, v) for k, v in consumer_records(topic)][-3:]
        assert tail == [(4, None), (6, None), (3, None)]
        assert "g" not in (await started(topic, clock)).consumer_groups.groups

    asyncio.run(scenario())


def test_a_member_still_revoking_at_the_failover_is_fenced_after_its_rebalance_timeout() -> None:
    async def scenario() -> None:
        topic, clock = MemoryOffsetsTopic(), ManualClock()
        first = await started(topic, clock)
        a = await beat(first, "a", 0, {}, rebalance_timeout_ms=1_000)
        a = await beat(first, "a", a.member_epoch, a.assignment)
        await beat(first, "b", 0, {}, rebalance_timeout_ms=1_000)
        await beat(first, "a", a.member_epoch, {TOPIC: {0, 1, 2, 3}})  # told to revoke 2, 3
        second = await started(topic, clock)
        assert second.consumer_groups.groups["g"].members["a"].revoke_deadline is not None
        assert second.consumer_groups.groups["g"].members["b"].revoke_deadline is None
        clock.advance(1_001)  # past a's rebalance timeout, within the 3 s session
        second.tick()
        await second.consumer_store.drain()
        assert set(second.consumer_groups.groups["g"].members) == {"b"}

    asyncio.run(scenario())


async def mixed_group(c: GroupCoordinator) -> None:
    """Consumer member "a" (3 s session) and classic member "k" (10 s session)."""
    await beat(c, "a", 0, {})
    protocols = (("range", encode_subscription([TOPIC])), ("roundrobin", b"\x00\x01"))
    join = mixed.ClassicJoin(
        group_id="g", member_id="k", instance_id=None, protocol_type="consumer",
        protocols=protocols, session_timeout_ms=10_000, rebalance_timeout_ms=20_000,
        client_id="c", client_host="/h", require_known_member_id=False,
    )  # fmt: skip
    group = c.consumer_groups.groups["g"]
    joined = mixed.join(c.consumer_groups, group, join, COUNTS.get, lambda: [TOPIC])
    assert joined.error is None
    done = HeartbeatResult(None, "k", joined.generation_id, 0)
    assert (await c.consumer_store.persist(done, "g", IDS.get)).error is None


def test_a_mixed_groups_classic_member_keeps_its_protocols_across_a_failover() -> None:
    async def scenario() -> None:
        topic, clock = MemoryOffsetsTopic(), ManualClock()
        first = await started(topic, clock)
        await mixed_group(first)
        group = first.consumer_groups.groups["g"]

        second = await started(topic, clock)  # the failover
        loaded = second.consumer_groups.groups["g"]
        assert loaded.classic == {"k": group.classic["k"]}
        assert loaded.classic["k"].rebalance_timeout_ms == 20_000
        assert loaded.members["k"].deadline == clock.monotonic() + 10  # its own session
        generation = loaded.members["k"].epoch
        assert mixed.heartbeat(second.consumer_groups, loaded, "k", generation) is None
        a = loaded.members["a"]
        back = await beat(second, "a", a.epoch, None)
        assert back.error is None and set(loaded.members) == {"a", "k"}

    asyncio.run(scenario())


def test_the_last_consumer_member_expiring_downgrades_the_group_at_once() -> None:
    async def scenario() -> None:
        topic, clock = MemoryOffsetsTopic(), ManualClock()
        c = await started(topic, clock)
        await mixed_group(c)
        clock.advance(4_000)  # past a's 3 s session, within k's 10 s
        c.tick()  # as Kafka: downgraded by the expiry, not at k's next request
        assert "g" not in c.consumer_groups.groups
        classic = c.groups["g"]
        assert set(classic.members) == {"k"} and classic.state is GroupState.PREPARING_REBALANCE
        await c.consumer_store.drain()
        tail = [(k.record_type, v) for k, v in consumer_records(topic)][-3:]
        assert tail == [(4, None), (6, None), (3, None)]  # the consumer group's tombstones

    asyncio.run(scenario())
