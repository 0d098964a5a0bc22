"""OffsetCommit, OffsetFetch, OffsetDelete and KIP-211 offset retention."""

import asyncio

import pytest

from brokers.coordinator import errors
from brokers.coordinator.group import GroupState
from brokers.coordinator.offset_store import CommitRequest, OffsetCommit
from brokers.coordinator.results import LeavingMember
from tests.unit.coordinator.harness import driver, join_request, settle

pytestmark = pytest.mark.unit
DAY_MS = 24 * 60 * 60 * 1000


def simple_commit(group: str = "s", *offsets: OffsetCommit) -> CommitRequest:
    return CommitRequest(group, "", None, -1, list(offsets or [OffsetCommit("t", 0, 5)]))


def test_simple_commit_creates_an_empty_group_and_fetch_returns_it() -> None:
    async def scenario() -> None:
        d = await driver()
        commit = simple_commit("s", OffsetCommit("t", 0, 42, leader_epoch=3, metadata="m"))
        [(_, error)] = await d.coordinator.commit_offsets(commit)
        assert error is None
        group = d.coordinator.groups["s"]
        assert group.state is GroupState.EMPTY and group.protocol_type is None
        error, [fetched] = d.coordinator.fetch_offsets("s", [("t", [0])])
        assert error is None and fetched.value is not None
        assert (fetched.value.offset, fetched.value.leader_epoch, fetched.value.metadata) == (
            42,
            3,
            "m",
        )
        _, missing = d.coordinator.fetch_offsets("s", [("t", [1]), ("u", [0])])
        assert [f.value for f in missing] == [None, None]
        _, everything = d.coordinator.fetch_offsets("s", None)
        assert [(f.topic, f.partition) for f in everything] == [("t", 0)]
        _, unknown = d.coordinator.fetch_offsets("nobody", None)
        assert unknown == []

    asyncio.run(scenario())


def test_group_commits_check_member_and_generation() -> None:
    async def scenario() -> None:
        d = await driver()
        [member] = await d.stable_group(1)
        mid = member.member_id

        async def commit(member_id: str, generation: int, version: int = 9) -> object:
            request = CommitRequest("g", member_id, None, generation, [OffsetCommit("t", 0, 1)])
            [(_, error)] = await d.coordinator.commit_offsets(request, api_version=version)
            return error

        assert await commit(mid, 1) is None
        assert isinstance(await commit(mid, 2), errors.IllegalGenerationError)
        assert isinstance(await commit("ghost", 1), errors.UnknownMemberIdError)
        assert isinstance(await commit("", -1), errors.UnknownMemberIdError)  # group is active
        lost = CommitRequest("lost", "m", None, 3, [OffsetCommit("t", 0, 1)])
        [(_, v9)] = await d.coordinator.commit_offsets(lost, api_version=9)
        [(_, v8)] = await d.coordinator.commit_offsets(lost, api_version=8)
        assert isinstance(v9, errors.GroupIdNotFoundError)
        assert isinstance(v8, errors.IllegalGenerationError)
        await d.start_join(join_request(require_known=False))
        assert await commit(mid, 1) is None  # still allowed while PreparingRebalance

    asyncio.run(scenario())


def test_commit_while_completing_rebalance_is_refused() -> None:
    async def scenario() -> None:
        d = await driver()
        member = await d.new_member()
        join = await d.start_join(join_request(member))
        d.advance(0)
        await settle()
        assert d.group.state is GroupState.COMPLETING_REBALANCE
        assert join.result().generation_id == 1
        request = CommitRequest("g", member, None, 1, [OffsetCommit("t", 0, 1)])
        [(_, error)] = await d.coordinator.commit_offsets(request)
        assert isinstance(error, errors.RebalanceInProgressError)

    asyncio.run(scenario())


def test_metadata_over_the_limit_fails_only_that_partition() -> None:
    async def scenario() -> None:
        d = await driver(offset_metadata_max_bytes=8)
        big = OffsetCommit("t", 0, 1, metadata="x" * 9)
        fine = OffsetCommit("t", 1, 1, metadata="x" * 8)
        results = await d.coordinator.commit_offsets(simple_commit("s", big, fine))
        assert isinstance(results[0][1], errors.OffsetMetadataTooLargeError)
        assert results[1][1] is None
        _, fetched = d.coordinator.fetch_offsets("s", [("t", [0, 1])])
        assert [f.value is not None for f in fetched] == [False, True]

    asyncio.run(scenario())


def test_failed_write_fails_the_commit_and_caches_nothing() -> None:
    async def scenario() -> None:
        d = await driver()
        d.topic.fail_with = errors.NotCoordinatorError()
        [(_, error)] = await d.coordinator.commit_offsets(simple_commit())
        assert isinstance(error, errors.NotCoordinatorError)
        _, [fetched] = d.coordinator.fetch_offsets("s", [("t", [0])])
        assert fetched.value is None

    asyncio.run(scenario())


