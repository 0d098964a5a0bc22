"""A scripted exchange of Kafka 4's newer request versions (issue 27 items 2, 4, 5), sent raw to one
system, for the differential test to run on Pier and on Apache Kafka 4.1.1 and compare.

Owns: `kafka4_observations(bootstrap, topic)`, a list of (step, observation) where observations
hold only what both systems must agree on (error code names, epoch deltas, states, the finalized
feature levels; never producer ids or topic ids, which each system assigns): ApiVersions v4's
finalized `transaction.version` and the version ranges of the APIs involved, a transaction version 2 producer (Produce v12 with no AddPartitionsToTxn, Produce v11 refused on
an unadded partition, EndTxn v5 abort / commit / retry / fenced / abort of nothing, a zombie's
batch), ListTransactions v2 with an id pattern and a bad one, Metadata v12 and DeleteTopics v6
by an id nobody has. Blocking; one call per system.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Sequence
from typing import Any

from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.api_versions.v4.response import ApiVersionsResponse
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.delete_topics.v6.response import DeleteTopicsResponse
from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.end_txn.v5.response import EndTxnResponse
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.init_producer_id.v5.response import InitProducerIdResponse
from kio.schema.list_transactions.v2.request import ListTransactionsRequest
from kio.schema.list_transactions.v2.response import ListTransactionsResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import ProducerId, TransactionalId
from kio.static.primitive import Records, i8, i16, i32Timedelta

from brokers.records.builder import simple_batch
from brokers.wire.entities import make, request_module, response_module
from brokers.wire.errors import ErrorCode
from tests.e2e.raw_wire import RawConnection
from tests.polling import wait_until

TIMEOUT_S = 60.0
# DeleteTopics, InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
# DescribeTransactions, ListTransactions (Produce, Fetch and Metadata: tests.compat.topic_id_script;
# WriteTxnMarkers is not compared: Pier serves v2 as Kafka 4.2 does, Kafka 4.1.1 stops at v1,
# docs/compatibility.md "Transactions v2 (KIP-890 part 2) and topic ids (KIP-516)")
COMPARED_APIS = (20, 22, 24, 25, 26, 28, 65, 66)
PRODUCE = 0
RETRIABLE = frozenset(
    {
        ErrorCode.concurrent_transactions,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.not_enough_replicas,
        # Kafka's broker may list a new partition's leader a moment before it can append to it
        ErrorCode.not_leader_or_follower,
    }
)
Observation = tuple[str, Any]
Producer = tuple[int, int]


def _ms(value: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=value))


def _until_final(call: Any, code_of: Any) -> Any:
    """`call()` until its answer's code is not one a client retries."""
    found: Any = wait_until(
        lambda: (answer := call()) is not None and code_of(answer) not in RETRIABLE and (answer,),
        what="an answer a client would not retry",
        timeout=TIMEOUT_S,
    )
    return found[0]


