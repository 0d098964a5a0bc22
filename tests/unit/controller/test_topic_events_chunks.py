"""New partitions are led in decisions of at most `DECISION_PARTITIONS` (issue 25: one decision
for 5,000 made every order, request and frame at once, megabytes the controller kept)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from brokers.controller.orders import Decision
from brokers.controller.state import BrokerEndpoint, LeaderAndIsr, ReplicaAssignment
from brokers.controller.topic_events import DECISION_PARTITIONS, TopicEvents
from brokers.controller.zk_paths import BrokerRegistration
from tests.unit.controller.test_term import make_term

pytestmark = pytest.mark.unit


class RecordingStore:
    def __init__(self) -> None:
        self.writes: list[int] = []

    async def write_states(
        self, _fence: Any, _context: Any, changes: Mapping[Any, LeaderAndIsr]
    ) -> dict[Any, LeaderAndIsr]:
        self.writes.append(len(changes))
        return dict(changes)


def test_new_partitions_are_led_in_bounded_decisions() -> None:
    async def scenario() -> None:
        term, _ = make_term()
        ctx = term.context
        ctx.live_brokers[1] = BrokerRegistration(
            1, (BrokerEndpoint("PLAINTEXT", "h", 9092),), None, 0, epoch=5
        )
        count = 2 * DECISION_PARTITIONS + 7
        new = ctx.add_topic("t", uuid.uuid4(), {p: ReplicaAssignment((1,)) for p in range(count)})
        store = RecordingStore()
        term.store = store  # type: ignore[assignment]
        sent: list[Decision] = []
        term.send = sent.append  # type: ignore[method-assign, assignment]
        await TopicEvents(term)._initialize(new)
        assert store.writes == [DECISION_PARTITIONS, DECISION_PARTITIONS, 7]
        assert [len(d.changes) for d in sent] == store.writes
        assert len(ctx.leadership) == count and all(s.leader == 1 for s in ctx.leadership.values())

    asyncio.run(scenario())


def test_partitions_a_new_controller_finds_without_state_are_led_in_bounded_decisions() -> None:
    """A failover mid-creation: the new controller leads what has no state yet, bounded too."""
    from brokers.controller.broker_events import BrokerEvents

    async def scenario() -> None:
        term, _ = make_term()
        ctx = term.context
        ctx.live_brokers[1] = BrokerRegistration(
            1, (BrokerEndpoint("PLAINTEXT", "h", 9092),), None, 0, epoch=5
        )
        count = DECISION_PARTITIONS + 3
        ctx.add_topic("t", uuid.uuid4(), {p: ReplicaAssignment((1,)) for p in range(count)})
        store = RecordingStore()
        term.store = store  # type: ignore[assignment]
        term.send = lambda _decision: None  # type: ignore[method-assign, assignment]
        await BrokerEvents(term).elect_offline_and_new([])
        assert store.writes == [DECISION_PARTITIONS, 3]
        assert len(ctx.leadership) == count

    asyncio.run(scenario())
