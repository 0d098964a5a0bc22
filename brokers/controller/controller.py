"""The controller: ZooKeeper changes and admin requests turned into leadership decisions (Kafka's
`KafkaController`), composed of one module per concern.

Owns: the composition and the term's lifecycle. `ControllerTerm` (term.py) is the event queue and
the fenced write-then-send of decisions; `BrokerEvents` membership changes; `TopicEvents` topics,
partition growth, deletion and ISR notifications; `LeadershipRequests` controlled shutdown,
ElectLeaders and the auto-rebalance timer; `ReassignmentEvents` KIP-455 reassignments. When this
broker wins the election (`on_elected`) the term begins with `_failover` (Kafka's
`onControllerFailover`): create the top-level paths and `/cluster/id`, load brokers and topics
(arming the watches), start pending deletions, send every live broker the full state, elect
leaders for offline and new partitions, drop dead replicas from ISRs, handle ISR notifications,
resume in-flight reassignments; if that fails, the broker gives the controllership up
(`election.move`) rather than stay a controller with a partial context. `on_resigned` ends the
term; `close` stops it for good.
The public methods are what the broker and the handlers call. Runs on the event loop; not
thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

from brokers.controller import partition_state_machine as psm
from brokers.controller.broker_events import BrokerEvents
from brokers.controller.channel import ControllerChannel
from brokers.controller.context import ControllerContext
from brokers.controller.election import ControllerElection
from brokers.controller.errors import ControllerError, ControllerMovedError
from brokers.controller.leadership_requests import LeadershipRequests
from brokers.controller.orders import Decision, UpdateMetadataOrder
from brokers.controller.reassignment_events import ReassignmentEvents
from brokers.controller.state import ReplicaAssignment, TopicPartition
from brokers.controller.term import ControllerTerm, Event, EventObserver
from brokers.controller.topic_events import TopicEvents
from brokers.controller.zk_client import SessionEvent, ZkClient

log = logging.getLogger(__name__)
PartitionResults = dict[TopicPartition, ControllerError | None]


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
        self._term = ControllerTerm(zk, election, channel)
        self._brokers = BrokerEvents(self._term, unclean_default=unclean_default)
        self._reassignments = ReassignmentEvents(self._term)
        self._topics = TopicEvents(self._term, on_isr_change=self._reassignments.check)
        self._brokers.on_startup = self._topics.deletion.resume
        self._leadership = LeadershipRequests(self._term, imbalance_percentage=imbalance_percentage)
        self._auto_rebalance = auto_rebalance
        self._rebalance_interval_s = rebalance_interval_s
        zk.add_session_listener(self._on_session)

    @property
    def broker_id(self) -> int:
        return self._term.broker_id

    @property
    def active(self) -> bool:
        return self._term.active

    @property
    def context(self) -> ControllerContext:
        return self._term.context

    @property
    def cluster_id(self) -> str:
        return self._term.cluster_id

    # --- the term --------------------------------------------------------------------------

    def on_elected(self, epoch: int) -> None:
        timers: list[tuple[float, Event]] = []
        if self._auto_rebalance:
            timers.append((self._rebalance_interval_s, self._leadership.auto_rebalance))
        self._term.begin(epoch, self._failover, timers)

    def on_resigned(self) -> None:
        self._term.end()

    def _on_session(self, event: SessionEvent) -> None:
        """After a reconnect (the session survived), read every watched path again: a read that
        was in flight when the connection dropped never armed its one-shot watch, and the
        changes it would have reported would otherwise be missed for the rest of the term."""
        if event is SessionEvent.CONNECTED and self.active:
            for resync in [self._brokers.broker_change, *self._topics.resync_events()]:
                self._term.enqueue(resync)

    async def close(self) -> None:
        await self._term.close()

    def observe_events(self, observer: EventObserver) -> None:
        """Metrics hook: `observer(name)` before each controller event, `observer(None)` after."""
        self._term.event_observer = observer

    def topic_config_changed(self, topic: str, overrides: Mapping[str, str]) -> None:
        """A topic's overrides changed (this broker's `/config/changes` listener): elections
        read them from now on, and enabling unclean election elects the topic's offline
        partitions at once (Kafka's TopicUncleanLeaderElectionEnable). Ignored unless active."""
        if not self.active:
            return

        async def config_changed() -> None:
            ctx = self._term.context
            if topic not in ctx.topic_ids:
                return
            ctx.topic_configs[topic] = dict(overrides)
            if psm.unclean_enabled(ctx, topic, self._brokers.unclean_default):
                await self._brokers.elect_offline_and_new([])

        config_changed.__name__ = f"topic_config_change[{topic}]"
        self._term.enqueue(config_changed)

    async def _failover(self) -> None:
        """Kafka's `onControllerFailover`. If it fails (ZooKeeper lost mid-load, a decision that
        keeps conflicting) the term must not stay active with a partial context: as Kafka's
        `triggerControllerMove`, resign and release `/controller` so the election runs again."""
        try:
            await self._take_charge()
        except (asyncio.CancelledError, ControllerMovedError):
            raise  # a newer controller exists: the term resigns without touching its znode
        except Exception as exc:
            log.error("event=controller_failover_failed broker=%d error=%r", self.broker_id, exc)
            self._term.election.move()

    async def _take_charge(self) -> None:
        term, ctx = self._term, self._term.context
        term.cluster_id = await term.store.create_top_level_paths()
        await self._brokers.load_live_brokers()
        missing = await self._topics.load_topics()
        # Pending deletions first (they leave the context), so the full resend below does not
        # tell a replica to recreate a log it is about to be told to delete.
        await self._topics.topic_deletion()
        everything = set(ctx.assignments)
        term.send(
            Decision(
                leader_and_isr=self._brokers.online_replica_orders(set(ctx.live_brokers)),
                update_metadata=[
                    UpdateMetadataOrder(b, tuple(sorted(everything))) for b in ctx.live_brokers
                ],
            )
        )
        await self._brokers.elect_offline_and_new(missing)
        await self._brokers.offline_dead_replicas()
        await self._topics.isr_change()
        await self._reassignments.resume()
        log.info("event=controller_ready epoch=%d brokers=%s", ctx.epoch, sorted(ctx.live_brokers))

    # --- requests from brokers and admins --------------------------------------------------

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        """Move leadership off a broker about to stop; the partitions it still leads."""
        return await self._leadership.controlled_shutdown(broker_id, broker_epoch)

    def request_controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> list[tuple[str, int]]:
        """The ControlledShutdown handler's entry: start the move (once), answer what is led now."""
        return self._leadership.request_controlled_shutdown(broker_id, broker_epoch)

    async def elect_preferred(self, partitions: list[TopicPartition]) -> Decision:
        """Preferred-leader election; failures are in `Decision.failed`."""
        return await self._leadership.elect_preferred(partitions)

    async def elect_leaders(
        self, partitions: Sequence[tuple[str, int]] | None, *, unclean: bool = False
    ) -> PartitionResults:
        """ElectLeaders (KIP-460): None = every partition. Per partition None or why not."""
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        return await self._leadership.elect_leaders(wanted, unclean=unclean)

    async def alter_partition_reassignments(
        self,
        targets: Mapping[tuple[str, int], Sequence[int] | None],
        *,
        allow_replication_factor_change: bool = True,
    ) -> PartitionResults:
        """AlterPartitionReassignments (KIP-455): start, replace or cancel (None) per partition;
        `allow_replication_factor_change=False` is KIP-860's guard."""
        return await self._reassignments.alter(
            {TopicPartition(*tp): target for tp, target in targets.items()},
            allow_rf_change=allow_replication_factor_change,
        )

    async def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None = None
    ) -> dict[TopicPartition, ReplicaAssignment]:
        """ListPartitionReassignments: the moving partitions (all, or among `partitions`)."""
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        return await self._reassignments.listing(wanted)
