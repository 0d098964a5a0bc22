"""KIP-101 end to end: the two scenarios the leader epoch fixed, and a zombie follower fetch.

Two real in-process brokers (`tests.integration.replication.cluster_helpers.node`, each on its own
event loop thread, talking Produce/Fetch/OffsetForLeaderEpoch over TCP) replicate one partition;
the test plays the controller, sending LeaderAndIsr by hand, so the order of crashes, restarts
and elections is exact without sleeps. A crash is a `kill -9` image: the replica's data dir is
copied while its event loop is held (what the files hold at that instant: no clean-shutdown
marker, no final high-watermark checkpoint), the broker is dropped, and the restart opens the copy.

(a) Truncate-to-HW data loss: the follower holds two acknowledged batches, but its checkpointed
    high watermark is behind (stale checkpoint). It restarts, the leader dies before the follower
    could refetch, and the follower is elected. Pre-KIP-101 it would have truncated to its HW and
    lost an acknowledged batch; with leader epochs it keeps its log.
(b) Divergent logs after a restart: both replicas crash, the follower having lost its unflushed
    tail (a power failure: page cache gone, no fsync per write), the old leader having
    checkpointed HW 2. The follower comes back first, leads epoch 2 and takes a new batch at the
    offset the old leader still holds. Pre-KIP-101 the old leader would keep its batch (it is
    below its HW): the logs would diverge. With epochs it truncates to where epoch 1 ended on the
    new leader and refetches: identical logs, every acks=all batch kept.
(c) A zombie fetch: a follower Fetch sent in an old leader epoch reaching the leader after the
    epoch changed is answered FENCED_LEADER_EPOCH and does not move the leader's view of that
    follower (its fetch offset would otherwise advance the high watermark).
"""

from __future__ import annotations

import asyncio
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from brokers.client import ClientConfig, TopicPartition
from brokers.client.connection import BrokerConnection
from brokers.client.consumer import FetchedPartition, FetchPosition
from brokers.log.checkpoints import read_offsets
from brokers.records.batch import iter_headers
from brokers.replication.leader_endpoint import RemoteLeader
from brokers.replication.partition import Partition
from brokers.replication.replica_manager import HW_CHECKPOINT, PartitionStateUpdate
from brokers.wire.errors import ErrorCode
from tests.integration.replication.cluster_helpers import (
    FakeIsrWriter,
    Node,
    consume,
    node,
    produce,
)
from tests.polling import wait_until
from tests.unit.log.partition_helpers import make_batch

pytestmark = [pytest.mark.fault, pytest.mark.timeout(120)]

TOPIC = "epochs"
TP = TopicPartition(TOPIC, 0)
TOPIC_ID = uuid.uuid4()
A, B = 1, 2  # A leads epoch 1


