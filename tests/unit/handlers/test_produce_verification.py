"""KIP-890 part 1 on the leader, the pure parts: which batches need the coordinator's
verification (only a transaction's first data batch on the partition: no ongoing transaction of
the producer at that epoch), how the coordinator's answer becomes the produce answer per version
(Kafka's AddPartitionsToTxnManager / ReplicaManager mapping), the first-header peek, and the
broker setting; and the handler with a scripted coordinator answer: one verification per
request, none once the transaction is open, and a marker racing the verification refuses the
append (Kafka's verification guard)."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from brokers.app.runtime import Broker
from brokers.coordinator.transactions.config import TransactionConfig
from brokers.coordinator.transactions.errors import TransactionConfigError
from brokers.handlers import produce
from brokers.handlers.produce import (
    FIRST_ABORTABLE_VERSION,
    first_header,
    needs_verification,
    produce_error,
)
from brokers.log.producer_state.entry import ProducerStateEntry
from brokers.records.batch import BatchHeader, parse_header
from brokers.records.builder import build_batch
from brokers.records.control import EndTxnMarker
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.admin_harness import call, entity, standalone_broker

pytestmark = pytest.mark.unit
PID, EPOCH = 42, 3


def header(*, transactional: bool = True, control: bool = False, pid: int = PID) -> BatchHeader:
    batch = build_batch(
        [(None, b"v")],
        producer_id=pid,
        producer_epoch=EPOCH,
        base_sequence=0,
        is_transactional=transactional,
        is_control=control,
    )
    return parse_header(batch)


def entry(*, epoch: int = EPOCH, txn_first_offset: int | None = None) -> ProducerStateEntry:
    return ProducerStateEntry(PID, epoch, current_txn_first_offset=txn_first_offset)


def test_the_first_transactional_batch_of_a_producer_is_verified() -> None:
    assert needs_verification(header(), None)


def test_a_producer_between_transactions_is_verified() -> None:
    assert needs_verification(header(), entry(txn_first_offset=None))


def test_an_ongoing_transaction_at_the_same_epoch_is_not_verified_again() -> None:
    assert not needs_verification(header(), entry(txn_first_offset=10))


def test_an_ongoing_transaction_of_another_epoch_does_not_count() -> None:
    assert needs_verification(header(), entry(epoch=EPOCH - 1, txn_first_offset=10))


def test_plain_control_and_anonymous_batches_are_never_verified() -> None:
    assert not needs_verification(header(transactional=False), None)
    assert not needs_verification(header(control=True), None)
    assert not needs_verification(header(pid=-1), None)


def test_first_header_peeks_only_a_readable_v2_header() -> None:
    batch = build_batch([(None, b"v")], producer_id=PID, producer_epoch=EPOCH, base_sequence=0)
    found = first_header(batch + batch)
    assert found is not None and found.producer_id == PID
    assert first_header(None) is None
    assert first_header(batch[:20]) is None
    legacy = bytearray(batch)
    legacy[16] = 1  # magic v1: the append answers for it
    assert first_header(bytes(legacy)) is None


def test_a_partition_not_in_the_transaction_is_invalid_txn_state_before_v11() -> None:
    code, message = produce_error(ErrorCode.transaction_abortable, FIRST_ABORTABLE_VERSION - 1)
    assert code == ErrorCode.invalid_txn_state
    assert message == "Partition was not added to the transaction"


def test_a_partition_not_in_the_transaction_is_transaction_abortable_from_v11() -> None:
    code, _ = produce_error(ErrorCode.transaction_abortable, FIRST_ABORTABLE_VERSION)
    assert code == ErrorCode.transaction_abortable


@pytest.mark.parametrize(
    "underlying",
    [
        ErrorCode.network_exception,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.concurrent_transactions,
    ],
)
def test_a_coordinator_that_cannot_answer_is_retriable_not_enough_replicas(
    underlying: ErrorCode,
) -> None:
    code, message = produce_error(underlying, 9)
    assert code == ErrorCode.not_enough_replicas
    assert message is not None and underlying.name.upper() in message


def test_fencing_and_success_keep_their_meaning() -> None:
    assert produce_error(ErrorCode.producer_fenced, 9) == (ErrorCode.invalid_producer_epoch, None)
    assert produce_error(ErrorCode.invalid_producer_id_mapping, 9) == (
        ErrorCode.invalid_producer_id_mapping,
        None,
    )
    assert produce_error(ErrorCode.none, 11) == (ErrorCode.none, None)


def test_the_setting_defaults_to_on_and_reads_kafkas_name() -> None:
    assert TransactionConfig.from_properties({}).partition_verification_enable
    off = {"transaction.partition.verification.enable": "false"}
    assert not TransactionConfig.from_properties(off).partition_verification_enable
    with pytest.raises(TransactionConfigError):
        TransactionConfig.from_properties({"transaction.partition.verification.enable": "maybe"})


# ---- the handler on a real standalone broker, with a scripted coordinator answer -----------


class Coordinator:
    """A `TxnVerifier` answering from a set of added partitions; records each call and can run
    something while it is being asked (the coordinator's markers racing the verification)."""

    def __init__(self, added: set[tuple[str, int]]) -> None:
        self.added = added
        self.busy = False  # still writing the previous transaction's markers
        self.calls: list[list[tuple[str, int]]] = []
        self.meanwhile: Callable[[], object] | None = None

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[tuple[str, int]],
        *,
        add: bool = False,
    ) -> dict[tuple[str, int], ErrorCode]:
        assert (transactional_id, producer_id, producer_epoch) == ("tx", PID, EPOCH)
        self.calls.append(list(partitions))
        if self.meanwhile is not None:
            self.meanwhile()
        if self.busy:
            return dict.fromkeys(partitions, ErrorCode.concurrent_transactions)
        return {
            tp: ErrorCode.none if tp in self.added else ErrorCode.transaction_abortable
            for tp in partitions
        }


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with standalone_broker(tmp_path) as b:
        b.topics.create_topic("t", 2, 1, {})
        yield b


