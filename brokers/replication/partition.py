"""One partition replica on this broker: its log plus leadership state (epoch, ISR, high watermark).

Owns: the leader-side append (min.insync.replicas check, validate, append as leader, advance the
high watermark) in three steps: `append_policy` (leadership, min.insync.replicas, the topic's
rules as an `AppendPolicy`), `brokers.records.prepare.prepare_append` (validation and
re-encoding, pure: the produce handler may run it on a worker thread) and `append_prepared` (the
checks again, then the log append); `append_as_leader` does all three at once. Also the leader's
view of its followers (`followers`, Kafka's remote `Replica`s) and the ISR changes they cause,
and reads bounded by the high watermark for consumers or the log end for followers. The high
watermark is min log end offset over the (maximal) ISR (`isr.high_watermark`), so with an ISR
of this broker alone it follows the log end offset.

Transactions (KIP-98): `append_marker` writes a COMMIT/ABORT marker for the transaction
coordinator with the checks of an acks=all append. The last stable offset is the log's
(`Log.last_stable_offset` of the current high watermark, computed on each call, so it is right
the moment a follower becomes leader); read_committed reads stop there and carry the aborted
transactions of the data returned. A marker moves the LSO only once the high watermark passes
it, and every HW move already calls `on_high_watermark`, so parked read_committed fetches wake.

Standalone vs replicated: a partition becomes *replicated* once the controller's LeaderAndIsr
reaches it (`become_leader`/`become_follower` from the replica manager). Until then — the
standalone broker — the ISR is {self} by construction and `Log.high_watermark` stays None, as
before replication existed. `min.insync.replicas` holds either way: as in Kafka, an acks=all
write to a topic with one replica and `min.insync.replicas=2` is NOT_ENOUGH_REPLICAS. ISR changes need an `isr_change` callback (the replica manager's
`IsrWriter` binding); without one the ISR never changes.

ISR changes (Kafka's pre-KIP-497 ZooKeeper mode): one write in flight at a time; while it is
pending the high watermark and acks=all use the *maximal* ISR (current plus pending members),
so a joining follower holds the high watermark before it is acknowledged as a member and a
leaving one until its removal is durable. A version conflict drops the change: the controller's
next LeaderAndIsr carries the truth.
Runs on the event loop (only `prepare_append` may run elsewhere); not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from brokers.common.clock import Clock
from brokers.log.config import LogConfig
from brokers.log.log import AppendResult, Log, ReadResult
from brokers.log.txn_index import AbortedTxn
from brokers.records.compression import CODEC_NAMES, GZIP, LZ4, ZSTD
from brokers.records.control import EndTxnMarker
from brokers.records.prepare import PreparedAppend, prepare_append
from brokers.records.validate import AppendPolicy
from brokers.replication import isr as isr_rules
from brokers.replication.errors import (
    FencedLeaderEpochError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from brokers.replication.replica_state import NO_BROKER_EPOCH, ReplicaState

NO_EPOCH = -1
NO_LEADER = -1
DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000  # replica.lag.time.max.ms

log = logging.getLogger(__name__)
IsrChange = Callable[["Partition", list[int]], Awaitable[int | None]]


@dataclass(frozen=True, slots=True)
class FetchedData:
    read: ReadResult | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    # read_committed: the aborted transactions overlapping what was read (None otherwise)
    aborted_transactions: list[AbortedTxn] | None = None


@dataclass(slots=True)
class LeadershipState:
    leader_id: int
    leader_epoch: int
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    zk_version: int = 0  # of the partition state znode, for conditional ISR writes


class Partition:
    def __init__(
        self,
        log: Log,
        *,
        node_id: int,
        clock: Clock,
        high_watermark: int,
        on_high_watermark: Callable[[Partition], None],
        topic_id: bytes = b"",
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        isr_change: IsrChange | None = None,
        awaiting_leadership: bool = False,
    ) -> None:
        self.log = log
        # The append rules of `log.config` (the policy but its clock), made once per config object.
        self._rules: tuple[LogConfig, _Rules, _Rules] | None = None  # config, client, coordinator
        self.topic = log.topic
        self.index = log.partition
        self.topic_id = topic_id
        self._node_id = node_id
        self._clock = clock
        self._on_high_watermark = on_high_watermark
        self._max_lag_ms = replica_lag_time_max_ms
        self.isr_change = isr_change
        # ZooKeeper mode (`awaiting_leadership`): a replica found on disk leads nothing until the
        # controller's LeaderAndIsr (Kafka's partitions are offline until then), so a client with
        # stale metadata cannot write to a restarted ex-leader and its checkpointed high watermark
        # is not raised to its log end (which may hold an unreplicated tail).
        self.state = LeadershipState(
            leader_id=NO_LEADER if awaiting_leadership else node_id,
            leader_epoch=0,
            replicas=[node_id],
            isr=[node_id],
        )
        self.followers: dict[int, ReplicaState] = {}
        self.replicated = False  # set by the first LeaderAndIsr (see the module docstring)
        self._maximal_isr: list[int] = self.state.isr
        self._pending_isr: list[int] | None = None
        self._isr_write: asyncio.Task[None] | None = None
        self._leader_epoch_start_offset = log.log_end_offset
        self.high_watermark = min(max(high_watermark, log.log_start_offset), log.log_end_offset)
        # Bumped each time this broker starts leading (not on an epoch bump while it leads, e.g.
        # an ISR shrink): a write waiting for the ISR stays valid exactly while it is unchanged.
        self.leadership_term = 0
        # Kafka's makeLeader: a leader whose ISR is itself owns every offset it has, so the
        # checkpoint (possibly stale after kill -9) must not hide records the log recovered.
        self._maybe_advance_high_watermark()

    @property
    def is_leader(self) -> bool:
        return self.state.leader_id == self._node_id

    @property
    def is_follower(self) -> bool:
        """A replica of a partition led elsewhere (KIP-392: it serves consumers up to its high
        watermark); not while it awaits the controller's orders or has no leader."""
        return self.replicated and self.state.leader_id not in (NO_LEADER, self._node_id)

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def maximal_isr(self) -> list[int]:
        return self._maximal_isr

    @property
    def min_insync_replicas(self) -> int:
        return self.log.config.min_insync_replicas

    # -- leadership changes (LeaderAndIsr) ------------------------------------------------------

    def become_leader(self, state: LeadershipState) -> None:
        """Kafka's makeLeader: follower offsets unknown until they fetch; ISR members get a fresh
        caught-up time so they are not dropped before their first fetch."""
        if not self.is_leader:
            self.leadership_term += 1  # leading again after a gap: writes of before may be gone
        now = self._clock.time_ms()
        end = self.log.log_end_offset
        old = self.followers
        self.followers = {
            b: old.get(b, ReplicaState(b)).reset(
                now_ms=now, leader_log_end_offset=end, in_isr=b in state.isr
            )
            for b in state.replicas
            if b != self._node_id
        }
        self._set_state(state)
        self._leader_epoch_start_offset = end
        self.log.leader_epoch_cache.assign(state.leader_epoch, end)
        self._maybe_advance_high_watermark()

    def become_follower(self, state: LeadershipState) -> None:
        """Kafka's makeFollower: the fetcher truncates and replicates; the HW comes from it."""
        self.followers = {}
        self._set_state(state)
        self.log.high_watermark = self.high_watermark
        self._on_high_watermark(self)  # parked acks=all produces see the lost leadership

    def _set_state(self, state: LeadershipState) -> None:
        self.state = state
        self.replicated = True
        self._pending_isr = None
        self._maximal_isr = state.isr

    def replace_isr(self, isr: list[int]) -> None:
        """The controller's ISR for our current leadership (a LeaderAndIsr refresh)."""
        self.state.isr = isr
        if self._pending_isr is None:
            self._maximal_isr = isr
        self._maybe_advance_high_watermark()
        self._on_high_watermark(self)

    def set_follower_high_watermark(self, high_watermark: int) -> None:
        """A follower's HW: min(leader HW, own log end), from the replica fetcher."""
        if not self.is_leader and high_watermark != self.high_watermark:
            self.high_watermark = high_watermark
            self.log.high_watermark = high_watermark
            self._on_high_watermark(self)  # consumers parked on this follower (KIP-392)

    def check_epoch(self, requested_epoch: int) -> None:
        """KIP-320: a client's current leader epoch must match ours (-1 skips the check)."""
        if requested_epoch == NO_EPOCH:
            return
        if requested_epoch < self.state.leader_epoch:
            raise FencedLeaderEpochError(f"{self.topic}-{self.index}: epoch {requested_epoch}")
        if requested_epoch > self.state.leader_epoch:
            raise UnknownLeaderEpochError(f"{self.topic}-{self.index}: epoch {requested_epoch}")

    # -- the leader's append and acks=all -----------------------------------------------------

    def append_as_leader(self, data: bytes, acks: int = 1) -> AppendResult:
        """Validate and append in one step on the caller's thread (coordinator writes, tests)."""
        return self.append_prepared(prepare_append(data, self.append_policy(acks)), acks)

    def append_policy(self, acks: int = 1, *, origin_client: bool = True) -> AppendPolicy:
        """The rules an append must meet now; raises when this replica may not take it.
        `origin_client=False`: a coordinator's own write (Kafka's AppendOrigin.COORDINATOR)."""
        self._check_writable(acks)
        config = self.log.config
        rules = self._rules
        if rules is None or rules[0] is not config:  # a new LogConfig object: topic config changed
            client = _rules(config)
            rules = self._rules = (config, client, (*client[:5], False, *client[6:]))
        return AppendPolicy(self._clock.time_ms(), *(rules[1] if origin_client else rules[2]))

    def append_prepared(self, prepared: PreparedAppend, acks: int = 1) -> AppendResult:
        """Append what `prepare_append` made of a request. Leadership and the ISR are checked
        again: a worker thread may have prepared it while they changed."""
        self._check_writable(acks)
        result = self.log.append_as_leader(
            prepared.data, prepared.batches, leader_epoch=self.state.leader_epoch
        )
        self._after_append()
        return result

    def append_marker(
        self, producer_id: int, producer_epoch: int, marker: EndTxnMarker
    ) -> AppendResult:
        """A COMMIT/ABORT marker from the transaction coordinator (WriteTxnMarkers), written
        as an acks=all append: leadership and `min.insync.replicas` are checked first."""
        self._check_writable(isr_rules.ACKS_ALL)
        result = self.log.append_marker(
            producer_id, producer_epoch, marker, leader_epoch=self.state.leader_epoch
        )
        self._after_append()
        return result

    def _after_append(self) -> None:
        if not self._maybe_advance_high_watermark() and self.followers:
            # Kafka wakes fetches parked on the log end: followers' fetches must not sit out
            # replica.fetch.wait.max.ms while an acks=all produce waits for them.
            self._on_high_watermark(self)

    def _check_writable(self, acks: int) -> None:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"{self.topic}-{self.index}")
        # Kafka checks the committed ISR before writing: refused writes are never in the log.
        isr_rules.check_append(acks, len(self.state.isr), self.min_insync_replicas)

    def acks_all_outcome(self, required_offset: int) -> isr_rules.AckOutcome:
        """Whether an acks=all append ending before `required_offset` may be answered."""
        return isr_rules.acks_all_outcome(
            required_offset, self.high_watermark, len(self.state.isr), self.min_insync_replicas
        )

    def _maybe_advance_high_watermark(self) -> bool:
        """Move the high watermark up to what the ISR holds; True when it moved."""
        if not self.is_leader:
            return False
        hw = isr_rules.high_watermark(
            self.high_watermark,
            self._maximal_isr,
            self.followers,
            leader_id=self._node_id,
            leader_log_end_offset=self.log.log_end_offset,
        )
        if hw > self.high_watermark:
            self.high_watermark = hw
            if self.replicated:
                self.log.high_watermark = hw
            self._on_high_watermark(self)
            return True
        return False

    # -- followers and the ISR (leader side) --------------------------------------------------

    def update_follower_fetch_state(
        self,
        replica_id: int,
        fetch_offset: int,
        log_start_offset: int,
        now_ms: int,
        broker_epoch: int = NO_BROKER_EPOCH,
    ) -> bool:
        """A follower fetched at `fetch_offset` (its log end): Kafka's updateFollowerFetchState.
        False when ignored: not an assigned follower, or a stale broker epoch (KIP-903)."""
        state = self.followers.get(replica_id)
        if not self.is_leader or state is None or not state.accepts_broker_epoch(broker_epoch):
            return False
        state = state.on_fetch(
            fetch_offset=fetch_offset,
            log_start_offset=log_start_offset,
            fetch_time_ms=now_ms,
            leader_log_end_offset=self.log.log_end_offset,
            broker_epoch=broker_epoch,
        )
        self.followers[replica_id] = state
        self._maybe_expand_isr(state)
        self._maybe_advance_high_watermark()
        return True

    def _maybe_expand_isr(self, state: ReplicaState) -> None:
        if self.isr_change is None or self._pending_isr is not None:
            return
        expanded = isr_rules.expanded_isr(
            self.state.isr,
            self.state.replicas,
            state,
            high_watermark=self.high_watermark,
            leader_epoch_start_offset=self._leader_epoch_start_offset,
        )
        if expanded is not None:
            self._submit_isr(expanded)

    def maybe_shrink_isr(self, now_ms: int) -> bool:
        """Drop followers lagging over replica.lag.time.max.ms (Kafka's maybeShrinkIsr)."""
        if not self.is_leader or self.isr_change is None or self._pending_isr is not None:
            return False
        lagging = isr_rules.out_of_sync_followers(
            self.state.isr,
            self.followers,
            leader_id=self._node_id,
            leader_log_end_offset=self.log.log_end_offset,
            now_ms=now_ms,
            max_lag_ms=self._max_lag_ms,
        )
        shrunk = isr_rules.shrunk_isr(self.state.isr, lagging)
        if shrunk is None:
            return False
        self._submit_isr(shrunk)
        return True

    def _submit_isr(self, isr: list[int]) -> None:
        self._pending_isr = isr
        self._maximal_isr = list(dict.fromkeys([*self.state.isr, *isr]))
        self._isr_write = asyncio.get_running_loop().create_task(self._write_isr(isr))

    async def _write_isr(self, isr: list[int]) -> None:
        assert self.isr_change is not None
        state = self.state
        try:
            version = await self.isr_change(self, isr)
        except Exception as exc:  # e.g. ZooKeeper unreachable: retried at the next check
            log.warning("%s-%d: ISR write failed: %r", self.topic, self.index, exc)
            version = None
        if self.state is not state:
            return  # a LeaderAndIsr arrived meanwhile; it carries the truth
        self._pending_isr = None
        if version is None:
            self._maximal_isr = state.isr
            return
        log.info("%s-%d: ISR %s -> %s", self.topic, self.index, state.isr, isr)
        state.isr, state.zk_version = isr, version
        self._maximal_isr = isr
        self._maybe_advance_high_watermark()
        self._on_high_watermark(self)  # the ISR size decides parked acks=all outcomes too

    # -- reads ----------------------------------------------------------------------------------

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is decided and replicated (KIP-98): read_committed
        consumers read up to here. Computed from the log's producer state on each call, so a
        follower that becomes leader has it right at once."""
        return self.log.last_stable_offset(self.high_watermark)

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        for_follower: bool = False,
        min_one_batch: bool = True,
        read_committed: bool = False,
    ) -> FetchedData:
        """Whole batches from `offset`: up to the log end for a follower, the last stable offset
        for a read_committed consumer (with the aborted transactions in the range returned,
        from `offset` to the end of the data, as Kafka collects them), else the high watermark."""
        log_ = self.log
        lso = self.last_stable_offset
        if for_follower:
            max_offset = log_.log_end_offset
        else:
            max_offset = lso if read_committed else self.high_watermark
        read = log_.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch)
        aborted = None
        if read_committed and not for_follower:
            aborted = [] if read.region is None else log_.collect_aborted(offset, read.next_offset)
        return FetchedData(
            read=read,
            high_watermark=self.high_watermark,
            log_start_offset=log_.log_start_offset,
            log_end_offset=log_.log_end_offset,
            last_stable_offset=lso,
            aborted_transactions=aborted,
        )

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: -1 means the high watermark; offsets past it are refused by the caller."""
        target = self.high_watermark if offset == -1 else offset
        return self.log.delete_records_before(target)


_TOPIC_CODECS = {name: codec for codec, name in CODEC_NAMES.items()} | {"uncompressed": 0}


_Rules = tuple[int, int, int, bool, bool, bool, int | None, int | None, int, int]


def _rules(config: LogConfig) -> _Rules:
    """The topic's configuration as the rules of an append: `AppendPolicy`'s fields after
    `now_ms`, in order. A `compression.type` other than `producer` re-encodes batches in that
    codec at the topic's level, as Kafka does."""
    codec = _TOPIC_CODECS.get(config.compression_type)
    levels = {
        GZIP: config.compression_gzip_level,
        LZ4: config.compression_lz4_level,
        ZSTD: config.compression_zstd_level,
    }
    return (
        config.max_message_bytes,
        config.message_timestamp_before_max_ms,
        config.message_timestamp_after_max_ms,
        config.compact,  # requires_keys
        config.message_timestamp_type == "LogAppendTime",  # log_append_time
        True,  # origin_client
        codec,  # target_codec
        None if codec is None else levels.get(codec),  # compression_level
        config.batch_max_decompressed_bytes,
        config.batch_max_records,
    )
