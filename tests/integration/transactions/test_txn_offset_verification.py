"""TxnOffsetCommit v0–4 is verified with the transaction coordinator (KIP-890 part 1), as Kafka's
GroupCoordinator does for every version: offsets of a producer whose transaction does not hold
the group's `__consumer_offsets` partition (no AddOffsetsToTxn, or a producer id no coordinator
knows) are refused and never written. Before, they were written as a transaction that no marker
would ever close: the group answered UNSTABLE_OFFSET_COMMIT to a require_stable OffsetFetch for
good, and the offsets partition's last stable offset stayed behind them, so its compaction
stopped for every group there (another tenant's too). Real in-process broker, raw requests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from brokers.wire.entities import make, request_module, response_module
from brokers.wire.errors import ErrorCode
from tests.e2e.raw_wire import RawConnection
from tests.e2e.transactions.txn_wire import end_txn, init_producer_id
from tests.integration.inproc import broker_thread
from tests.polling import wait_until

pytestmark = pytest.mark.integration
TOPIC, GROUP = "in", "eos-app"
TIMEOUT_S = 60.0
ADD_OFFSETS, TXN_COMMIT, FETCH, FIND = 25, 28, 9, 10
BASE = {"transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1"}


@pytest.fixture
def wire(tmp_path: Path) -> Iterator[RawConnection]:
    with broker_thread(tmp_path, BASE) as running:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{running.port}"})
        [created] = admin.create_topics([NewTopic(TOPIC, 1, 1)]).values()
        created.result(TIMEOUT_S)
        with RawConnection("127.0.0.1", running.port, timeout=TIMEOUT_S) as connection:
            find = request_module(FIND, 3)
            request = make(find, "FindCoordinatorRequest", key=GROUP, key_type=0)
            wait_until(
                lambda: (
                    connection.call(
                        request, response_module(FIND, 3).FindCoordinatorResponse
                    ).error_code
                    == 0
                ),
                what="the group coordinator loaded",
                timeout=TIMEOUT_S,
            )
            yield connection


def txn_commit(wire: RawConnection, tid: str, producer: tuple[int, int], offset: int) -> int:
    module = request_module(TXN_COMMIT, 3)
    partition = make(module, "TxnOffsetCommitRequestPartition", partition_index=0,
                     committed_offset=offset, committed_leader_epoch=-1, committed_metadata="")  # fmt: skip
    request = make(
        module, "TxnOffsetCommitRequest", transactional_id=tid, group_id=GROUP,
        producer_id=producer[0], producer_epoch=producer[1], generation_id=-1, member_id="",
        group_instance_id=None,
        topics=(make(module, "TxnOffsetCommitRequestTopic", name=TOPIC, partitions=(partition,)),),
    )  # fmt: skip
    answer = wire.call(request, response_module(TXN_COMMIT, 3).TxnOffsetCommitResponse)
    return int(answer.topics[0].partitions[0].error_code)


def add_offsets(wire: RawConnection, tid: str, producer: tuple[int, int]) -> int:
    module = request_module(ADD_OFFSETS, 3)
    request = make(module, "AddOffsetsToTxnRequest", transactional_id=tid,
                   producer_id=producer[0], producer_epoch=producer[1], group_id=GROUP)  # fmt: skip
    return int(
        wire.call(request, response_module(ADD_OFFSETS, 3).AddOffsetsToTxnResponse).error_code
    )


def stable_offset(wire: RawConnection, group: str) -> tuple[int, int]:
    """(committed offset, error) of `in`-0 for `group`, asking for stable offsets only."""
    module = request_module(FETCH, 7)
    topic = make(module, "OffsetFetchRequestTopic", name=TOPIC, partition_indexes=(0,))
    request = make(module, "OffsetFetchRequest", group_id=group, topics=(topic,),
                   require_stable=True)  # fmt: skip
    answer: Any = wire.call(request, response_module(FETCH, 7).OffsetFetchResponse)
    (partition,) = answer.topics[0].partitions
    return int(partition.committed_offset), int(partition.error_code)


def test_offsets_of_a_transaction_without_the_offsets_partition_are_refused(
    wire: RawConnection,
) -> None:
    tid = f"eos-{uuid.uuid4().hex[:6]}"
    producer = init_producer_id(wire, tid, 60_000)
    assert txn_commit(wire, tid, producer, 10) == ErrorCode.invalid_txn_state
    stranger = (producer[0] + 1000, 0)  # a producer id no coordinator gave out
    assert txn_commit(wire, tid, stranger, 11) != ErrorCode.none
    assert stable_offset(wire, GROUP) == (-1, ErrorCode.none), "nothing pending was written"

    # The real sequence: AddOffsetsToTxn, then the commit, then EndTxn's markers.
    assert add_offsets(wire, tid, producer) == ErrorCode.none
    assert txn_commit(wire, tid, producer, 12) == ErrorCode.none
    assert stable_offset(wire, GROUP)[1] == ErrorCode.unstable_offset_commit  # pending
    assert end_txn(wire, tid, producer, commit=True) == ErrorCode.none
    wait_until(
        lambda: stable_offset(wire, GROUP) == (12, ErrorCode.none),
        what="the committed offset stable",
        timeout=TIMEOUT_S,
    )
