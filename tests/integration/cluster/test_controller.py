"""The controller against a real ZooKeeper, with a recording channel in place of the brokers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from brokers.common.clock import ManualClock
from brokers.controller import requests as rq
from brokers.controller import zk_paths
from brokers.controller.channel import ControllerChannel, OnResponse
from brokers.controller.controller import Controller
from brokers.controller.election import ControllerElection
from brokers.controller.errors import ZNodeMissingError, ZooKeeperUnavailableError
from brokers.controller.registration import BrokerRegistrar
from brokers.controller.state import BrokerEndpoint, LeaderAndIsr, ReplicaAssignment, TopicPartition
from brokers.controller.zk_client import SessionEvent, ZkClient
from brokers.controller.zk_isr_writer import ZkIsrWriter
from tests.polling import wait_until_async

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
CLOCK = ManualClock()
TOPIC_ID = uuid.UUID(int=7)


class RecordingChannel(ControllerChannel):
    """Keeps what the controller sends instead of sending it."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[int, Any]] = []
        self.live: set[int] = set()

    @property
    def brokers(self) -> set[int]:
        return set(self.live)

    def add_broker(self, broker_id: int, host: str, port: int) -> None:
        self.live.add(broker_id)

    async def remove_broker(self, broker_id: int) -> None:
        self.live.discard(broker_id)

    def send(self, broker_id: int, request: Any, on_response: OnResponse | None = None) -> bool:
        self.sent.append((broker_id, request))
        live = broker_id in self.live
        if live and on_response is not None and isinstance(request, rq.StopReplicaRequest):
            # A live broker deletes what it is told to; topic deletion waits for these answers.
            answer = rq.StopReplicaResponse(
                error_code=0,
                partition_errors=tuple(
                    rq.StopReplicaPartitionError(
                        topic_name=t.topic_name, partition_index=p.partition_index, error_code=0
                    )
                    for t in request.topic_states
                    for p in t.partition_states
                ),
            )
            asyncio.get_running_loop().call_soon(on_response, broker_id, answer)
        return live

    def of(self, kind: type[Any], broker: int | None = None) -> list[Any]:
        return [r for b, r in self.sent if isinstance(r, kind) and broker in (None, b)]

    async def close(self) -> None:
        self.live.clear()


async def until(
    check: Callable[[], Awaitable[bool] | bool], *, what: str, timeout: float = 20.0
) -> None:
    """`wait_until_async` for a check that is either a coroutine function or a plain function
    of state the event loop updates (the controller's context, the recording channel)."""

    async def checked() -> bool:
        result = check()
        return bool(await result if isinstance(result, Awaitable) else result)

    await wait_until_async(checked, what=what, timeout=timeout)


async def register(connect: str, broker_id: int) -> tuple[ZkClient, BrokerRegistrar]:
    zk = ZkClient(connect, session_timeout_s=4.0)
    await zk.start()
    endpoint = BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id)
    reg = zk_paths.BrokerRegistration(broker_id, (endpoint,), None, 0)
    registrar = BrokerRegistrar(zk, reg, CLOCK)
    await registrar.register()
    return zk, registrar


async def elected_controller(
    zk: ZkClient,
) -> tuple[Controller, ControllerElection, RecordingChannel]:
    """Broker 1's controller over a recording channel, elected (the first in its chroot)."""
    channel = RecordingChannel()
    election = ControllerElection(zk, 1, CLOCK)
    controller = Controller(zk, election, channel, auto_rebalance=False)
    election.follow(controller.on_elected, controller.on_resigned)
    assert await election.start()
    return controller, election, channel


async def state(zk: ZkClient, tp: TopicPartition) -> LeaderAndIsr | None:
    """The partition's state znode, None when it does not exist (any other error propagates)."""
    try:
        node = await zk.get(zk_paths.partition_state_path(tp))
    except ZNodeMissingError:
        return None
    return zk_paths.decode_partition_state(node.data, node.version)


