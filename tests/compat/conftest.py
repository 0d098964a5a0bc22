"""Fixtures of the compatibility tier: Apache Kafka's own Java tools against Pier and against Kafka.

`reference_kafka` makes sure the kafka-tools jars are in their cache (`infra/reference/kafka
fetch`: Maven Central through mvn the first time, a checksum comparison after; infra/test fetches
before pytest so the download never counts against a test's time) and returns a runner for a tool
class. A missing mvn or network is a test error with the fetch's own message, never a skip: CI has
both, and a compatibility check that quietly does not run is no check.

To keep CI's cost bounded there is ONE Pier broker and ONE Apache Kafka node per test session
(`pier_broker`, `kafka_node`; started side by side, Kafka's JVM formatting and booting while Pier
starts), both single-node with node id 0 so tool outputs line up; tests keep apart by unique topic
and group names (`topic_name`). `side_by_side` runs one tool command on both in parallel
(`tests/compat/side_by_side.py`). `module_broker` is the session's Pier broker (the name the older
tests use). Fixtures run on pytest's main thread.
"""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from infra import reference_kafka as rk
from infra.stack import BrokerProcess, start_broker
from tests.compat.side_by_side import REFERENCE, SideBySide, Target
from tests.conftest import remember_log

FETCH_TIMEOUT_S = 600.0
TOOL_TIMEOUT_S = 120.0
KAFKA_HEAP = "512m"


@dataclass(frozen=True)
class ReferenceKafka:
    """Runs `infra/reference/kafka tool CLASS ARGS...` and returns the finished process."""

    def run(self, tool_class: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(REFERENCE), "tool", tool_class, *args],
            capture_output=True,
            text=True,
            timeout=TOOL_TIMEOUT_S,
            check=False,
        )


@pytest.fixture(scope="session")
def reference_kafka() -> ReferenceKafka:
    fetched = subprocess.run(
        [str(REFERENCE), "fetch"],
        capture_output=True,
        text=True,
        timeout=FETCH_TIMEOUT_S,
        check=False,
    )
    assert fetched.returncode == 0, f"infra/reference/kafka fetch failed:\n{fetched.stderr}"
    return ReferenceKafka()


@dataclass(frozen=True)
class Pair:
    pier: BrokerProcess
    kafka: rk.KafkaCluster


@pytest.fixture(scope="session")
def _pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    root = tmp_path_factory.mktemp("compat")
    kafka = rk.prepare(
        root / "kafka", nodes=1, first_node_id=0, heap=KAFKA_HEAP, jvm_flags=rk.QUICK_JVM_FLAGS
    )
    for node in kafka.nodes:
        node.start()
    try:
        pier = start_broker(root / "pier" / "data")
        try:
            kafka.wait_ready(120)
            yield Pair(pier, kafka)
        finally:
            pier.stop()
    finally:
        kafka.close()


@pytest.fixture(scope="session")
def pier_broker(_pair: Pair) -> BrokerProcess:
    return _pair.pier


@pytest.fixture(scope="session")
def kafka_node(_pair: Pair) -> rk.KafkaCluster:
    return _pair.kafka


@pytest.fixture
def module_broker(pier_broker: BrokerProcess) -> BrokerProcess:
    return pier_broker


@pytest.fixture(scope="session")
def side_by_side(
    reference_kafka: ReferenceKafka, pier_broker: BrokerProcess, kafka_node: rk.KafkaCluster
) -> SideBySide:
    (node,) = kafka_node.nodes
    return SideBySide(
        pier=Target("pier", pier_broker.bootstrap, (pier_broker.node_id,), (pier_broker.data_dir,)),
        kafka=Target("kafka", kafka_node.bootstrap, (node.node_id,), (node.data_dir,)),
    )


@pytest.fixture(autouse=True)
def _attach_logs(request: pytest.FixtureRequest) -> None:
    names = set(request.fixturenames)
    if names & {"module_broker", "pier_broker", "side_by_side"}:
        pair: Pair = request.getfixturevalue("_pair")
        remember_log(request.node, "compat Pier broker", pair.pier.log_path)
        for node in pair.kafka.nodes:
            remember_log(request.node, f"compat Kafka node {node.node_id}", node.log_path)


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test; hyphens only (kafka-topics warns about '.' and '_')."""
    readable = re.sub(r"[^a-zA-Z0-9-]", "-", request.node.name)[:150]
    return f"{readable}-{uuid.uuid4().hex[:8]}"
