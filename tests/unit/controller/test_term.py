"""The controller term's request queue: a request submitted to a term that ends is still answered
(ControllerMovedError), and work that finds the controller moved makes the runner resign. Also
the controlled-shutdown answer, which lists only partitions that can move."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from brokers.controller import BrokerEpochMismatchError, BrokerNotAvailableError
from brokers.controller.controller_store import PartialWriteError
from brokers.controller.errors import ControllerMovedError
from brokers.controller.leadership_requests import LeadershipRequests
from brokers.controller.orders import Decision, LeaderAndIsrOrder, UpdateMetadataOrder
from brokers.controller.state import BrokerEndpoint, LeaderAndIsr, ReplicaAssignment
from brokers.controller.state import TopicPartition as TP
from brokers.controller.term import ControllerTerm
from brokers.controller.zk_paths import BrokerRegistration

pytestmark = pytest.mark.unit


class FakeElection:
    broker_id = 1
    epoch_zk_version = 0

    def __init__(self) -> None:
        self.resigned = 0

    def resign(self) -> None:
        self.resigned += 1

    def fence(self) -> None:
        return None


class FakeChannel:
    brokers: set[int] = set()
    unreachable: set[int] = set()

    def notice_closed(self) -> None:
        return None

    async def confirm_reachable(self) -> None:
        return None

    async def close(self) -> None:
        return None


def make_term() -> tuple[ControllerTerm, FakeElection]:
    election = FakeElection()
    term = ControllerTerm(None, election, FakeChannel())  # type: ignore[arg-type]
    return term, election


def test_a_request_queued_when_the_term_ends_is_answered() -> None:
    async def scenario() -> None:
        term, _ = make_term()
        blocker = asyncio.Event()

        async def busy() -> None:
            await blocker.wait()  # the runner is stuck on an earlier event

        term.begin(1, busy, [])

        async def work() -> str:
            return "never"

        request = asyncio.ensure_future(term.submit(work))
        await asyncio.sleep(0)
        assert not request.done()
        term.end()
        with pytest.raises(ControllerMovedError):
            await asyncio.wait_for(request, 5)

    asyncio.run(scenario())


def test_a_request_running_when_the_term_closes_is_answered() -> None:
    async def scenario() -> None:
        term, _ = make_term()
        started = asyncio.Event()

        async def first() -> None:
            return None

        term.begin(1, first, [])

        async def slow() -> Any:
            started.set()
            await asyncio.Event().wait()

        request = asyncio.ensure_future(term.submit(slow))
        await asyncio.wait_for(started.wait(), 5)
        await term.close()
        with pytest.raises(ControllerMovedError):
            await asyncio.wait_for(request, 5)

    asyncio.run(scenario())


def test_work_that_finds_the_controller_moved_fails_and_the_runner_resigns() -> None:
    async def scenario() -> None:
        term, election = make_term()

        async def first() -> None:
            return None

        term.begin(1, first, [])

        async def deposed() -> None:
            raise ControllerMovedError("epoch moved on")

        with pytest.raises(ControllerMovedError):
            await asyncio.wait_for(term.submit(deposed), 5)
        for _ in range(10):
            await asyncio.sleep(0)
        assert election.resigned == 1
        await term.close()

    asyncio.run(scenario())


def test_controlled_shutdown_lists_only_partitions_another_in_sync_replica_can_take() -> None:
    """The stopping broker asks again until the list is empty: a partition whose only in-sync
    replica is that broker can never move, so it must not keep the broker waiting."""

    async def scenario() -> None:
        term, _ = make_term()

        async def first() -> None:
            return None

        term.begin(1, first, [])
        ctx = term.context
        for b in (1, 2, 3):
            endpoint = BrokerEndpoint("PLAINTEXT", "h", 9000 + b)
            ctx.live_brokers[b] = BrokerRegistration(b, (endpoint,), None, 0, epoch=100 + b)
        ctx.add_topic("t", uuid.uuid4(), {})
        alone, shared = TP("t", 0), TP("t", 1)
        for tp, isr in ((alone, (1,)), (shared, (1, 2))):
            ctx.assignments[tp] = ReplicaAssignment((1, 2, 3))
            ctx.leadership[tp] = LeaderAndIsr(1, 3, isr, 1, zk_version=0)
        requests = LeadershipRequests(term)
        assert requests.request_controlled_shutdown(1, 101) == [("t", 1)]
        # Kafka's broker-epoch rules: older is stale, newer is a registration not read yet.
        with pytest.raises(BrokerEpochMismatchError):
            requests.request_controlled_shutdown(2, 101)
        assert requests.request_controlled_shutdown(3, 999) == []
        with pytest.raises(BrokerNotAvailableError):
            requests.request_controlled_shutdown(9, 1)
        await term.close()

    asyncio.run(scenario())


def test_states_a_partial_write_recorded_are_announced_before_the_error() -> None:
    """Chunks written before a failed chunk are in ZooKeeper and in the context: the brokers must
    hear of them, or no later decision would (it sees nothing left to change there)."""

    async def scenario() -> None:
        term, _ = make_term()
        a, b = TP("t", 0), TP("t", 1)
        state = LeaderAndIsr(2, 4, (2, 3), 1, zk_version=1)
        assignment = ReplicaAssignment((2, 3))

        class FailingStore:
            async def write_states(self, *_: Any) -> None:
                raise PartialWriteError("connection lost", {a: state}, conflict=False)

        term.store = FailingStore()  # type: ignore[assignment]
        sent: list[Decision] = []
        term.send = sent.append  # type: ignore[method-assign, assignment]
        decision = Decision(
            changes={a: state, b: state},
            leader_and_isr=[LeaderAndIsrOrder(2, tp, state, assignment) for tp in (a, b)],
            update_metadata=[UpdateMetadataOrder(3, (a, b))],
        )
        with pytest.raises(PartialWriteError):
            await term.decide(lambda: decision)
        (announced,) = sent
        assert list(announced.changes) == [a]
        assert [o.tp for o in announced.leader_and_isr] == [a]
        assert announced.update_metadata == [UpdateMetadataOrder(3, (a,))]

    asyncio.run(scenario())


def test_a_controlled_shutdown_confirms_reachability_before_it_elects() -> None:
    """Broker 3 was killed so recently that its connection still looks open: only the fresh
    connections the election makes first (`confirm_reachable`) can tell, and they must come
    before the decision, or broker 3 (first in the assignment after the stopping broker) leads."""

    async def scenario() -> None:
        order: list[str] = []

        class KillNoticedOnConfirm(FakeChannel):
            def __init__(self) -> None:
                self.unreachable = set()

            async def confirm_reachable(self) -> None:
                order.append("confirm")
                self.unreachable.add(3)

        class RecordingStore:
            async def write_states(
                self, _fence: object, _ctx: object, changes: dict[TP, LeaderAndIsr]
            ) -> dict[TP, LeaderAndIsr]:
                order.append("write")
                return dict(changes)

        term = ControllerTerm(None, FakeElection(), KillNoticedOnConfirm())  # type: ignore[arg-type]

        async def first() -> None:
            return None

        term.begin(1, first, [])
        term.store = RecordingStore()  # type: ignore[assignment]
        term.send = lambda decision: None  # type: ignore[method-assign]
        ctx = term.context
        for b in (1, 2, 3):
            endpoint = BrokerEndpoint("PLAINTEXT", "h", 9000 + b)
            ctx.live_brokers[b] = BrokerRegistration(b, (endpoint,), None, 0, epoch=100 + b)
        tp = TP("t", 0)
        ctx.add_topic("t", uuid.uuid4(), {0: ReplicaAssignment((2, 3, 1))})
        ctx.leadership[tp] = LeaderAndIsr(2, 3, (2, 3, 1), 1, zk_version=0)
        assert await LeadershipRequests(term).controlled_shutdown(2, 102) == []
        assert order == ["confirm", "write"]
        assert ctx.leadership[tp].leader == 1
        await term.close()

    asyncio.run(scenario())