class Replica:
    """One broker of the pair that can crash (kill -9 image) and restart on a crash image."""

    def __init__(self, root: Path, node_id: int, writer: FakeIsrWriter) -> None:
        self.node_id = node_id
        self._root = root
        self._writer = writer
        self._images = 0
        self._home = root / "image0"  # node() keeps the data in <home>/node<id>
        self._stack: ExitStack | None = None
        self.node: Node | None = None
        self.port = 0  # the last port, kept after a crash (the controller's stale address)

    @property
    def data_dir(self) -> Path:
        return self._home / f"node{self.node_id}"

    def start(self) -> Replica:
        stack = ExitStack()
        self.node = stack.enter_context(node(self._home, self.node_id, isr_writer=self._writer))
        self._stack, self.port = stack, self.node.port
        return self

    def image(self) -> Path:
        """A copy of the data dir as a kill -9 at this instant leaves it: taken on the broker's
        loop, so no append or checkpoint is half done; no clean-shutdown marker."""
        self._images += 1
        home = self._root / f"image{self._images}"
        self.live().call(lambda: shutil.copytree(self.data_dir, home / f"node{self.node_id}"))
        return home

    def crash(self, image: Path | None = None) -> Path:
        """kill -9: the broker is gone; the next `start` opens `image` (default: taken now)."""
        home = self.image() if image is None else image
        self.stop()
        self._home = home
        return self.data_dir

    def stop(self) -> None:
        if self._stack is not None:
            self._stack.close()
            self.node, self._stack = None, None

    def live(self) -> Node:
        assert self.node is not None, f"broker {self.node_id} is down"
        return self.node

    @property
    def partition(self) -> Partition:
        n = self.live()
        return n.call(lambda: n.broker.replicas.get(TOPIC, 0))

    def log_end(self) -> int:
        p = self.partition
        return self.live().call(lambda: p.log.log_end_offset)

    def isr(self) -> list[int]:
        p = self.partition
        return self.live().call(lambda: sorted(p.state.isr))

    def batches(self) -> list[tuple[int, int, int]]:
        """(base offset, leader epoch, CRC) of every batch of the replica's log, read on its loop."""
        p = self.partition

        def read() -> list[tuple[int, int, int]]:
            return [
                (h.base_offset, h.partition_leader_epoch, h.crc)
                for segment in p.log.segments
                for _, h in segment.records.headers(0)
            ]

        return self.live().call(read)


@contextmanager
def pair(tmp_path: Path) -> Iterator[tuple[Replica, Replica, FakeIsrWriter]]:
    writer = FakeIsrWriter()
    a, b = Replica(tmp_path / "a", A, writer), Replica(tmp_path / "b", B, writer)
    try:
        yield a.start(), b.start(), writer
    finally:
        b.stop()
        a.stop()


def elect(
    replicas: list[Replica], leader: int, epoch: int, isr: list[int], writer: FakeIsrWriter,
    *, min_isr: int = 1,
) -> None:  # fmt: skip
    """The controller's LeaderAndIsr to every live replica; a crashed leader keeps its last
    address (the controller has not noticed yet), so its followers' connections fail."""
    state = PartitionStateUpdate(
        TOPIC, 0, TOPIC_ID, leader, epoch, isr, [A, B], writer.version,
        {"min.insync.replicas": str(min_isr)},
    )  # fmt: skip
    addresses = {r.node_id: ("127.0.0.1", r.port) for r in replicas}
    for r in replicas:
        if r.node is not None:
            assert apply(r.node, state, addresses) == {(TOPIC, 0): None}


def apply(
    n: Node, state: PartitionStateUpdate, addresses: dict[int, tuple[str, int]]
) -> dict[tuple[str, int], Exception | None]:
    manager = n.broker.replicas
    return n.call(lambda: manager.apply_leader_and_isr(1, [state], addresses))


def send(r: Replica, batch: bytes, *, acks: int) -> int:
    answer = produce(r.live().port, TP, batch, acks=acks, timeout_s=20)
    assert answer.error_code == ErrorCode.none, ErrorCode(answer.error_code).name
    return int(answer.base_offset)


def crcs(data: bytes) -> list[int]:
    return [h.crc for _, h in iter_headers(data)]


def truncation_attempted(r: Replica) -> bool:
    """The follower's OffsetForLeaderEpoch to its leader failed at least once (backed off)."""
    n = r.live()
    fetcher = n.call(lambda: n.broker.replicas.fetchers.fetcher_for(TP))
    state = None if fetcher is None else n.call(lambda: fetcher._partitions.get(TP))
    return state is not None and state.retry_at > 0


def checkpointed_hw(data_dir: Path) -> int:
    return read_offsets(data_dir / HW_CHECKPOINT).get((TOPIC, 0), 0)


def in_sync(leader: Replica, follower: Replica) -> bool:
    return leader.isr() == [A, B] and follower.log_end() == leader.log_end()


