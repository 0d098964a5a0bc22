"""Two in-process brokers replicating one partition, driven by LeaderAndIsr/StopReplica called
by hand (no ZooKeeper; a fake IsrWriter): the follower replicates, the high watermark and
acks=all wait for it, consumers never see past the high watermark, a stopped follower is shrunk
out of the ISR and acks=all then fails with NOT_ENOUGH_REPLICAS under min.insync.replicas=2, and
after it rejoins the ISR both logs hold identical batches."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from brokers.client import TopicPartition
from brokers.records.batch import iter_headers
from brokers.replication.partition import Partition
from brokers.replication.replica_manager import PartitionStateUpdate
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
from tests.unit.replication.replication_helpers import batches

pytestmark = pytest.mark.integration

TOPIC = "replicated"
TP = TopicPartition(TOPIC, 0)
TOPIC_ID = uuid.uuid4()
LEADER, FOLLOWER = 1, 2
LAG_MS = 1_500


def update(epoch: int, isr: list[int], zk_version: int) -> PartitionStateUpdate:
    return PartitionStateUpdate(
        TOPIC, 0, TOPIC_ID, LEADER, epoch, isr, [LEADER, FOLLOWER], zk_version,
        {"min.insync.replicas": "2"},
    )  # fmt: skip


def apply(nodes: list[Node], state: PartitionStateUpdate, controller_epoch: int = 1) -> None:
    leaders = {n.broker.config.node_id: ("127.0.0.1", n.port) for n in nodes}
    for n in nodes:
        results = n.call(
            lambda n=n: n.broker.replicas.apply_leader_and_isr(controller_epoch, [state], leaders)
        )
        assert results == {(TOPIC, 0): None}


def replica(n: Node) -> Partition:
    return n.call(lambda: n.broker.replicas.get(TOPIC, 0))


def test_follower_replicates_isr_shrinks_and_logs_end_identical(tmp_path: Path) -> None:
    writer = FakeIsrWriter()
    with (
        node(tmp_path, LEADER, isr_writer=writer, lag_ms=LAG_MS) as leader,
        node(tmp_path, FOLLOWER, lag_ms=LAG_MS) as follower,
    ):
        apply([leader, follower], update(1, [LEADER, FOLLOWER], 0))
        lead, copy = replica(leader), replica(follower)
        assert lead.is_leader and not copy.is_leader

        # acks=all is answered only once the follower holds the batch.
        for i in range(3):
            answer = produce(
                leader.port, TP, make_batch(2, value=b"a%d" % i), acks=-1, timeout_s=20
            )
            assert answer.error_code == ErrorCode.none and answer.base_offset == 2 * i
            assert follower.call(lambda: copy.log.log_end_offset) >= 2 * i + 2
        wait_until(lambda: follower.call(lambda: copy.high_watermark) == 6, what="follower HW")
        # KIP-392: a follower serves a v11+ consumer, up to its own high watermark
        from_follower = consume(follower.port, TP)
        assert from_follower.error == ErrorCode.none and from_follower.high_watermark == 6

        # The follower stops fetching: the HW stays, consumers stop at it, acks=all waits.
        assert follower.call(
            lambda: follower.broker.replicas.stop_replicas([(TOPIC, 0)], delete=False)
        ) == {(TOPIC, 0): None}
        answer = produce(leader.port, TP, make_batch(1, value=b"unreplicated"), acks=1, timeout_s=5)
        assert answer.error_code == ErrorCode.none and answer.base_offset == 6
        assert leader.call(lambda: (lead.high_watermark, lead.log.log_end_offset)) == (6, 7)
        seen = consume(leader.port, TP)
        assert seen.high_watermark == 6 and max_offset(bytes(seen.records)) == 5
        timed_out = produce(leader.port, TP, make_batch(1), acks=-1, timeout_s=0.3)
        assert timed_out.error_code == ErrorCode.request_timed_out

        # replica.lag.time.max.ms later the leader shrinks the ISR to itself.

        def shrunk() -> bool:  # the leader checks for laggards on its own schedule: ask now
            leader.run(leader.broker.replicas.shrink_isrs())
            return leader.call(lambda: lead.state.isr) == [LEADER]

        wait_until(shrunk, what="ISR shrink")
        assert writer.written == [[LEADER]]
        assert leader.call(lambda: lead.high_watermark) == 8  # the leader alone is the ISR
        refused = produce(leader.port, TP, make_batch(1), acks=-1, timeout_s=5)
        assert refused.error_code == ErrorCode.not_enough_replicas
        assert produce(leader.port, TP, make_batch(1), acks=1, timeout_s=5).error_code == 0

        # A new epoch: the follower truncates, catches up and is expanded back into the ISR.
        apply([leader, follower], update(2, [LEADER], writer.version), controller_epoch=2)
        wait_until(
            lambda: leader.call(lambda: lead.state.isr) == [LEADER, FOLLOWER], what="ISR expand"
        )
        answer = produce(leader.port, TP, make_batch(3, value=b"again"), acks=-1, timeout_s=20)
        assert answer.error_code == ErrorCode.none and answer.base_offset == 9
        wait_until(
            lambda: follower.call(lambda: copy.log.log_end_offset) == 12, what="follower caught up"
        )
        assert leader.call(lambda: batches(lead.log)) == follower.call(lambda: batches(copy.log))
        wait_until(
            lambda: follower.call(lambda: copy.high_watermark) == 12, what="follower HW after"
        )


def test_stale_controller_and_leader_epochs_are_refused(tmp_path: Path) -> None:
    with node(tmp_path, LEADER) as leader:
        apply([leader], update(3, [LEADER, FOLLOWER], 0), controller_epoch=5)
        replicas = leader.broker.replicas
        stale = leader.call(lambda: replicas.apply_leader_and_isr(4, [update(4, [LEADER], 1)], {}))
        assert type(stale[(TOPIC, 0)]).__name__ == "StaleControllerEpochError"
        fenced = leader.call(lambda: replicas.apply_leader_and_isr(5, [update(2, [LEADER], 1)], {}))
        assert type(fenced[(TOPIC, 0)]).__name__ == "FencedLeaderEpochError"
        # The same epoch and leader only refreshes the ISR.
        apply([leader], update(3, [LEADER], 1), controller_epoch=5)
        assert leader.call(lambda: replicas.get(TOPIC, 0).state.isr) == [LEADER]
        removed = leader.call(lambda: replicas.stop_replicas([(TOPIC, 0)], delete=True))
        assert removed == {(TOPIC, 0): None}
        assert leader.call(lambda: replicas.find(TOPIC, 0)) is None


def max_offset(records: bytes) -> int:
    return max(h.base_offset + h.last_offset_delta for _, h in iter_headers(records))