async def create_topic(zk: ZkClient, partitions: dict[int, tuple[int, ...]]) -> None:
    assignment = zk_paths.TopicAssignment(
        TOPIC_ID, {p: ReplicaAssignment(r) for p, r in partitions.items()}
    )
    await zk.create(zk_paths.topic_path("orders"), zk_paths.encode_topic(assignment))


def test_controller_failover_topics_isr_and_shutdown(chroot: str) -> None:
    async def scenario() -> None:
        nodes = {b: await register(chroot, b) for b in (1, 2, 3)}
        zk1 = nodes[1][0]
        controller, _election, channel = await elected_controller(zk1)
        await until(
            lambda: channel.live == {1, 2, 3}, what="brokers 1, 2 and 3 live in the channel"
        )
        assert controller.context.epoch == 1 and controller.cluster_id
        assert await zk1.exists(zk_paths.ISR_CHANGE_NOTIFICATION)

        # Topic creation: states written, every replica told, every broker's metadata refreshed.
        await create_topic(zk1, {0: (1, 2, 3), 1: (2, 3, 1)})
        p0, p1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
        await until(lambda: p1 in controller.context.leadership, what="orders-1 led")
        assert await state(zk1, p0) == LeaderAndIsr(1, 0, (1, 2, 3), 1, 0)
        assert (await state(zk1, p1)) == LeaderAndIsr(2, 0, (2, 3, 1), 1, 0)
        for broker in (1, 2, 3):
            lai = channel.of(rq.LeaderAndIsrRequest, broker)[-1]
            assert lai.controller_epoch == 1
            assert lai.broker_epoch == nodes[broker][1].epoch
            assert lai.topic_states[0].topic_id == TOPIC_ID
            assert {p.partition_index for p in lai.topic_states[0].partition_states} == {0, 1}
            um = channel.of(rq.UpdateMetadataRequest, broker)[-1]
            assert {p.leader for p in um.topic_states[0].partition_states} == {1, 2}

        # Broker 2 dies: partition 1 gets a leader from its ISR, with a bumped leader epoch.
        await nodes[2][0].close()
        await until(lambda: 2 not in controller.context.live_brokers, what="broker 2 dead")
        await until(lambda: controller.context.leadership[p1].leader == 3, what="orders-1 led by 3")
        moved = await state(zk1, p1)
        assert moved is not None and (moved.leader, moved.leader_epoch) == (3, 1)
        assert moved.isr == (3, 1)
        p0_now = await state(zk1, p0)
        assert p0_now is not None and p0_now.isr == (1, 3)
        assert channel.of(rq.LeaderAndIsrRequest, 3)[-1].topic_states[0].partition_states

        # A leader's ISR change is announced; the controller re-reads it and tells every broker.
        writer = ZkIsrWriter(zk1, broker_id=1, notify_delay_s=60)
        assert p0_now is not None
        await writer.write_isr("orders", 0, p0_now.leader_epoch, [1], p0_now.zk_version, 1)
        await writer.flush()
        await until(
            lambda: controller.context.leadership[p0].isr == (1,),
            what="the ISR change of orders-0 read",
        )
        await until(lambda: _no_children(zk1), what="the ISR change notification consumed")

        # Partition growth.
        grown = zk_paths.TopicAssignment(
            TOPIC_ID,
            {
                0: ReplicaAssignment((1, 2, 3)),
                1: ReplicaAssignment((2, 3, 1)),
                2: ReplicaAssignment((3, 1, 2)),
            },
        )
        await zk1.set(zk_paths.topic_path("orders"), zk_paths.encode_topic(grown))
        p2 = TopicPartition("orders", 2)
        await until(lambda: p2 in controller.context.leadership, what="orders-2 led")
        created = await state(zk1, p2)
        assert created is not None and created.leader == 3 and created.isr == (3, 1)

        # Controlled shutdown of broker 3: leadership moves off it first.
        remaining = await controller.controlled_shutdown(3, nodes[3][1].epoch)
        assert remaining == []
        led = [tp for tp, s in controller.context.leadership.items() if s.leader == 3]
        assert led == []
        after = await state(zk1, p1)
        assert after is not None and after.leader == 1 and 3 not in after.isr

        # Topic deletion: StopReplica(delete) to the live replicas; broker 2 holds replicas and is
        # down, so (as Kafka's TopicDeletionManager) the znodes stay until it answers too.
        await zk1.create(zk_paths.delete_topic_path("orders"))
        await until(
            lambda: "orders" in controller.context.topics_to_delete,
            what="orders queued for deletion",
        )

        def deleted_on(broker: int) -> set[int]:
            return {
                p.partition_index
                for request in channel.of(rq.StopReplicaRequest, broker)
                for t in request.topic_states
                for p in t.partition_states
                if t.topic_name == "orders" and p.delete_partition
            }

        await until(
            lambda: deleted_on(1) == deleted_on(3) == {0, 1, 2},
            what="StopReplica(delete) to brokers 1 and 3",
        )
        assert await zk1.exists(zk_paths.topic_path("orders"))
        assert await zk1.children(zk_paths.DELETE_TOPICS) == ["orders"]

        # A topic being deleted does not grow, even if its znode is rewritten meanwhile.
        events: list[str | None] = []
        controller.observe_events(events.append)
        bigger = zk_paths.TopicAssignment(
            TOPIC_ID, {**grown.partitions, 3: ReplicaAssignment((1, 3, 2))}
        )
        await zk1.set(zk_paths.topic_path("orders"), zk_paths.encode_topic(bigger))

        def growth_handled() -> bool:
            name = "partition_change[orders]"
            return name in events and None in events[events.index(name) :]

        await until(growth_handled, what="the partition change handled")
        assert TopicPartition("orders", 3) not in controller.context.assignments
        assert await state(zk1, TopicPartition("orders", 3)) is None

        await controller.close()
        for b in (1, 3):
            await nodes[b][0].close()

    asyncio.run(scenario())


