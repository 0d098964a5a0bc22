"""`pier transactions` as a real process against a real in-process broker and real clients.

An open transaction comes from confluent-kafka's transactional producer (the coordinator knows
it); a hanging one is a transactional batch written with our own client under a producer id no
coordinator ever handed out, which is exactly what kafka-transactions.sh find-hanging / abort are
for. The last stable offset (ListOffsets latest under read_committed) shows whether the abort
really ended the transaction. Layout details and refusals are unit-tested in
tests/unit/client/test_transactions_cli.py; the same commands beside Kafka's tool are in
tests/compat/test_java_transactions.py.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from brokers.client import Admin, TopicPartition
from brokers.client.offsets import LATEST
from brokers.client.producer import produce
from brokers.records.builder import simple_batch
from tests.e2e.kafka_admin import create_topic
from tests.integration.inproc import running_broker
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
REPO = Path(__file__).resolve().parents[2]
TIMEOUT_MS = 60_000
HANGING_PID, HANGING_EPOCH = 7_000_000_000, 5  # no coordinator hands out ids this high here
HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # KIP-890 verification would refuse the hanging batch (its producer is in no transaction):
    # off, as on the brokers that hanging transactions come from.
    properties = {"transaction.partition.verification.enable": "false"}
    with running_broker(tmp_path_factory.mktemp("transactions-cli"), properties) as address:
        yield address


@pytest.fixture
def topic(bootstrap: str) -> str:
    name = f"txn-cli-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name, 2)
    return name


def pier(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pier", "transactions", "--bootstrap-server", bootstrap, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr
    return result.stdout


def table(result: subprocess.CompletedProcess[str]) -> list[list[str]]:
    """Kafka's layout: tab-terminated cells padded with spaces; the header row first."""
    lines = ok(result).splitlines()
    assert all(line.endswith("\t") for line in lines), lines
    return [[cell.strip() for cell in line.split("\t")[:-1]] for line in lines]


def error_line(result: subprocess.CompletedProcess[str], status: int = 1) -> str:
    assert result.returncode == status, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("pier: error: "), result.stderr
    return lines[0]


@pytest.fixture
def open_transaction(bootstrap: str, topic: str) -> Iterator[tuple[str, Producer]]:
    """A transaction of confluent-kafka's producer, open on partitions 0 (3 records) and 1."""
    transactional_id = f"cli-{uuid.uuid4().hex[:8]}"
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": TIMEOUT_MS,
        }
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    for partition in (0, 0, 0, 1):
        producer.produce(topic, b"open", partition=partition)
    assert producer.flush(60) == 0
    yield transactional_id, producer
    producer.abort_transaction(60)


def stable_and_end(bootstrap: str, tp: TopicPartition) -> tuple[int, int]:
    async def ask() -> tuple[int, int]:
        async with Admin.for_bootstrap(bootstrap) as admin:
            stable = await admin.list_offsets({tp: LATEST}, read_committed=True)
            end = await admin.list_offsets({tp: LATEST})
            return stable[tp].offset, end[tp].offset

    return asyncio.run(ask())


def write_hanging(bootstrap: str, tp: TopicPartition, records: int) -> int:
    """A transactional batch of a producer no coordinator knows, stamped an hour ago; returns
    its base offset (the transaction's start offset)."""
    batch = simple_batch(
        [b"hanging"] * records,
        timestamps=[int(time.time() * 1000) - HOUR_MS] * records,
        producer_id=HANGING_PID,
        producer_epoch=HANGING_EPOCH,
        base_sequence=0,
        is_transactional=True,
    )

    async def write() -> int:
        async with Admin.for_bootstrap(bootstrap) as admin:
            result = await produce(
                admin.cluster, tp, batch, transactional_id=f"never-{uuid.uuid4().hex[:6]}"
            )
            assert result is not None
            return result.base_offset

    return asyncio.run(write())


def test_unreachable_broker_is_an_operation_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = pier(f"127.0.0.1:{port}", "--timeout", "5", "list")
    assert "no broker reachable" in error_line(result)


