"""Fixtures of the stream-processing tests: the clusters they run on and the Kafka Streams build.

Each test runs on Pier in CI; the same test runs on Apache Kafka 4.1.1 (`infra/reference/kafka`,
KRaft) as its `kafka` variant, marked slow, so the tests themselves are checked against the
reference (`--run-slow -k 'kafka and not pier'`).

- `three_brokers` (params `pier`, `kafka`): three brokers, internal topics (offsets, transaction
  state) and default replication factor 3, min ISR 2. Pier's run in ZooKeeper mode on the session's
  ZooKeeper (`chroot`, `broker_factory` from tests/conftest.py).
- `one_broker` (params `pier`, `kafka`): a standalone Pier broker or a single Kafka node.
- `wordcount` makes sure the Kafka Streams app is built (`infra/streams/wordcount build`: Maven
  Central the first time, a checksum comparison after; infra/test builds it before pytest so the
  download never counts against a test's time) and returns the launcher's path. A missing mvn or
  network is a test error with the build's own message, never a skip.
- `quix_python` is the interpreter of quixstreams' own venv (`infra/streams/quix venv`, made the
  same way: PyPI the first time, by infra/test before pytest), which runs tests/streams/quix_app.py.
Logs of every process a test uses are attached to its failure report. Fixtures run on pytest's
main thread.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from infra import reference_kafka as rk
from tests.cluster_probes import SETTLE_S, metadata_of
from tests.conftest import remember_log
from tests.polling import wait_until

REPO = Path(__file__).resolve().parents[2]
WORDCOUNT = REPO / "infra" / "streams" / "wordcount"
QUIX = REPO / "infra" / "streams" / "quix"
BUILD_TIMEOUT_S = 600.0
KAFKA_HEAP = "512m"

# Both kinds of cluster get these; each is a Kafka broker setting.
COMMON_CONFIG = {
    "group.initial.rebalance.delay.ms": "0",  # the first rebalance of a group starts at once
    "offsets.topic.num.partitions": "5",  # fewer internal partitions: quicker to create and load
    "transaction.state.log.num.partitions": "5",
}
THREE_CONFIG = {
    **COMMON_CONFIG,
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}
ONE_CONFIG = {
    **COMMON_CONFIG,
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}
TARGETS = ["pier", pytest.param("kafka", marks=pytest.mark.slow)]


@dataclass
class Target:
    """A running cluster: what a test connects to."""

    name: str
    bootstrap: str
    replication_factor: int
    logs: dict[str, Path] = field(default_factory=dict)


def pier_cluster(broker_factory: Any, chroot: str) -> Target:
    brokers = [broker_factory(node_id=n, zookeeper=chroot, config=THREE_CONFIG) for n in (1, 2, 3)]
    wait_until(
        lambda: all(sorted(metadata_of(b).brokers) == [1, 2, 3] for b in brokers),
        what="Pier brokers 1, 2 and 3 registered",
        timeout=SETTLE_S,
    )
    bootstrap = ",".join(b.bootstrap for b in brokers)
    return Target("pier", bootstrap, 3, {f"broker {b.node_id}": b.log_path for b in brokers})


def kafka_target(cluster: rk.KafkaCluster, replication_factor: int) -> Target:
    logs = {f"kafka node {n.node_id}": n.log_path for n in cluster.nodes}
    return Target("kafka", cluster.bootstrap, replication_factor, logs)


@pytest.fixture(params=TARGETS)
def three_brokers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    if request.param == "pier":
        target = pier_cluster(
            request.getfixturevalue("broker_factory"), request.getfixturevalue("chroot")
        )
        _remember(request, target)
        yield target
        return
    root = tmp_path_factory.mktemp("kafka3")
    with rk.start_kafka(
        root,
        nodes=3,
        heap=KAFKA_HEAP,
        jvm_flags=rk.QUICK_JVM_FLAGS,
        config=THREE_CONFIG,
        wait=180,
    ) as cluster:
        target = kafka_target(cluster, 3)
        _remember(request, target)
        yield target


@pytest.fixture(params=TARGETS)
def one_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    if request.param == "pier":
        broker = request.getfixturevalue("broker_factory")(config=ONE_CONFIG)
        target = Target("pier", broker.bootstrap, 1, {"broker": broker.log_path})
        _remember(request, target)
        yield target
        return
    root = tmp_path_factory.mktemp("kafka1")
    with rk.start_kafka(
        root, nodes=1, heap=KAFKA_HEAP, jvm_flags=rk.QUICK_JVM_FLAGS, config=ONE_CONFIG, wait=120
    ) as cluster:
        target = kafka_target(cluster, 1)
        _remember(request, target)
        yield target


def _remember(request: pytest.FixtureRequest, target: Target) -> None:
    for name, path in target.logs.items():
        remember_log(request.node, name, path)


@pytest.fixture(scope="session")
def wordcount() -> Path:
    built = subprocess.run(
        [str(WORDCOUNT), "build"],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert built.returncode == 0, f"infra/streams/wordcount build failed:\n{built.stderr}"
    return WORDCOUNT


@pytest.fixture(scope="session")
def quix_python() -> Path:
    made = subprocess.run(
        [str(QUIX), "venv"], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
    )
    assert made.returncode == 0, f"infra/streams/quix venv failed:\n{made.stderr}"
    found = subprocess.run(
        [str(QUIX), "python"], capture_output=True, text=True, timeout=30, check=True
    )
    return Path(found.stdout.strip())
