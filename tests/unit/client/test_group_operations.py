"""Group, offset and reset operations through the real wire path against the in-memory broker,
at every version of the client's table (Kafka semantics; see fake_broker.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from brokers.client.admin import Admin
from brokers.client.assignment import decode_assignment, encode_assignment
from brokers.client.cluster import MAX_KNOWN_COORDINATORS, Cluster
from brokers.client.config import ClientConfig
from brokers.client.errors import BrokerResponseError, OffsetResetError
from brokers.client.metadata import TopicPartition
from brokers.client.offset_reset import ResetKind, ResetSpec, execute_reset, prepare_reset
from brokers.client.offsets import EARLIEST, LATEST
from brokers.client.versions import CLIENT_VERSIONS, ApiKey
from brokers.wire.errors import ErrorCode
from tests.unit.client.fake_broker import FakeBroker, FakeGroup, FakeMember, FakePartition

pytestmark = pytest.mark.unit
T = TypeVar("T")
TP0, TP1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
GROUP_APIS = (
    ApiKey.FIND_COORDINATOR,
    ApiKey.LIST_GROUPS,
    ApiKey.DESCRIBE_GROUPS,
    ApiKey.DELETE_GROUPS,
    ApiKey.OFFSET_FETCH,
    ApiKey.OFFSET_COMMIT,
    ApiKey.LIST_OFFSETS,
)


def pinned(api_key: ApiKey, version: int) -> dict[int, tuple[int, int]]:
    """The client's table with one API pinned to one version (what the fake advertises)."""
    table = {int(k): v for k, v in CLIENT_VERSIONS.items()}
    table[int(api_key)] = (version, version)
    return table


def every_group_api_version() -> list[tuple[ApiKey, int]]:
    return [
        (api, v)
        for api in GROUP_APIS
        for v in range(CLIENT_VERSIONS[api][0], CLIENT_VERSIONS[api][1] + 1)
    ]


def seeded(broker: FakeBroker) -> FakeBroker:
    broker.topics["orders"] = [
        FakePartition(start=5, end=100, timestamps={10: 1_000, 50: 2_000, 90: 3_000}),
        FakePartition(start=0, end=40),
    ]
    broker.groups["idle"] = FakeGroup(offsets={TP0: 60, TP1: 10})
    member = FakeMember("m-1", instance_id="i-1", assignment=encode_assignment([TP0, TP1], 1))
    broker.groups["busy"] = FakeGroup(state="Stable", members=[member], offsets={TP0: 70})
    return broker


def run(broker: FakeBroker, action: Callable[[Admin], Awaitable[T]]) -> T:
    async def main() -> T:
        slept: list[float] = []

        async def sleep(seconds: float) -> None:
            slept.append(seconds)

        cluster = Cluster("fake-broker:9092", ClientConfig(), sleep=sleep, connector=broker.connect)
        async with Admin(cluster) as admin:
            return await action(admin)

    return asyncio.run(main())


@pytest.mark.parametrize(("api", "version"), every_group_api_version(), ids=str)
def test_group_operations_at_every_version(api: ApiKey, version: int) -> None:
    broker = seeded(FakeBroker(pinned(api, version)))

    async def scenario(admin: Admin) -> None:
        listed = await admin.list_groups()
        assert [g.group_id for g in listed] == ["busy", "idle"]
        busy = (await admin.describe_groups(["busy"]))["busy"]
        assert busy.state == "Stable"
        (member,) = busy.members
        assert member.assignment == (TP0, TP1)
        committed = await admin.fetch_offsets("idle")
        assert {tp: c.offset for tp, c in committed.items()} == {TP0: 60, TP1: 10}
        only = await admin.fetch_offsets("idle", [TP1])
        assert list(only) == [TP1]
        ends = await admin.list_offsets({TP0: EARLIEST, TP1: LATEST})
        assert (ends[TP0].offset, ends[TP1].offset) == (5, 40)
        await admin.commit_offsets("fresh", {TP0: 7})
        assert broker.groups["fresh"].offsets == {TP0: 7}
        deleted = await admin.delete_groups(["fresh", "busy", "missing"])
        assert deleted["fresh"] is None
        assert _code(deleted["busy"]) == ErrorCode.non_empty_group
        assert _code(deleted["missing"]) == ErrorCode.group_id_not_found

    run(broker, scenario)
    assert (int(api), version) in broker.requests


def _code(error: object) -> ErrorCode:
    assert isinstance(error, BrokerResponseError)
    return error.code


def test_state_filter_applies_even_without_broker_support() -> None:
    broker = seeded(FakeBroker(pinned(ApiKey.LIST_GROUPS, 3)))  # v3: no states, no filter
    listed = run(broker, lambda admin: admin.list_groups(["empty"]))
    assert listed == []  # states unknown at v3, so nothing can match
    broker = seeded(FakeBroker())
    listed = run(broker, lambda admin: admin.list_groups(["empty"]))
    assert [(g.group_id, g.state) for g in listed] == [("idle", "Empty")]


def test_unknown_group_describes_as_dead() -> None:
    described = run(seeded(FakeBroker()), lambda admin: admin.describe_groups(["nobody"]))
    assert described["nobody"].state == "Dead"
    assert described["nobody"].members == ()


