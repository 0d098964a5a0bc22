"""The group APIs keep the tenant's member ledger (`gateway/kafka/member_ledger.py`): a JoinGroup,
SyncGroup or ConsumerGroupHeartbeat past `tenant.max.group.member.bytes` is GROUP_MAX_SIZE_REACHED
and never forwarded; answers file members under their ids, leaves answered NONE free their places,
and a member this gateway did not let through may not keep itself alive here (Heartbeat and
OffsetCommit REBALANCE_IN_PROGRESS, a KIP-848 heartbeat UNKNOWN_MEMBER_ID: it rejoins here) unless
it is a KIP-848 member its coordinator describes: then it is charged here as described there."""

from __future__ import annotations

import asyncio
import datetime
from dataclasses import replace
from typing import Any

import pytest

from brokers.wire.entities import make, response_module
from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import HeldGroup
from gateway.kafka.filters import (
    consumer_group_heartbeat,
    heartbeat,
    join_group,
    leave_group,
    offset_commit,
    sync_group,
)
from gateway.kafka.filters.member_size import TOPIC_OVERHEAD_BYTES
from gateway.kafka.member_ledger import LOOKUP_BURST, OVERHEAD_BYTES, MemberLedger
from tests.unit.gateway.filters.harness import (
    FakeFleet,
    context,
    forwarded,
    replied,
    request,
    response,
    run,
)
from tests.unit.gateway.filters.test_join_group import _join
from tests.unit.gateway.filters.test_offset_commit import _commit
from tests.unit.gateway.filters.test_sync_group import _sync

pytestmark = pytest.mark.unit
SIZE = 10_000
NAME = len("range")
IDS = 2 + 3 * len("app")  # a two-character member id and the harness's client id
EACH = OVERHEAD_BYTES + SIZE + NAME + IDS  # a JoinGroup member "mN" of SIZE metadata ("range")


def call(
    module: Any, version: int, book: MemberLedger, req: Any, fleet: FakeFleet | None = None
) -> Any:
    return asyncio.run(run(module, context(module, version, members=book, fleet=fleet), req))


def joined(book: MemberLedger, member_id: str, version: int = 9) -> Any:
    """A member's JoinGroup (connect protocol), forwarded and answered NONE under its id."""
    sent = forwarded(call(join_group, version, book, _join_as(version, member_id)))
    sent.on_response(_join_answer(version, member_id, ErrorCode.none))
    return sent


def _join_as(version: int, member_id: str) -> Any:
    return replace(_join(version, "connect", b"x" * SIZE), member_id=member_id)  # type: ignore[type-var]


def _join_answer(version: int, member_id: str, error: ErrorCode) -> Any:
    return response(
        join_group,
        version,
        "JoinGroupResponse",
        error_code=error,
        generation_id=1,
        protocol_type="connect",
        protocol_name="range",
        leader=member_id,
        skip_assignment=False,
        member_id=member_id,
        members=(),
    )


@pytest.mark.parametrize("version", [0, 4, 9])
def test_a_join_past_the_tenant_s_member_bytes_is_refused(version: int) -> None:
    book = MemberLedger(2 * EACH)
    joined(book, "m1", version)
    joined(book, "m2", version)
    refused = replied(call(join_group, version, book, _join_as(version, "m3")))
    assert refused.error_code == ErrorCode.group_max_size_reached
    assert book.members("acme") == 2
    joined(book, "m1", version)  # a member the tenant holds rejoins at the limit


def test_a_join_whose_answer_never_comes_keeps_its_place() -> None:
    book = MemberLedger(EACH)
    sent = forwarded(call(join_group, 9, book, _join_as(9, "")))
    sent.on_failure()
    assert replied(call(join_group, 9, book, _join_as(9, ""))).error_code == (
        ErrorCode.group_max_size_reached
    )


def test_a_leader_s_assignments_past_the_limit_are_refused() -> None:
    book = MemberLedger(EACH + 1 + SIZE)  # "m-1": one character more than EACH's ids
    joined(book, "m-1")
    assert forwarded(call(sync_group, 5, book, _sync(5, b"y" * SIZE, "connect")))
    over = _sync(5, b"y" * (SIZE + 1), "connect")
    assert replied(call(sync_group, 5, book, over)).error_code == ErrorCode.group_max_size_reached


