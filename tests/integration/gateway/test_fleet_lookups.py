"""The gateway's fleet view against a real in-process broker: what a tenant's request makes it
look up (partition counts of named topics, names of topic ids) is asked of the broker for those
topics alone, never by reading every topic of the fleet, and answers exactly as a full read would.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from pathlib import Path
from typing import Any

import pytest

from brokers.client import Cluster
from brokers.client.admin import Admin
from brokers.client.topics import NewTopic
from brokers.coordinator.consumer_protocol import encode_subscription
from brokers.wire.entities import make, request_module
from gateway.http.topic_metadata import TopicMetadata
from gateway.kafka import fleet as fleet_module
from gateway.kafka.fleet import FleetDirectory
from tests.integration.inproc import broker_thread
from tests.polling import wait_until_async

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_counts_and_ids_are_looked_up_without_reading_the_whole_fleet(tmp_path: Path) -> None:
    with broker_thread(tmp_path) as broker:
        bootstrap = f"127.0.0.1:{broker.port}"

        async def scenario() -> None:
            async with Admin.for_bootstrap(bootstrap) as admin:
                made = await admin.create_topics(
                    [NewTopic(f"t{i}", i + 1, 1, {}) for i in range(5)]
                    + [NewTopic("acme_x", 2, 1, {}), NewTopic("acme_y", 1, 1, {})]
                )
                assert set(made.values()) == {None}
            cluster = Cluster(bootstrap)
            fleet = FleetDirectory(cluster, advertised_host="gw", port_base=9000)
            try:
                full = await fleet.refresh()
                ids = {name: full.topics[name].topic_id for name in ("t1", "t3")}
                snapshot = fleet._metadata
                asked = record_metadata_topics(cluster)

                counts = await fleet.partition_counts(["t1", "t3", "gone", "t1"])
                assert counts == {"t1": 2, "t3": 4, "gone": None}
                unknown = uuid.uuid4()
                names = await fleet.topic_names([ids["t1"], unknown, ids["t3"]])
                assert names == {ids["t1"]: "t1", unknown: None, ids["t3"]: "t3"}
                zero = uuid.UUID(int=0)
                assert await fleet.topic_names([zero]) == {zero: None}
                # Neither look-up read the fleet again: each named its topics or ids alone.
                assert fleet._metadata is snapshot
                assert asked == [["t1", "t3", "gone"], [ids["t1"], unknown, ids["t3"]]]
                counts = await fleet.tenant_partitions(["acme", "bolt", "t"])
                assert counts == {"acme": 3, "bolt": 0, "t": 0}  # `t1` is no tenant's

                # The HTTP side's wait for a topic made after the last full read asks for that
                # topic alone, and the kept metadata learns it.
                async with Admin.for_bootstrap(bootstrap) as admin:
                    made = await admin.create_topics([NewTopic("late", 3, 1, {})])
                    assert made == {"late": None}
                asked.clear()
                waiter = TopicMetadata(cluster)
                assert await waiter.partitions("late", wait_s=10) == 3
                assert asked and all(topics == ["late"] for topics in asked)
                assert len((await cluster.metadata()).topics["late"].partitions) == 3

                # An id the hot path does not know (Produce/Fetch v13) is looked up alone in the
                # background; meanwhile it is unknown (the client retries).
                other = Cluster(bootstrap)
                try:
                    late_id = (await other.metadata()).topics["late"].topic_id
                finally:
                    await other.close()
                assert late_id is not None and fleet.known_topic_name(late_id) is None
                asked.clear()

                async def known() -> bool:
                    return fleet.known_topic_name(late_id) == "late"

                await wait_until_async(known, what="the missed id looked up", timeout=10)
                assert asked == [[late_id]]
            finally:
                await cluster.close()

        asyncio.run(scenario())


def record_metadata_topics(cluster: Cluster) -> list[list[Any] | None]:
    """The topics (names or ids) of every Metadata request sent from now on; None for all."""
    asked: list[list[Any] | None] = []
    connect = cluster.any_connection

    class Recording:
        def __init__(self, connection: Any) -> None:
            self._connection = connection

        def version(self, api_key: int) -> int:
            return int(self._connection.version(api_key))

        async def send(self, request: Any, **kw: Any) -> Any:
            topics = getattr(request, "topics", None)
            asked.append(None if topics is None else [t.name or t.topic_id for t in topics])
            return await self._connection.send(request, **kw)

    async def recording() -> Any:
        return Recording(await connect())

    cluster.any_connection = recording  # type: ignore[method-assign]
    return asked


def test_the_periodic_refresh_asks_for_the_brokers_alone_and_reads_every_topic_rarely(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every `fleet.refresh.interval.ms` a read of every topic cost the gateway's loop ~100 ms at
    17,000 partitions; the brokers alone cost what the brokers are."""
    monkeypatch.setattr(fleet_module, "FULL_READ_S", 0.5, raising=False)
    with broker_thread(tmp_path) as broker:
        bootstrap = f"127.0.0.1:{broker.port}"

        async def scenario() -> None:
            async with Admin.for_bootstrap(bootstrap) as admin:
                assert await admin.create_topics([NewTopic("t", 3, 1, {})]) == {"t": None}
            cluster = Cluster(bootstrap)
            seen: list[set[int]] = []
            fleet = FleetDirectory(
                cluster, advertised_host="gw", port_base=9000, refresh_s=0.05,
                on_brokers=seen.append,
            )  # fmt: skip
            try:
                await fleet.start()  # a full read: brokers and ids
                asked = record_metadata_topics(cluster)
                t_id = (await cluster.metadata()).topics["t"].topic_id
                assert t_id is not None and fleet.known_topic_name(t_id) == "t"

                async def both_kinds() -> bool:
                    return [] in asked and None in asked[asked.index([]) :]

                await wait_until_async(both_kinds, what="brokers-only, then full", timeout=20)
                assert set(map(repr, asked)) == {"[]", "None"}  # nothing else was asked
                assert asked.count([]) > asked.count(None)  # the full read is the rare one
                (node,) = fleet.broker_ids()
                assert seen == [{node}]  # learnt once, unchanged since
                assert fleet.endpoint(node) == ("gw", 9000 + node)
                assert fleet.known_topic_name(t_id) == "t"  # the cache survives both kinds
            finally:
                await fleet.stop()
                await cluster.close()

        asyncio.run(scenario())