def test_a_restarted_follower_elected_before_refetching_keeps_acked_data(tmp_path: Path) -> None:
    with pair(tmp_path) as (a, b, writer):
        elect([a, b], A, 1, [A, B], writer, min_isr=2)
        m1, m2 = make_batch(1, value=b"m1"), make_batch(1, value=b"m2")
        assert send(a, m1, acks=-1) == 0
        assert send(a, m2, acks=-1) == 1  # acknowledged: B holds it too
        assert b.log_end() == 2

        b_image = b.crash()
        # The scenario's precondition: B's checkpointed HW is behind its log (checkpoints are
        # periodic), so the pre-KIP-101 rule "truncate to the HW on becoming follower" loses m2.
        assert checkpointed_hw(b_image) < 2
        a.crash()  # the leader dies before B refetches its tail
        b.start()
        # Until the controller speaks, the restarted replica leads nothing and keeps its
        # checkpointed HW (not its log end, which could hold an unreplicated tail).
        refused = produce(b.live().port, TP, make_batch(1, value=b"early"), acks=1, timeout_s=5)
        assert refused.error_code == ErrorCode.not_leader_or_follower
        assert b.partition.high_watermark == checkpointed_hw(b_image)
        elect([a, b], A, 1, [A, B], writer, min_isr=2)  # B follows the (dead) A again
        wait_until(
            lambda: truncation_attempted(b), what="B asked the unreachable A where epoch 1 ended"
        )
        assert b.log_end() == 2  # no truncation to the stale HW while it could not ask
        elect([a, b], B, 2, [B], writer)  # A's session expired: B, in the ISR, leads
        assert b.log_end() == 2
        fetched = consume(b.live().port, TP)
        assert fetched.error == ErrorCode.none
        assert crcs(fetched.records) == crcs(m1) + crcs(m2), "an acknowledged batch was lost"

        a.start()  # A returns on its crash image and follows B in epoch 2
        elect([a, b], B, 2, [B], writer)
        m3 = make_batch(1, value=b"m3")
        assert send(b, m3, acks=1) == 2
        wait_until(lambda: in_sync(b, a), what="A back in the ISR")
        assert a.batches() == b.batches()
        assert [offset for offset, _, _ in b.batches()] == [0, 1, 2]


def test_replicas_crashing_together_and_returning_in_the_other_order_converge(
    tmp_path: Path,
) -> None:
    with pair(tmp_path) as (a, b, writer):
        elect([a, b], A, 1, [A, B], writer)
        m1 = make_batch(1, value=b"m1")
        assert send(a, m1, acks=-1) == 0
        b_disk = b.image()  # what B's disk will hold: the m2 it fetches next never reaches it
        m2 = make_batch(1, value=b"m2")
        assert send(a, m2, acks=1) == 1
        wait_until(lambda: a.partition.high_watermark == 2, what="A's HW covers m2 (B fetched it)")
        a.live().call(a.live().broker.replicas.checkpoint_high_watermarks)  # a periodic one

        # Power failure of both: B's page cache (m2) is lost, A's disk has m2 and HW 2.
        b.crash(b_disk)
        a_disk = a.crash()
        assert checkpointed_hw(a_disk) == 2  # so truncating to the HW would keep m2 on A

        b.start()  # B returns first; A is still down: B, in the ISR, leads epoch 2
        elect([a, b], B, 2, [B], writer)
        m3 = make_batch(1, value=b"m3")
        assert send(b, m3, acks=-1) == 1  # offset 1 again: A holds m2 there, in epoch 1

        a.start()
        elect([a, b], B, 2, [B], writer)
        wait_until(lambda: in_sync(b, a), what="A back in the ISR")
        assert a.batches() == b.batches(), "the replicas' logs diverged"
        fetched = consume(b.live().port, TP)
        assert crcs(fetched.records) == crcs(m1) + crcs(m3)  # every acks=all batch kept
        assert [epoch for _, epoch, _ in b.batches()] == [1, 2]