async def _no_children(zk: ZkClient) -> bool:
    return await zk.children(zk_paths.ISR_CHANGE_NOTIFICATION) == []


def test_a_deposed_controller_writes_nothing_and_resigns(chroot: str) -> None:
    async def scenario() -> None:
        nodes = {b: await register(chroot, b) for b in (1, 2)}
        zk1 = nodes[1][0]
        controller, election, channel = await elected_controller(zk1)
        await until(lambda: channel.live == {1, 2}, what="brokers 1 and 2 live in the channel")
        await create_topic(zk1, {0: (2, 1)})
        tp = TopicPartition("orders", 0)
        await until(lambda: tp in controller.context.leadership, what="orders-0 led")
        before = await state(zk1, tp)
        # Another controller was elected meanwhile (epoch bumped) but this one has not noticed.
        epoch_node = await zk1.get(zk_paths.CONTROLLER_EPOCH)
        await zk1.set(zk_paths.CONTROLLER_EPOCH, zk_paths.encode_epoch(2), epoch_node.version)
        await nodes[2][0].close()  # broker 2 dies: the deposed controller's write must fail
        await until(lambda: not election.is_controller, what="the deposed controller resigned")
        assert not controller.active
        assert await state(zk1, tp) == before
        await controller.close()
        await zk1.close()

    asyncio.run(scenario())


def test_a_reassignment_writes_the_replica_set_before_bumping_the_epoch(chroot: str) -> None:
    """Kafka's U1 before A3: if the topic znode write fails, the partition state is untouched."""

    async def scenario() -> None:
        nodes = {b: await register(chroot, b) for b in (1, 2, 3)}
        zk1 = nodes[1][0]
        controller, _election, _channel = await elected_controller(zk1)
        await create_topic(zk1, {0: (1, 2)})
        p0 = TopicPartition("orders", 0)
        await until(lambda: p0 in controller.context.leadership, what="orders-0 led")
        before = await state(zk1, p0)

        async def broken(*_args: Any, **_kwargs: Any) -> None:
            raise ZooKeeperUnavailableError("connection lost")

        store = controller._term.store
        store.write_assignments = broken  # type: ignore[method-assign]
        outcome = await controller.alter_partition_reassignments({("orders", 0): [2, 3]})
        assert outcome[p0] is not None  # refused, per partition
        assert await state(zk1, p0) == before  # no epoch bump without the new replica set
        await controller.close()
        for b in (1, 2, 3):
            await nodes[b][0].close()

    asyncio.run(scenario())