class Budget:
    """A `LookupBudget` with `tokens` look-ups, recording what the answers weighed."""

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens
        self.spent: list[int] = []

    def take(self) -> bool:
        if self.tokens <= 0:
            return False
        self.tokens -= 1
        return True

    def spend(self, size: int) -> None:
        self.spent.append(size)


def test_a_consumer_group_s_kip_848_members_are_described_once_for_a_moment(
    tmp_path: Path,
) -> None:
    """`consumer_group_members` (the member ledger's adoption): one ConsumerGroupDescribe for the
    requests asking meanwhile and for `MEMBER_LOOKUP_FRESH_S` after, a token only when one is sent,
    the answer's weight spent; classic members of a mixed group left out; no group, None."""
    with broker_thread(tmp_path, {"group.initial.rebalance.delay.ms": "0"}) as broker:
        bootstrap = f"127.0.0.1:{broker.port}"

        async def scenario() -> None:
            async with Admin.for_bootstrap(bootstrap) as admin:
                assert await admin.create_topics([NewTopic("acme_t", 2, 1, {})]) == {"acme_t": None}
            cluster = Cluster(bootstrap)
            fleet = FleetDirectory(cluster, advertised_host="gw", port_base=9000)
            try:
                await fleet.refresh()
                connection = await cluster.coordinator("acme_k")
                joined = await connection.send(consumer_join("acme_k", "member-1"))
                assert joined.error_code == 0, joined.error_message
                classic = asyncio.ensure_future(connection.send(classic_join("acme_k")))
                budget = Budget(tokens=2)
                both = await asyncio.gather(
                    fleet.consumer_group_members("acme_k", budget),
                    fleet.consumer_group_members("acme_k", budget),
                )
                assert both[0] is both[1] and both[0] is not None
                assert set(both[0].members) == {"member-1"}
                assert both[0].members["member-1"].subscribed_topic_names == ("acme_t",)
                assert budget.tokens == 1 and len(budget.spent) == 1 and budget.spent[0] > 0
                again = await fleet.consumer_group_members("acme_k", budget)
                assert again is both[0] and budget.tokens == 1, "remembered: no token, no ask"
                fleet._described.clear()
                mixed = await described_with_a_classic_member(fleet, budget, classic)
                assert set(mixed.members) == {"member-1"}, "a classic member is never adopted"
                assert await fleet.consumer_group_members("acme_none", Budget(1)) is None
                assert await fleet.consumer_group_members("acme_other", Budget(0)) is None
            finally:
                await cluster.close()

        asyncio.run(scenario())


async def described_with_a_classic_member(
    fleet: FleetDirectory, budget: Budget, classic: asyncio.Future[Any]
) -> Any:
    """The group described once the classic member's JoinGroup made it mixed (the join itself
    is parked until the group rebalances; it is not awaited)."""
    answer = await classic
    assert answer.error_code == 79  # MEMBER_ID_REQUIRED: the KIP-394 round trip
    connection = await fleet._cluster.coordinator("acme_k")
    parked = asyncio.ensure_future(connection.send(classic_join("acme_k", answer.member_id)))
    try:
        for _ in range(100):
            budget.tokens = 1
            fleet._described.clear()
            raw = await connection.send(describe("acme_k"))
            if len(raw.groups[0].members) == 2:
                held = await fleet.consumer_group_members("acme_k", budget)
                assert held is not None
                return held
            await asyncio.sleep(0.05)
        raise AssertionError("the classic member never joined the consumer group")
    finally:
        parked.cancel()


def consumer_join(group: str, member_id: str) -> Any:
    return make(
        request_module(68, 1), "ConsumerGroupHeartbeatRequest",
        group_id=group, member_id=member_id, member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout=datetime.timedelta(seconds=30), subscribed_topic_names=("acme_t",),
        subscribed_topic_regex=None, server_assignor=None, topic_partitions=(),
    )  # fmt: skip


def classic_join(group: str, member_id: str = "") -> Any:
    module = request_module(11, 9)
    protocol = make(module, "JoinGroupRequestProtocol", name="range", metadata=SUBSCRIPTION)
    return make(
        module, "JoinGroupRequest", group_id=group, session_timeout=datetime.timedelta(seconds=30),
        rebalance_timeout=datetime.timedelta(seconds=30), member_id=member_id,
        group_instance_id=None, protocol_type="consumer", protocols=(protocol,), reason=None,
    )  # fmt: skip


def describe(group: str) -> Any:
    return make(
        request_module(69, 1), "ConsumerGroupDescribeRequest",
        group_ids=(group,), include_authorized_operations=False,
    )  # fmt: skip


SUBSCRIPTION = encode_subscription(["acme_t"])
