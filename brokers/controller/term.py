"""One controller term: the event queue and how a decision is applied (Kafka's
`ControllerEventManager` and the write-then-send half of `KafkaController`).

Owns: the state every controller event shares — the ZooKeeper client, the election, the channel,
the `ControllerStore`, the `ControllerContext` of the current term and the cluster id — and:
- the event queue: events (watches, timers, requests) run one at a time, in order, so the context
  never sees interleaved changes. `begin` starts a term (fresh context, queue, the runner task and
  periodic timers, then the first event); `end` stops them; watches armed in an ended term are
  ignored (`watch` remembers its term number).
- `submit`: run a request's work as an event and await its result (ControllerMovedError when this
  broker is not the controller, or stops being it before the work ran or finished: a request is
  always answered).
- `decide`: refresh which brokers are reachable (`ControllerChannel.notice_closed`; for an
  election that moves leadership, `confirm_reachable` first: fresh connections), ask a pure
  state machine for a `Decision`, write its partition states with fenced
  multi-ops (in chunks; chunks written before a failure are still announced), record them in the context, run an optional `before_send` step
  (e.g. a reassignment's topic znode write), then queue the requests on the channel. A version
  conflict re-reads the partitions and decides again; a failed fence means another controller
  was elected: ControllerMovedError, and the runner resigns. Every applied decision is offered to
  the `after_decision` listeners (reassignment completion re-checks).
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from brokers.controller import request_batch
from brokers.controller.channel import ControllerChannel
from brokers.controller.context import ControllerContext
from brokers.controller.controller_store import ControllerStore, PartialWriteError
from brokers.controller.election import ControllerElection
from brokers.controller.errors import ControllerError, ControllerMovedError, ZNodeVersionError
from brokers.controller.orders import Decision
from brokers.controller.zk_client import ZkClient

log = logging.getLogger(__name__)
Event = Callable[[], Awaitable[None]]
DecisionListener = Callable[[Decision], None]
# Metrics hook (brokers/controller/metrics.py): the running event's name, None when idle.
EventObserver = Callable[[str | None], None]

MAX_DECISION_ATTEMPTS = 5


class ControllerTerm:
    def __init__(
        self, zk: ZkClient, election: ControllerElection, channel: ControllerChannel
    ) -> None:
        self.zk = zk
        self.election = election
        self.channel = channel
        self.store = ControllerStore(zk)
        self.context = ControllerContext(unreachable=channel.unreachable)
        self.cluster_id = ""
        self.after_decision: list[DecisionListener] = []
        self._term = 0
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._submitted: set[asyncio.Future[Any]] = set()
        self.event_observer: EventObserver = lambda name: None

    @property
    def broker_id(self) -> int:
        return self.election.broker_id

    @property
    def active(self) -> bool:
        return bool(self._tasks)

    # --- the term --------------------------------------------------------------------------

    def begin(self, epoch: int, first: Event, timers: list[tuple[float, Event]]) -> None:
        self.end()
        self._term += 1
        self.context = ControllerContext(
            epoch, self.election.epoch_zk_version, unreachable=self.channel.unreachable
        )
        self._events = asyncio.Queue()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._run())]
        self._tasks += [loop.create_task(self._every(s, event)) for s, event in timers]
        self._events.put_nowait(first)

    def end(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._tasks = []
        self._term += 1  # watches armed in the ended term are ignored from now on
        self._fail_submitted()
        for broker in list(self.channel.brokers):
            asyncio.get_running_loop().create_task(self.channel.remove_broker(broker))

    async def close(self) -> None:
        tasks, self._tasks = self._tasks, []
        self._term += 1
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._fail_submitted()
        await self.channel.close()

    def _fail_submitted(self) -> None:
        """Requests queued in an ended term get an answer: the controller moved."""
        submitted, self._submitted = self._submitted, set()
        for future in submitted:
            if not future.done():
                future.set_exception(ControllerMovedError(f"broker {self.broker_id} resigned"))

    async def _run(self) -> None:
        while True:
            event = await self._events.get()
            self.event_observer(event.__name__)
            try:
                await event()
            except asyncio.CancelledError:
                raise
            except ControllerMovedError:
                log.info("event=controller_moved broker=%d", self.broker_id)
                self.election.resign()
            except Exception as exc:  # one failed event must not stop the controller
                log.error("event=controller_event_failed name=%s error=%r", event.__name__, exc)
            finally:
                self.event_observer(None)

    async def _every(self, interval_s: float, event: Event) -> None:
        while True:
            await asyncio.sleep(interval_s)
            self._events.put_nowait(event)

    def enqueue(self, event: Event) -> None:
        self._events.put_nowait(event)

    def watch(self, event: Event) -> Callable[[str], None]:
        """A ZooKeeper watch callback that queues `event`, unless its term has ended."""
        term = self._term

        def fire(_path: str) -> None:
            if term == self._term:
                self._events.put_nowait(event)

        return fire

    def require_active(self) -> None:
        if not self.active:
            raise ControllerMovedError(f"broker {self.broker_id} is not the controller")

    async def submit(self, work: Callable[[], Awaitable[Any]]) -> Any:
        """Run `work` as an event (after those queued before it); its result or its error."""
        self.require_active()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._submitted.add(future)
        future.add_done_callback(self._submitted.discard)

        def settle(result: Any = None, error: Exception | None = None) -> None:
            if future.done():  # the term ended meanwhile and answered it already
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

        async def event() -> None:
            try:
                result = await work()
            except ControllerMovedError as exc:
                settle(error=exc)
                raise  # the runner resigns
            except Exception as exc:
                settle(error=exc)
            else:
                settle(result)

        event.__name__ = getattr(work, "__name__", "request")
        self._events.put_nowait(event)
        return await future

    # --- applying decisions ----------------------------------------------------------------

    async def decide(
        self,
        make: Callable[[], Decision],
        before_send: Callable[[Decision], Awaitable[None]] | None = None,
        *,
        confirm_reachable: bool = False,
    ) -> Decision:
        """Decide, write fenced, record, send; on a version conflict re-read and decide again.
        `confirm_reachable`: the decision moves leadership, so first learn of any broker killed
        so recently that its connection has not closed yet (`ControllerChannel`)."""
        if confirm_reachable:
            await self.channel.confirm_reachable()
        for _ in range(MAX_DECISION_ATTEMPTS):
            self.channel.notice_closed()  # a broker killed this very loop turn is no candidate
            decision = make()
            try:
                written = await self.store.write_states(
                    self.election.fence(), self.context, decision.changes
                )
            except PartialWriteError as exc:
                # Some chunks were written (and recorded): brokers must hear of those now, or a
                # new decision would see nothing left to change for them.
                self.send(decision.restricted_to(set(exc.written)))
                if not exc.conflict:
                    raise
                await self._refresh_after_conflict(decision)
                continue
            except ZNodeVersionError:
                await self._refresh_after_conflict(decision)
                continue
            self.context.apply(written)
            if before_send is not None:
                await before_send(decision)
            self.send(decision)
            for listener in self.after_decision:
                listener(decision)
            return decision
        raise ControllerError("partition states kept changing under the controller")

    async def _refresh_after_conflict(self, decision: Decision) -> None:
        if not self.election.is_controller or await self.deposed():
            raise ControllerMovedError("the controller epoch moved on")
        for tp in decision.changes:
            state = await self.store.read_state(tp)
            if state is not None:
                self.context.leadership[tp] = state

    async def deposed(self) -> bool:
        node = await self.zk.get("/controller_epoch")
        return node.version != self.election.epoch_zk_version

    def send(self, decision: Decision) -> None:
        for broker, request in request_batch.requests_for(self.context, self.broker_id, decision):
            self.channel.send(broker, request)