def test_list_and_describe_an_open_transaction(
    bootstrap: str, topic: str, open_transaction: tuple[str, Producer]
) -> None:
    transactional_id, producer = open_transaction
    header, *rows = table(pier(bootstrap, "list"))
    assert header == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    (mine,) = [r for r in rows if r[0] == transactional_id]
    producer_id = mine[2]
    assert (mine[1], mine[3]) == ("0", "Ongoing")
    ongoing = table(pier(bootstrap, "list", "--state", "ongoing", "--producer-id", producer_id))
    assert ongoing[1:] == [mine]
    assert table(pier(bootstrap, "list", "--state", "CompleteCommit,Empty"))[1:].count(mine) == 0
    assert ok(pier(bootstrap, "list", "--duration-filter", str(HOUR_MS), "--json")) == "[]\n"

    before_ms = int(time.time() * 1000)
    header, row = table(pier(bootstrap, "describe", "--transactional-id", transactional_id))
    described = dict(zip(header, row, strict=True))
    started = int(described.pop("CurrentTransactionStartTimeMs"))
    duration = int(described.pop("TransactionDurationMs"))
    assert described == {
        "CoordinatorId": "0",
        "TransactionalId": transactional_id,
        "ProducerId": producer_id,
        "ProducerEpoch": "0",
        "TransactionState": "Ongoing",
        "TransactionTimeoutMs": str(TIMEOUT_MS),
        "TopicPartitions": f"{topic}-0,{topic}-1",
    }
    assert started <= before_ms and 0 <= duration < TIMEOUT_MS

    header, row = table(pier(bootstrap, "describe-producers", "--topic", topic, "--partition", "0"))
    assert dict(zip(header, row, strict=True)) | {"LastTimestamp": "-"} == {
        "ProducerId": producer_id,
        "ProducerEpoch": "0",
        "LatestCoordinatorEpoch": "-1",
        "LastSequence": "2",
        "LastTimestamp": "-",
        "CurrentTransactionStartOffset": "0",
    }

    producer.commit_transaction(60)
    producer.begin_transaction()  # the fixture's abort then ends an empty transaction

    def completed() -> dict[str, Any] | None:
        args = ("describe", "--transactional-id", transactional_id, "--json")
        document: dict[str, Any] = json.loads(ok(pier(bootstrap, *args)))
        return document if document["state"] == "CompleteCommit" else None

    # The coordinator answers EndTxn once PrepareCommit is logged; the markers and CompleteCommit
    # follow in the background.
    done = wait_until(completed, what="the transaction in CompleteCommit")
    assert done is not None and (done["producer_id"], done["partitions"]) == (int(producer_id), [])


def test_describe_of_an_unknown_transactional_id_fails(bootstrap: str) -> None:
    result = pier(bootstrap, "describe", "--transactional-id", f"nobody-{uuid.uuid4().hex[:6]}")
    assert "does not exist (TRANSACTIONAL_ID_NOT_FOUND)" in error_line(result)


def test_find_and_abort_a_hanging_transaction(bootstrap: str, topic: str) -> None:
    tp = TopicPartition(topic, 1)
    start = write_hanging(bootstrap, tp, records=4)
    assert stable_and_end(bootstrap, tp) == (start, start + 4)  # the LSO is stuck at the start

    header, *rows = table(pier(bootstrap, "find-hanging", "--topic", topic))
    assert header == [
        "Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
        "LastTimestamp", "Duration(min)",
    ]  # fmt: skip
    (row,) = rows
    assert row[:6] == [topic, "1", str(HANGING_PID), str(HANGING_EPOCH), "-1", str(start)]
    assert int(row[7]) >= 60
    by_broker = table(pier(bootstrap, "find-hanging", "--broker-id", "0"))
    assert row in by_broker[1:]

    stale = pier(bootstrap, "abort", "--topic", topic, "--partition", "1",
                 "--producer-id", str(HANGING_PID), "--producer-epoch", str(HANGING_EPOCH - 1),
                 "--coordinator-epoch", "-1")  # fmt: skip
    assert "INVALID_PRODUCER_EPOCH" in error_line(stale)
    missing = pier(bootstrap, "abort", "--topic", topic, "--partition", "1",
                   "--start-offset", str(start + 1))  # fmt: skip
    assert f"no open transaction starts at offset {start + 1} on {topic}-1" in error_line(missing)
    assert stable_and_end(bootstrap, tp) == (start, start + 4)

    aborted = pier(bootstrap, "abort", "--topic", topic, "--partition", "1",
                   "--start-offset", str(start))  # fmt: skip
    assert ok(aborted) == ""  # silent on success, as kafka-transactions.sh
    assert stable_and_end(bootstrap, tp) == (start + 5, start + 5)  # records + the ABORT marker
    assert table(pier(bootstrap, "find-hanging", "--topic", topic))[1:] == []
    header, row = table(pier(bootstrap, "describe-producers", "--topic", topic, "--partition", "1"))
    assert dict(zip(header, row, strict=True))["CurrentTransactionStartOffset"] == "None"


def test_abort_of_an_unknown_partition_fails(bootstrap: str, topic: str) -> None:
    result = pier(bootstrap, "abort", "--topic", topic, "--partition", "9", "--start-offset", "0")
    assert f"{topic}-9" in error_line(result)