def test_coordinator_move_is_followed_after_backoff() -> None:
    broker = seeded(FakeBroker())
    broker.inject(
        ApiKey.OFFSET_FETCH, ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress
    )
    committed = run(broker, lambda admin: admin.fetch_offsets("idle"))
    assert committed[TP0].offset == 60
    lookups = [r for r in broker.requests if r[0] == ApiKey.FIND_COORDINATOR]
    assert len(lookups) == 2  # NOT_COORDINATOR forgot it; loading kept it


def test_non_retriable_group_error_surfaces_at_once() -> None:
    broker = seeded(FakeBroker())
    broker.inject(ApiKey.DESCRIBE_GROUPS, ErrorCode.group_authorization_failed)
    with pytest.raises(BrokerResponseError) as raised:
        run(broker, lambda admin: admin.describe_groups(["idle"]))
    assert raised.value.code == ErrorCode.group_authorization_failed
    assert (
        broker.requests.count((ApiKey.DESCRIBE_GROUPS, CLIENT_VERSIONS[ApiKey.DESCRIBE_GROUPS][1]))
        == 1
    )


def test_simple_commit_to_an_active_group_is_refused() -> None:
    with pytest.raises(BrokerResponseError) as raised:
        run(seeded(FakeBroker()), lambda admin: admin.commit_offsets("busy", {TP0: 1}))
    assert raised.value.code == ErrorCode.unknown_member_id


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (ResetSpec(ResetKind.EARLIEST), {TP0: 5, TP1: 0}),
        (ResetSpec(ResetKind.LATEST), {TP0: 100, TP1: 40}),
        (ResetSpec(ResetKind.OFFSET, 30), {TP0: 30, TP1: 30}),
        (ResetSpec(ResetKind.OFFSET, 1_000), {TP0: 100, TP1: 40}),  # clamped to the log end
        (ResetSpec(ResetKind.SHIFT, -58), {TP0: 5, TP1: 0}),  # clamped to the log start
        (ResetSpec(ResetKind.DATETIME, 1_500), {TP0: 50, TP1: 40}),  # no record → log end
    ],
    ids=["earliest", "latest", "offset", "offset-clamped", "shift-clamped", "datetime"],
)
def test_reset_plans_and_executes(spec: ResetSpec, expected: dict[TopicPartition, int]) -> None:
    broker = seeded(FakeBroker())

    async def scenario(admin: Admin) -> None:
        plan = await prepare_reset(admin.cluster, "idle", spec, [TP0, TP1])
        assert {e.tp: e.target for e in plan} == expected
        assert {e.tp: e.current for e in plan} == {TP0: 60, TP1: 10}
        assert broker.groups["idle"].offsets == {TP0: 60, TP1: 10}  # planning commits nothing
        await execute_reset(admin.cluster, "idle", plan)

    run(broker, scenario)
    assert broker.groups["idle"].offsets == expected


def test_shift_without_a_committed_offset_is_refused() -> None:
    broker = seeded(FakeBroker())
    spec = ResetSpec(ResetKind.SHIFT, 1)
    with pytest.raises(OffsetResetError, match="orders-1"):
        run(broker, lambda admin: prepare_reset(admin.cluster, "busy", spec, [TP0, TP1]))


@pytest.mark.parametrize("version", range(4))
def test_assignment_round_trips_and_garbage_is_not_an_error(version: int) -> None:
    assigned = [TopicPartition("a", 2), TopicPartition("b", 0)]
    assert decode_assignment(encode_assignment(assigned, version)) == assigned
    assert decode_assignment(b"") == []
    assert decode_assignment(b"\x00") is None
    assert decode_assignment(b"\x00\x00\x7f\xff\xff\xff") is None  # array count past the end
    assert (
        decode_assignment(
            encode_assignment(assigned, 3)[:1] + b"\x09" + encode_assignment(assigned, 3)[2:]
        )
        == assigned
    )


def test_known_coordinators_are_bounded_least_recently_used_first() -> None:
    """The gateway's HTTP API looks up the coordinator of any group a URL names: the cluster
    keeps at most `MAX_KNOWN_COORDINATORS`, so a stream of new names holds no memory."""
    broker = seeded(FakeBroker())
    finds = int(ApiKey.FIND_COORDINATOR)

    async def main() -> tuple[int, int, int]:
        cluster = Cluster("fake-broker:9092", ClientConfig(), connector=broker.connect)
        await cluster.coordinator("kept")
        for i in range(MAX_KNOWN_COORDINATORS + 50):
            await cluster.coordinator(f"g-{i}")
            if i % 100 == 0:
                await cluster.coordinator("kept")  # recently used: stays
        held = len(cluster._coordinators)
        before = sum(1 for key, _ in broker.requests if key == finds)
        await cluster.coordinator("kept")
        after_kept = sum(1 for key, _ in broker.requests if key == finds)
        await cluster.coordinator("g-0")  # the oldest: forgotten, looked up again
        after_oldest = sum(1 for key, _ in broker.requests if key == finds)
        await cluster.close()
        return held, after_kept - before, after_oldest - after_kept

    held, kept_lookups, oldest_lookups = asyncio.run(main())
    assert held == MAX_KNOWN_COORDINATORS
    assert (kept_lookups, oldest_lookups) == (0, 1)