def send(broker: Broker, coordinator: Coordinator, batches: dict[int, int]) -> dict[int, int]:
    """Produce v9 of one transactional batch per partition (partition → base sequence)."""
    return send_batches(
        broker, coordinator, "tx", {i: batch(seq=seq) for i, seq in batches.items()}
    )


def test_one_verification_per_request_and_none_once_the_transaction_is_open(
    broker: Broker,
) -> None:
    coordinator = Coordinator({("t", 0)})
    assert send(broker, coordinator, {0: 0, 1: 0}) == {
        0: ErrorCode.none,
        1: ErrorCode.invalid_txn_state,
    }
    assert coordinator.calls == [[("t", 0), ("t", 1)]]
    assert broker.replicas.get("t", 1).log.log_end_offset == 0
    assert send(broker, coordinator, {0: 1}) == {0: ErrorCode.none}
    assert coordinator.calls == [[("t", 0), ("t", 1)]], "an open transaction was verified again"


def test_a_marker_written_during_verification_refuses_the_append(broker: Broker) -> None:
    partition = broker.replicas.get("t", 0)
    coordinator = Coordinator({("t", 0)})
    coordinator.meanwhile = lambda: partition.append_marker(PID, EPOCH, EndTxnMarker(False, 0))
    assert send(broker, coordinator, {0: 0}) == {0: ErrorCode.not_enough_replicas}
    assert partition.log.log_end_offset == 1, "only the marker is in the log"
    assert partition.last_stable_offset == partition.high_watermark


