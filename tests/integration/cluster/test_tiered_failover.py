"""Tiered storage through a leader change (KIP-405, issue 26): three brokers in ZooKeeper mode
share one remote store (a directory, as the local-directory store is used by Kafka's own tests);
`__remote_log_metadata` has a replica on every broker. The leader of a tiered RF 3 topic is
SIGKILLed while it uploads a segment (uploads paced at 256 KiB/s). The new leader resumes after the
last COPY_SEGMENT_FINISHED it read from the metadata topic: the unfinished copy is deleted, no
segment is copied twice, and every record is read exactly once from offset 0, the older ones from
the remote tier; the follower deletes its local copies of the copied segments too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from infra.stack import BrokerProcess
from tests.cluster_probes import SETTLE_S, TOPIC_SETTLING, metadata_of
from tests.e2e.tiered import (
    EARLIEST,
    LATEST_TIERED,
    TIERED_TOPIC,
    list_offset,
    local_segments,
    numbers_confluent,
    produce,
    tiered_broker_config,
)
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]
TOPIC = "tiered-stream"
RECORDS, MORE = 4_000, 1_000


def test_a_new_leader_resumes_uploading_where_the_killed_one_stopped(
    broker_factory: Any, chroot: str, tmp_path: Path
) -> None:
    remote = tmp_path / "remote"
    config = tiered_broker_config(
        remote,
        **{
            "remote.log.manager.copy.max.bytes.per.second": str(256 * 1024),
            "zookeeper.session.timeout.ms": "4000",
            "replica.lag.time.max.ms": "2000",
            "auto.leader.rebalance.enable": "false",
        },
    )
    brokers: dict[int, BrokerProcess] = {
        n: broker_factory(node_id=n, zookeeper=chroot, config=config) for n in (1, 2, 3)
    }
    any_broker = brokers[1]
    wait_until(
        lambda: sorted(metadata_of(any_broker).brokers) == [1, 2, 3],
        what="three brokers registered", timeout=SETTLE_S,
    )  # fmt: skip
    admin = AdminClient({"bootstrap.servers": any_broker.bootstrap})
    topic_config = {**TIERED_TOPIC, "min.insync.replicas": "2"}
    [future] = admin.create_topics([NewTopic(TOPIC, 1, 3, config=topic_config)]).values()
    future.result(timeout=30)
    leader_id = wait_until(
        lambda: metadata_of(any_broker).topic(TOPIC).partitions[0].leader,
        what=f"{TOPIC} led", timeout=SETTLE_S, retry_on=TOPIC_SETTLING,
    )  # fmt: skip
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    produce(bootstrap, TOPIC, RECORDS)
    partition_dir = remote / f"{TOPIC}-0"
    wait_until(
        lambda: partition_dir.is_dir() and any(partition_dir.glob("*.log.*.tmp")),
        what="an upload in progress", timeout=SETTLE_S, interval=0.05,
    )  # fmt: skip
    brokers[leader_id].kill()
    assert any(partition_dir.glob("*.log.*.tmp")), "the kill did not land mid-upload"
    survivor = next(b for n, b in brokers.items() if n != leader_id)
    new_leader = wait_until(
        lambda: (lead := metadata_of(survivor).topic(TOPIC).partitions[0].leader) not in
        (leader_id, -1) and lead,
        what="a new leader", timeout=SETTLE_S, retry_on=TOPIC_SETTLING,
    )  # fmt: skip
    leader = brokers[int(new_leader)]
    live = ",".join(b.bootstrap for n, b in brokers.items() if n != leader_id)
    produce(live, TOPIC, MORE, first=RECORDS)
    last_closed = local_segments(leader.data_dir, TOPIC)[-1] - 1
    wait_until(
        lambda: list_offset(leader.host, leader.port, TOPIC, LATEST_TIERED) >= last_closed,
        what="every closed segment copied by the new leader", timeout=180, interval=0.5,
    )  # fmt: skip
    wait_until(
        lambda: not any(partition_dir.glob("*.tmp")),
        what="the killed leader's unfinished copy deleted", timeout=SETTLE_S, interval=0.2,
    )  # fmt: skip
    data = sorted(p.name[:20] for p in partition_dir.glob("*.log"))
    assert len(data) == len(set(data)), f"a segment was copied twice: {data}"
    indexes = {p.name.removesuffix(".index") for p in partition_dir.glob("*.index")}
    assert indexes == {p.name.removesuffix(".log") for p in partition_dir.glob("*.log")}
    assert list_offset(leader.host, leader.port, TOPIC, EARLIEST) == 0
    assert numbers_confluent(live, TOPIC) == list(range(RECORDS + MORE))
    # The follower's local retention follows the leader's copies (it folds the same metadata).
    follower = next(b for n, b in brokers.items() if n not in (leader_id, int(new_leader)))
    wait_until(
        lambda: local_segments(follower.data_dir, TOPIC)[0] > 0,
        what="the follower's copied segments gone from its disk", timeout=SETTLE_S, interval=0.5,
    )  # fmt: skip
