"""KIP-345 static membership and the coordinator's timers: session expiry, KIP-394 pending and
new-member join timeouts, pending-sync expiry."""

import asyncio
from typing import Any

import pytest

from brokers.coordinator import errors
from brokers.coordinator.group import GroupState
from brokers.coordinator.results import JoinResult, LeavingMember
from tests.unit.coordinator.harness import (
    SESSION_MS,
    Driver,
    driver,
    join_request,
    protocols,
    settle,
)

pytestmark = pytest.mark.unit


async def _static_group(
    d: Driver, instances: tuple[str, ...] = ("a", "b"), **kwargs: Any
) -> list[JoinResult]:
    tasks = [await d.start_join(join_request(instance=i, **kwargs)) for i in instances]
    d.advance(0)
    d.advance(0)
    await settle()
    results = [t.result() for t in tasks]
    await d.sync_all(results)
    return results


def test_static_member_restart_in_stable_keeps_its_assignment_without_rebalance() -> None:
    async def scenario() -> None:
        d = await driver()
        a, b = await _static_group(d)
        assert a.member_id.startswith("a-")
        restarted = await d.coordinator.join_group(join_request(instance="a"))
        assert restarted.error is None and restarted.member_id != a.member_id
        assert restarted.generation_id == 1 and d.group.state is GroupState.STABLE
        assert restarted.skip_assignment  # v9: it is the leader but must not reassign
        sync = await d.start_sync(restarted.member_id, 1, instance="a")
        assert sync.result().assignment == b"a-" + a.member_id.encode()
        # the old incarnation is fenced on its next request
        stale = d.coordinator.heartbeat("g", a.member_id, "a", 1)
        assert isinstance(stale, errors.FencedInstanceIdError)
        assert d.coordinator.heartbeat("g", b.member_id, "b", 1) is None

    asyncio.run(scenario())


def test_static_restart_for_old_clients_names_the_previous_leader() -> None:
    async def scenario() -> None:
        d = await driver()
        a, _ = await _static_group(d)
        again = await d.coordinator.join_group(join_request(instance="a", skip_assignment=False))
        assert again.leader_id == a.member_id != again.member_id
        assert not again.members and not again.skip_assignment

    asyncio.run(scenario())


def test_static_restart_is_persisted_before_the_answer() -> None:
    async def scenario() -> None:
        d = await driver()
        await _static_group(d)
        before = len(d.topic.records(d.coordinator.partition_for("g")))
        await d.coordinator.join_group(join_request(instance="b"))
        assert len(d.topic.records(d.coordinator.partition_for("g"))) == before + 1

    asyncio.run(scenario())


def test_failed_persist_reverts_the_static_member_id() -> None:
    async def scenario() -> None:
        d = await driver()
        a, _ = await _static_group(d)
        d.topic.fail_with = errors.NotCoordinatorError()
        failed = await d.coordinator.join_group(join_request(instance="a"))
        assert isinstance(failed.error, errors.NotCoordinatorError)
        assert d.group.static_members["a"] == a.member_id
        d.topic.fail_with = None
        assert d.coordinator.heartbeat("g", a.member_id, "a", 1) is None

    asyncio.run(scenario())


def test_static_rejoin_with_a_new_protocol_rebalances() -> None:
    async def scenario() -> None:
        d = await driver()
        await _static_group(d, instances=("a",), protos=protocols("range", "roundrobin"))
        switched = await d.start_join(join_request(instance="a", protos=protocols("roundrobin")))
        # the only member rejoined, so the new generation starts at once
        assert d.group.state is GroupState.COMPLETING_REBALANCE
        assert switched.result().protocol_name == "roundrobin"
        assert switched.result().generation_id == 2

    asyncio.run(scenario())


def test_duplicate_instance_fences_the_parked_join() -> None:
    async def scenario() -> None:
        d = await driver()
        a, b = await _static_group(d)
        parked = await d.start_join(join_request(a.member_id, instance="a"))  # leader: rebalance
        assert not parked.done()
        second = await d.start_join(join_request(instance="a"))  # same instance, new process
        assert isinstance(parked.result().error, errors.FencedInstanceIdError)
        assert not second.done()
        b_rejoin = await d.start_join(join_request(b.member_id, instance="b"))
        assert second.result().generation_id == b_rejoin.result().generation_id == 2
        assert d.group.static_members["a"] == second.result().member_id

    asyncio.run(scenario())


