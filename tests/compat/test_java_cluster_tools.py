"""`kafka-reassign-partitions.sh` (org.apache.kafka.tools.reassign.ReassignPartitionsCommand) and
`kafka-leader-election.sh` (org.apache.kafka.tools.LeaderElectionCommand), kafka-tools 4.1.1,
against a 3-broker Pier cluster (ZooKeeper mode, `infra/up`'s cluster defaults) and a 3-node
Apache Kafka 4.1.1 (KRaft), both with node ids 0-2 so outputs line up: a replica set reordered by
reassignment (execute, verify until complete), then a preferred leader election moving the
leader to the new first replica, and the same election again (nothing to do). Outputs and the
described replicas/leader must match. Module-scoped clusters: ~30 s to start both."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from infra import reference_kafka as rk
from infra.stack import Stack
from infra.up_cluster import CLUSTER_DEFAULTS
from tests.compat.conftest import KAFKA_HEAP, ReferenceKafka
from tests.compat.side_by_side import SideBySide, Target, assert_same, mask
from tests.conftest import remember_log
from tests.polling import wait_until

pytestmark = [pytest.mark.compat, pytest.mark.timeout(300)]

TOPICS = "org.apache.kafka.tools.TopicCommand"
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"


_LOGS: dict[str, Path] = {}  # the module's cluster process logs, attached to a failing test


@pytest.fixture(scope="module")
def clusters(
    reference_kafka: ReferenceKafka, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SideBySide]:
    root = tmp_path_factory.mktemp("compat-clusters")
    kafka = rk.prepare(
        root / "kafka", nodes=3, first_node_id=0, heap=KAFKA_HEAP, jvm_flags=rk.QUICK_JVM_FLAGS
    )
    for node in kafka.nodes:
        node.start()
    try:
        with Stack(
            root / "pier", zookeeper=True, brokers=3, broker_config=CLUSTER_DEFAULTS
        ) as pier:
            kafka.wait_ready(120)
            rk.wait_brokers(pier.bootstrap, 3, 60)
            _LOGS.update({f"Kafka node {n.node_id}": n.log_path for n in kafka.nodes})
            _LOGS.update({f"Pier broker {b.node_id}": b.log_path for b in pier.brokers})
            yield SideBySide(
                pier=Target("pier", pier.bootstrap, (0, 1, 2)),
                kafka=Target("kafka", kafka.bootstrap, (0, 1, 2)),
            )
    finally:
        kafka.close()


def create(target: Target, topic: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    admin.create_topics([NewTopic(topic, len(assignment), -1, replica_assignment=assignment)])[
        topic
    ].result(timeout=60)
    wait_until(
        lambda: all(
            p.leader >= 0
            for p in admin.list_topics(topic, timeout=5).topics[topic].partitions.values()
        ),
        what=f"{topic} led on {target.name}",
        retry_on=(KafkaException,),
    )


def partition_row(pair: SideBySide, topic: str) -> str:
    """The described partition row (same on both), ISR sorted: its order is the followers'
    catch-up order, not part of the contract."""
    pier, kafka = pair.run(
        "tool", TOPICS, "--bootstrap-server", "{bootstrap}", "--describe", "--topic", topic
    )
    rows = []
    for ran in (pier, kafka):
        assert ran.returncode == 0, ran.describe()
        (row,) = [
            line
            for line in mask(ran.stdout, ran.target, {topic: "<T>"}).splitlines()
            if "Partition: 0" in line
        ]
        isr = re.search(r"Isr: ([\d,]+)", row)
        assert isr is not None, row
        ordered = ",".join(sorted(isr.group(1).split(",")))
        rows.append(re.sub(r"\tElr: .*$", "", row.replace(isr.group(0), f"Isr: {ordered}")))
    assert rows[0] == rows[1], f"{pier.describe()}\n{kafka.describe()}"
    return rows[0]


def reassign(
    clusters: SideBySide, request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[str, Path]:
    """A topic on both with partition 0 on [0, 1], reordered to [1, 0] by `--execute`; returns
    the topic and the plan file once the described replicas show the new order on both."""
    for name, path in _LOGS.items():
        remember_log(request.node, name, path)
    topic = f"reassign-{tmp_path.name[-6:]}".replace("_", "-")
    names = {topic: "<T>"}
    for target in (clusters.pier, clusters.kafka):
        create(target, topic, [[0, 1]])
    assert "Leader: 0\tReplicas: 0,1\tIsr: 0,1" in partition_row(clusters, topic)
    plan = tmp_path / "plan.json"
    partitions = [{"topic": topic, "partition": 0, "replicas": [1, 0]}]
    plan.write_text(json.dumps({"version": 1, "partitions": partitions}))
    started = assert_same(
        *clusters.run("tool", REASSIGN, "--bootstrap-server", "{bootstrap}",
                      "--reassignment-json-file", str(plan), "--execute"),
        names,
    )  # fmt: skip
    assert "Successfully started partition reassignment for <T>-0" in started
    # Reordered, not moved: the leader stays 0 until the preferred (first) replica is elected.
    wait_until(
        lambda: "Leader: 0\tReplicas: 1,0\tIsr: 0,1" in partition_row(clusters, topic),
        what="replicas reordered on both",
        timeout=60,
    )
    return topic, plan


def test_reassign_then_preferred_election(
    clusters: SideBySide, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    topic, _ = reassign(clusters, request, tmp_path)
    names = {topic: "<T>"}
    election = ("--bootstrap-server", "{bootstrap}", "--election-type", "preferred",
                "--topic", topic, "--partition", "0")  # fmt: skip
    elected = assert_same(*clusters.run("tool", ELECTION, *election), names)
    assert elected == "Successfully completed leader election (PREFERRED) for partitions <T>-0"
    assert "Leader: 1\tReplicas: 1,0\tIsr: 0,1" in partition_row(clusters, topic)
    pier, kafka = clusters.run("tool", ELECTION, *election)
    assert_same(pier, kafka, names)
    assert "Valid replica already elected for partitions <T>-0" in mask(
        pier.stdout, pier.target, names
    )


def test_reassign_verify(
    clusters: SideBySide, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    topic, plan = reassign(clusters, request, tmp_path)
    verify = clusters.run(
        "tool", REASSIGN, "--bootstrap-server", "{bootstrap}",
        "--reassignment-json-file", str(plan), "--verify",
    )  # fmt: skip
    assert "Reassignment of partition <T>-0 is completed." in mask(
        verify[1].stdout, verify[1].target, {topic: "<T>"}
    )
    assert_same(*verify, {topic: "<T>"})