def test_require_stable_reports_a_commit_still_being_written() -> None:
    async def scenario() -> None:
        d = await driver()
        d.topic.gate = asyncio.Event()
        pending = asyncio.ensure_future(d.coordinator.commit_offsets(simple_commit()))
        await settle()
        _, [unstable] = d.coordinator.fetch_offsets("s", [("t", [0])], require_stable=True)
        assert isinstance(unstable.error, errors.UnstableOffsetCommitError)
        _, [loose] = d.coordinator.fetch_offsets("s", [("t", [0])])
        assert loose.error is None and loose.value is None
        d.topic.gate.set()
        await pending
        _, [stable] = d.coordinator.fetch_offsets("s", [("t", [0])], require_stable=True)
        assert stable.error is None and stable.value is not None and stable.value.offset == 5

    asyncio.run(scenario())


def test_offset_delete_refuses_subscribed_topics() -> None:
    async def scenario() -> None:
        d = await driver()
        [member] = await d.stable_group(1)  # subscribed to "t"
        for topic in ("t", "old"):
            request = CommitRequest("g", member.member_id, None, 1, [OffsetCommit(topic, 0, 9)])
            await d.coordinator.commit_offsets(request)
        error, results = await d.coordinator.delete_offsets("g", [("t", [0]), ("old", [0, 1])])
        assert error is None
        assert [(t, p, type(e).__name__) for t, p, e in results] == [
            ("t", 0, "GroupSubscribedToTopicError"),
            ("old", 0, "NoneType"),
            ("old", 1, "NoneType"),
        ]
        _, fetched = d.coordinator.fetch_offsets("g", None)
        assert [(f.topic, f.value.offset if f.value else None) for f in fetched] == [("t", 9)]
        missing, _ = await d.coordinator.delete_offsets("nobody", [("t", [0])])
        assert isinstance(missing, errors.GroupIdNotFoundError)

    asyncio.run(scenario())


def test_offset_delete_of_a_non_consumer_active_group_is_refused() -> None:
    async def scenario() -> None:
        d = await driver()
        await d.stable_group(1, protocol_type="connect")
        error, _ = await d.coordinator.delete_offsets("g", [("t", [0])])
        assert isinstance(error, errors.NonEmptyGroupError)

    asyncio.run(scenario())


def test_offsets_of_an_empty_group_expire_then_the_group_goes() -> None:
    async def scenario() -> None:
        d = await driver(offsets_retention_ms=7 * DAY_MS)
        [member] = await d.stable_group(1)
        request = CommitRequest("g", member.member_id, None, 1, [OffsetCommit("t", 0, 3)])
        await d.coordinator.commit_offsets(request)
        d.clock.advance(30 * DAY_MS)  # commits are old, but the group is not empty yet
        d.coordinator.heartbeat("g", member.member_id, None, 1)
        assert await d.coordinator.expire_offsets() == 0
        assert len(d.group.offsets) == 1
        d.coordinator.leave_group("g", [LeavingMember(member.member_id)])
        await d.coordinator.rebalancer.drain()  # the Empty group's metadata, written days before
        d.clock.advance(7 * DAY_MS - 1)
        assert await d.coordinator.expire_offsets() == 0 and len(d.group.offsets) == 1
        d.clock.advance(1)  # retention counts from when the group became Empty
        assert await d.coordinator.expire_offsets() == 1
        assert "g" not in d.coordinator.groups
        records = d.topic.records(d.coordinator.partition_for("g"))
        assert [value for _, value in records[-2:]] == [None, None]  # offset + group tombstones

    asyncio.run(scenario())


def test_simple_group_offsets_expire_from_their_commit_time() -> None:
    async def scenario() -> None:
        d = await driver(offsets_retention_ms=1000)
        await d.coordinator.commit_offsets(simple_commit("s", OffsetCommit("t", 0, 1)))
        d.clock.advance(600)
        await d.coordinator.commit_offsets(simple_commit("s", OffsetCommit("t", 1, 1)))
        d.clock.advance(400)
        await d.coordinator.expire_offsets()
        _, left = d.coordinator.fetch_offsets("s", None)
        assert [(f.topic, f.partition) for f in left] == [("t", 1)]

    asyncio.run(scenario())


def test_explicit_retention_time_sets_an_expire_timestamp() -> None:
    async def scenario() -> None:
        d = await driver(offsets_retention_ms=10 * DAY_MS)
        request = CommitRequest("s", "", None, -1, [OffsetCommit("t", 0, 1)], retention_ms=500)
        await d.coordinator.commit_offsets(request)
        d.clock.advance(500)
        await d.coordinator.expire_offsets()
        assert "s" not in d.coordinator.groups

    asyncio.run(scenario())