class _Script:
    def __init__(self, wire: RawConnection, topic: str) -> None:
        self.wire, self.topic = wire, topic
        self.tid = f"{topic}-tx"
        self.seen: list[Observation] = []

    def note(self, step: str, value: Any) -> None:
        self.seen.append((step, value))

    def features(self) -> None:
        request = ApiVersionsRequest(client_software_name="pier-test", client_software_version="1")
        response = self.wire.call(request, ApiVersionsResponse)
        levels = {f.name: int(f.max_version_level) for f in response.finalized_features}
        self.note("finalized transaction.version", levels.get("transaction.version"))
        ranges = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
        }
        self.note("ApiVersions ranges", {key: ranges.get(key) for key in COMPARED_APIS})

    def init(self) -> Any:
        find = FindCoordinatorRequest(key_type=i8(1), coordinator_keys=(self.tid,))
        _until_final(
            lambda: self.wire.call(find, FindCoordinatorResponse).coordinators[0],
            lambda c: ErrorCode(c.error_code),
        )
        request = InitProducerIdRequest(
            transactional_id=TransactionalId(self.tid),
            transaction_timeout=_ms(60_000),
        )
        return _until_final(
            lambda: self.wire.call(request, InitProducerIdResponse),
            lambda r: ErrorCode(r.error_code),
        )

    def produce(self, producer: Producer, partition: int, sequence: int, v11: bool = False) -> str:
        batch = simple_batch(
            [b"x"],
            producer_id=producer[0],
            producer_epoch=producer[1],
            base_sequence=sequence,
            is_transactional=True,
        )
        version = 11 if v11 else 12
        module = request_module(PRODUCE, version)
        data = make(module, "PartitionProduceData", index=partition, records=Records(batch))
        request = make(
            module,
            "ProduceRequest",
            transactional_id=self.tid,
            acks=-1,
            timeout=_ms(10_000),
            topic_data=(make(module, "TopicProduceData", name=self.topic, partition_data=(data,)),),
        )

        def call() -> Any:
            answer = self.wire.call(request, response_module(PRODUCE, version).ProduceResponse)
            return answer.responses[0].partition_responses[0]

        return ErrorCode(_until_final(call, lambda p: ErrorCode(p.error_code)).error_code).name

    def end(self, producer: Producer, commit: bool) -> tuple[str, int, int]:
        request = EndTxnRequest(
            transactional_id=TransactionalId(self.tid),
            producer_id=ProducerId(producer[0]),
            producer_epoch=i16(producer[1]),
            committed=commit,
        )
        answer = _until_final(
            lambda: self.wire.call(request, EndTxnResponse), lambda r: ErrorCode(r.error_code)
        )
        return (
            ErrorCode(answer.error_code).name,
            int(answer.producer_id),
            int(answer.producer_epoch),
        )

    def list_transactions(self, pattern: str) -> tuple[str, list[tuple[str, str]]]:
        request = ListTransactionsRequest(
            state_filters=(), producer_id_filters=(), transactional_id_pattern=pattern
        )
        response = self.wire.call(request, ListTransactionsResponse)
        listed = sorted(
            (str(t.transactional_id).removeprefix(self.topic), t.transaction_state)
            for t in response.transaction_states
        )
        return ErrorCode(response.error_code).name, listed

    def unknown_ids(self) -> None:
        nobody = uuid.uuid4()
        metadata = MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=nobody, name=None),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        (topic,) = self.wire.call(metadata, MetadataResponse).topics
        self.note("Metadata v12 by an unknown id", ErrorCode(topic.error_code).name)
        delete = DeleteTopicsRequest(
            topics=(DeleteTopicState(topic_id=nobody),), timeout=_ms(10_000)
        )
        (result,) = self.wire.call(delete, DeleteTopicsResponse).responses
        self.note("DeleteTopics v6 by an unknown id", ErrorCode(result.error_code).name)


def kafka4_observations(bootstrap: str, topic: str) -> Sequence[Observation]:
    """The script's observations on one system (the topic exists with 2 partitions)."""
    host, port = bootstrap.rsplit(":", 1)
    with RawConnection(host, int(port), timeout=30.0) as wire:
        s = _Script(wire, topic)
        s.features()
        first = s.init()
        pid, epoch = int(first.producer_id), int(first.producer_epoch)
        s.note("InitProducerId v5", (ErrorCode(first.error_code).name, epoch))

        def end(step: str, producer: Producer, commit: bool) -> None:
            code, answered_pid, answered_epoch = s.end(producer, commit)
            s.note(step, (code, answered_pid == pid, answered_epoch - epoch))

        s.note("Produce v11, partition never added", s.produce((pid, epoch), 1, 0, v11=True))
        s.note("Produce v12 adds the partition", s.produce((pid, epoch), 0, 0))
        end("EndTxn v5 abort", (pid, epoch), False)
        s.note("Produce v12 at the bumped epoch", s.produce((pid, epoch + 1), 0, 0))
        end("EndTxn v5 commit", (pid, epoch + 1), True)
        end("EndTxn v5 commit retried", (pid, epoch + 1), True)
        end("EndTxn v5 abort of the previous epoch", (pid, epoch + 1), False)
        end("EndTxn v5 of an older epoch", (pid, epoch), True)
        s.note("Produce v12 of a zombie", s.produce((pid, epoch + 1), 0, 1))
        end("EndTxn v5 abort with nothing added", (pid, epoch + 2), False)
        end("EndTxn v5 commit with nothing added", (pid, epoch + 3), True)
        s.note("ListTransactions v2 by pattern", s.list_transactions(f"{topic}-t.*"))
        s.note("ListTransactions v2 no match", s.list_transactions("no-such-.*"))
        s.note("ListTransactions v2 bad pattern", s.list_transactions("(["))
        s.unknown_ids()
        return s.seen
