"""kafka-python and aiokafka transactional producers commit and abort; every client's read_committed
consumer skips the aborted data and sees the committed data (issue 14, acceptance).

One module-scoped log (3 partitions) is written by two transactional producers whose
transactions interleave — kafka-python's stays open while aiokafka's is aborted, and the other
way round — with non-transactional records (confluent-kafka, idempotent) landing in the middle
of an open transaction. Each transaction writes to all three partitions. Then a read_committed
consumer of each of confluent-kafka, kafka-python, aiokafka and kcat (`-X
isolation.level=read_committed`) reads every partition from offset 0 to its end and must get
exactly the committed and non-transactional records, per partition in log order; the aborted
records are shown to be in the log (read_uncommitted), so skipping them is the consumer's and the
broker's doing (Fetch's aborted transactions list), not their absence.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from confluent_kafka import Producer

from tests.e2e.kafka_admin import create_topic
from tests.e2e.transactions.conftest import TxnBroker
from tests.e2e.transactions.readers import READ_UNCOMMITTED, read_topic
from tests.e2e.transactions.txn_clients import (
    CONSUMERS,
    AioTransactions,
    AsyncRunner,
    Seen,
    kafka_python_producer,
    read_committed,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PARTITIONS = 3
PER_TRANSACTION = 30  # records, round-robin over the partitions
TOPIC = "txn-clients"
COMMITTED = ("kp/commit-1", "aio/commit-2", "kp/commit-3", "plain/1", "plain/2")
ABORTED = ("aio/abort-1", "kp/abort-2")


@dataclass(frozen=True)
class MixedLog:
    topic: str
    committed: list[Seen]  # what a read_committed consumer must get, per partition in log order
    aborted: int  # aborted records in the log


def values(tag: str, count: int = PER_TRANSACTION) -> list[tuple[int, bytes]]:
    return [(i % PARTITIONS, f"{tag}/{i}".encode()) for i in range(count)]


def tag_of(value: bytes) -> str:
    return value.decode().rsplit("/", 1)[0]


def write_mixed_log(bootstrap: str, topic: str) -> None:
    runner = AsyncRunner()
    kp = kafka_python_producer(bootstrap, "txn-clients-kafka-python")
    aio = AioTransactions(runner, bootstrap, "txn-clients-aiokafka")
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    try:

        def kp_send(tag: str) -> None:
            for partition, value in values(tag):
                kp.send(topic, value, partition=partition)
            kp.flush()

        def aio_send(tag: str) -> None:
            for partition, value in values(tag):
                aio.send(topic, partition, value)

        def plain_send(tag: str) -> None:
            for partition, value in values(tag, PARTITIONS):
                plain.produce(topic, value, partition=partition)
            assert plain.flush(30) == 0

        kp.begin_transaction()
        kp_send("kp/commit-1")
        aio.begin()
        aio_send("aio/abort-1")
        plain_send("plain/1")  # behind two open transactions
        kp.commit_transaction()
        aio.abort()
        aio.begin()
        aio_send("aio/commit-2")
        kp.begin_transaction()
        kp_send("kp/abort-2")
        aio.commit()
        kp.abort_transaction()
        kp.begin_transaction()
        kp_send("kp/commit-3")
        kp.commit_transaction()
        plain_send("plain/2")
    finally:
        kp.close()
        aio.close()
        runner.close()


@pytest.fixture(scope="module")
def mixed_log(txn_broker: TxnBroker) -> MixedLog:
    create_topic(txn_broker.bootstrap, TOPIC, PARTITIONS)
    write_mixed_log(txn_broker.bootstrap, TOPIC)
    everything = read_topic(txn_broker.bootstrap, TOPIC, PARTITIONS, READ_UNCOMMITTED)
    tags = {tag_of(r.value) for r in everything}
    assert tags == set(COMMITTED) | set(ABORTED), f"the log holds {sorted(tags)}"
    committed = [
        (r.partition, r.offset, r.value) for r in everything if tag_of(r.value) in COMMITTED
    ]
    aborted = sum(1 for r in everything if tag_of(r.value) in ABORTED)
    assert aborted == PER_TRANSACTION * len(ABORTED)
    return MixedLog(TOPIC, committed, aborted)


@pytest.mark.parametrize("client", CONSUMERS)
def test_read_committed_consumers_skip_aborted_data(
    txn_broker: TxnBroker, mixed_log: MixedLog, client: str
) -> None:
    seen = read_committed(client, txn_broker.bootstrap, mixed_log.topic, PARTITIONS)
    leaked = sorted({tag_of(value) for _, _, value in seen} & set(ABORTED))
    assert not leaked, f"{client} read_committed got records of aborted {leaked}"
    for partition in range(PARTITIONS):
        got = [(o, v) for p, o, v in seen if p == partition]
        expected = [(o, v) for p, o, v in mixed_log.committed if p == partition]
        assert got == expected, (
            f"{client}, partition {partition}: {got[:3]}... != {expected[:3]}..."
        )