def test_a_leave_answered_none_frees_the_member_and_a_refused_one_does_not() -> None:
    book = MemberLedger(2 * EACH)
    joined(book, "m1")
    joined(book, "m2")
    identities = tuple(
        request(leave_group, 5, "MemberIdentity", member_id=m, group_instance_id=None, reason=None)
        for m in ("m1", "m2")
    )
    leave = request(leave_group, 5, "LeaveGroupRequest", group_id="g", members=identities)
    sent = forwarded(call(leave_group, 5, book, leave))
    results = (
        response(
            leave_group,
            5,
            "MemberResponse",
            member_id="m1",
            group_instance_id=None,
            error_code=ErrorCode.none,
        ),
        response(
            leave_group,
            5,
            "MemberResponse",
            member_id="m2",
            group_instance_id=None,
            error_code=ErrorCode.unknown_member_id,
        ),
    )
    sent.on_response(
        response(leave_group, 5, "LeaveGroupResponse", error_code=ErrorCode.none, members=results)
    )
    assert book.members("acme") == 1, "m2's leave failed: its coordinator may still hold it"
    old = request(leave_group, 0, "LeaveGroupRequest", group_id="g", member_id="m2")
    forwarded(call(leave_group, 0, book, old)).on_response(
        response(leave_group, 0, "LeaveGroupResponse", error_code=ErrorCode.none)
    )
    assert book.members("acme") == 0


def test_a_member_not_let_through_here_must_rejoin_to_keep_itself_alive() -> None:
    book = MemberLedger(2 * EACH)
    joined(book, "m1")
    beat = request(
        heartbeat, 4, "HeartbeatRequest", group_id="g", generation_id=1, member_id="m1",
        group_instance_id=None,
    )  # fmt: skip
    assert forwarded(call(heartbeat, 4, book, beat)).request.group_id == "acme_g"
    stranger = replace(beat, member_id="m9")
    answer = replied(call(heartbeat, 4, book, stranger))
    assert answer.error_code == ErrorCode.rebalance_in_progress
    commit: Any = _commit(8, "t")
    assert forwarded(call(offset_commit, 8, book, replace(commit, member_id="m1")))
    refused = replied(call(offset_commit, 8, book, replace(commit, member_id="m9")))
    assert {p.error_code for t in refused.topics for p in t.partitions} == {
        ErrorCode.rebalance_in_progress
    }
    simple = replace(commit, member_id="", generation_id_or_member_epoch=-1)
    assert forwarded(call(offset_commit, 8, book, simple)), "a commit of no member passes"
    unknown_beat = _consumer("z", 3, None)
    answer = replied(call(consumer_group_heartbeat, 1, book, unknown_beat))
    assert answer.error_code == ErrorCode.unknown_member_id


def _consumer(member_id: str, epoch: int, names: tuple[str, ...] | None) -> Any:
    return request(
        consumer_group_heartbeat,
        1,
        "ConsumerGroupHeartbeatRequest",
        group_id="g",
        member_id=member_id,
        member_epoch=epoch,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=names,
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=(),
    )


def _consumer_answer(member_id: str, error: ErrorCode) -> Any:
    return response(
        consumer_group_heartbeat,
        1,
        "ConsumerGroupHeartbeatResponse",
        error_code=error,
        error_message=None,
        member_id=member_id,
        member_epoch=1,
        heartbeat_interval=datetime.timedelta(seconds=5),
        assignment=None,
    )


def test_kip_848_members_join_up_to_the_limit_and_a_leave_frees_one() -> None:
    names = ("t" * SIZE,)
    each = OVERHEAD_BYTES + len("acme_") + SIZE + TOPIC_OVERHEAD_BYTES + 1 + 3 * len("app")
    book = MemberLedger(2 * each)
    for member in ("a", "b"):
        sent = forwarded(call(consumer_group_heartbeat, 1, book, _consumer(member, 0, names)))
        sent.on_response(_consumer_answer(member, ErrorCode.none))
    refused = replied(call(consumer_group_heartbeat, 1, book, _consumer("c", 0, names)))
    assert refused.error_code == ErrorCode.group_max_size_reached
    assert "tenant.max.group.member.bytes" in refused.error_message
    bigger = _consumer("a", 1, (*names, "u"))  # one more topic: over, by its prefix and overhead
    assert replied(call(consumer_group_heartbeat, 1, book, bigger)).error_code == (
        ErrorCode.group_max_size_reached
    )
    leave = forwarded(call(consumer_group_heartbeat, 1, book, _consumer("a", -1, None)))
    leave.on_response(_consumer_answer("a", ErrorCode.none))
    assert book.members("acme") == 1
    sent = forwarded(call(consumer_group_heartbeat, 1, book, _consumer("c", 0, names)))
    sent.on_response(_consumer_answer("c", ErrorCode.none))
    assert book.members("acme") == 2