def test_after_a_reconnect_the_controller_reads_every_watched_path_again(chroot: str) -> None:
    """A read in flight when the connection dropped never armed its watch: on CONNECTED the
    controller re-runs the events that read (and re-arm) brokers, topics, deletions, ISR
    notifications and each topic's partitions."""

    async def scenario() -> None:
        nodes = {b: await register(chroot, b) for b in (1, 2)}
        zk1 = nodes[1][0]
        controller, _election, _channel = await elected_controller(zk1)
        await create_topic(zk1, {0: (1, 2)})
        await until(
            lambda: TopicPartition("orders", 0) in controller.context.leadership,
            what="orders-0 led",
        )
        events: list[str | None] = []
        controller.observe_events(events.append)
        controller._on_session(SessionEvent.CONNECTED)
        wanted = {
            "broker_change",
            "topic_change",
            "topic_deletion",
            "isr_change",
            "partition_change[orders]",
        }
        await until(
            lambda: wanted <= set(events) and events[-1] is None,
            what="every watched path read again",
        )
        await controller.close()
        for b in (1, 2):
            await nodes[b][0].close()

    asyncio.run(scenario())


def test_a_broker_failure_that_could_not_be_handled_is_handled_on_the_next_read(
    chroot: str,
) -> None:
    """If handling a dead broker fails (ZooKeeper lost mid-decision), the broker stays live in
    the context, so the next read of /brokers/ids sees it dead again and re-elects."""

    async def scenario() -> None:
        nodes = {b: await register(chroot, b) for b in (1, 2)}
        zk1 = nodes[1][0]
        controller, _election, _channel = await elected_controller(zk1)
        p0 = TopicPartition("orders", 0)
        await create_topic(zk1, {0: (2, 1)})
        await until(lambda: p0 in controller.context.leadership, what="orders-0 led")
        assert controller.context.leadership[p0].leader == 2
        term = controller._term
        real_decide = term.decide
        failed: list[str] = []

        async def lost(*_args: Any, **_kwargs: Any) -> Any:
            failed.append("decide")
            raise ZooKeeperUnavailableError("connection lost")

        term.decide = lost  # type: ignore[method-assign]
        await nodes[2][0].close()
        await until(lambda: bool(failed), what="a failed attempt at handling broker 2's death")
        await until(
            lambda: 2 in controller.context.live_brokers, what="broker 2 still live in the context"
        )
        term.decide = real_decide  # type: ignore[method-assign]
        controller._on_session(SessionEvent.CONNECTED)
        await until(lambda: controller.context.leadership[p0].leader == 1, what="orders-0 led by 1")
        assert 2 not in controller.context.live_brokers
        await controller.close()
        await zk1.close()

    asyncio.run(scenario())


def test_a_new_controller_starts_pending_deletions_before_resending_state(chroot: str) -> None:
    """A topic queued for deletion when the controller takes over is never handed out again:
    its replicas get StopReplica(delete), not a LeaderAndIsr that would recreate the logs."""

    async def scenario() -> None:
        nodes = {b: await register(chroot, b) for b in (1, 2)}
        zk1 = nodes[1][0]
        await create_topic(zk1, {0: (1, 2)})
        await zk1.create(zk_paths.delete_topic_path("orders"))
        controller, _election, channel = await elected_controller(zk1)

        async def deleted() -> bool:
            return not await zk1.exists(zk_paths.topic_path("orders"))

        await until(deleted, what="the pending deletion done")
        handed_out = [
            t.topic_name
            for request in channel.of(rq.LeaderAndIsrRequest)
            for t in request.topic_states
        ]
        assert "orders" not in handed_out
        assert channel.of(rq.StopReplicaRequest)
        await controller.close()
        for b in (1, 2):
            await nodes[b][0].close()

    asyncio.run(scenario())
