"""KIP-890 part 2 (`transaction.version` 2) on a real broker (issue 27 item 2), with the requests a
Kafka 4 producer sends: ApiVersions finalizes `transaction.version` 2 (1 with
`pier.transaction.version=1`), Produce v12 adds its partitions to the transaction without any
AddPartitionsToTxn (the leader asks the coordinator), EndTxn v5 answers the bumped epoch, the
markers carry it so the previous epoch is fenced on the partitions too (a zombie's batch is
INVALID_PRODUCER_EPOCH), a read_committed consumer sees only the committed transaction, and
TxnOffsetCommit v5 adds the group's offsets partition itself (no AddOffsetsToTxn). Produce v11
keeps KIP-890 part 1: an unadded partition is refused. Kafka's own Java producer (kafka-tools
4.1.1 ProducerPerformance, transactional) then runs against the broker: with TV2 its epoch grows
with every transaction, with TV1 it stays."""

from __future__ import annotations

import datetime
import os
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.api_versions.v4.response import ApiVersionsResponse
from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.end_txn.v5.response import EndTxnResponse
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic
from kio.schema.offset_fetch.v7.response import OffsetFetchResponse
from kio.schema.produce.v11.request import ProduceRequest as ProduceV11
from kio.schema.produce.v12.request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kio.schema.produce.v12.response import ProduceResponse
from kio.schema.txn_offset_commit.v5.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kio.schema.txn_offset_commit.v5.response import TxnOffsetCommitResponse
from kio.schema.types import GroupId, ProducerId, TopicName, TransactionalId
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64

from brokers.records.builder import simple_batch
from brokers.wire.errors import ErrorCode
from tests.e2e.raw_wire import RawConnection
from tests.e2e.transactions.readers import READ_COMMITTED, read_topic
from tests.e2e.transactions.txn_wire import describe_transactions, init_producer_id
from tests.integration.inproc import broker_thread
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
TOPIC = "tv2-out"
GROUP = "tv2-group"
TIMEOUT_S = 60.0
REFERENCE = Path(__file__).resolve().parents[3] / "infra" / "reference" / "kafka"
PERF = "org.apache.kafka.tools.ProducerPerformance"
BASE = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"}
Producer = tuple[int, int]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Any]:
    with broker_thread(tmp_path, BASE) as running:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{running.port}"})
        [created] = admin.create_topics([NewTopic(TOPIC, 2, 1)]).values()
        created.result(TIMEOUT_S)
        yield running


def finalized(wire: RawConnection) -> dict[str, int]:
    request = ApiVersionsRequest(client_software_name="pier-test", client_software_version="1")
    response = wire.call(request, ApiVersionsResponse)
    assert response.finalized_features_epoch >= 0
    return {f.name: int(f.max_version_level) for f in response.finalized_features}


def produce(
    wire: RawConnection,
    tid: str,
    producer: Producer,
    partition: int,
    sequence: int,
    values: Sequence[bytes],
    *,
    request_cls: Any = ProduceRequest,
) -> int:
    batch = simple_batch(
        list(values),
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=sequence,
        is_transactional=True,
    )
    data = PartitionProduceData(index=i32(partition), records=Records(batch))
    request = request_cls(
        transactional_id=TransactionalId(tid),
        acks=i16(-1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        topic_data=(TopicProduceData(name=TopicName(TOPIC), partition_data=(data,)),),
    )
    response = wire.call(request, ProduceResponse)
    (answer,) = response.responses[0].partition_responses
    return int(answer.error_code)


def produce_retrying(wire: RawConnection, *args: Any) -> int:
    """As a producer does: NOT_ENOUGH_REPLICAS while the previous transaction completes."""
    answered = wait_until(
        lambda: (code := produce(wire, *args)) != ErrorCode.not_enough_replicas and (code,),
        what="a produce not answered NOT_ENOUGH_REPLICAS",
        timeout=TIMEOUT_S,
    )
    assert answered
    return answered[0]


def end_txn(wire: RawConnection, tid: str, producer: Producer, commit: bool) -> tuple[int, ...]:
    request = EndTxnRequest(
        transactional_id=TransactionalId(tid),
        producer_id=ProducerId(producer[0]),
        producer_epoch=i16(producer[1]),
        committed=commit,
    )
    response = wire.call(request, EndTxnResponse)
    return int(response.error_code), int(response.producer_id), int(response.producer_epoch)


def txn_offset_commit(wire: RawConnection, tid: str, producer: Producer, offset: int) -> int:
    request = TxnOffsetCommitRequest(
        transactional_id=TransactionalId(tid),
        group_id=GroupId(GROUP),
        producer_id=ProducerId(producer[0]),
        producer_epoch=i16(producer[1]),
        topics=(
            TxnOffsetCommitRequestTopic(
                name=TopicName(TOPIC),
                partitions=(
                    TxnOffsetCommitRequestPartition(
                        partition_index=i32(0), committed_offset=i64(offset), committed_metadata=""
                    ),
                ),
            ),
        ),
    )
    response = wire.call(request, TxnOffsetCommitResponse)
    (topic,) = response.topics
    (partition,) = topic.partitions
    return int(partition.error_code)


def find_group_coordinator(wire: RawConnection) -> None:
    """As a client does before TxnOffsetCommit (this creates `__consumer_offsets`)."""
    request = FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(GROUP,))
    wait_until(
        lambda: wire.call(request, FindCoordinatorResponse).coordinators[0].error_code == 0,
        what=f"the coordinator of {GROUP}",
        timeout=TIMEOUT_S,
    )