def test_a_later_batch_cannot_overtake_the_retried_first_one(broker: Broker) -> None:
    """CI's TV2 failure: the transaction's first batch on a partition where the producer is
    unknown is refused retriably (the coordinator still completing the previous transaction);
    the next request's batch, verified a moment later, must not be written at its sequence
    (any sequence fits an unknown producer), or the retried first batch is out of order for
    ever. It is refused out of order until the first one is written."""
    coordinator = Coordinator({("t", 1)})
    coordinator.busy = True
    assert send(broker, coordinator, {1: 0}) == {1: ErrorCode.not_enough_replicas}
    coordinator.busy = False
    assert send(broker, coordinator, {1: 1}) == {1: ErrorCode.out_of_order_sequence_number}
    assert broker.replicas.get("t", 1).log.log_end_offset == 0
    assert send(broker, coordinator, {1: 0}) == {1: ErrorCode.none}
    assert send(broker, coordinator, {1: 1}) == {1: ErrorCode.none}
    assert broker.replicas.get("t", 1).log.log_end_offset == 2


def test_a_final_refusal_leaves_no_bound(broker: Broker) -> None:
    coordinator = Coordinator(set())
    assert send(broker, coordinator, {1: 0}) == {1: ErrorCode.invalid_txn_state}
    partition = broker.replicas.get("t", 1)
    assert partition.log.producer_state.verification(PID) is None


# ---- the request-wide rules (brokers/handlers/produce_txn_rules.py) ------------------------


def send_batches(
    broker: Broker,
    coordinator: Coordinator,
    transactional_id: str | None,
    batches: dict[int, bytes],
) -> dict[int, int]:
    """Produce v9 of the given record set per partition."""
    data = tuple(
        entity(0, 9, "PartitionProduceData", index=index, records=records)
        for index, records in batches.items()
    )
    topic = entity(0, 9, "TopicProduceData", name="t", partition_data=data)
    request = entity(
        0,
        9,
        "ProduceRequest",
        transactional_id=transactional_id,
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(topic,),
    )
    route = produce.route(
        broker.replicas, broker.purgatory, broker.clock, broker.topic_metrics, coordinator
    )
    response = call(route, 9, request)
    return {p.index: p.error_code for p in response.responses[0].partition_responses}


def batch(pid: int = PID, *, seq: int = 0, transactional: bool = True) -> bytes:
    return build_batch(
        [(None, b"v")],
        producer_id=pid,
        producer_epoch=EPOCH,
        base_sequence=seq,
        is_transactional=transactional,
    )


def test_a_transactional_batch_without_a_transactional_id_refuses_the_request(
    broker: Broker,
) -> None:
    """Without the rule the batch was written unverified: a transaction no coordinator knows,
    which no marker closes, held the partition's last stable offset below it for good."""
    coordinator = Coordinator({("t", 0), ("t", 1)})
    sent = {0: batch(), 1: batch(transactional=False)}
    refused = ErrorCode.transactional_id_authorization_failed
    assert send_batches(broker, coordinator, None, sent) == {0: refused, 1: refused}
    for index in (0, 1):
        partition = broker.replicas.get("t", index)
        assert partition.log.log_end_offset == 0
        assert partition.last_stable_offset == partition.high_watermark == 0
    assert coordinator.calls == []
    assert send_batches(broker, coordinator, None, {1: batch(transactional=False)}) == {
        1: ErrorCode.none
    }, "idempotent batches need no transactional id"


def test_transactional_batches_of_two_producers_refuse_the_request(broker: Broker) -> None:
    coordinator = Coordinator({("t", 0), ("t", 1)})
    sent = {0: batch(), 1: batch(PID + 1)}
    refused = ErrorCode.invalid_producer_id_mapping
    assert send_batches(broker, coordinator, "tx", sent) == {0: refused, 1: refused}
    assert coordinator.calls == [], "no coordinator call per producer"
    assert broker.replicas.get("t", 0).log.log_end_offset == 0
    assert send_batches(broker, coordinator, "tx", {0: batch(), 1: batch()}) == {
        0: ErrorCode.none,
        1: ErrorCode.none,
    }
