"""The controller's topic events (Kafka's `TopicChange`, `PartitionModifications`,
`TopicDeletion` and `IsrChangeNotification`).

Owns: loading every topic into the context (arming `/brokers/topics` and per-topic watches, the
latter for partition growth); new topics and new partitions get leaders (NewPartition →
OnlinePartition); topics queued in `/admin/delete_topics` are deleted by `TopicDeletion`
(topic_deletion.py: complete once every replica has deleted its log); ISR-change notifications from leaders make the controller
re-read those partition states, tell every broker (UpdateMetadata) and offer the partitions to
`on_isr_change` (a reassignment completes once its targets are in the ISR).
Events run on the controller's queue (`ControllerTerm`); not thread-safe.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial

from brokers.controller import partition_state_machine as psm
from brokers.controller.orders import Decision, UpdateMetadataOrder
from brokers.controller.state import TopicPartition
from brokers.controller.term import ControllerTerm, Event
from brokers.controller.topic_deletion import TopicDeletion

DECISION_PARTITIONS = 1000
"""New partitions are led in decisions of at most this many (each written in fenced multis of
500, then sent): one decision for a 10-topic CreateTopics of 5,000 partitions made its orders,
requests and frames for all of them at once, megabytes the controller's broker kept resident."""

log = logging.getLogger(__name__)


async def initialize_in_decisions(term: ControllerTerm, new: list[TopicPartition]) -> None:
    """Lead `new` partitions (NewPartition → OnlinePartition) in decisions of at most
    `DECISION_PARTITIONS`, one after another."""
    for first in range(0, len(new), DECISION_PARTITIONS):
        chunk = new[first : first + DECISION_PARTITIONS]
        await term.decide(partial(psm.initialize_partitions, term.context, chunk))


IsrListener = Callable[[list[TopicPartition]], Awaitable[None]]


class TopicEvents:
    def __init__(self, term: ControllerTerm, on_isr_change: IsrListener | None = None) -> None:
        self._term = term
        self.on_isr_change = on_isr_change
        self.deletion = TopicDeletion(term)

    async def load_topics(self) -> list[TopicPartition]:
        """Read every topic into the context; the partitions that have no state yet."""
        term = self._term
        missing: list[TopicPartition] = []
        for topic in await term.store.topic_names(term.watch(self.topic_change)):
            missing += await term.store.load_topic(
                term.context, topic, self._partition_watch(topic)
            )
        return missing

    def _partition_watch(self, topic: str) -> Callable[[str], None]:
        return self._term.watch(self.partition_event(topic))

    def partition_event(self, topic: str) -> Event:
        async def partitions_changed() -> None:
            await self.partition_change(topic)

        partitions_changed.__name__ = f"partition_change[{topic}]"
        return partitions_changed

    def resync_events(self) -> list[Event]:
        """Events that re-read every watched topic path (and so re-arm the watches)."""
        topics = sorted(self._term.context.topic_ids)
        return [
            self.topic_change,
            self.topic_deletion,
            self.isr_change,
            *(self.partition_event(t) for t in topics),
        ]

    async def topic_change(self) -> None:
        term = self._term
        ctx = term.context
        names = set(await term.store.topic_names(term.watch(self.topic_change)))
        for gone in sorted(set(ctx.topic_ids) - names):
            ctx.remove_topic(gone)
        new: list[TopicPartition] = []
        for topic in sorted(names - set(ctx.topic_ids)):
            new += await term.store.load_topic(ctx, topic, self._partition_watch(topic))
        await self._initialize(new)

    async def _initialize(self, new: list[TopicPartition]) -> None:
        await initialize_in_decisions(self._term, new)

    async def partition_change(self, topic: str) -> None:
        """Partition growth: new partitions in `/brokers/topics/<t>` get leaders."""
        term = self._term
        ctx = term.context
        assignment = await term.store.read_topic(topic, self._partition_watch(topic))
        if assignment is None or topic not in ctx.topic_ids or topic in ctx.topics_to_delete:
            return  # a topic being deleted does not grow (Kafka's PartitionModifications)
        added = [TopicPartition(topic, p) for p in assignment.partitions]
        added = [tp for tp in added if tp not in ctx.assignments]
        for tp in added:
            ctx.assignments[tp] = assignment.partitions[tp.partition]
        await self._initialize(added)

    async def topic_deletion(self) -> None:
        """Kafka's `TopicDeletion` event: see `TopicDeletion.requests_changed`."""
        await self.deletion.requests_changed()

    async def isr_change(self) -> None:
        """Leaders changed ISRs: re-read those states and tell every broker."""
        term = self._term
        ctx = term.context
        names, changed = await term.store.isr_changes(term.watch(self.isr_change))
        known = sorted(tp for tp in changed if tp in ctx.assignments)
        for tp in known:
            state = await term.store.read_state(tp)
            if state is not None:
                ctx.leadership[tp] = state
        if known:
            term.send(
                Decision(
                    update_metadata=[
                        UpdateMetadataOrder(b, tuple(known)) for b in sorted(ctx.live_brokers)
                    ]
                )
            )
        await term.store.delete_isr_changes(names)
        if known and self.on_isr_change is not None:
            await self.on_isr_change(known)
