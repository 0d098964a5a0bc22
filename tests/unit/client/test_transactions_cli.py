"""`pier transactions`: argument checks, Kafka's table layout, and the hanging-transaction test.

Against real brokers the command runs in tests/integration/test_transactions_cli.py and beside
Kafka's own kafka-transactions.sh in tests/compat/test_java_transactions.py; here are the parts
that need no broker: refusals before any connection, the layout of Kafka's TransactionsCommand
(cells padded to the column width, each followed by a tab), the describe row (duration counted
from the start time), and find-hanging's selection of candidates and hanging ones.
"""

from __future__ import annotations

import pytest

from brokers.client.metadata import TopicPartition
from brokers.client.transactions import (
    ProducerState,
    TransactionDescription,
    hanging,
    open_longer_than,
)
from pier.cli import main
from pier.transactions import (
    DESCRIBE_HEADERS,
    LIST_HEADERS,
    describe_row,
    hanging_row,
    kafka_table,
)

pytestmark = pytest.mark.unit
BOOT = ["transactions", "--bootstrap-server", "127.0.0.1:9"]
TP0, TP1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
NOW = 1_700_000_000_000


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        status = main(list(argv))
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return status, out, err


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    status, out, err = run(capsys, *argv)
    lines = [line for line in err.splitlines() if line.strip()]
    assert (status, out) == (2, ""), err
    assert lines[-1].startswith("pier: error: "), err
    return lines[-1]


def test_bootstrap_is_required_and_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--bootstrap-server" in usage_error(capsys, "transactions", "list")
    assert "not host:port" in usage_error(
        capsys, "transactions", "--bootstrap-server", "nohost", "list"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["abort", "--topic", "t", "--partition", "0"], "--start-offset, or with --producer-id"),
        (
            ["abort", "--topic", "t", "--partition", "0", "--start-offset", "5",
             "--producer-id", "7"],
            "not both",
        ),
        (
            ["abort", "--topic", "t", "--partition", "0", "--producer-id", "7",
             "--producer-epoch", "1"],
            "--producer-id needs --coordinator-epoch",
        ),
        (["find-hanging"], "--topic or --broker-id"),
        (["find-hanging", "--broker-id", "0", "--partition", "1"], "--partition needs --topic"),
        (["list", "--state", "Ongoing,Hanging"], "unknown transaction state Hanging"),
        (["list", "--producer-id", "x"], "producer ids must be numbers"),
        (["list", "--producer-id", "1,-2"], "producer ids are 0 to 2^63-1"),
        (
            ["abort", "--topic", "t", "--partition", "0", "--producer-id", "7",
             "--producer-epoch", "32768", "--coordinator-epoch", "0"],
            "--producer-epoch: 32768 is not in [0, 32767]",
        ),
        (["describe-producers", "--topic", "t", "--partition", "-1"], "-1 is not in [0,"),
        (["find-hanging", "--topic", "t", "--max-transaction-timeout", "-5"], "is not in [0,"),
        (["describe"], "--transactional-id"),
        (["abort", "--topic", "t"], "--partition"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused_before_connecting(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """127.0.0.1:9 (discard) would answer nothing: each refusal comes before any connection."""
    assert message in usage_error(capsys, *BOOT, *argv)


def test_the_table_is_laid_out_as_kafkas() -> None:
    rows = [["tx-a", 0, 4000, "Ongoing"], ["a-longer-transactional-id", 12, 7, "Empty"]]
    assert kafka_table(LIST_HEADERS, rows) == (
        "TransactionalId          \tCoordinator\tProducerId\tTransactionState\t\n"
        "tx-a                     \t0          \t4000      \tOngoing         \t\n"
        "a-longer-transactional-id\t12         \t7         \tEmpty           \t\n"
    )
    assert kafka_table(("A", "B"), []) == "A\tB\t\n"


def description(start: int | None, *partitions: TopicPartition) -> TransactionDescription:
    return TransactionDescription(
        transactional_id="tx-a",
        coordinator_id=2,
        state="Ongoing" if start is not None else "Empty",
        producer_id=4000,
        producer_epoch=3,
        timeout_ms=60_000,
        start_time_ms=start,
        partitions=partitions,
    )


def test_describe_counts_the_duration_from_the_start() -> None:
    row = describe_row(description(NOW - 1500, TP0, TP1), NOW)
    assert dict(zip(DESCRIBE_HEADERS, row, strict=True)) == {
        "CoordinatorId": 2,
        "TransactionalId": "tx-a",
        "ProducerId": 4000,
        "ProducerEpoch": 3,
        "TransactionState": "Ongoing",
        "TransactionTimeoutMs": 60_000,
        "CurrentTransactionStartTimeMs": NOW - 1500,
        "TransactionDurationMs": 1500,
        "TopicPartitions": "orders-0,orders-1",
    }
    never_started = kafka_table(DESCRIBE_HEADERS, [describe_row(description(None), NOW)])
    assert never_started.splitlines()[1].split()[5:] == ["60000", "None", "None"]


def producer(pid: int, start: int | None, last_ms: int, epoch: int = 0) -> ProducerState:
    return ProducerState(pid, epoch, 9, last_ms, None, start)


def test_only_open_transactions_older_than_the_bound_are_candidates() -> None:
    old, recent, closed = (
        producer(1, 40, NOW - 60_001),
        producer(2, 7, NOW - 1000),
        producer(3, None, NOW - 999_999),
    )
    found = open_longer_than({TP0: [old, recent, closed], TP1: []}, 60_000, NOW)
    assert found == [(TP0, old)]
    assert open_longer_than({TP0: [old, recent]}, 0, NOW) == [(TP0, old), (TP0, recent)]


def test_hanging_unless_the_coordinator_still_holds_the_partition() -> None:
    unknown_id = (TP0, producer(1, 5, 0))  # no transactional id has this producer id
    expired = (TP0, producer(2, 6, 0))  # the id is known but no longer described
    moved_on = (TP0, producer(3, 7, 0))  # the id's transaction no longer has this partition
    live = (TP1, producer(3, 8, 0))  # ...but does have this one: its marker will come
    ids = {2: "tx-expired", 3: "tx-live"}
    descriptions = {"tx-expired": None, "tx-live": description(NOW, TP1)}
    candidates = [unknown_id, expired, moved_on, live]
    assert hanging(candidates, ids, descriptions) == [unknown_id, expired, moved_on]


def test_hanging_row_reports_whole_minutes_since_the_last_write() -> None:
    state = ProducerState(77, 5, 12, NOW - 3 * 60_000 - 59_999, 4, 1200)
    assert hanging_row(TP1, state, NOW) == ["orders", 1, 77, 5, 4, 1200, state.last_timestamp_ms, 3]