def test_a_sync_of_a_member_not_let_through_here_must_rejoin() -> None:
    book = MemberLedger(2 * EACH)
    stranger = replace(_sync(5, b"", "connect"), member_id="m9")  # type: ignore[type-var]
    answer = replied(call(sync_group, 5, book, stranger))
    assert answer.error_code == ErrorCode.rebalance_in_progress
    joined(book, "m-1")
    assert forwarded(call(sync_group, 5, book, _sync(5, b"", "connect")))


def test_a_rebalance_timeout_past_thirty_minutes_is_forwarded_as_thirty() -> None:
    book = MemberLedger(2 * EACH)
    long: Any = replace(_join_as(9, "m1"), rebalance_timeout=datetime.timedelta(days=24))
    sent = forwarded(call(join_group, 9, book, long))
    assert sent.request.rebalance_timeout == datetime.timedelta(minutes=30)
    short = forwarded(call(join_group, 9, book, _join_as(9, "m1")))
    assert short.request.rebalance_timeout == datetime.timedelta(seconds=30)


def _described(member_id: str, names: tuple[str, ...], instance: str | None = None) -> Any:
    """A member as ConsumerGroupDescribe v0 shows it (fleet names)."""
    assignment = make(response_module(69, 0), "Assignment", topic_partitions=())
    return make(
        response_module(69, 0),
        "Member",
        member_id=member_id,
        instance_id=instance,
        rack_id=None,
        member_epoch=3,
        client_id="app",
        client_host="/10.0.0.1",
        subscribed_topic_names=names,
        subscribed_topic_regex=None,
        assignment=assignment,
        target_assignment=assignment,
    )


def _held(*members: Any) -> FakeFleet:
    return FakeFleet(groups={"acme_g": HeldGroup("uniform", {m.member_id: m for m in members})})


def test_a_kip_848_member_its_coordinator_holds_is_charged_here_and_beats_on() -> None:
    names = ("acme_" + "t" * SIZE,)
    held = OVERHEAD_BYTES + len(names[0]) + TOPIC_OVERHEAD_BYTES + len("uniform") + 1 + 9
    book = MemberLedger(2 * held + len("i-1"))  # z, and y with its instance id
    fleet = _held(_described("z", names), _described("y", names, instance="i-1"))
    beat = _consumer("z", 3, None)
    sent = forwarded(call(consumer_group_heartbeat, 1, book, beat, fleet))
    assert sent.request.member_id == "z" and sent.request.group_id == "acme_g"
    assert book.knows("acme", "g", "z") and book.held("acme") == held
    assert fleet.lookups == [("members", 1)]
    forwarded(call(consumer_group_heartbeat, 1, book, beat, fleet))  # known now: no look-up
    assert fleet.lookups == [("members", 1)]
    commit: Any = _commit(9, "t")
    commit = replace(commit, member_id="y", generation_id_or_member_epoch=3)
    assert forwarded(call(offset_commit, 9, book, commit, fleet)), "its commit adopts it too"
    assert book.held("acme") == 2 * held + len("i-1")
    third = _held(_described("x", names))
    answer = replied(call(consumer_group_heartbeat, 1, book, _consumer("x", 3, None), third))
    assert answer.error_code == ErrorCode.unknown_member_id, "no room: it rejoins here"
    assert not book.knows("acme", "g", "x") and book.held("acme") == 2 * held + len("i-1")


def test_a_member_its_coordinator_does_not_hold_rejoins_and_look_ups_are_bounded() -> None:
    book = MemberLedger(1 << 20)
    fleet = _held(_described("z", ("acme_t",)))
    stranger = _consumer("w", 3, None)
    answer = replied(call(consumer_group_heartbeat, 1, book, stranger, fleet))
    assert answer.error_code == ErrorCode.unknown_member_id
    for _ in range(int(LOOKUP_BURST)):  # the tenant's look-ups: a burst, then none
        replied(call(consumer_group_heartbeat, 1, book, stranger, fleet))
    asked = len(fleet.lookups)
    answer = replied(call(consumer_group_heartbeat, 1, book, _consumer("z", 3, None), fleet))
    assert answer.error_code == ErrorCode.unknown_member_id, "held, but no look-up left"
    assert len(fleet.lookups) == asked == LOOKUP_BURST
    classic = replied(call(heartbeat, 4, book, request(
        heartbeat, 4, "HeartbeatRequest", group_id="g", generation_id=1, member_id="z",
        group_instance_id=None,
    ), fleet))  # fmt: skip
    assert classic.error_code == ErrorCode.rebalance_in_progress, "a classic member: no look-up"
    assert len(fleet.lookups) == asked
