"""The controller: one event queue that turns ZooKeeper changes into leadership decisions
(Kafka's `KafkaController` and `ControllerEventManager`).

Owns: the controller's term. When this broker wins the election (`on_elected`) it creates the
top-level paths and `/cluster/id`, loads a fresh `ControllerContext` from ZooKeeper, arms watches on
`/brokers/ids`, `/brokers/topics` (and each topic, for partition growth), `/admin/delete_topics`
and `/isr_change_notification`, sends every live broker the full state, and elects leaders for
offline and new partitions. Watches, controlled-shutdown and preferred-election requests, and the
auto-rebalance timer each enqueue an event; events run one at a time, in order, so the context
never sees interleaved changes. Each event asks the pure state machines for a `Decision`, writes
its partition states with `ControllerStore.write_states` (one multi-op fenced by the controller
epoch), records them in the context, then queues the requests on the `ControllerChannel`. A
version conflict re-reads the partitions and decides again; a failed fence means another
controller was elected: this one resigns. `on_resigned` ends the term: the queue, timers and
channel stop, and watches of the old term are ignored. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from brokers.controller import BrokerEpochMismatchError, request_batch
from brokers.controller import partition_state_machine as psm
from brokers.controller import replica_state_machine as rsm
from brokers.controller.channel import ControllerChannel
from brokers.controller.context import ControllerContext
from brokers.controller.controller_store import ControllerStore
from brokers.controller.election import ControllerElection
from brokers.controller.errors import ControllerError, ControllerMovedError, ZNodeVersionError
from brokers.controller.orders import Decision, LeaderAndIsrOrder, UpdateMetadataOrder
from brokers.controller.registration import read_live_brokers
from brokers.controller.state import TopicPartition
from brokers.controller.zk_client import ZkClient

log = logging.getLogger(__name__)
Event = Callable[[], Awaitable[None]]

MAX_DECISION_ATTEMPTS = 5


class Controller:
    def __init__(
        self,
        zk: ZkClient,
        election: ControllerElection,
        channel: ControllerChannel,
        *,
        unclean_default: bool = False,
        auto_rebalance: bool = True,
        rebalance_interval_s: float = 300.0,
        imbalance_percentage: int = 10,
    ) -> None:
        self._zk = zk
        self._election = election
        self._channel = channel
        self._store = ControllerStore(zk)
        self._unclean_default = unclean_default
        self._auto_rebalance = auto_rebalance
        self._rebalance_interval_s = rebalance_interval_s
        self._imbalance_percentage = imbalance_percentage
        self.context = ControllerContext()
        self.cluster_id = ""
        self._term = 0
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._shutdowns: set[int] = set()

    @property
    def broker_id(self) -> int:
        return self._election.broker_id

    @property
    def active(self) -> bool:
        return bool(self._tasks)

    # --- the term --------------------------------------------------------------------------

    def on_elected(self, epoch: int) -> None:
        self.on_resigned()
        self._term += 1
        self.context = ControllerContext(epoch, self._election.epoch_zk_version)
        self._events = asyncio.Queue()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._run())]
        if self._auto_rebalance:
            self._tasks.append(loop.create_task(self._rebalance_timer()))
        self._events.put_nowait(self._failover)

    def on_resigned(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._tasks = []
        self._term += 1  # watches armed in the ended term are ignored from now on
        for broker in list(self._channel.brokers):
            asyncio.get_running_loop().create_task(self._channel.remove_broker(broker))

    async def close(self) -> None:
        tasks, self._tasks = self._tasks, []
        self._term += 1
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._channel.close()

    async def _run(self) -> None:
        while True:
            event = await self._events.get()
            try:
                await event()
            except asyncio.CancelledError:
                raise
            except ControllerMovedError:
                log.info("event=controller_moved broker=%d", self.broker_id)
                self._election.resign()
            except Exception as exc:  # one failed event must not stop the controller
                log.error("event=controller_event_failed name=%s error=%r", event.__name__, exc)

    def _watch(self, event: Event) -> Callable[[str], None]:
        term = self._term

        def fire(_path: str) -> None:
            if term == self._term:
                self._events.put_nowait(event)

        return fire

    async def _rebalance_timer(self) -> None:
        while True:
            await asyncio.sleep(self._rebalance_interval_s)
            self._events.put_nowait(self._auto_rebalance_event)

    # --- applying decisions ----------------------------------------------------------------

    async def _decide(self, make: Callable[[], Decision]) -> Decision:
        """Decide, write fenced, record, send; on a version conflict re-read and decide again."""
        for _ in range(MAX_DECISION_ATTEMPTS):
            decision = make()
            try:
                written = await self._store.write_states(
                    self._election.fence(), self.context, decision.changes
                )
            except ZNodeVersionError:
                await self._refresh_after_conflict(decision)
                continue
            self.context.apply(written)
            self._send(decision)
            return decision
        raise ControllerError("partition states kept changing under the controller")

    async def _refresh_after_conflict(self, decision: Decision) -> None:
        if not self._election.is_controller or await self._deposed():
            raise ControllerMovedError("the controller epoch moved on")
        for tp in decision.changes:
            state = await self._store.read_state(tp)
            if state is not None:
                self.context.leadership[tp] = state

    async def _deposed(self) -> bool:
        node = await self._zk.get("/controller_epoch")
        return node.version != self._election.epoch_zk_version

    def _send(self, decision: Decision) -> None:
        for broker, request in request_batch.requests_for(self.context, self.broker_id, decision):
            self._channel.send(broker, request)

    # --- events ----------------------------------------------------------------------------

    async def _failover(self) -> None:
        """Kafka's `onControllerFailover`: load everything, resend it all, elect what is needed."""
        ctx = self.context
        self.cluster_id = await self._store.create_top_level_paths()
        ctx.live_brokers = await read_live_brokers(self._zk, self._watch(self._broker_change))
        for broker, reg in ctx.live_brokers.items():
            self._channel.add_broker(broker, reg.host, reg.port)
        missing: list[TopicPartition] = []
        for topic in await self._store.topic_names(self._watch(self._topic_change)):
            missing += await self._store.load_topic(ctx, topic, self._partition_watch(topic))
        everything = set(ctx.assignments)
        resend = Decision(
            leader_and_isr=self._online_replica_orders(set(ctx.live_brokers)),
            update_metadata=[
                UpdateMetadataOrder(b, tuple(sorted(everything))) for b in ctx.live_brokers
            ],
        )
        self._send(resend)
        await self._elect_offline_and_new(missing)
        await self._offline_dead_replicas()
        await self._topic_deletion()
        await self._isr_change()
        log.info("event=controller_ready epoch=%d brokers=%s", ctx.epoch, sorted(ctx.live_brokers))

    def _partition_watch(self, topic: str) -> Callable[[str], None]:
        async def partitions_changed() -> None:
            await self._partition_change(topic)

        partitions_changed.__name__ = f"partition_change[{topic}]"
        return self._watch(partitions_changed)

    def _online_replica_orders(self, brokers: set[int]) -> list[LeaderAndIsrOrder]:
        ctx = self.context
        return [
            LeaderAndIsrOrder(b, tp, ctx.leadership[tp], ctx.assignments[tp])
            for tp in sorted(ctx.leadership)
            if tp in ctx.assignments
            for b in ctx.assignments[tp].replicas
            if b in brokers
        ]

    async def _elect_offline_and_new(self, new: list[TopicPartition]) -> None:
        ctx = self.context
        offline = [tp for tp in ctx.offline_partitions() if tp in ctx.leadership]
        if offline:
            unclean = self._unclean_default
            await self._decide(
                lambda: psm.elect_leaders(
                    ctx, offline, psm.Strategy.OFFLINE, unclean_default=unclean
                )
            )
        pending = sorted(set(new) | {tp for tp in ctx.assignments if tp not in ctx.leadership})
        if pending:
            await self._decide(lambda: psm.initialize_partitions(ctx, pending))

    async def _offline_dead_replicas(self) -> None:
        """Kafka's ReplicaStateMachine.startup: replicas on brokers that died before this controller
        took over (often with the old controller) leave the ISRs of the partitions that kept a
        leader; the dead broker's own leaderships were re-elected just before."""
        ctx = self.context

        def decide() -> Decision:
            dead = [
                (tp, broker)
                for tp, state in sorted(ctx.leadership.items())
                for broker in state.isr
                if broker not in ctx.live_brokers and broker != state.leader
            ]
            return rsm.replicas_offline(ctx, dead)

        if any(
            b not in ctx.live_brokers and b != s.leader
            for s in ctx.leadership.values()
            for b in s.isr
        ):
            await self._decide(decide)

    async def _broker_change(self) -> None:
        """Kafka's `BrokerChange`: a bounced broker (new epoch) is a failure, then a startup."""
        ctx = self.context
        current = await read_live_brokers(self._zk, self._watch(self._broker_change))
        old = ctx.live_brokers
        dead = sorted(b for b in old if b not in current or current[b].epoch != old[b].epoch)
        new = sorted(b for b in current if b not in old or current[b].epoch != old[b].epoch)
        for broker in dead:
            del ctx.live_brokers[broker]
            ctx.shutting_down.discard(broker)
            await self._channel.remove_broker(broker)
            log.info("event=broker_failure broker=%d", broker)
            failure = functools.partial(
                rsm.broker_failure, ctx, broker, unclean_default=self._unclean_default
            )
            await self._decide(failure)
        for broker in new:
            ctx.live_brokers[broker] = current[broker]
            self._channel.add_broker(broker, current[broker].host, current[broker].port)
        if new:
            await self._broker_startup(set(new))

    async def _broker_startup(self, new: set[int]) -> None:
        ctx = self.context
        everything = tuple(sorted(ctx.assignments))
        self._send(
            Decision(
                leader_and_isr=self._online_replica_orders(new),
                update_metadata=[
                    UpdateMetadataOrder(b, everything if b in new else ())
                    for b in sorted(ctx.live_brokers)
                ],
            )
        )
        await self._elect_offline_and_new([])

    async def _topic_change(self) -> None:
        ctx = self.context
        names = set(await self._store.topic_names(self._watch(self._topic_change)))
        for gone in sorted(set(ctx.topic_ids) - names):
            ctx.remove_topic(gone)
        new: list[TopicPartition] = []
        for topic in sorted(names - set(ctx.topic_ids)):
            new += await self._store.load_topic(ctx, topic, self._partition_watch(topic))
        if new:
            await self._decide(lambda: psm.initialize_partitions(ctx, new))

    async def _partition_change(self, topic: str) -> None:
        """Partition growth: new partitions in `/brokers/topics/<t>` get leaders."""
        ctx = self.context
        assignment = await self._store.read_topic(topic, self._partition_watch(topic))
        if assignment is None or topic not in ctx.topic_ids:
            return
        added = [TopicPartition(topic, p) for p in assignment.partitions]
        added = [tp for tp in added if tp not in ctx.assignments]
        for tp in added:
            ctx.assignments[tp] = assignment.partitions[tp.partition]
        if added:
            await self._decide(lambda: psm.initialize_partitions(ctx, added))

    async def _topic_deletion(self) -> None:
        """Kafka's `TopicDeletion`: StopReplica(delete) to the replicas, then remove the znodes."""
        ctx = self.context
        for topic in await self._store.topics_to_delete(self._watch(self._topic_deletion)):
            if topic in ctx.topic_ids:
                ctx.topics_to_delete.add(topic)
                self._send(rsm.replicas_deleted(ctx, topic))
            await self._store.delete_topic(topic)
            ctx.remove_topic(topic)
            log.info("event=topic_deleted topic=%s", topic)

    async def _isr_change(self) -> None:
        """Leaders changed ISRs: re-read those states and tell every broker."""
        ctx = self.context
        names, changed = await self._store.isr_changes(self._watch(self._isr_change))
        known = sorted(tp for tp in changed if tp in ctx.assignments)
        for tp in known:
            state = await self._store.read_state(tp)
            if state is not None:
                ctx.leadership[tp] = state
        if known:
            self._send(
                Decision(
                    update_metadata=[
                        UpdateMetadataOrder(b, tuple(known)) for b in sorted(ctx.live_brokers)
                    ]
                )
            )
        await self._store.delete_isr_changes(names)

    async def _auto_rebalance_event(self) -> None:
        ctx = self.context
        candidates = psm.preferred_election_candidates(ctx, self._imbalance_percentage)
        if candidates:
            await self._decide(lambda: psm.elect_leaders(ctx, candidates, psm.Strategy.PREFERRED))

    # --- requests from brokers and admins --------------------------------------------------

    async def _submit(self, work: Callable[[], Awaitable[Any]]) -> Any:
        if not self.active:
            raise ControllerMovedError(f"broker {self.broker_id} is not the controller")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        async def event() -> None:
            try:
                future.set_result(await work())
            except Exception as exc:
                future.set_exception(exc)

        event.__name__ = getattr(work, "__name__", "request")
        self._events.put_nowait(event)
        return await future

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        """Move leadership off a broker about to stop; the partitions it still leads."""

        async def shutdown() -> list[TopicPartition]:
            ctx = self.context
            if broker_epoch != -1 and broker_epoch != ctx.broker_epoch(broker_id):
                raise BrokerEpochMismatchError(f"broker {broker_id} epoch {broker_epoch} is stale")
            ctx.shutting_down.add(broker_id)
            remaining: list[TopicPartition] = []

            def decide() -> Decision:
                decision, left = rsm.controlled_shutdown(ctx, broker_id)
                remaining[:] = left
                return decision

            await self._decide(decide)
            return remaining

        result: list[TopicPartition] = await self._submit(shutdown)
        return result

    def request_controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> list[tuple[str, int]]:
        """The ControlledShutdown handler's entry: start the move (once), answer what is led now."""
        if not self.active:
            raise ControllerMovedError(f"broker {self.broker_id} is not the controller")
        ctx = self.context
        if broker_epoch != -1 and broker_epoch != ctx.broker_epoch(broker_id):
            raise BrokerEpochMismatchError(f"broker {broker_id} epoch {broker_epoch} is stale")
        if broker_id not in self._shutdowns:
            self._shutdowns.add(broker_id)
            task = asyncio.get_running_loop().create_task(
                self.controlled_shutdown(broker_id, broker_epoch)
            )
            task.add_done_callback(functools.partial(self._shutdown_done, broker_id))
        return [
            (tp.topic, tp.partition)
            for tp in ctx.partitions_led_by(broker_id)
            if len(ctx.replicas(tp)) > 1
        ]

    def _shutdown_done(self, broker_id: int, task: asyncio.Task[list[TopicPartition]]) -> None:
        self._shutdowns.discard(broker_id)
        if not task.cancelled() and task.exception() is not None:
            log.warning(
                "event=controlled_shutdown_failed broker=%d error=%r", broker_id, task.exception()
            )

    async def elect_preferred(self, partitions: list[TopicPartition]) -> Decision:
        """Preferred-leader election (ElectLeaders); failures are in `Decision.failed`."""

        async def elect() -> Decision:
            ctx = self.context
            return await self._decide(
                lambda: psm.elect_leaders(ctx, partitions, psm.Strategy.PREFERRED)
            )

        result: Decision = await self._submit(elect)
        return result
