"""A follower that was down while the leader tiered and deleted its segments rebuilds from the
remote tier (KIP-405, issue 26): three brokers in ZooKeeper mode share one local-directory
remote store, `__remote_log_metadata` has a replica on each. Follower 2 is SIGKILLed; an
idempotent producer writes, more records push its batches into copied segments, and the leader
deletes them locally. Restarted, broker 2 fetches below the leader's local log start, is answered
OFFSET_MOVED_TO_TIERED_STORAGE, asks the leader's local log start (ListOffsets -4) and restarts
there with the remote segment's leader epochs and producer snapshot. Leader 1 is then killed and
2 leads with the producer's state: a retry of the producer's last (tiered) batch is answered as a
duplicate with its original offset, a sequence gap is refused with OUT_OF_ORDER_SEQUENCE, the
next sequence is accepted; every record, remote and local, is read once. (Since KIP-360 a leader
without the producer's state accepts any sequence, so duplicates and gaps are what it would
miss.) The producer speaks raw idempotent Produce (a fixed producer id, explicit sequences) so
the test controls the retry.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from brokers.client import TopicPartition
from brokers.client.cluster import Cluster
from brokers.client.errors import BrokerResponseError
from brokers.client.producer import produce as produce_batch
from brokers.records.builder import build_batch
from brokers.wire.errors import ErrorCode
from infra.stack import BrokerProcess
from tests.cluster_probes import SETTLE_S, TOPIC_SETTLING, metadata_of
from tests.e2e.tiered import (
    EARLIEST_LOCAL,
    LATEST_TIERED,
    TIERED_TOPIC,
    VALUE,
    list_offset,
    local_segments,
    numbers_confluent,
    produce,
    tiered_broker_config,
)
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]
TOPIC = "tiered-rebuild"
TP = TopicPartition(TOPIC, 0)
FIRST, BATCHES, PER_BATCH, FILLER = 1_100, 150, 10, 3_000
IDEMPOTENT_END = FIRST + BATCHES * PER_BATCH
LEADER, FOLLOWER, THIRD = 1, 2, 3
PRODUCER_ID = 424_242


def idempotent_batch(batch: int) -> bytes:
    """Batch `batch` of the producer: records FIRST + batch * PER_BATCH on, sequence likewise."""
    first = FIRST + batch * PER_BATCH
    records = [(None, b"%08d" % n + VALUE) for n in range(first, first + PER_BATCH)]
    return build_batch(
        records, producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=batch * PER_BATCH,
        base_timestamp=int(time.time() * 1000),  # (a producer is expired by its timestamps)
    )  # fmt: skip


async def send(bootstrap: str, batch: bytes) -> int:
    cluster = Cluster(bootstrap)
    try:
        result = await produce_batch(cluster, TP, batch, acks=-1)
    finally:
        await cluster.close()
    assert result is not None
    return result.base_offset


async def send_all(bootstrap: str, count: int) -> int:
    """Batches 0 to count - 1 in order; the base offset of the last."""
    cluster = Cluster(bootstrap)
    offset = -1
    try:
        for batch in range(count):
            result = await produce_batch(cluster, TP, idempotent_batch(batch), acks=-1)
            assert result is not None
            offset = result.base_offset
    finally:
        await cluster.close()
    return offset


def test_a_follower_below_the_local_log_start_rebuilds_from_the_remote_tier(
    broker_factory: Any, chroot: str, tmp_path: Path
) -> None:
    config = tiered_broker_config(
        tmp_path / "remote",
        **{
            "zookeeper.session.timeout.ms": "4000",
            "replica.lag.time.max.ms": "2000",
            "auto.leader.rebalance.enable": "false",
        },
    )
    brokers: dict[int, BrokerProcess] = {
        n: broker_factory(node_id=n, zookeeper=chroot, config=config)
        for n in (LEADER, FOLLOWER, THIRD)
    }
    wait_until(
        lambda: sorted(metadata_of(brokers[LEADER]).brokers) == [1, 2, 3],
        what="three brokers registered", timeout=SETTLE_S,
    )  # fmt: skip
    admin = AdminClient({"bootstrap.servers": brokers[LEADER].bootstrap})
    topic = NewTopic(
        TOPIC, replica_assignment=[[LEADER, FOLLOWER, THIRD]], num_partitions=1,
        config={**TIERED_TOPIC, "min.insync.replicas": "2"},
    )  # fmt: skip
    [future] = admin.create_topics([topic]).values()
    future.result(timeout=30)
    wait_until(
        lambda: metadata_of(brokers[LEADER]).topic(TOPIC).partitions[0].leader == LEADER,
        what=f"{TOPIC} led by {LEADER}", timeout=SETTLE_S, retry_on=TOPIC_SETTLING,
    )  # fmt: skip
    live = f"{brokers[LEADER].bootstrap},{brokers[THIRD].bootstrap}"
    leader = brokers[LEADER]
    produce(live, TOPIC, FIRST)  # the follower holds a first segment, copied: the metadata
    wait_until(  # topic (created on first use) then has its replica on the follower too
        lambda: list_offset(leader.host, leader.port, TOPIC, LATEST_TIERED) >= 0,
        what="a first segment copied", timeout=SETTLE_S, interval=0.5,
    )  # fmt: skip
    brokers[FOLLOWER].kill()

    last_offset = asyncio.run(send_all(live, BATCHES))
    produce(live, TOPIC, FILLER, first=IDEMPOTENT_END)  # the idempotent batches get tiered
    wait_until(
        lambda: list_offset(leader.host, leader.port, TOPIC, EARLIEST_LOCAL) > IDEMPOTENT_END,
        what="the idempotent producer's segments copied and deleted locally", timeout=180,
        interval=0.5,
    )  # fmt: skip

    brokers[FOLLOWER].restart()
    follower = brokers[FOLLOWER]
    wait_until(
        lambda: FOLLOWER in metadata_of(leader).topic(TOPIC).partitions[0].isr,
        what="the restarted follower back in the ISR", timeout=SETTLE_S, retry_on=TOPIC_SETTLING,
    )  # fmt: skip
    assert local_segments(follower.data_dir, TOPIC)[0] > IDEMPOTENT_END

    brokers[LEADER].kill()
    wait_until(
        lambda: metadata_of(follower).topic(TOPIC).partitions[0].leader == FOLLOWER,
        what=f"{FOLLOWER} leading", timeout=SETTLE_S, retry_on=TOPIC_SETTLING,
    )  # fmt: skip
    survivors = f"{follower.bootstrap},{brokers[THIRD].bootstrap}"
    retried = asyncio.run(send(survivors, idempotent_batch(BATCHES - 1)))
    assert retried == last_offset, "the retry of a tiered batch was appended again"
    with pytest.raises(BrokerResponseError) as gap:
        asyncio.run(send(survivors, idempotent_batch(BATCHES + 1)))
    assert gap.value.code == ErrorCode.out_of_order_sequence_number
    asyncio.run(send(survivors, idempotent_batch(BATCHES)))  # the next sequence: accepted
    total = IDEMPOTENT_END + FILLER
    expected = [*range(total), *range(total - FILLER, total - FILLER + PER_BATCH)]
    assert numbers_confluent(survivors, TOPIC) == expected
