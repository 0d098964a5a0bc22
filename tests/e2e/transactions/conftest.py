"""Fixtures of the transactions tests: one standalone broker per module, or Apache Kafka instead.

`txn_broker` (module scope) is a Pier broker with the transaction settings these tests shorten:
the coordinator looks for timed-out transactions every 200 ms (Kafka's default is 10 s), so a
timeout test waits for the abort itself, not for the sweep. With `PIER_TXN_REFERENCE=kafka` in
the environment the same tests run against one Apache Kafka 4.1.1 node (infra/reference_kafka,
with the same settings) instead: that is how the drivers and checks here were validated, and how
a difference of behaviour is told apart from a wrong test. The broker's log tail is attached to a
failing test's report. Fixtures run on pytest's main thread.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from infra import reference_kafka as rk
from infra.stack import start_broker
from tests.conftest import remember_log

TXN_BROKER_CONFIG = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    "group.initial.rebalance.delay.ms": "0",
}
REFERENCE = os.environ.get("PIER_TXN_REFERENCE", "").strip().lower() == "kafka"


@dataclass(frozen=True)
class TxnBroker:
    """What the tests need of the broker under test, Pier's or Kafka's."""

    kind: str  # "pier" or "kafka"
    host: str
    port: int
    log_path: Path

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TxnBroker]:
    root = tmp_path_factory.mktemp("txn-broker")
    if REFERENCE:
        cluster = rk.start_kafka(
            root / "kafka",
            nodes=1,
            config=TXN_BROKER_CONFIG,
            heap="512m",
            jvm_flags=rk.QUICK_JVM_FLAGS,
        )
        try:
            (node,) = cluster.nodes
            yield TxnBroker("kafka", node.host, node.port, node.log_path)
        finally:
            cluster.close()
        return
    broker = start_broker(root / "data", config=TXN_BROKER_CONFIG)
    try:
        yield TxnBroker("pier", broker.host, broker.port, broker.log_path)
    finally:
        broker.stop()


@pytest.fixture(autouse=True)
def _attach_txn_broker_log(request: pytest.FixtureRequest) -> None:
    if "txn_broker" in request.fixturenames:
        broker: TxnBroker = request.getfixturevalue("txn_broker")
        remember_log(request.node, f"{broker.kind} broker", broker.log_path)
