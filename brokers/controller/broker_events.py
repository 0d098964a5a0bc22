"""The controller's broker events (Kafka's `BrokerChange`, `onBrokerStartup`, `onBrokerFailure`).

Owns: loading the live brokers (arming the `/brokers/ids` watch) and reacting when they change —
a broker that vanished or re-registered with a new epoch (a bounce) is a failure, then a startup:
its led partitions are re-elected and its replicas leave the ISRs; a new broker gets LeaderAndIsr
for its replicas and every broker UpdateMetadata. Also the elections every such change may need:
offline partitions (OFFLINE strategy, `unclean.leader.election.enable`) and partitions without a
state yet, and, on takeover, dropping replicas of brokers that died before this controller
started from the ISRs (Kafka's `ReplicaStateMachine.startup`).
Events run on the controller's queue (`ControllerTerm`); not thread-safe.
"""

from __future__ import annotations

import functools
import logging

from brokers.controller import partition_state_machine as psm
from brokers.controller import replica_state_machine as rsm
from brokers.controller.orders import Decision, LeaderAndIsrOrder, UpdateMetadataOrder
from brokers.controller.registration import read_live_brokers
from brokers.controller.state import TopicPartition
from brokers.controller.term import ControllerTerm, Event
from brokers.controller.topic_events import initialize_in_decisions

log = logging.getLogger(__name__)


class BrokerEvents:
    def __init__(self, term: ControllerTerm, *, unclean_default: bool = False) -> None:
        self._term = term
        self.unclean_default = unclean_default
        # Run after a broker startup: pending topic deletions ask the returned broker (Kafka's
        # resumeDeletions in onBrokerStartup).
        self.on_startup: Event | None = None

    async def load_live_brokers(self) -> None:
        term = self._term
        term.context.live_brokers = await read_live_brokers(term.zk, term.watch(self.broker_change))
        for broker, reg in term.context.live_brokers.items():
            term.channel.add_broker(broker, reg.inter_broker.host, reg.inter_broker.port)

    def online_replica_orders(self, brokers: set[int]) -> list[LeaderAndIsrOrder]:
        ctx = self._term.context
        return [
            LeaderAndIsrOrder(b, tp, ctx.leadership[tp], ctx.assignments[tp])
            for tp in sorted(ctx.leadership)
            if tp in ctx.assignments
            for b in ctx.assignments[tp].replicas
            if b in brokers
        ]

    async def elect_offline_and_new(self, new: list[TopicPartition]) -> None:
        ctx = self._term.context
        offline = [tp for tp in ctx.offline_partitions() if tp in ctx.leadership]
        if offline:
            unclean = self.unclean_default
            await self._term.decide(
                lambda: psm.elect_leaders(
                    ctx, offline, psm.Strategy.OFFLINE, unclean_default=unclean
                ),
                confirm_reachable=True,
            )
        pending = sorted(
            tp
            for tp in set(new) | {tp for tp in ctx.assignments if tp not in ctx.leadership}
            if tp.topic not in ctx.topics_to_delete
        )
        # A failover mid-creation may find thousands without a state: bounded decisions too.
        await initialize_in_decisions(self._term, pending)

    async def offline_dead_replicas(self) -> None:
        """Replicas on brokers that died before this controller took over (often with the old
        controller) leave the ISRs of the partitions that kept a leader; the dead broker's own
        leaderships were re-elected just before."""
        ctx = self._term.context

        def dead_replicas() -> list[tuple[TopicPartition, int]]:
            return [
                (tp, broker)
                for tp, state in sorted(ctx.leadership.items())
                for broker in state.isr
                if broker not in ctx.live_brokers and broker != state.leader
            ]

        if dead_replicas():
            await self._term.decide(lambda: rsm.replicas_offline(ctx, dead_replicas()))

    async def broker_change(self) -> None:
        """A bounced broker (new epoch) is a failure, then a startup."""
        term = self._term
        ctx = term.context
        current = await read_live_brokers(term.zk, term.watch(self.broker_change))
        old = ctx.live_brokers
        dead = sorted(b for b in old if b not in current or current[b].epoch != old[b].epoch)
        new = sorted(b for b in current if b not in old or current[b].epoch != old[b].epoch)
        for broker in dead:
            registration = ctx.live_brokers.pop(broker)
            ctx.shutting_down.discard(broker)
            await term.channel.remove_broker(broker)
            log.info("event=broker_failure broker=%d", broker)
            try:
                await self._reread_states(broker)
                failure = functools.partial(
                    rsm.broker_failure, ctx, broker, unclean_default=self.unclean_default
                )
                await term.decide(failure, confirm_reachable=True)
            except Exception:
                # Not handled: keep it live in the context so the next broker change (or the
                # resync after a reconnect) sees it dead again and re-elects its partitions.
                ctx.live_brokers[broker] = registration
                raise
        if dead:
            # Kafka's onBrokerFailure: every live broker learns the new broker list even when no
            # partition state changed (the dead broker led nothing and was in no ISR).
            term.send(
                Decision(
                    update_metadata=[UpdateMetadataOrder(b, ()) for b in sorted(ctx.live_brokers)]
                )
            )
        for broker in new:
            ctx.live_brokers[broker] = current[broker]
            endpoint = current[broker].inter_broker  # the controller speaks inter-broker
            term.channel.add_broker(broker, endpoint.host, endpoint.port)
        if new:
            await self._broker_startup(set(new))
            if self.on_startup is not None:
                await self.on_startup()

    async def _reread_states(self, broker: int) -> None:
        """Kafka reads the partition states from ZooKeeper before removing a dead replica from
        ISRs: a leader may have just added it (its ISR-change notification not yet handled), and
        a decision that changes nothing would never notice the stale context."""
        term = self._term
        for tp in list(term.context.partitions_on_broker(broker)):
            state = await term.store.read_state(tp)
            if state is not None:
                term.context.leadership[tp] = state

    async def _broker_startup(self, new: set[int]) -> None:
        ctx = self._term.context
        everything = tuple(sorted(ctx.assignments))
        self._term.send(
            Decision(
                leader_and_isr=self.online_replica_orders(new),
                update_metadata=[
                    UpdateMetadataOrder(b, everything if b in new else ())
                    for b in sorted(ctx.live_brokers)
                ],
            )
        )
        await self.elect_offline_and_new([])
