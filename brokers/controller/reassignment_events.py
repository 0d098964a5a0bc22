"""Partition reassignments driven by the controller (KIP-455 on ZooKeeper, Kafka 2.4+'s
`KafkaController.onPartitionReassignment` and `maybeResumeReassignments`).

Owns the wiring of the pure steps in `reassignment`:
- `alter` (AlterPartitionReassignments): per partition, start a reassignment to the target
  replicas, replace one in flight, or cancel it (target None). The new replica set (replicas,
  adding_replicas, removing_replicas) is written first into `/brokers/topics/<t>` as Kafka's
  ZooKeeper mode stores it, and into the context; then the decision (leader epoch bump,
  LeaderAndIsr to every replica, the added ones as new replicas) is written fenced and sent.
  Answers once started, as Kafka does: completion comes later.
- completion: after every applied decision (a LeaderAndIsr round: the start itself, elections,
  broker changes) and every ISR-change notification, a moving partition whose target replicas
  are all in the ISR completes: the final leader/ISR are written, the final replica set is
  written to the topic znode, LeaderAndIsr goes to the targets and StopReplica(delete) to the
  removed replicas.
- `resume` on controller failover: in-flight reassignments found in ZooKeeper complete if caught
  up, else are started again (the epoch bump re-sends LeaderAndIsr to the adding replicas).
- `listing` (ListPartitionReassignments): the moving partitions, all or those asked for (unknown
  partitions are left out, as Kafka does).
Work runs on the controller's queue (`ControllerTerm`); not thread-safe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from brokers.controller import reassignment
from brokers.controller.errors import ControllerError, ControllerMovedError
from brokers.controller.orders import Decision
from brokers.controller.state import ReplicaAssignment, TopicPartition
from brokers.controller.term import ControllerTerm, Event

log = logging.getLogger(__name__)
Step = Callable[[], tuple[ReplicaAssignment, Decision]]
AlterResults = dict[TopicPartition, ControllerError | None]


class ReassignmentEvents:
    def __init__(self, term: ControllerTerm) -> None:
        self._term = term
        term.after_decision.append(self._after_decision)

    async def alter(
        self,
        targets: Mapping[TopicPartition, Sequence[int] | None],
        *,
        allow_rf_change: bool = True,
    ) -> AlterResults:
        async def alter_reassignments() -> AlterResults:
            results: AlterResults = {}
            for tp, target in sorted(targets.items()):
                try:
                    wanted = None if target is None else tuple(target)
                    await self._start(tp, wanted, allow_rf_change)
                    results[tp] = None
                except ControllerMovedError:
                    raise
                except ControllerError as exc:
                    results[tp] = exc
            return results

        result: AlterResults = await self._term.submit(alter_reassignments)
        return result

    async def listing(
        self, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, ReplicaAssignment]:
        async def list_reassignments() -> dict[TopicPartition, ReplicaAssignment]:
            ctx = self._term.context
            moving = reassignment.reassigning(ctx)
            wanted = moving if partitions is None else [tp for tp in moving if tp in partitions]
            return {tp: ctx.assignments[tp] for tp in wanted}

        result: dict[TopicPartition, ReplicaAssignment] = await self._term.submit(
            list_reassignments
        )
        return result

    async def resume(self) -> None:
        ctx = self._term.context
        for tp in reassignment.reassigning(ctx):
            if reassignment.caught_up(ctx, tp):
                await self.complete(tp)
            else:
                await self._start(tp, ctx.assignments[tp].target_replicas)

    async def _start(
        self, tp: TopicPartition, target: tuple[int, ...] | None, allow_rf_change: bool = True
    ) -> None:
        ctx = self._term.context
        if target is None:
            await self._begin(tp, lambda: reassignment.cancel(ctx, tp))
        else:
            await self._begin(tp, lambda: reassignment.start(ctx, tp, target, allow_rf_change))
        log.info("event=reassignment_started partition=%s target=%s", tp, target)

    async def _begin(self, tp: TopicPartition, step: Step) -> None:
        """Start (or cancel): the new replica set goes to `/brokers/topics/<t>` first, then the
        epoch bump (Kafka's U1 before A3), so a failed write never leaves ZooKeeper with the
        bumped state and the old replica set. The decision is made against the assignment as it
        was, since the replicas it drops are those of the previous set."""
        ctx = self._term.context
        previous = reassignment.current_assignment(ctx, tp)
        assignment, _ = step()  # checks the target; the decision is re-made below
        if assignment != previous:
            fence = self._term.election.fence()
            await self._term.store.write_assignments(fence, tp.topic, {tp.partition: assignment})
            ctx.assignments[tp] = assignment

        def decide() -> Decision:
            ctx.assignments[tp] = previous
            try:
                return step()[1]
            finally:
                ctx.assignments[tp] = assignment

        await self._term.decide(decide)

    async def complete(self, tp: TopicPartition) -> None:
        ctx = self._term.context
        assignment = ctx.assignments.get(tp)
        if assignment is None or not assignment.is_reassigning:
            return
        if tp not in ctx.leadership or not reassignment.caught_up(ctx, tp):
            return
        await self._apply(tp, lambda: reassignment.complete(ctx, tp))
        final = ctx.assignments[tp]
        if not final.is_reassigning:
            log.info("event=reassignment_completed partition=%s replicas=%s", tp, final.replicas)

    async def _apply(self, tp: TopicPartition, step: Step) -> None:
        """Completion: decide `step` (re-made on a version conflict), then write the final
        assignment before sending (Kafka's B3 before B5)."""
        chosen: list[ReplicaAssignment] = []

        def decide() -> Decision:
            assignment, decision = step()
            chosen[:] = [assignment]
            return decision

        async def write_assignment(decision: Decision) -> None:
            if tp not in decision.changes or chosen[0] == self._term.context.assignments.get(tp):
                return
            fence = self._term.election.fence()
            await self._term.store.write_assignments(fence, tp.topic, {tp.partition: chosen[0]})
            self._term.context.assignments[tp] = chosen[0]

        await self._term.decide(decide, before_send=write_assignment, confirm_reachable=True)

    def _after_decision(self, decision: Decision) -> None:
        ctx = self._term.context
        ready = [
            tp
            for tp in decision.changes
            if (a := ctx.assignments.get(tp)) is not None
            and a.is_reassigning
            and reassignment.caught_up(ctx, tp)
        ]
        if ready:
            self._term.enqueue(self._completion_event(ready))

    async def check(self, partitions: list[TopicPartition]) -> None:
        """ISR changes: complete the moving partitions whose targets are now all in sync."""
        for tp in partitions:
            await self.complete(tp)

    def _completion_event(self, partitions: list[TopicPartition]) -> Event:
        async def complete_reassignments() -> None:
            await self.check(partitions)

        return complete_reassignments
