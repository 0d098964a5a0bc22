"""Requests that move leadership: controlled shutdown, ElectLeaders and the auto-rebalance timer
(Kafka's `ControlledShutdown`, `ReplicaLeaderElection` and `AutoPreferredReplicaLeaderElection`
events).

Owns:
- controlled shutdown: the stopping broker joins `shutting_down`, its leaderships move to other
  in-sync replicas and it leaves the ISRs it follows; the answer lists what it still leads that
  another live in-sync replica could take (it asks again until that is empty). Partitions with
  no such replica are left out, so the last broker of a partition is not kept waiting for a move
  that cannot happen. A request for an earlier registration of the broker is
  refused (KIP-380). The ControlledShutdown handler answers at once, so the work is started once
  per broker and runs as an event.
- `elect_leaders` (KIP-460): preferred (the first assigned replica, live and in the ISR) or
  unclean (a partition whose leader is not live gets the first live in-sync replica, else the
  first live replica); `None` means every partition, and then, as Kafka's `handleElectLeaders`,
  partitions that needed no election are left out of the answer. Per-partition outcomes are
  domain errors (ElectionNotNeededError, …), None on success.
- the auto-rebalance check (`auto.leader.rebalance.enable`): every
  `leader.imbalance.check.interval.seconds`, brokers leading fewer than their preferred share (over
  `leader.imbalance.per.broker.percentage`) get their partitions back — never a broker that is
  shutting down or out of the ISR, never a partition being reassigned.
Work runs on the controller's queue (`ControllerTerm`); not thread-safe.
"""

from __future__ import annotations

import asyncio
import functools
import logging

from brokers.controller import BrokerEpochMismatchError, BrokerNotAvailableError
from brokers.controller import partition_state_machine as psm
from brokers.controller import replica_state_machine as rsm
from brokers.controller.errors import ControllerError, ElectionNotNeededError
from brokers.controller.orders import Decision
from brokers.controller.state import TopicPartition
from brokers.controller.term import ControllerTerm

log = logging.getLogger(__name__)
ElectionResults = dict[TopicPartition, ControllerError | None]


class LeadershipRequests:
    def __init__(self, term: ControllerTerm, *, imbalance_percentage: int = 10) -> None:
        self._term = term
        self._imbalance_percentage = imbalance_percentage
        self._shutdowns: set[int] = set()

    # --- controlled shutdown ---------------------------------------------------------------

    def _check_broker_epoch(self, broker_id: int, broker_epoch: int) -> None:
        """Kafka's rules: an unknown broker is not available; an older epoch is stale (a newer
        one is a registration this controller has not read yet, and is accepted)."""
        known = self._term.context.broker_epoch(broker_id)
        if known == -1:
            raise BrokerNotAvailableError(f"broker {broker_id} is not registered as live")
        if broker_epoch != -1 and broker_epoch < known:
            raise BrokerEpochMismatchError(f"broker {broker_id} epoch {broker_epoch} is stale")

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        """Move leadership off a broker about to stop; the partitions it still leads."""

        async def shutdown() -> list[TopicPartition]:
            ctx = self._term.context
            self._check_broker_epoch(broker_id, broker_epoch)
            ctx.shutting_down.add(broker_id)
            remaining: list[TopicPartition] = []

            def decide() -> Decision:
                decision, left = rsm.controlled_shutdown(ctx, broker_id)
                remaining[:] = left
                log.info(
                    "event=controlled_shutdown_decided broker=%d candidates=%s leaders=%s"
                    " remaining=%d",
                    broker_id,
                    sorted(ctx.leader_candidates()),
                    sorted({s.leader for s in decision.changes.values()}),
                    len(left),
                )
                return decision

            await self._term.decide(decide, confirm_reachable=True)
            return [tp for tp in remaining if self._movable(tp, broker_id)]

        result: list[TopicPartition] = await self._term.submit(shutdown)
        return result

    def _movable(self, tp: TopicPartition, broker_id: int) -> bool:
        """Another in-sync replica could lead `tp` instead of the stopping broker."""
        ctx = self._term.context
        state = ctx.leadership.get(tp)
        return state is not None and any(r != broker_id and ctx.is_live(r) for r in state.isr)

    def request_controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> list[tuple[str, int]]:
        """The ControlledShutdown handler's entry: start the move (once), answer what is led now."""
        self._term.require_active()
        ctx = self._term.context
        self._check_broker_epoch(broker_id, broker_epoch)
        if broker_id not in self._shutdowns:
            self._shutdowns.add(broker_id)
            task = asyncio.get_running_loop().create_task(
                self.controlled_shutdown(broker_id, broker_epoch)
            )
            task.add_done_callback(functools.partial(self._shutdown_done, broker_id))
        return [
            (tp.topic, tp.partition)
            for tp in ctx.partitions_led_by(broker_id)
            if self._movable(tp, broker_id)
        ]

    def _shutdown_done(self, broker_id: int, task: asyncio.Task[list[TopicPartition]]) -> None:
        self._shutdowns.discard(broker_id)
        if not task.cancelled() and task.exception() is not None:
            log.warning(
                "event=controlled_shutdown_failed broker=%d error=%r", broker_id, task.exception()
            )

    # --- elections -------------------------------------------------------------------------

    async def elect_preferred(self, partitions: list[TopicPartition]) -> Decision:
        """Preferred-leader election; failures are in `Decision.failed`."""

        async def elect() -> Decision:
            ctx = self._term.context
            return await self._term.decide(
                lambda: psm.elect_leaders(ctx, partitions, psm.Strategy.PREFERRED),
                confirm_reachable=True,
            )

        result: Decision = await self._term.submit(elect)
        return result

    async def elect_leaders(
        self, partitions: list[TopicPartition] | None, *, unclean: bool = False
    ) -> ElectionResults:
        """ElectLeaders: per partition None (elected) or why not."""
        strategy = psm.Strategy.UNCLEAN if unclean else psm.Strategy.PREFERRED

        async def elect() -> ElectionResults:
            ctx = self._term.context
            wanted = sorted(ctx.assignments) if partitions is None else partitions
            decision = await self._term.decide(
                lambda: psm.elect_leaders(ctx, wanted, strategy), confirm_reachable=True
            )
            results: ElectionResults = {tp: None for tp in decision.changes}
            results.update({tp: why.as_error(tp) for tp, why in decision.failed.items()})
            if partitions is None:
                return {
                    tp: e for tp, e in results.items() if not isinstance(e, ElectionNotNeededError)
                }
            return results

        result: ElectionResults = await self._term.submit(elect)
        return result

    async def auto_rebalance(self) -> None:
        ctx = self._term.context
        candidates = psm.preferred_election_candidates(ctx, self._imbalance_percentage)
        if candidates:
            log.info("event=auto_leader_rebalance partitions=%d", len(candidates))
            await self._term.decide(
                lambda: psm.elect_leaders(ctx, candidates, psm.Strategy.PREFERRED),
                confirm_reachable=True,
            )
