"""Topic deletion that completes only when every replica has deleted its log (Kafka's
`TopicDeletionManager`, ZooKeeper mode).

Owns: the deletions of the current controller term. For each topic being deleted, the replicas
(partition, broker) not yet confirmed deleted and the broker epoch each StopReplica(delete) went
to. Three steps, each run as a controller event:
- begin: a topic named under `/admin/delete_topics` that the context knows is taken out of
  service. Every live broker gets UpdateMetadata with leader -2 (Kafka's LeaderDuringDelete), so
  clients stop seeing it; its partitions leave the context's assignments and leadership, so no
  election, LeaderAndIsr, ISR notification, reassignment or controlled shutdown touches them again
  (Kafka filters topics queued for deletion out of each of these). It stays in `topic_ids` and
  `topics_to_delete`: its znodes remain, and the topic admin refuses to create it again.
- ask: StopReplica(delete) to every unconfirmed replica whose broker is live and was not yet
  asked at its current epoch. A broker that was down, or bounced, is asked when it registers
  again (`resume` after a broker startup: Kafka's resumeDeletions). A replica answered without
  error is confirmed; a refused one waits for its broker's next registration or the next
  controller (Kafka's ReplicaDeletionIneligible).
- complete: once all replicas are confirmed, the topic's znodes go (`/brokers/topics/<t>` and its
  partitions, `/config/topics/<t>`, `/admin/delete_topics/<t>`) and it leaves the context. Only
  then can the name be created again, so a re-created topic never meets an old log.
A new term starts afresh: every replica of every topic still requested is asked again (a broker
answers success for a partition it does not host). Answers arrive on the channel's sender tasks;
they only mark their own deletion record and queue `resume`, guarded by the term.
Events run on the controller's queue (`ControllerTerm`); not thread-safe.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from brokers.controller import request_batch
from brokers.controller.context import ControllerContext
from brokers.controller.orders import Decision, StopReplicaOrder, metadata_to_all
from brokers.controller.state import TopicPartition
from brokers.controller.term import ControllerTerm

log = logging.getLogger(__name__)
Replica = tuple[TopicPartition, int]
NOT_LIVE = -1


@dataclass
class _Deletion:
    leader_epochs: dict[TopicPartition, int]
    pending: set[Replica]
    asked: dict[Replica, int] = field(default_factory=dict)  # replica -> broker epoch asked at


class TopicDeletion:
    def __init__(self, term: ControllerTerm) -> None:
        self._term = term
        self._context: ControllerContext | None = None
        self._topics: dict[str, _Deletion] = {}

    def pending(self, topic: str) -> set[Replica]:
        """Replicas of `topic` not yet confirmed deleted (empty when it is not being deleted)."""
        deletion = self._topics.get(topic)
        return set(deletion.pending) if deletion is not None else set()

    async def requests_changed(self) -> None:
        """The `/admin/delete_topics` watch (also run at takeover): begin what is newly asked."""
        term = self._term
        requested = await term.store.topics_to_delete(term.watch(self.requests_changed))
        ctx = self._current_context()
        for topic in requested:
            if topic in self._topics:
                continue
            if topic in ctx.topic_ids:
                self._begin(ctx, topic)
            else:  # nothing of it is known: only the request itself is left to remove
                await term.store.delete_topic(topic)
        await self.resume()

    async def resume(self) -> None:
        """Ask the replicas that can answer now; complete the topics whose replicas all did."""
        ctx = self._current_context()
        for topic in [t for t in self._topics if t not in ctx.topic_ids]:
            del self._topics[topic]  # its znodes went away by other means
        self._ask(ctx)
        for topic in sorted(t for t, d in self._topics.items() if not d.pending):
            await self._term.store.delete_topic(topic)
            ctx.remove_topic(topic)
            del self._topics[topic]
            log.info("event=topic_deleted topic=%s", topic)

    def _current_context(self) -> ControllerContext:
        ctx = self._term.context
        if ctx is not self._context:  # a new term: its context was loaded afresh
            self._context, self._topics = ctx, {}
        return ctx

    def _begin(self, ctx: ControllerContext, topic: str) -> None:
        partitions = ctx.partitions_of(topic)
        self._topics[topic] = _Deletion(
            leader_epochs={
                tp: state.leader_epoch if (state := ctx.leadership.get(tp)) else -1
                for tp in partitions
            },
            pending={(tp, broker) for tp in partitions for broker in ctx.replicas(tp)},
        )
        ctx.topics_to_delete.add(topic)
        for tp in partitions:
            del ctx.assignments[tp]
            ctx.leadership.pop(tp, None)
        live = set(ctx.live_brokers)
        self._term.send(Decision(update_metadata=metadata_to_all(live, set(partitions))))
        log.info("event=topic_deletion_started topic=%s partitions=%d", topic, len(partitions))

    def _ask(self, ctx: ControllerContext) -> None:
        orders: dict[int, list[StopReplicaOrder]] = defaultdict(list)
        records: dict[int, list[_Deletion]] = defaultdict(list)
        for _topic, deletion in sorted(self._topics.items()):
            for tp, broker in sorted(deletion.pending):
                epoch = ctx.broker_epoch(broker)
                if epoch == NOT_LIVE or deletion.asked.get((tp, broker)) == epoch:
                    continue
                deletion.asked[(tp, broker)] = epoch
                orders[broker].append(
                    StopReplicaOrder(broker, tp, True, deletion.leader_epochs[tp])
                )
                if deletion not in records[broker]:
                    records[broker].append(deletion)
        for broker, stops in sorted(orders.items()):
            request = request_batch.stop_replica(ctx, self._term.broker_id, broker, stops)
            answered = self._on_answer(records[broker], self._term.watch(self.resume))
            if not self._term.channel.send(broker, request, answered):
                for deletion in records[broker]:  # no queue for it (yet): ask again later
                    for stop in stops:
                        deletion.asked.pop((stop.tp, broker), None)

    @staticmethod
    def _on_answer(
        deletions: list[_Deletion], resume: Callable[[str], None]
    ) -> Callable[[int, Any], None]:
        def answered(broker: int, response: Any) -> None:
            if response.error_code:
                log.warning(
                    "event=stop_replica_refused broker=%d error=%d", broker, response.error_code
                )
                return
            for result in response.partition_errors:
                replica = (TopicPartition(result.topic_name, result.partition_index), broker)
                if result.error_code:
                    log.warning(
                        "event=replica_deletion_failed broker=%d partition=%s error=%d",
                        broker, replica[0], result.error_code,
                    )  # fmt: skip
                    continue
                for deletion in deletions:
                    deletion.pending.discard(replica)
            resume("")

        return answered