async def zombie_fetch(port: int, replica_id: int, position: FetchPosition) -> FetchedPartition:
    connection = await BrokerConnection.connect("127.0.0.1", port, ClientConfig())
    try:
        leader = RemoteLeader(connection, node_id=replica_id)
        return (await leader.fetch({TP: position}))[TP]
    finally:
        await connection.aclose()


def test_a_follower_fetch_from_an_old_epoch_is_fenced_and_changes_nothing(
    tmp_path: Path,
) -> None:
    with pair(tmp_path) as (a, b, writer):
        elect([a, b], A, 1, [A, B], writer, min_isr=2)
        for i in range(3):
            assert send(a, make_batch(1, value=b"e1-%d" % i), acks=-1) == i
        elect([a, b], B, 2, [A, B], writer)  # leadership moves to B: epoch 2
        assert send(b, make_batch(1, value=b"e2"), acks=-1) == 3
        wait_until(lambda: a.log_end() == 4, what="A follows B in epoch 2")
        leader = b.partition
        hw_before = b.live().call(lambda: leader.high_watermark)
        seen_before = b.live().call(lambda: leader.followers[A].log_end_offset)

        # A's Fetch from when it followed in epoch 1, claiming an offset past everything: were
        # it accepted, B would believe A holds offsets it does not.
        stale = FetchPosition(offset=7, current_leader_epoch=1, last_fetched_epoch=1)
        answer = asyncio.run(zombie_fetch(b.port, A, stale))
        assert answer.error == ErrorCode.fenced_leader_epoch
        assert answer.records == b""
        # The same zombie reaching the deposed leader A is fenced there too.
        answer = asyncio.run(zombie_fetch(a.port, B, FetchPosition(4, current_leader_epoch=1)))
        assert answer.error == ErrorCode.fenced_leader_epoch

        assert b.live().call(lambda: leader.high_watermark) == hw_before
        assert b.live().call(lambda: leader.followers[A].log_end_offset) == seen_before
        assert send(b, make_batch(1, value=b"e2-after"), acks=-1) == 4
        wait_until(lambda: a.log_end() == 5, what="A keeps replicating")
        assert a.batches() == b.batches()


def test_producer_state_follows_leadership_and_survives_recovery(tmp_path: Path) -> None:
    """Idempotence across failover (KIP-98): the follower builds the producer's state from the
    batches it replicates, so a retry of an acknowledged batch sent to the new leader is answered
    with its original offsets instead of being written twice — also after that leader crashes
    (state rebuilt by replaying the log) and after a clean restart (state from the snapshot)."""
    pid, now_ms = 4242, int(time.time() * 1000)  # an older timestamp expires the producer

    def batch(sequence: int, value: bytes) -> bytes:
        return make_batch(
            2, value=value, timestamp=now_ms, producer_id=pid, producer_epoch=0,
            base_sequence=sequence,
        )  # fmt: skip

    first, second = batch(0, b"p0"), batch(2, b"p1")
    with pair(tmp_path) as (a, b, writer):
        elect([a, b], A, 1, [A, B], writer, min_isr=2)
        assert send(a, first, acks=-1) == 0
        assert send(a, second, acks=-1) == 2  # the producer never saw this ack: it retries
        a.crash()
        elect([a, b], B, 2, [B], writer)
        epoch = 2
        for restart in (b.crash, b.stop, None):
            # B alone is the ISR under min.insync.replicas=2: acks=1 from here on.
            assert send(b, second, acks=1) == 2  # a duplicate: the original offsets
            assert send(b, first, acks=1) == 0
            assert b.log_end() == 4
            gap = produce(b.live().port, TP, batch(5, b"gap"), acks=1, timeout_s=5)
            assert gap.error_code == ErrorCode.out_of_order_sequence_number
            if restart is not None:
                restart()  # kill -9 (log replay), then a clean stop (snapshot)
                b.start()
                epoch += 1
                elect([a, b], B, epoch, [B], writer)
        assert send(b, batch(4, b"p2"), acks=1) == 4
