"""Kafka's Java producer 4.1.1 (kafka-tools ProducerPerformance, transactional) through the gateway
uses transaction version 2 (KIP-890 part 2, issue 27 item 2): the gateway passes on the brokers'
finalized `transaction.version` 2 in ApiVersions (it serves EndTxn v5, Produce v12 and
TxnOffsetCommit v5), so the producer bumps its epoch with every transaction and sends no
AddPartitionsToTxn. Kafka's kafka-transactions tool then describes the tenant's transactional id
through the gateway at an epoch of one per transaction, and a read_committed consumer reads every
record exactly once."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.api_versions.v4.response import ApiVersionsResponse

from infra.connect_help import java_client_properties
from tests.compat.conftest import ReferenceKafka
from tests.conftest import remember_log
from tests.e2e.raw_wire import RawConnection
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

pytestmark = [pytest.mark.compat]
PERF = "org.apache.kafka.tools.ProducerPerformance"
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
TENANT, TOPIC, RECORDS = "acme", "tv2", 600
TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with GatewayStack(Path(tmp_path_factory.mktemp("tv2-gateway"))) as s:
        admin = AdminClient(s.client_config(TENANT))
        for future in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
            future.result(TIMEOUT_S)
        yield s


def gateway_features(stack: GatewayStack) -> dict[str, int]:
    host, port = stack.bootstrap.rsplit(":", 1)
    request = ApiVersionsRequest(client_software_name="pier-test", client_software_version="1")
    with RawConnection(host, int(port)) as wire:  # ApiVersions is answered before SASL
        response = wire.call(request, ApiVersionsResponse)
    return {f.name: int(f.max_version_level) for f in response.finalized_features}


def read_committed(stack: GatewayStack) -> int:
    consumer = Consumer(
        {
            **stack.client_config(TENANT),
            "group.id": f"tv2-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    seen: list[bytes] = []
    try:

        def all_read() -> bool:
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    seen.append(message.value() or b"")
            return len(seen) >= RECORDS

        wait_until(all_read, what=f"{RECORDS} committed records read", timeout=TIMEOUT_S)
        assert not consumer.consume(100, 1.0), "more records than were committed"
    finally:
        consumer.close()
    return len(seen)


def first_problems(output: str, lines: int = 12) -> str:
    """The tool's first warnings and errors: what went wrong first, which a tail loses."""
    found = [line for line in output.splitlines() if " WARN " in line or " ERROR " in line]
    return "\n".join(found[:lines])


def test_the_java_producer_runs_transaction_version_2_through_the_gateway(
    reference_kafka: ReferenceKafka,
    stack: GatewayStack,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    remember_log(request.node, "broker", stack.root / "broker" / "broker-0.log")
    remember_log(request.node, "gateway", stack.root / "gateway" / "gateway.log")
    features = gateway_features(stack)
    creds = stack.credentials[TENANT]
    config = tmp_path / "client.properties"
    config.write_text(
        java_client_properties(stack.bootstrap, {"key_id": creds.key_id, "secret": creds.secret})
    )
    tid = f"perf-{uuid.uuid4().hex[:8]}"
    ran = reference_kafka.run(
        PERF, "--topic", TOPIC, "--num-records", str(RECORDS), "--record-size", "100",
        "--throughput", "2000", "--transactional-id", tid, "--transaction-duration-ms", "50",
        "--producer.config", str(config), "--producer-props", "linger.ms=5",
    )  # fmt: skip
    assert ran.returncode == 0, (
        f"first problems:\n{first_problems(ran.stderr)}\n---\n{ran.stdout[-2000:]}\n"
        f"{ran.stderr[-2000:]}"
    )
    described = reference_kafka.run(
        TRANSACTIONS, "--bootstrap-server", stack.bootstrap, "--command-config", str(config),
        "describe", "--transactional-id", tid,
    )  # fmt: skip
    assert described.returncode == 0, described.stderr
    header, row = (line.split("\t") for line in described.stdout.splitlines()[:2])
    fields = {name.strip(): value.strip() for name, value in zip(header, row, strict=False)}
    assert fields["TransactionalId"] == tid and fields["TransactionState"] == "CompleteCommit"
    assert int(fields["ProducerEpoch"]) >= 2, described.stdout  # TV1 would stay at 0
    assert not re.search(rf"{TENANT}[._]", described.stdout), described.stdout  # no fleet name
    assert read_committed(stack) == RECORDS
    assert features == {"transaction.version": 2}
