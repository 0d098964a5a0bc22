"""Kafka's own kafka-transactions.sh (org.apache.kafka.tools.TransactionsCommand, kafka-tools 4.1.1)
and `pier transactions`, each against Pier and against Apache Kafka 4.1.1.

On each system confluent-kafka's transactional producer leaves one transaction open (3 records on
partition 0, one on partition 1) and a second transactional id only initialised (Empty, no start
time). Kafka's tool must print the same `list` and `describe` tables on both systems, producer ids
and times masked (each server hands out its own); `pier transactions` must print exactly what
Kafka's tool prints on the same server (only the ever-growing duration differs); and `pier
transactions abort` must end the open transaction on partition 0 of both systems alike.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from brokers.client import Admin, TopicPartition
from brokers.client.offsets import LATEST
from tests.compat import data
from tests.compat.side_by_side import Ran, SideBySide, Target

pytestmark = [pytest.mark.compat]

TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
REPO = Path(__file__).resolve().parents[2]
TIMEOUT_MS = 60_000
VOLATILE = {"ProducerId", "CurrentTransactionStartTimeMs", "TransactionDurationMs"}


@pytest.fixture
def transactions(side_by_side: SideBySide, topic_name: str) -> Iterator[tuple[str, str]]:
    """(the open transaction's id, the Empty one's) on both systems."""
    open_id, empty_id = f"{topic_name}-open", f"{topic_name}-empty"
    producers = []
    for target in data.targets(side_by_side):
        data.create_topic(target, topic_name, 2)
        settings = {"bootstrap.servers": target.bootstrap, "transaction.timeout.ms": TIMEOUT_MS}
        Producer({**settings, "transactional.id": empty_id}).init_transactions(60)
        producer = Producer({**settings, "transactional.id": open_id})
        producer.init_transactions(60)
        producer.begin_transaction()
        for partition in (0, 0, 0, 1):
            producer.produce(topic_name, b"open", partition=partition)
        assert producer.flush(60) == 0
        producers.append(producer)
    yield open_id, empty_id
    for producer in producers:
        producer.abort_transaction(60)


def kafka_tool(pair: SideBySide, *args: str) -> tuple[Ran, Ran]:
    return pair.run("tool", TRANSACTIONS, "--bootstrap-server", "{bootstrap}", *args)


def pier_cli(target: Target, *args: str) -> str:
    ran = subprocess.run(
        [sys.executable, "-m", "pier", "transactions", "--bootstrap-server", target.bootstrap,
         *args],
        capture_output=True, text=True, timeout=120, check=False, cwd=REPO,
    )  # fmt: skip
    assert (ran.returncode, ran.stderr) == (0, ""), f"[{target.name}] {ran.stderr}"
    return ran.stdout


def rows(stdout: str) -> list[list[str]]:
    """Kafka's layout: cells padded with spaces, each followed by a tab; the header row first."""
    lines = stdout.splitlines()
    assert lines and all(line.endswith("\t") for line in lines), stdout
    return [[cell.strip() for cell in line.split("\t")[:-1]] for line in lines]


def ok(ran: Ran) -> list[list[str]]:
    assert ran.returncode == 0, ran.describe()
    return rows(ran.stdout)


def comparable(header: list[str], row: list[str]) -> dict[str, str]:
    """A described transaction with what differs between servers masked; partitions as a set
    (Kafka's tool prints them in its hash set's order)."""
    cells = dict(zip(header, row, strict=True))
    for name in VOLATILE:
        cells[name] = "None" if cells[name] == "None" else "<n>"
    cells["TopicPartitions"] = ",".join(sorted(cells["TopicPartitions"].split(",")))
    return cells


