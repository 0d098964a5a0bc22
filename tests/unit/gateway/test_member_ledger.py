"""The bytes of group members a tenant holds (`gateway/kafka/member_ledger.py`): joins, rejoins,
static replacement, assignments, leaves, answers, expiry, members adopted as their coordinator
described them and the look-ups that takes, on a clock the test moves."""

from __future__ import annotations

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.member_ledger import (
    CONSUMER_HOLD_S,
    LOOKUP_BURST,
    LOOKUP_BYTES,
    LOOKUPS_PER_S,
    MAX_REBALANCE_S,
    OVERHEAD_BYTES,
    SWEEP_INTERVAL_S,
    MemberLedger,
)

pytestmark = pytest.mark.unit
KIB = 1024
SIZE = 100 * KIB
EACH = SIZE + OVERHEAD_BYTES
NONE, REQUIRED = ErrorCode.none, ErrorCode.member_id_required
HOLD_S = 40.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def ledger(members: int) -> tuple[MemberLedger, Clock]:
    """A ledger with room for `members` members of SIZE and no more."""
    clock = Clock()
    return MemberLedger(members * EACH, clock=clock), clock


def join(
    book: MemberLedger,
    member_id: str = "",
    *,
    size: int = SIZE,
    group: str = "g",
    instance: str | None = None,
    tenant: str = "acme",
    answer: str | None = None,
    error: ErrorCode = NONE,
) -> bool:
    """Join (answered with `answer`, or the member's own id) and say whether it was let through."""
    admission = book.join(tenant, group, member_id, instance, {"join": size}, HOLD_S)
    if admission is None:
        return False
    admission.answered(answer if answer is not None else member_id, error)
    return True