def test_static_member_leaves_by_instance_id() -> None:
    async def scenario() -> None:
        d = await driver()
        await _static_group(d)
        error, [left] = d.coordinator.leave_group("g", [LeavingMember("", "a")])
        assert error is None and left.error is None
        assert "a" not in d.group.static_members
        _, [unknown] = d.coordinator.leave_group("g", [LeavingMember("", "zzz")])
        assert isinstance(unknown.error, errors.UnknownMemberIdError)
        _, [fenced] = d.coordinator.leave_group("g", [LeavingMember("wrong-id", "b")])
        assert isinstance(fenced.error, errors.FencedInstanceIdError)

    asyncio.run(scenario())


def test_absent_static_member_keeps_its_place_until_its_session_ends() -> None:
    async def scenario() -> None:
        d = await driver()
        a, b = await _static_group(d)
        rejoin = await d.start_join(join_request(a.member_id, instance="a"))  # leader: rebalance
        d.advance(SESSION_MS - 1)
        assert not rejoin.done() and b.member_id in d.group.members
        d.advance(1)  # b never rejoined nor heartbeated: its session ends
        await settle()
        assert rejoin.result().generation_id == 2 and list(d.group.members) == [a.member_id]
        assert "b" not in d.group.static_members

    asyncio.run(scenario())


def test_session_expiry_removes_a_silent_member_and_rebalances() -> None:
    async def scenario() -> None:
        d = await driver()
        alive, silent = await d.stable_group(2)
        for _ in range(3):
            d.advance(SESSION_MS // 2)
            alive_beat = d.coordinator.heartbeat("g", alive.member_id, None, 1)
        assert isinstance(alive_beat, errors.RebalanceInProgressError)
        assert silent.member_id not in d.group.members
        rejoin = await d.start_join(join_request(alive.member_id))
        assert rejoin.result().generation_id == 2

    asyncio.run(scenario())


def test_commits_keep_a_member_session_alive() -> None:
    async def scenario() -> None:
        from brokers.coordinator.offset_store import CommitRequest, OffsetCommit

        d = await driver()
        [only] = await d.stable_group(1)
        for offset in range(4):
            d.advance(SESSION_MS // 2)
            commit = CommitRequest("g", only.member_id, None, 1, [OffsetCommit("t", 0, offset)])
            [(_, error)] = await d.coordinator.commit_offsets(commit)
            assert error is None
        assert d.group.state is GroupState.STABLE

    asyncio.run(scenario())


def test_pending_member_expires_after_its_session_timeout() -> None:
    async def scenario() -> None:
        d = await driver()
        pending = await d.new_member()
        d.advance(SESSION_MS)
        assert pending not in d.group.pending_members
        late = await d.coordinator.join_group(join_request(pending))
        assert isinstance(late.error, errors.UnknownMemberIdError)

    asyncio.run(scenario())


def test_new_member_join_timeout_answers_a_parked_join() -> None:
    async def scenario() -> None:
        d = await driver(new_member_join_timeout_ms=1000)
        [old] = await d.stable_group(1)
        newcomer = await d.start_join(join_request(require_known=False))
        d.coordinator.heartbeat("g", old.member_id, None, 1)  # alive, but never rejoins
        d.advance(1000)
        await settle()
        assert isinstance(newcomer.result().error, errors.UnknownMemberIdError)
        assert len(d.group.members) == 1

    asyncio.run(scenario())


def test_members_that_never_sync_are_removed() -> None:
    async def scenario() -> None:
        d = await driver()
        ids = [await d.new_member(rebalance_ms=5000) for _ in range(2)]
        tasks = [await d.start_join(join_request(i, rebalance_ms=5000)) for i in ids]
        d.advance(0)
        d.advance(0)
        await settle()
        leader = next(t.result() for t in tasks if t.result().members)
        other = next(t.result() for t in tasks if not t.result().members)
        await d.start_sync(leader.member_id, 1, {})
        assert d.group.state is GroupState.STABLE
        d.advance(5000)
        assert other.member_id not in d.group.members
        assert d.state() is GroupState.PREPARING_REBALANCE

    asyncio.run(scenario())


def test_failed_assignment_write_sends_members_back_to_rebalance() -> None:
    async def scenario() -> None:
        d = await driver()
        ids = [await d.new_member() for _ in range(2)]
        tasks = [await d.start_join(join_request(i)) for i in ids]
        d.advance(0)
        d.advance(0)
        await settle()
        results = [t.result() for t in tasks]
        follower = next(r for r in results if not r.members)
        leader = next(r for r in results if r.members)
        waiting = await d.start_sync(follower.member_id, 1)
        d.topic.fail_with = errors.CoordinatorNotAvailableError()
        failed = await d.start_sync(leader.member_id, 1, {leader.member_id: b"x"})
        assert isinstance(failed.result().error, errors.CoordinatorNotAvailableError)
        assert isinstance(waiting.result().error, errors.CoordinatorNotAvailableError)
        assert d.group.state is GroupState.PREPARING_REBALANCE

    asyncio.run(scenario())