@pytest.mark.parametrize("which", ["open", "empty"])
def test_describe(
    side_by_side: SideBySide, transactions: tuple[str, str], topic_name: str, which: str
) -> None:
    transactional_id = transactions[0] if which == "open" else transactions[1]
    described = {}
    for ran in kafka_tool(side_by_side, "describe", "--transactional-id", transactional_id):
        header, row = ok(ran)
        ours = rows(pier_cli(ran.target, "describe", "--transactional-id", transactional_id))
        assert ours[0] == header
        assert comparable(header, ours[1]) == comparable(header, row)
        cells = dict(zip(header, row, strict=True))
        assert cells["ProducerId"] == ours[1][2]  # the same server's own producer id
        assert cells["CurrentTransactionStartTimeMs"] == ours[1][6]
        described[ran.target.name] = comparable(header, row)
    assert described["pier"] == described["kafka"]
    expected = {
        "open": ("Ongoing", f"{topic_name}-0,{topic_name}-1", "<n>"),
        "empty": ("Empty", "", "None"),
    }[which]
    state = described["pier"]
    got = (state["TransactionState"], state["TopicPartitions"], state["TransactionDurationMs"])
    assert got == expected
    assert (state["CoordinatorId"], state["TransactionTimeoutMs"]) == ("0", str(TIMEOUT_MS))


@pytest.mark.parametrize("duration_filter", [None, "3600000"])
def test_list(
    side_by_side: SideBySide, transactions: tuple[str, str], duration_filter: str | None
) -> None:
    """Kafka lists an Empty id under any duration filter (its start time is -1)."""
    extra = () if duration_filter is None else ("--duration-filter", duration_filter)
    listed = {}
    for ran in kafka_tool(side_by_side, "list", *extra):
        header, *listing = ok(ran)
        assert header == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
        mine = sorted(r for r in listing if r[0] in transactions)
        ours = rows(pier_cli(ran.target, "list", *extra))
        assert ours[0] == header
        assert sorted(r for r in ours[1:] if r[0] in transactions) == mine
        listed[ran.target.name] = [[tid, node, "<pid>", state] for tid, node, _, state in mine]
    assert listed["pier"] == listed["kafka"]
    open_id, empty_id = transactions
    expected = [[empty_id, "0", "<pid>", "Empty"]]
    if duration_filter is None:
        expected.append([open_id, "0", "<pid>", "Ongoing"])
    assert listed["pier"] == sorted(expected)


def test_describe_unknown_transactional_id(side_by_side: SideBySide, topic_name: str) -> None:
    nobody = f"{topic_name}-nobody"
    for ran in kafka_tool(side_by_side, "describe", "--transactional-id", nobody):
        assert ran.returncode == 1, ran.describe()
        assert "could not be found" in ran.stderr, ran.describe()


def stable_and_end(target: Target, tp: TopicPartition) -> tuple[int, int]:
    async def ask() -> tuple[int, int]:
        async with Admin.for_bootstrap(target.bootstrap) as admin:
            stable = await admin.list_offsets({tp: LATEST}, read_committed=True)
            end = await admin.list_offsets({tp: LATEST})
            return stable[tp].offset, end[tp].offset

    return asyncio.run(ask())


def test_abort_by_start_offset(
    side_by_side: SideBySide, transactions: tuple[str, str], topic_name: str
) -> None:
    where = ("--topic", topic_name, "--partition", "0")
    tp = TopicPartition(topic_name, 0)
    for ran in kafka_tool(side_by_side, "describe-producers", *where):
        header, before = ok(ran)
        assert rows(pier_cli(ran.target, "describe-producers", *where)) == [header, before]
        epochs_sequence_start = [before[i] for i in (1, 2, 3, 5)]
        assert epochs_sequence_start == ["0", "-1", "2", "0"], ran.describe()
        assert stable_and_end(ran.target, tp) == (0, 3)
        assert pier_cli(ran.target, "abort", *where, "--start-offset", "0") == ""
        assert stable_and_end(ran.target, tp) == (4, 4), ran.target.name  # 3 records + ABORT
    for ran in kafka_tool(side_by_side, "describe-producers", *where):
        _header, after = ok(ran)
        # The marker came with coordinator epoch 0 (the producer had seen none: -1 → 0).
        assert after[1:3] == ["0", "0"] and after[5] == "None", ran.describe()
