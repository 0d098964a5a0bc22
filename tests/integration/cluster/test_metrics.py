"""Replication and controller metrics of three real brokers, scraped from their Prometheus ports,
through a `kill -9` of one broker and its restart; `pier cluster` checked on the damaged cluster.

Timeouts are short so the test is quick: a follower lags out of the ISR after 1.5 s, while the
controller only learns of the death when the ZooKeeper session expires (6 s), so the leaders'
own ISR shrinks (what IsrShrinks counts, as in Kafka) happen first.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any
from urllib.error import URLError

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from brokers.client.admin import Admin
from brokers.client.metadata import ClusterMetadata
from brokers.client.topics import NewTopic
from infra.stack import BrokerProcess, free_port
from pier.cli import main
from tests.cluster_probes import SETTLE_S, metadata_of
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
CONFIG = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "1500",
    "auto.leader.rebalance.enable": "false",
}
TOPIC, PARTITIONS = "metered", 6
RM = "kafka_server_replicamanager_"
KC = "kafka_controller_kafkacontroller_"


def scrape(broker: BrokerProcess) -> dict[str, float]:
    """Unlabelled samples of the broker's /metrics (gauges, counters' _total, histograms' _count)."""
    url = f"http://{broker.host}:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


def total(brokers: list[BrokerProcess], name: str) -> float:
    return sum(scrape(b)[name] for b in brokers)


def partition_count(meta: ClusterMetadata) -> int:
    return sum(len(topic.partitions) for topic in meta.topics.values())


def cluster_report(broker: BrokerProcess, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["cluster", "--bootstrap", broker.bootstrap, "--json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def produce_to(brokers: list[BrokerProcess], partitions: list[int]) -> None:
    """acks=1 writes to `partitions` so their leaders' log end moves past a dead follower."""
    bootstrap = ",".join(b.bootstrap for b in brokers)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1"})
    for partition in partitions:
        producer.produce(TOPIC, b"tick", partition=partition)
    assert producer.flush(30) == 0


def test_replication_and_controller_metrics_through_a_kill_and_a_restart(
    chroot: str, broker_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    brokers = {
        n: broker_factory(node_id=n, zookeeper=chroot, config=CONFIG, metrics_port=free_port())
        for n in (1, 2, 3)
    }
    everyone = list(brokers.values())
    wait_until(
        lambda: all(sorted(metadata_of(b).brokers) == [1, 2, 3] for b in everyone),
        what="brokers 1, 2 and 3 registered",
        timeout=SETTLE_S,
    )

    async def create() -> dict[str, Any]:
        async with Admin.for_bootstrap(brokers[1].bootstrap) as admin:
            return await admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])

    assert asyncio.run(create()) == {TOPIC: None}

    def settled() -> ClusterMetadata | None:
        meta = metadata_of(brokers[1])
        topic = meta.topics.get(TOPIC)
        parts = [p for t in meta.topics.values() for p in t.partitions.values()]
        if topic is None or any(p.leader not in brokers or len(p.isr) < 3 for p in parts):
            return None
        count = partition_count(meta)
        leaders = total(everyone, RM + "leadercount")
        replicas = total(everyone, RM + "partitioncount")
        return meta if leaders == count and replicas == 3 * count else None

    meta = wait_until(
        settled, what="every partition led and in sync, counted by the gauges", timeout=SETTLE_S
    )
    assert meta
    controller = meta.controller_id
    assert [b.node_id for b in everyone if scrape(b)[KC + "activecontrollercount"] == 1] == [
        controller
    ]
    figures = scrape(brokers[controller])
    assert figures[KC + "globalpartitioncount"] == partition_count(meta)
    assert figures[KC + "globaltopiccount"] == len(meta.topics)
    assert figures[KC + "offlinepartitionscount"] == 0
    assert total(everyone, RM + "underreplicatedpartitions") == 0

    # Kill a broker that is not the controller, so the controller's figures stay on one broker.
    victim = next(n for n in brokers if n != controller)
    survivors = [b for n, b in brokers.items() if n != victim]
    led_by_survivors = [
        p.partition for p in meta.topic(TOPIC).partitions.values() if p.leader != victim
    ]
    brokers[victim].kill()
    produce_to(survivors, led_by_survivors)

    def shrunk() -> bool:
        under = total(survivors, RM + "underreplicatedpartitions")
        return under > 0 and total(survivors, RM + "isrshrinks_total") > 0

    wait_until(shrunk, what="ISR shrinks counted by the survivors", timeout=SETTLE_S)

    def failed_over() -> dict[str, Any] | None:
        report = cluster_report(survivors[0], capsys)
        gone = victim not in [b["id"] for b in report["brokers"]]
        under = [row for row in report["under_replicated"] if row["topic"] == TOPIC]
        return report if gone and len(under) == PARTITIONS else None

    report = wait_until(
        failed_over,
        what=f"a report without broker {victim}, all under-replicated",
        timeout=SETTLE_S,
    )
    assert report
    assert report["offline"] == [] and report["controller"] == controller
    assert [b.node_id for b in survivors if scrape(b)[KC + "activecontrollercount"] == 1] == [
        controller
    ]
    figures = scrape(brokers[controller])
    assert figures[KC + "offlinepartitionscount"] == 0
    # The broker's death ran as a BrokerChange event, timed as LeaderElectionRateAndTimeMs.
    assert figures["kafka_controller_controllerstats_leaderelectionrateandtimems_count"] >= 1

    expands_before = total(survivors, RM + "isrexpands_total")
    brokers[victim].restart()

    def healed() -> bool:
        expanded = total(survivors, RM + "isrexpands_total") > expands_before
        return expanded and total(everyone, RM + "underreplicatedpartitions") == 0

    wait_until(
        healed,
        what="ISR expansions and no under-replicated partition",
        timeout=SETTLE_S,
        retry_on=(URLError,),  # the restarted broker's metrics port may open after its Kafka one
    )
    wait_until(
        lambda: cluster_report(brokers[victim], capsys)["under_replicated"] == [],
        what="no under-replicated partition in the restarted broker's report",
        timeout=SETTLE_S,
    )
    assert scrape(brokers[victim])[KC + "activecontrollercount"] == 0
