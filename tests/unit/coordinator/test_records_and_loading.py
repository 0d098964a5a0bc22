"""The `__consumer_offsets` formats (Kafka-compatible bytes), placement of groups, and reloading a
coordinator's state from its log."""

import asyncio
import struct
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.coordinator import errors
from brokers.coordinator.consumer_protocol import encode_subscription, subscribed_topics
from brokers.coordinator.group import GroupState
from brokers.coordinator.group_records import (
    GroupMetadataKey,
    GroupMetadataRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from brokers.coordinator.offset_store import CommitRequest, OffsetCommit
from brokers.coordinator.offsets_topic import java_string_hashcode, partition_for
from brokers.coordinator.timers import DeadlineQueue
from tests.unit.coordinator.harness import MemoryOffsetsTopic, driver, join_request

pytestmark = pytest.mark.unit
texts = st.text(max_size=20)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


def test_keys_match_kafka_layout() -> None:
    assert encode_offset_commit_key("g", "t", 7) == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x07"
    # lengths are of the UTF-8 bytes, not of the characters
    assert encode_offset_commit_key(
        "é", "ü", 0
    ) == b"\x00\x01\x00\x02\xc3\xa9\x00\x02\xc3\xbc" + bytes(4)
    assert encode_group_metadata_key("grp") == b"\x00\x02\x00\x03grp"
    assert decode_key(b"\x00\x00\x00\x01g\x00\x01t\x00\x00\x00\x01") == OffsetCommitKey("g", "t", 1)
    assert decode_key(b"\x00\x02\x00\x01g") == GroupMetadataKey("g")
    assert decode_key(b"\x00\x03\x00\x01g") is None  # a KIP-848 record: not ours


def test_offset_value_v3_layout_and_v1_with_expiry() -> None:
    value = OffsetAndMetadata(10, 2, "md", 1000)
    expected = struct.pack(">hqih2sq", 3, 10, 2, 2, b"md", 1000)
    assert encode_offset_commit_value(value) == expected
    expiring = OffsetAndMetadata(10, -1, "", 1000, 5000)
    assert encode_offset_commit_value(expiring) == struct.pack(">hqhqq", 1, 10, 0, 1000, 5000)
    assert decode_offset_commit_value(encode_offset_commit_value(expiring)) == expiring
    accented = OffsetAndMetadata(10, 2, "é", 1000)
    assert encode_offset_commit_value(accented) == struct.pack(
        ">hqih2sq", 3, 10, 2, 2, b"\xc3\xa9", 1000
    )


def test_decodes_older_and_flexible_offset_values() -> None:
    v0 = struct.pack(">hqh1sq", 0, 5, 1, b"m", 77)
    assert decode_offset_commit_value(v0) == OffsetAndMetadata(5, -1, "m", 77)
    v4 = struct.pack(">hqiB2sqB", 4, 5, 9, 3, b"md", 77, 0)  # compact string, no tagged fields
    assert decode_offset_commit_value(v4) == OffsetAndMetadata(5, 9, "md", 77)


def test_bad_values_raise_domain_errors() -> None:
    with pytest.raises(errors.GroupRecordError):
        decode_offset_commit_value(struct.pack(">hq", 3, 1))
    with pytest.raises(errors.GroupRecordError):
        decode_offset_commit_value(struct.pack(">h", 9))
    with pytest.raises(errors.GroupRecordError):
        decode_group_metadata_value(struct.pack(">hhiqi", 3, 0, 1, 0, 10**6))


members = st.builds(
    MemberRecord,
    member_id=texts,
    group_instance_id=st.none() | texts,
    client_id=texts,
    client_host=texts,
    rebalance_timeout_ms=st.integers(0, 2**31 - 1),
    session_timeout_ms=int32,
    subscription=st.binary(max_size=30),
    assignment=st.binary(max_size=30),
)


@settings(max_examples=60, deadline=None)
@given(
    st.builds(
        GroupMetadataRecord,
        protocol_type=texts,
        generation=int32,
        protocol=st.none() | texts,
        leader=st.none() | texts,
        current_state_timestamp_ms=int64,
        members=st.lists(members, max_size=4).map(tuple),
    )
)
def test_group_metadata_value_round_trip(record: GroupMetadataRecord) -> None:
    assert decode_group_metadata_value(encode_group_metadata_value(record)) == record


@settings(max_examples=60, deadline=None)
@given(st.builds(OffsetAndMetadata, int64, int32, texts, int64, st.none()))
def test_offset_value_round_trip(value: OffsetAndMetadata) -> None:
    assert decode_offset_commit_value(encode_offset_commit_value(value)) == value


def test_subscription_prefix_parses_any_version() -> None:
    assert subscribed_topics(encode_subscription(["a", "b"], b"x", version=3)) == {"a", "b"}
    with pytest.raises(errors.GroupRecordError):
        subscribed_topics(b"\x00")


def test_partition_for_matches_java_hashcode() -> None:
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("polygenelubricants") == -(2**31)
    assert java_string_hashcode("\U0001f600") == 1772899  # UTF-16 surrogate pair
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    assert partition_for("my-group", 50) == 12


def test_deadline_queue_pops_each_due_group_once() -> None:
    queue = DeadlineQueue()
    for deadline, group in ((3.0, "b"), (1.0, "a"), (2.0, "a"), (9.0, "c")):
        queue.schedule(deadline, group)
    queue.schedule(float("inf"), "never")
    assert queue.pop_due(3.0) == ["a", "b"]
    assert queue.next_deadline() == 9.0 and len(queue) == 1


def test_ownership_and_loading_errors() -> None:
    async def scenario() -> None:
        from brokers.common.clock import ManualClock
        from brokers.coordinator.group_coordinator import GroupCoordinator
        from brokers.records.builder import build_batch
        from tests.unit.coordinator.harness import config

        topic = MemoryOffsetsTopic(partitions=2)
        coordinator = GroupCoordinator(config(), topic, ManualClock())
        assert isinstance(coordinator.check("g"), errors.NotCoordinatorError)
        value = encode_offset_commit_value(OffsetAndMetadata(1, -1, "", 0))
        batch = build_batch([(encode_offset_commit_key("g", "t", 0), value)])
        topic.logs[coordinator.partition_for("g")] = [batch] * 200  # long enough to yield
        loading = asyncio.ensure_future(coordinator.load_partitions([0, 1]))
        await asyncio.sleep(0)
        assert isinstance(coordinator.check("g"), errors.CoordinatorLoadInProgressError)
        assert coordinator.heartbeat("g", "m", None, 1) is None  # answered blindly while loading
        await loading
        assert coordinator.check("g") is None
        coordinator.unload_partition(coordinator.partition_for("g"))
        assert isinstance(coordinator.check("g"), errors.NotCoordinatorError)

    asyncio.run(scenario())


def test_reload_restores_groups_members_and_offsets() -> None:
    async def scenario() -> None:
        d = await driver()
        results = await d.stable_group(2)
        m0, m1 = (r.member_id for r in results)
        commit = CommitRequest("g", m0, None, 1, [OffsetCommit("t", 0, 11, 4, "meta")])
        await d.coordinator.commit_offsets(commit)
        await d.coordinator.commit_offsets(
            CommitRequest("s", "", None, -1, [OffsetCommit("t", 1, 3)])
        )
        reloaded = await driver(topic=d.topic, clock=d.clock)
        group = reloaded.group
        assert group.state is GroupState.STABLE and group.generation_id == 1
        assert set(group.members) == {m0, m1} and group.leader_id == m0
        assert group.members[m1].assignment == b"a-" + m1.encode()
        assert group.subscribed_topics == frozenset({"t"})
        _, [fetched] = reloaded.coordinator.fetch_offsets("g", [("t", [0])])
        assert fetched.value == OffsetAndMetadata(11, 4, "meta", d.clock.time_ms())
        assert reloaded.coordinator.groups["s"].state is GroupState.EMPTY
        # members of the loaded generation carry on if they heartbeat...
        reloaded.advance(6000)
        assert reloaded.coordinator.heartbeat("g", m0, None, 1) is None
        # ...and the silent one expires
        reloaded.advance(6000)
        assert m1 not in group.members
        rejoin = await reloaded.start_join(join_request(m0))
        assert rejoin.result().generation_id == 2

    asyncio.run(scenario())


def test_reload_applies_tombstones() -> None:
    async def scenario() -> None:
        from brokers.coordinator.group_admin import delete_groups

        d = await driver()
        await d.coordinator.commit_offsets(
            CommitRequest("gone", "", None, -1, [OffsetCommit("t", 0, 3)])
        )
        await d.coordinator.commit_offsets(
            CommitRequest("kept", "", None, -1, [OffsetCommit("t", 0, 4)])
        )
        await delete_groups(d.coordinator, ["gone"])
        await d.coordinator.delete_offsets("kept", [("t", [0])])
        reloaded = await driver(topic=d.topic, clock=d.clock)
        assert "gone" not in reloaded.coordinator.groups
        _, kept = reloaded.coordinator.fetch_offsets("kept", None)
        assert kept == []

    asyncio.run(scenario())


def test_unreadable_records_are_skipped_not_fatal() -> None:
    async def scenario() -> None:
        from brokers.records.builder import build_batch

        d = await driver()
        await d.coordinator.commit_offsets(
            CommitRequest("s", "", None, -1, [OffsetCommit("t", 0, 3)])
        )
        partition = d.coordinator.partition_for("s")
        garbage = build_batch([(encode_offset_commit_key("s", "t", 1), b"\x00\x07junk")])
        d.topic.logs[partition].append(garbage)
        reloaded = await driver(topic=d.topic, clock=d.clock)
        _, offsets = reloaded.coordinator.fetch_offsets("s", None)
        assert [(f.topic, f.partition) for f in offsets] == [("t", 0)]

    asyncio.run(scenario())


def test_a_partition_that_cannot_be_read_is_left_unowned() -> None:
    async def scenario() -> None:
        from brokers.common.clock import ManualClock
        from brokers.coordinator.group_coordinator import GroupCoordinator
        from brokers.records.errors import CorruptRecordError
        from tests.unit.coordinator.harness import config

        class Broken(MemoryOffsetsTopic):
            def read_batches(self, partition: int, from_offset: int) -> Iterator[bytes]:
                if partition == 0:
                    raise CorruptRecordError("bad tail")
                return super().read_batches(partition, from_offset)

        coordinator = GroupCoordinator(config(), Broken(partitions=2), ManualClock())
        await coordinator.load_partitions([0, 1])
        on_zero = next(g for g in ("a", "b", "c", "d", "e") if coordinator.partition_for(g) == 0)
        on_one = next(g for g in ("a", "b", "c", "d", "e") if coordinator.partition_for(g) == 1)
        assert isinstance(coordinator.check(on_zero), errors.NotCoordinatorError)
        assert coordinator.check(on_one) is None and not coordinator.loading

    asyncio.run(scenario())
