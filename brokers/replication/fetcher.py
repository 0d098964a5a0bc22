"""The follower side of replication: fetch a set of partitions from one leader into local logs.

Owns: `ReplicaFetcher` (Kafka's `ReplicaFetcherThread` as an asyncio task) and `LeaderEndpoint`,
the two requests it needs from the leader, injected so tests drive it without sockets
(`leader_endpoint.RemoteLeader` is the real one). Each partition is followed in one leader epoch:
1. TRUNCATING: ask the leader where our latest epoch ended (OffsetForLeaderEpoch) and truncate
   (`leader_epoch_truncation`, KIP-101/279); repeat while the rule says so;
2. FETCHING: Fetch from our log end with our replica id and current leader epoch (KIP-320, so
   the leader fences us if either side is behind), append the batches as the leader wrote them,
   then follower HW = min(leader HW, our log end);
3. FENCED: the leader has a newer epoch than ours (FENCED_LEADER_EPOCH); we stop until the
   controller tells us the new epoch (`follow` again), as Kafka's onPartitionFenced.
UNKNOWN_LEADER_EPOCH (the leader has not heard of our epoch yet), NOT_LEADER_OR_FOLLOWER and
connection failures back the partition off and retry.
4. OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405: our log end is below the leader's local log start,
   in the remote tier): ask the leader for its local log start (ListOffsets -4) and rebuild the
   log there with the epochs and producer snapshot of the remote segment ending just below it
   (`tier_state`, Kafka's TierStateMachine); without a remote tier here, or while our remote
   metadata does not know that segment yet, back off and ask again.

Never a stale epoch's data: every answer is applied only if the partition is still followed by
the same `follow` call, in the same phase, and (for fetches) at the same log end it was asked
from; a delayed (zombie) answer across an epoch change is dropped.

Runs on one event loop; not thread-safe. `follow`/`unfollow` may be called while a round is in
flight. The per-batch work is a header parse and a CRC check over bytes received (as Kafka's
follower validation); batches are written with one writev by `Log.append_as_follower`. The
answer's records may be a view into the endpoint's receive buffer, valid until the next request:
they are appended (or dropped) before this fetcher sends another.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from brokers.client.consumer import FetchPosition
from brokers.client.errors import ClientError
from brokers.client.metadata import TopicPartition
from brokers.common.clock import Clock
from brokers.log.errors import LogError
from brokers.log.log import Log
from brokers.records.batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, parse_header, verify_crc
from brokers.records.errors import CorruptRecordError, RecordError
from brokers.replication import leader_epoch_truncation as truncation
from brokers.replication import tier_state
from brokers.wire.errors import ErrorCode

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EpochQuery:
    current_leader_epoch: int  # fences the request on the leader (KIP-320)
    leader_epoch: int  # the epoch whose end offset we want


@dataclass(frozen=True, slots=True)
class EpochAnswer:
    error: ErrorCode
    leader_epoch: int = truncation.UNDEFINED_EPOCH
    end_offset: int = truncation.UNDEFINED_EPOCH_OFFSET


@dataclass(frozen=True, slots=True)
class LocalStartAnswer:
    """The leader's ListOffsets -4 (earliest local) answer for one partition."""

    error: ErrorCode
    offset: int = -1
    leader_epoch: int = truncation.UNDEFINED_EPOCH


