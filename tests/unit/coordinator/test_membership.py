"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup of dynamic members: the classic group protocol
state machine driven by method calls and a ManualClock."""

import asyncio

import pytest

from brokers.coordinator import errors
from brokers.coordinator.group import GroupState
from brokers.coordinator.results import LeavingMember
from tests.unit.coordinator.harness import (
    REBALANCE_MS,
    driver,
    join_request,
    protocols,
    settle,
)

pytestmark = pytest.mark.unit


def test_member_id_required_then_join_after_initial_delay() -> None:
    async def scenario() -> None:
        d = await driver(initial_rebalance_delay_ms=3000)
        member = await d.new_member()
        assert member.startswith("client-")
        assert member in d.group.pending_members
        join = await d.start_join(join_request(member))
        assert d.state() is GroupState.PREPARING_REBALANCE
        d.advance(2999)
        await settle()
        assert not join.done()  # KIP-134: the initial rebalance waits out its delay
        d.advance(1)
        await settle()
        result = join.result()
        assert result.error is None
        assert (result.generation_id, result.leader_id, result.member_id) == (1, member, member)
        assert result.protocol_name == "range" and result.protocol_type == "consumer"
        assert [m.member_id for m in result.members] == [member]
        assert d.group.state is GroupState.COMPLETING_REBALANCE
        sync = await d.start_sync(member, 1, {member: b"mine"})
        assert sync.result().assignment == b"mine" and sync.result().protocol_name == "range"
        assert d.state() is GroupState.STABLE

    asyncio.run(scenario())


def test_v3_join_without_member_id_is_added_at_once() -> None:
    async def scenario() -> None:
        d = await driver()
        join = await d.start_join(join_request(require_known=False))
        d.advance(0)
        await settle()
        assert join.result().error is None and join.result().generation_id == 1

    asyncio.run(scenario())


def test_initial_delay_is_extended_while_members_keep_arriving() -> None:
    async def scenario() -> None:
        d = await driver(initial_rebalance_delay_ms=3000)
        first, second = await d.new_member(), await d.new_member()
        a = await d.start_join(join_request(first, rebalance_ms=10_000))
        d.advance(2000)
        b = await d.start_join(join_request(second, rebalance_ms=10_000))
        d.advance(1000)  # first delay over, but a member arrived: wait again
        await settle()
        assert not a.done() and not b.done()
        d.advance(3000)
        await settle()
        assert a.result().generation_id == b.result().generation_id == 1
        assert len(d.group.members) == 2

    asyncio.run(scenario())


def test_follower_sync_waits_for_the_leader_assignment() -> None:
    async def scenario() -> None:
        d = await driver()
        ids = [await d.new_member() for _ in range(2)]
        tasks = [await d.start_join(join_request(i)) for i in ids]
        d.advance(0)
        d.advance(0)
        await settle()
        results = [t.result() for t in tasks]
        leader = next(r for r in results if r.members)
        follower = next(r for r in results if not r.members)
        assert {m.member_id for m in leader.members} == set(ids)
        assert follower.leader_id == leader.member_id
        waiting = await d.start_sync(follower.member_id, 1)
        assert not waiting.done()
        assignment = {leader.member_id: b"L", follower.member_id: b"F"}
        mine = await d.start_sync(leader.member_id, 1, assignment)
        assert (mine.result().assignment, waiting.result().assignment) == (b"L", b"F")
        assert d.group.state is GroupState.STABLE and d.group.completed_rebalances == 1

    asyncio.run(scenario())


def test_members_missing_from_the_leader_assignment_get_an_empty_one() -> None:
    async def scenario() -> None:
        d = await driver()
        results = await d.stable_group(2)
        second = await d.start_sync(results[1].member_id, 1)
        assert second.result().error is None

    asyncio.run(scenario())


def test_protocol_vote_picks_what_all_support_and_most_prefer() -> None:
    async def scenario() -> None:
        d = await driver()
        prefs = [("range", "roundrobin"), ("range", "roundrobin"), ("roundrobin", "range")]
        ids = [await d.new_member() for _ in prefs]
        tasks = [
            await d.start_join(join_request(i, protos=protocols(*p)))
            for i, p in zip(ids, prefs, strict=True)
        ]
        d.advance(0)
        d.advance(0)
        await settle()
        assert {t.result().protocol_name for t in tasks} == {"range"}

    asyncio.run(scenario())


def test_inconsistent_protocol_type_or_names_are_refused() -> None:
    async def scenario() -> None:
        d = await driver()
        await d.stable_group(1)
        other_type = await d.coordinator.join_group(join_request(protocol_type="connect"))
        assert isinstance(other_type.error, errors.InconsistentGroupProtocolError)
        other_names = await d.coordinator.join_group(join_request(protos=protocols("sticky")))
        assert isinstance(other_names.error, errors.InconsistentGroupProtocolError)
        empty = await d.coordinator.join_group(join_request(group="fresh", protos=()))
        assert isinstance(empty.error, errors.InconsistentGroupProtocolError)

    asyncio.run(scenario())


def test_a_protocol_named_twice_by_one_member_counts_once() -> None:
    """Kafka keeps a member's protocols as a set: naming one twice must not make the vote fail
    (it raised, and the JoinGroup of every member hung)."""

    async def scenario() -> None:
        d = await driver()
        prefs = [("range", "range"), ("range", "roundrobin")]
        ids = [await d.new_member() for _ in prefs]
        tasks = [
            await d.start_join(join_request(i, protos=protocols(*p)))
            for i, p in zip(ids, prefs, strict=True)
        ]
        d.advance(0)
        d.advance(0)
        await settle()
        assert [t.result().protocol_name for t in tasks] == ["range", "range"]

    asyncio.run(scenario())


def test_join_validation_errors() -> None:
    async def scenario() -> None:
        d = await driver(min_session_timeout_ms=6000, max_session_timeout_ms=60_000)
        short = await d.coordinator.join_group(join_request(session_ms=5999))
        assert isinstance(short.error, errors.InvalidSessionTimeoutError)
        long = await d.coordinator.join_group(join_request(session_ms=60_001))
        assert isinstance(long.error, errors.InvalidSessionTimeoutError)
        no_id = await d.coordinator.join_group(join_request(group=""))
        assert isinstance(no_id.error, errors.InvalidGroupIdError)
        stranger = await d.coordinator.join_group(join_request("who", group="nobody"))
        assert isinstance(stranger.error, errors.UnknownMemberIdError)
        assert "nobody" not in d.coordinator.groups

    asyncio.run(scenario())


def test_group_max_size_refuses_extra_members() -> None:
    async def scenario() -> None:
        d = await driver(max_size=2)
        await d.stable_group(2)
        extra = await d.coordinator.join_group(join_request(require_known=False))
        assert isinstance(extra.error, errors.GroupMaxSizeReachedError)
        assert len(d.group.members) == 2 and d.group.state is GroupState.STABLE

    asyncio.run(scenario())


def test_heartbeat_answers_by_state_and_generation() -> None:
    async def scenario() -> None:
        d = await driver()
        [only] = await d.stable_group(1)
        beat = d.coordinator.heartbeat
        assert beat("g", only.member_id, None, 1) is None
        assert isinstance(beat("g", only.member_id, None, 7), errors.IllegalGenerationError)
        assert isinstance(beat("g", "ghost", None, 1), errors.UnknownMemberIdError)
        assert isinstance(beat("nobody", "ghost", None, 1), errors.UnknownMemberIdError)
        await d.start_join(join_request(require_known=False))  # a newcomer: rebalance
        assert d.group.state is GroupState.PREPARING_REBALANCE
        assert isinstance(beat("g", only.member_id, None, 1), errors.RebalanceInProgressError)

    asyncio.run(scenario())


def test_newcomer_rebalance_completes_once_everyone_rejoined() -> None:
    async def scenario() -> None:
        d = await driver()
        [old] = await d.stable_group(1)
        newcomer = await d.start_join(join_request(require_known=False))
        assert not newcomer.done()
        rejoin = await d.start_join(join_request(old.member_id))
        assert newcomer.result().generation_id == rejoin.result().generation_id == 2
        assert rejoin.result().members  # the old member stays leader
        sync = await d.start_sync(old.member_id, 2, {old.member_id: b"x"})
        assert sync.result().assignment == b"x"

    asyncio.run(scenario())


def test_a_follower_rejoining_unchanged_in_stable_keeps_the_generation() -> None:
    """Cooperative-sticky clients rejoin with the same protocol; only the leader's rejoin
    (the second, revocation round) starts a new generation, and that round completes."""

    async def scenario() -> None:
        d = await driver()
        results = await d.stable_group(2)
        leader = next(r for r in results if r.members)
        follower = next(r for r in results if not r.members)
        again = await d.coordinator.join_group(join_request(follower.member_id))
        assert again.generation_id == 1 and d.group.state is GroupState.STABLE
        second_round = [
            await d.start_join(join_request(leader.member_id)),
            await d.start_join(join_request(follower.member_id)),
        ]
        assert [t.result().generation_id for t in second_round] == [2, 2]
        synced = await d.sync_all([t.result() for t in second_round])
        assert all(s.error is None for s in synced.values())
        assert d.group.state is GroupState.STABLE

    asyncio.run(scenario())


def test_sync_errors() -> None:
    async def scenario() -> None:
        d = await driver()
        [only] = await d.stable_group(1)
        wrong_gen = await d.start_sync(only.member_id, 9)
        assert isinstance(wrong_gen.result().error, errors.IllegalGenerationError)
        ghost = await d.start_sync("ghost", 1)
        assert isinstance(ghost.result().error, errors.UnknownMemberIdError)
        from brokers.coordinator.group_coordinator import SyncRequest

        mismatch = await d.coordinator.sync_group(
            SyncRequest("g", 1, only.member_id, protocol_name="roundrobin")
        )
        assert isinstance(mismatch.error, errors.InconsistentGroupProtocolError)
        await d.start_join(join_request(require_known=False))
        during = await d.start_sync(only.member_id, 1)
        assert isinstance(during.result().error, errors.RebalanceInProgressError)

    asyncio.run(scenario())


def test_leave_group_rebalances_the_rest() -> None:
    async def scenario() -> None:
        d = await driver()
        results = await d.stable_group(3)
        leaving = results[0].member_id
        error, left = d.coordinator.leave_group("g", [LeavingMember(leaving), LeavingMember("x")])
        assert error is None
        assert [type(r.error) for r in left] == [type(None), errors.UnknownMemberIdError]
        assert d.group.state is GroupState.PREPARING_REBALANCE and leaving not in d.group.members
        rejoins = [await d.start_join(join_request(r.member_id)) for r in results[1:]]
        assert {t.result().generation_id for t in rejoins} == {2}
        assert len(d.group.members) == 2
        missing, _ = d.coordinator.leave_group("nobody", [LeavingMember("m")])
        assert isinstance(missing, errors.UnknownMemberIdError)

    asyncio.run(scenario())


def test_last_member_leaving_empties_the_group_and_persists_it() -> None:
    async def scenario() -> None:
        d = await driver()
        [only] = await d.stable_group(1)
        d.coordinator.leave_group("g", [LeavingMember(only.member_id)])
        await d.coordinator.rebalancer.drain()
        assert d.group.state is GroupState.EMPTY and d.group.generation_id == 2
        partition = d.coordinator.partition_for("g")
        # sync of generation 1, then the empty generation 2
        assert len(d.topic.records(partition)) == 2

    asyncio.run(scenario())


def test_a_pending_member_can_leave_before_joining() -> None:
    async def scenario() -> None:
        d = await driver()
        pending = await d.new_member()
        error, [left] = d.coordinator.leave_group("g", [LeavingMember(pending)])
        assert error is None and left.error is None
        assert pending not in d.group.pending_members

    asyncio.run(scenario())


def test_rebalance_timeout_drops_dynamic_members_that_do_not_rejoin() -> None:
    async def scenario() -> None:
        d = await driver()
        results = await d.stable_group(2, rebalance_ms=REBALANCE_MS)
        stays, lags = results[0].member_id, results[1].member_id
        rejoin = await d.start_join(join_request(stays))  # leader or not: a new generation
        for _ in range(REBALANCE_MS // 5000):
            d.advance(5000)
            assert d.coordinator.heartbeat("g", lags, None, 1) is not None  # keeps its session
        await settle()
        assert rejoin.result().generation_id == 2
        assert list(d.group.members) == [stays]

    asyncio.run(scenario())