def test_a_tenant_holds_members_up_to_its_limit_and_other_tenants_are_apart() -> None:
    book, _ = ledger(3)
    assert [join(book, f"m{i}") for i in range(4)] == [True, True, True, False]
    assert book.held("acme") == 3 * EACH and book.members("acme") == 3
    assert join(book, "m0"), "a rejoin that holds no more passes at the limit"
    assert join(book, "m0", size=SIZE // 2), "a rejoin that shrinks passes"
    assert book.held("acme") == 3 * EACH - SIZE // 2
    assert join(book, "x", tenant="bolt")
    assert book.held("acme") == 3 * EACH - SIZE // 2


def test_a_new_member_is_filed_under_the_id_its_answer_names() -> None:
    book, _ = ledger(2)
    assert join(book, "", answer="m-1", error=REQUIRED)  # KIP-394: the id, then the rejoin
    assert join(book, "m-1")
    assert book.members("acme") == 1 and book.held("acme") == EACH
    assert join(book, "", answer="", error=ErrorCode.invalid_session_timeout)
    assert book.members("acme") == 1, "a join refused without a member id holds nothing"


def test_a_join_waiting_for_its_answer_holds_its_place() -> None:
    book, _ = ledger(1)
    waiting = book.join("acme", "g", "", None, {"join": SIZE}, HOLD_S)
    assert waiting is not None
    assert not join(book, "other"), "the waiting join's bytes count before it is answered"
    waiting.answered("m-1", NONE)
    waiting.answered("m-2", NONE)  # a second settlement changes nothing
    assert book.members("acme") == 1


def test_a_static_member_rejoining_under_a_new_id_replaces_its_old_one() -> None:
    book, _ = ledger(2)
    assert join(book, "", instance="i-1", answer="m-1")
    assert join(book, "", instance="i-1", answer="m-2")  # restarted: the same instance
    assert book.members("acme") == 1 and book.held("acme") == EACH
    book.left("acme", "g", "someone-else", "i-1")
    assert book.members("acme") == 1, "a leave naming a member id leaves only that member"
    book.left("acme", "g", "", "i-1")
    assert book.members("acme") == 0 and book.held("acme") == 0


def test_a_leader_s_assignments_count_and_are_refused_past_the_limit() -> None:
    book, _ = ledger(3)
    for member in ("m1", "m2"):
        assert join(book, member, size=0)
    assert book.sync("acme", "g", "m1", 1, [("m1", SIZE), ("m2", SIZE)]) is not None
    assert book.held("acme") == 2 * EACH
    assert book.sync("acme", "g", "m1", 1, [("m1", SIZE), ("m2", 3 * SIZE)]) is None
    assert book.held("acme") == 2 * EACH, "a refused SyncGroup changes nothing"
    follower = book.sync("acme", "g", "m2", 1, [])
    assert follower is not None
    follower.answered(None, ErrorCode.unknown_member_id)
    assert book.members("acme") == 2, "an error answer drops nothing: only leaves and expiry do"


def test_only_the_leader_s_answered_assignments_shrink() -> None:
    book, _ = ledger(3)
    leader = book.join("acme", "g", "m1", None, {"join": 0}, HOLD_S)
    assert leader is not None
    leader.answered("m1", NONE, leader="m1", generation=1)
    assert join(book, "m2", size=0)
    assert book.sync("acme", "g", "m1", 1, [("m2", SIZE)]) is not None
    follower = book.sync("acme", "g", "m2", 1, [("m2", 0)])  # the coordinator ignores it
    assert follower is not None
    follower.answered(None, NONE)
    assert book.held("acme") == 2 * OVERHEAD_BYTES + SIZE
    refused = book.sync("acme", "g", "m1", 1, [("m2", 0)])
    assert refused is not None
    refused.answered(None, ErrorCode.rebalance_in_progress)
    assert book.held("acme") == 2 * OVERHEAD_BYTES + SIZE, "nothing shrinks before NONE"
    taken = book.sync("acme", "g", "m1", 1, [("m2", 0)])
    assert taken is not None
    taken.answered(None, NONE)
    assert book.held("acme") == 2 * OVERHEAD_BYTES
    consistent(book)


def test_a_rejoin_shrinks_only_once_its_coordinator_took_it() -> None:
    book, _ = ledger(2)
    assert join(book, "m1")
    assert join(book, "m1", size=0, error=ErrorCode.inconsistent_group_protocol)
    assert book.held("acme") == EACH, "a refused rejoin leaves the coordinator's bytes as they were"
    assert join(book, "m1", size=0)
    assert book.held("acme") == OVERHEAD_BYTES
    consistent(book)


def test_an_error_answer_naming_a_member_keeps_it_for_its_hold() -> None:
    book, clock = ledger(2)
    assert join(book, "", answer="m-1", error=ErrorCode.coordinator_not_available)
    assert book.members("acme") == 1 and not book.knows("acme", "g", "m-1")
    clock.now += HOLD_S + SWEEP_INTERVAL_S + 1
    assert join(book, "m2") and join(book, "m3"), "it expired with its hold"


def test_assignments_to_members_not_known_here_are_charged() -> None:
    book, _ = ledger(2)
    assert join(book, "leader", size=0)
    assert book.sync("acme", "g", "leader", 1, [("elsewhere", SIZE)]) is not None
    assert book.members("acme") == 2 and book.held("acme") == 2 * OVERHEAD_BYTES + SIZE


def test_a_leave_frees_a_place() -> None:
    book, _ = ledger(2)
    assert join(book, "m1") and join(book, "m2") and not join(book, "m3")
    book.left("acme", "g", "m1", None)
    book.left("acme", "g", "unknown", None)
    book.left("other-tenant", "g", "m2", None)
    assert join(book, "m3") and book.members("acme") == 2


def test_members_not_heard_of_for_their_hold_are_swept_at_the_limit() -> None:
    book, clock = ledger(2)
    assert join(book, "quiet") and join(book, "alive")
    clock.now += HOLD_S / 2
    book.seen("acme", "g", "alive")
    clock.now += HOLD_S / 2 + 1
    assert join(book, "new"), "the quiet member's coordinator has let it go"
    assert book.members("acme") == 2
    assert not join(book, "newer"), "the member heard of recently is still held"


def test_a_member_the_sweep_finds_expired_while_it_rejoins_is_kept_and_counted_once() -> None:
    book, clock = ledger(2)
    assert join(book, "quiet") and join(book, "other")
    clock.now += HOLD_S + 1
    assert join(book, "quiet", size=2 * SIZE)  # at the limit: the sweep drops "other" only
    assert book.members("acme") == 1 and book.held("acme") == 2 * SIZE + OVERHEAD_BYTES
    consistent(book)


def test_a_sweep_runs_at_most_once_a_second() -> None:
    book, clock = ledger(1)
    assert join(book, "m1")
    assert not join(book, "m2")  # sweeps: m1 is alive
    clock.now += HOLD_S + SWEEP_INTERVAL_S / 2  # m1 expired, but a sweep ran half a second ago
    book._tenants["acme"].swept_at = clock.now - SWEEP_INTERVAL_S / 2
    assert not join(book, "m2")
    clock.now += SWEEP_INTERVAL_S
    assert join(book, "m2")


def test_a_member_parked_in_a_join_never_expires_and_one_whose_answer_is_lost_keeps_its_hold() -> (
    None
):
    book, clock = ledger(1)
    parked = book.join("acme", "g", "m1", None, {"join": SIZE}, HOLD_S)
    assert parked is not None
    clock.now += 10 * HOLD_S
    assert not join(book, "m2"), "a JoinGroup waiting at the coordinator keeps its member"
    parked.failed()
    clock.now += HOLD_S + MAX_REBALANCE_S - 1
    assert not join(book, "m2"), "a rebalance may keep it parked, then its session"
    clock.now += 2 + SWEEP_INTERVAL_S
    assert join(book, "m2")


def test_a_leader_shrinks_assignments_once_per_generation() -> None:
    book, _ = ledger(3)
    leader = book.join("acme", "g", "m1", None, {"join": 0}, HOLD_S)
    assert leader is not None
    leader.answered("m1", NONE, leader="m1", generation=4)
    stale = book.sync("acme", "g", "m1", 3, [("m1", 0)])
    assert stale is not None
    first = book.sync("acme", "g", "m1", 4, [("m1", SIZE)])
    assert first is not None
    first.answered(None, NONE)
    stale.answered(None, NONE)  # an earlier generation's: the coordinator refused or ignored it
    again = book.sync("acme", "g", "m1", 4, [("m1", 0)])  # stable: the coordinator ignores it
    assert again is not None
    again.answered(None, NONE)
    assert book.held("acme") == OVERHEAD_BYTES + SIZE
    consistent(book)


def test_members_known_only_by_an_assignment_are_not_joined_here() -> None:
    book, _ = ledger(3)
    assert join(book, "leader", size=0)
    assert book.sync("acme", "g", "leader", 1, [("elsewhere", SIZE)]) is not None
    assert book.knows("acme", "g", "leader") and not book.knows("acme", "g", "elsewhere")
    assert join(book, "elsewhere")
    assert book.knows("acme", "g", "elsewhere")
    assert book.held("acme") == 2 * OVERHEAD_BYTES + 2 * SIZE


def test_an_instance_id_counts_only_once_an_answer_confirmed_it() -> None:
    book, _ = ledger(3)
    assert join(book, "", instance="i-1", answer="s1")
    assert join(book, "d1", instance="i-1", error=ErrorCode.fenced_instance_id)
    assert join(book, "d1")  # the dynamic member rejoins without the instance
    assert book.members("acme") == 2, "the static member s1 is still held"
    consistent(book)


def test_a_group_s_entries_go_with_its_last_member() -> None:
    book, _ = ledger(3)
    for i in range(100):
        admission = book.join("acme", f"g{i}", "m", None, {"join": 0}, HOLD_S, 60.0)
        assert admission is not None
        admission.answered("m", NONE, leader="m", generation=1)
        book.left("acme", f"g{i}", "m", None)
    tenant = book._tenants["acme"]
    assert (tenant.members, tenant.leaders, tenant.rebalance_s, tenant.filed) == ({}, {}, {}, {})


def test_a_timeout_only_grows() -> None:
    book, clock = ledger(1)
    assert join(book, "m1")
    short = book.join("acme", "g", "m1", None, {"join": SIZE}, 0.001)
    assert short is not None
    short.answered("", ErrorCode.invalid_session_timeout)  # refused: the member keeps its old one
    clock.now += HOLD_S - 1
    assert not join(book, "m2")


def test_a_kip_848_heartbeat_replaces_only_the_fields_it_sends() -> None:
    book, _ = ledger(2)
    names = {"subscribed_topic_names": SIZE, "rack_id": None, "instance_id": None}
    admission = book.join("acme", "g", "m1", None, names, CONSUMER_HOLD_S)
    assert admission is not None
    admission.answered("m1", NONE)
    beat = book.heartbeat("acme", "g", "m1", None, {"rack_id": 2, "subscribed_topic_names": None})
    assert beat is not None
    beat.answered("m1", NONE)
    assert book.held("acme") == EACH + 2, "a heartbeat naming only its rack keeps the names"
    grown = {"subscribed_topic_names": 2 * SIZE + OVERHEAD_BYTES}
    assert book.heartbeat("acme", "g", "m1", None, grown) is None
    assert book.held("acme") == EACH + 2
    smaller = book.heartbeat("acme", "g", "m1", None, {"subscribed_topic_names": 0})
    assert smaller is not None
    assert book.held("acme") == EACH + 2, "charged at the larger until its answer"
    smaller.answered("m1", NONE)
    assert book.held("acme") == OVERHEAD_BYTES + 2
    consistent(book)


def test_a_group_s_longest_rebalance_timeout_holds_every_member() -> None:
    book, clock = ledger(2)
    slow = book.join("acme", "g", "slow", None, {"join": 0}, HOLD_S, rebalance_s=1000.0)
    assert slow is not None
    slow.answered("slow", NONE)
    assert join(book, "parked")  # its own rebalance timeout is short
    clock.now += HOLD_S + 500
    assert not join(book, "new", group="h"), "the group's rebalance may still hold it"


def consistent(book: MemberLedger) -> None:
    for tenant in book._tenants.values():
        assert tenant.held == sum(m.charge for m in tenant.members.values())
        assert all(m.key == k for k, m in tenant.members.items())


def test_an_adopted_member_is_charged_known_and_expires_like_one_joined_here() -> None:
    book, clock = ledger(2)
    assert book.adopt("acme", "g", "z", None, {"subscribed_topic_names": SIZE}, CONSUMER_HOLD_S)
    assert book.knows("acme", "g", "z") and book.held("acme") == EACH
    assert book.adopt("acme", "g", "z", None, {"subscribed_topic_names": 1}, CONSUMER_HOLD_S)
    assert book.held("acme") == EACH, "adopting a known member changes nothing"
    assert join(book, "m1")
    assert not book.adopt("acme", "g", "y", None, {"x": SIZE}, CONSUMER_HOLD_S), "no room"
    assert not book.knows("acme", "g", "y") and book.members("acme") == 2
    clock.now += max(CONSUMER_HOLD_S, HOLD_S) + 1  # z's hold, m1's session (no rebalance)
    assert book.adopt("acme", "g", "y", None, {"x": SIZE}, CONSUMER_HOLD_S), "both swept"
    assert book.members("acme") == 1
    consistent(book)


def test_an_adopted_static_member_is_replaced_by_its_rejoin_under_a_new_id() -> None:
    book, _ = ledger(2)
    assert book.adopt("acme", "g", "z", "i-1", {"x": SIZE}, CONSUMER_HOLD_S)
    assert book.held("acme") == EACH  # the instance id's bytes are in the parts measured
    assert join(book, "z2", instance="i-1")
    assert not book.knows("acme", "g", "z") and book.members("acme") == 1
    consistent(book)


def test_an_adopted_member_known_by_an_assignment_keeps_it() -> None:
    book, _ = ledger(3)
    assert join(book, "leader")
    admission = book.sync("acme", "g", "leader", 1, [("z", SIZE)])
    assert admission is not None and not book.knows("acme", "g", "z")
    assert book.adopt("acme", "g", "z", None, {"x": SIZE}, CONSUMER_HOLD_S)
    assert book.knows("acme", "g", "z") and book.held("acme") == 2 * EACH + SIZE
    consistent(book)


def test_look_ups_are_a_burst_then_a_few_a_second_per_tenant_and_large_answers_cost_more() -> None:
    book, clock = ledger(1)
    acme = book.look_ups("acme")
    assert all(acme.take() for _ in range(int(LOOKUP_BURST)))
    assert not acme.take()
    assert book.look_ups("bolt").take(), "another tenant's are its own"
    clock.now += 1.0
    assert sum(acme.take() for _ in range(100)) == int(LOOKUPS_PER_S)
    clock.now += 10.0  # the bucket full again
    acme.spend(30 * LOOKUP_BYTES)  # an answer of 30 MiB: 30 look-ups' worth
    assert not acme.take()
    clock.now += (30 - LOOKUP_BURST + 1) / LOOKUPS_PER_S
    assert acme.take()


def test_a_stale_description_does_not_replace_the_instance_that_rejoined_here() -> None:
    book, _ = ledger(3)
    assert join(book, "z2", instance="i-1")
    assert not book.adopt("acme", "g", "z", "i-1", {"x": SIZE}, CONSUMER_HOLD_S)
    assert book.knows("acme", "g", "z2") and not book.knows("acme", "g", "z")
    consistent(book)