class LeaderFetched(Protocol):
    """One partition of a replica fetch answer (the client's `FetchedPartition`, or
    `fetch_answer.ReplicaFetched` whose records are a view valid until the next request)."""

    @property
    def error(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def records(self) -> bytes | memoryview: ...


class LeaderEndpoint(Protocol):
    async def end_offsets(
        self, queries: Mapping[TopicPartition, EpochQuery]
    ) -> Mapping[TopicPartition, EpochAnswer]: ...

    async def fetch(
        self, positions: Mapping[TopicPartition, FetchPosition]
    ) -> Mapping[TopicPartition, LeaderFetched]: ...

    async def earliest_local(
        self, tp: TopicPartition, current_leader_epoch: int
    ) -> LocalStartAnswer: ...


class Phase(enum.Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"
    FENCED = "fenced"


@dataclass(slots=True)
class FollowedPartition:
    log: Log
    leader_epoch: int
    high_watermark: int
    phase: Phase = Phase.TRUNCATING
    retry_at: float = 0.0  # monotonic seconds; backed off until then


class ReplicaFetcher:
    def __init__(
        self,
        leader: LeaderEndpoint,
        *,
        clock: Clock,
        on_high_watermark: Callable[[TopicPartition, int], None] = lambda tp, hw: None,
        backoff_s: float = 1.0,  # replica.fetch.backoff.ms
        remote_tier: tier_state.RemoteAuxSource | None = None,
    ) -> None:
        self._leader = leader
        self.remote_tier = remote_tier
        self._clock = clock
        self._on_high_watermark = on_high_watermark
        self._backoff_s = backoff_s
        self._partitions: dict[TopicPartition, FollowedPartition] = {}
        self._wake = asyncio.Event()
        self._stopped = False

    # -- membership -----------------------------------------------------------------------------

    def follow(
        self, tp: TopicPartition, log: Log, *, leader_epoch: int, high_watermark: int
    ) -> None:
        """Follow `tp` in `leader_epoch` (a LeaderAndIsr made us its follower): truncate first.
        An answer to a request sent under an earlier `follow` is discarded."""
        current = self._partitions.get(tp)
        if current is not None and current.leader_epoch > leader_epoch:
            return  # a stale instruction; the newer epoch stands
        self._partitions[tp] = FollowedPartition(log, leader_epoch, high_watermark)
        self._wake.set()

    def unfollow(self, tp: TopicPartition) -> None:
        self._partitions.pop(tp, None)

    def phase(self, tp: TopicPartition) -> Phase | None:
        state = self._partitions.get(tp)
        return None if state is None else state.phase

    def high_watermark(self, tp: TopicPartition) -> int:
        return self._partitions[tp].high_watermark

    # -- the loop -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Rounds until `stop`; idles until a partition is ready or `follow` wakes it."""
        while not self._stopped:
            try:
                busy = await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # e.g. a disk error appending: never end the task silently
                log.error("event=replica_fetch_round_failed error=%r", exc)
                for state in self._partitions.values():
                    self._back_off(state)
                busy = False
            if not busy:
                await self._idle()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    async def run_once(self) -> bool:
        """One round: truncate the partitions that need it, then one Fetch. False: idle."""
        truncated = await self._truncate_round()
        fetched = await self._fetch_round()
        return truncated or fetched

    async def _idle(self) -> None:
        self._wake.clear()
        now = self._clock.monotonic()
        waits = [s.retry_at - now for s in self._partitions.values() if s.phase != Phase.FENCED]
        timeout = max(min(waits, default=self._backoff_s), 0.001)
        try:
            async with asyncio.timeout(timeout):
                await self._wake.wait()
        except TimeoutError:
            pass

    def _ready(self, phase: Phase) -> dict[TopicPartition, FollowedPartition]:
        now = self._clock.monotonic()
        return {
            tp: s for tp, s in self._partitions.items() if s.phase is phase and s.retry_at <= now
        }

    def _current(self, tp: TopicPartition, state: FollowedPartition, phase: Phase) -> bool:
        """Still the same `follow` of `tp`, in the phase the request was sent in."""
        return self._partitions.get(tp) is state and state.phase is phase

    def _back_off(self, state: FollowedPartition) -> None:
        state.retry_at = self._clock.monotonic() + self._backoff_s

    # -- truncation -----------------------------------------------------------------------------

    async def _truncate_round(self) -> bool:
        asked: dict[TopicPartition, tuple[FollowedPartition, EpochQuery]] = {}
        for tp, state in self._ready(Phase.TRUNCATING).items():
            epoch = truncation.epoch_to_ask(state.log.leader_epoch_cache)
            if epoch is None:
                end = state.log.log_end_offset
                decision = truncation.without_epochs(
                    high_watermark=state.high_watermark, log_end_offset=end
                )
                self._truncate(tp, state, decision)
            else:
                asked[tp] = (state, EpochQuery(state.leader_epoch, epoch))
        if not asked:
            return False
        try:
            answers = await self._leader.end_offsets({tp: q for tp, (_, q) in asked.items()})
        except ClientError as exc:
            log.warning("OffsetForLeaderEpoch failed: %s", exc)
            for state, _ in asked.values():
                self._back_off(state)
            return True
        for tp, (state, _) in asked.items():
            answer = answers.get(tp)
            if answer is not None and self._current(tp, state, Phase.TRUNCATING):
                self._on_epoch_answer(tp, state, answer)
        return True

    def _on_epoch_answer(
        self, tp: TopicPartition, state: FollowedPartition, a: EpochAnswer
    ) -> None:
        if a.error != ErrorCode.none:
            self._on_partition_error(tp, state, a.error)
            return
        decision = truncation.truncation_for(
            truncation.EpochEndOffset(a.leader_epoch, a.end_offset),
            state.log.leader_epoch_cache,
            log_end_offset=state.log.log_end_offset,
            high_watermark=state.high_watermark,
        )
        self._truncate(tp, state, decision)

    def _truncate(
        self, tp: TopicPartition, state: FollowedPartition, t: truncation.Truncation
    ) -> None:
        if t.offset < state.log.log_end_offset:
            log.info("%s: truncating to %d in epoch %d", tp, t.offset, state.leader_epoch)
            state.log.truncate_to(t.offset)
        if t.completed:
            state.phase = Phase.FETCHING
        self._set_high_watermark(tp, state, min(state.high_watermark, state.log.log_end_offset))

    def _on_partition_error(self, tp: TopicPartition, state: FollowedPartition, error: int) -> None:
        if error == ErrorCode.fenced_leader_epoch:
            log.info("%s: fenced in epoch %d; waiting for a newer epoch", tp, state.leader_epoch)
            state.phase = Phase.FENCED
        else:  # unknown_leader_epoch, not_leader_or_follower, …: the leader may catch up
            log.info("%s: leader answered %s; backing off", tp, ErrorCode(error).name)
            self._back_off(state)

    # -- fetching -------------------------------------------------------------------------------

    async def _fetch_round(self) -> bool:
        sent = self._ready(Phase.FETCHING)
        if not sent:
            return False
        offsets = {tp: s.log.log_end_offset for tp, s in sent.items()}
        positions = {tp: self._position(s) for tp, s in sent.items()}
        try:
            answers = await self._leader.fetch(positions)
        except ClientError as exc:
            log.warning("fetch failed: %s", exc)
            for state in sent.values():
                self._back_off(state)
            return True
        moved: list[tuple[TopicPartition, FollowedPartition]] = []
        for tp, state in sent.items():
            answer = answers.get(tp)
            if answer is None or not self._current(tp, state, Phase.FETCHING):
                continue  # a zombie answer: the partition moved on while it was in flight
            if state.log.log_end_offset != offsets[tp]:
                continue
            if answer.error == ErrorCode.offset_moved_to_tiered_storage:
                moved.append((tp, state))
            else:
                self._on_fetched(tp, state, answer)
        for tp, state in moved:
            await self._rebuild_from_remote_tier(tp, state)
        return True

    @staticmethod
    def _position(state: FollowedPartition) -> FetchPosition:
        latest = state.log.leader_epoch_cache.latest_epoch()
        return FetchPosition(
            offset=state.log.log_end_offset,
            current_leader_epoch=state.leader_epoch,
            last_fetched_epoch=-1 if latest is None else latest,
            log_start_offset=state.log.log_start_offset,
        )

    def _on_fetched(self, tp: TopicPartition, state: FollowedPartition, p: LeaderFetched) -> None:
        if p.error == ErrorCode.offset_out_of_range:
            self._on_out_of_range(tp, state, p.log_start_offset)
            return
        if p.error != ErrorCode.none:
            self._on_partition_error(tp, state, p.error)
            return
        try:
            batches = complete_batches(p.records)
            if batches:
                state.log.append_as_follower(p.records, batches)
        except (RecordError, LogError) as exc:
            log.warning("%s: cannot append the leader's batches: %s", tp, exc)
            self._back_off(state)
            return
        self._set_high_watermark(tp, state, min(p.high_watermark, state.log.log_end_offset))

    async def _rebuild_from_remote_tier(self, tp: TopicPartition, state: FollowedPartition) -> None:
        """OFFSET_MOVED_TO_TIERED_STORAGE: restart at the leader's local log start with the
        remote tier's epochs and producer state (Kafka's buildRemoteLogAuxState)."""
        end = state.log.log_end_offset
        try:
            local = await self._leader.earliest_local(tp, state.leader_epoch)
            if not self._current(tp, state, Phase.FETCHING) or state.log.log_end_offset != end:
                return
            if local.error != ErrorCode.none:
                self._on_partition_error(tp, state, local.error)
                return
            aux = None
            if self.remote_tier is not None and local.offset > end:
                aux = await self.remote_tier.aux_state(state.log, local.offset)
        except Exception as exc:  # ClientError, the remote store failing: ask again later
            log.warning("event=remote_aux_state_failed partition=%s error=%r", tp, str(exc))
            self._back_off(state)
            return
        if not self._current(tp, state, Phase.FETCHING) or state.log.log_end_offset != end:
            return
        if aux is None:
            log.info("event=remote_aux_state_unknown partition=%s offset=%d", tp, local.offset)
            self._back_off(state)
            return
        tier_state.rebuild(state.log, local.offset, aux)
        log.info(
            "event=rebuilt_from_remote_tier partition=%s offset=%d epochs=%d producers=%d",
            tp, local.offset, len(aux.leader_epochs),
            len(state.log.producer_state.active_producers()),
        )  # fmt: skip
        self._set_high_watermark(tp, state, local.offset)  # the tier holds only committed data

    def _on_out_of_range(self, tp: TopicPartition, state: FollowedPartition, start: int) -> None:
        log_ = state.log
        if 0 <= log_.log_end_offset < start:
            # Behind the leader's log start (retention moved it): nothing to keep, restart there.
            log_.truncate_fully_and_start_at(start)
            self._set_high_watermark(tp, state, start)
        else:  # ahead of the leader's end: find the divergence point again
            state.phase = Phase.TRUNCATING

    def _set_high_watermark(self, tp: TopicPartition, state: FollowedPartition, hw: int) -> None:
        if hw != state.high_watermark:
            state.high_watermark = hw
            self._on_high_watermark(tp, hw)


def complete_batches(records: bytes | memoryview) -> list[tuple[int, BatchHeader]]:
    """The whole, CRC-valid batches of a fetch answer; a trailing partial batch (the leader cut
    the response at a size limit) is left out. Raises CorruptRecordError on a corrupt batch."""
    view = memoryview(records)
    batches: list[tuple[int, BatchHeader]] = []
    pos = 0
    while len(view) - pos >= HEADER_SIZE:
        header = parse_header(view, pos)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(f"batch length {header.batch_length} below the minimum")
        if pos + header.size > len(view):
            break
        verify_crc(view, pos, header)
        batches.append((pos, header))
        pos += header.size
    return batches