def committed_offset(wire: RawConnection) -> int:
    request = OffsetFetchRequest(
        group_id=GroupId(GROUP),
        topics=(OffsetFetchRequestTopic(name=TopicName(TOPIC), partition_indexes=(i32(0),)),),
        require_stable=True,
    )
    response = wire.call(request, OffsetFetchResponse)
    (topic,) = response.topics
    (partition,) = topic.partitions
    return int(partition.committed_offset)


def tv2_flow(wire: RawConnection) -> None:
    """A TV2 producer's requests, on a connection to a broker or (tests/e2e/gateway) the gateway:
    an aborted transaction, a committed one with an offset, a zombie fenced."""
    tid = f"tv2-{uuid.uuid4().hex[:8]}"
    assert finalized(wire) == {"transaction.version": 2}
    pid, epoch = init_producer_id(wire, tid, 60_000)
    # Produce v11 (KIP-890 part 1) still refuses a partition never added ...
    refused = produce(wire, tid, (pid, epoch), 0, 0, [b"v11"], request_cls=ProduceV11)
    assert refused == ErrorCode.transaction_abortable
    # ... while v12 adds it: no AddPartitionsToTxn at all in this test.
    assert produce(wire, tid, (pid, epoch), 0, 0, [b"aborted-0"]) == ErrorCode.none
    assert produce(wire, tid, (pid, epoch), 1, 0, [b"aborted-1"]) == ErrorCode.none
    state = describe_transactions(wire, [tid])[tid]
    assert state.transaction_state == "Ongoing"
    assert sorted((t.topic, p) for t in state.topics for p in t.partitions) == [
        (TOPIC, 0),
        (TOPIC, 1),
    ]
    assert end_txn(wire, tid, (pid, epoch), commit=False) == (0, pid, epoch + 1)

    # The next transaction runs at the bumped epoch, commits, and bumps again.
    bumped = (pid, epoch + 1)
    assert produce_retrying(wire, tid, bumped, 0, 0, [b"committed-0"]) == ErrorCode.none
    find_group_coordinator(wire)
    assert txn_offset_commit(wire, tid, bumped, 42) == ErrorCode.none
    assert end_txn(wire, tid, bumped, commit=True) == (0, pid, epoch + 2)
    wait_until(
        lambda: committed_offset(wire) == 42,
        what="the transactional offset committed without AddOffsetsToTxn",
        timeout=TIMEOUT_S,
    )

    # A zombie of an older epoch is fenced on the partitions, where the markers carried
    # the bumped epochs, and by the coordinator on a partition it never wrote to.
    zombie = (pid, epoch + 1)
    assert produce(wire, tid, zombie, 0, 1, [b"zombie"]) == ErrorCode.invalid_producer_epoch
    assert end_txn(wire, tid, (pid, epoch), commit=True)[0] == ErrorCode.producer_fenced


def test_a_tv2_producer_adds_no_partitions_and_every_end_bumps_its_epoch(broker: Any) -> None:
    with RawConnection("127.0.0.1", broker.port) as wire:
        tv2_flow(wire)
    bootstrap = f"127.0.0.1:{broker.port}"
    seen = read_topic(bootstrap, TOPIC, 2, READ_COMMITTED)
    assert [r.value for r in seen] == [b"committed-0"]


def java_transactions(bootstrap: str, tid: str, records: int) -> str:
    """Kafka's Java producer 4.1.1, transactional, committing every 50 ms; its output."""
    ran = subprocess.run(
        [str(REFERENCE), "tool", PERF, "--topic", TOPIC, "--num-records", str(records),
         "--record-size", "100", "--throughput", "2000", "--transactional-id", tid,
         "--transaction-duration-ms", "50",
         "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all", "linger.ms=5"],
        capture_output=True, text=True, timeout=180, check=False,
        env={**os.environ, "PIER_KAFKA_JAVA_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    return ran.stdout


@pytest.mark.parametrize("level", [2, 1])
def test_kafkas_java_producer_uses_the_finalized_transaction_version(
    tmp_path: Path, level: int
) -> None:
    properties = {**BASE, "pier.transaction.version": str(level)}
    with broker_thread(tmp_path, properties) as running:
        bootstrap = f"127.0.0.1:{running.port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        [created] = admin.create_topics([NewTopic(TOPIC, 2, 1)]).values()
        created.result(TIMEOUT_S)
        tid = f"java-tv{level}-{uuid.uuid4().hex[:8]}"
        java_transactions(bootstrap, tid, 1000)
        with RawConnection("127.0.0.1", running.port) as wire:
            state = describe_transactions(wire, [tid])[tid]
            assert state.transaction_state == "CompleteCommit"
            if level == 2:  # an epoch per transaction: the producer ran several
                assert state.producer_epoch >= 2, state
            else:  # one epoch across all of them
                assert state.producer_epoch == 0, state
            assert finalized(wire) == {"transaction.version": level}
        seen = read_topic(bootstrap, TOPIC, 2, READ_COMMITTED)
        assert len(seen) == 1000
