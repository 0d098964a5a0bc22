"""A WriteTxnMarkers request on a `__consumer_offsets` partition reaches the group coordinator
through the broker's route wiring: a transactional offset commit (TxnOffsetCommit) stays pending
until the marker, then a COMMIT makes it visible to OffsetFetch and an ABORT drops it. All over
the wire against a running broker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from brokers.app.runtime import Broker
from brokers.wire.entities import make, request_module
from brokers.wire.errors import ErrorCode
from tests.integration.inproc import broker_thread, raw_call
from tests.polling import wait_until

pytestmark = pytest.mark.integration
OFFSETS = "__consumer_offsets"
TOPIC = "consumed"


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, str]]:
    # Hand-written commits and markers, no transaction coordinator: not verified.
    unverified = {"transaction.partition.verification.enable": "false"}
    with broker_thread(tmp_path_factory.mktemp("offsets"), unverified) as broker:
        bootstrap = f"127.0.0.1:{broker.port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            future.result(10)
        yield broker, bootstrap


def find_coordinator(bootstrap: str, group: str) -> ErrorCode:
    module = request_module(10, 3)
    response = raw_call(bootstrap, make(module, "FindCoordinatorRequest", key=group, key_type=0))
    return ErrorCode(response.error_code)


def txn_offset_commit(bootstrap: str, group: str, producer_id: int, offset: int) -> ErrorCode:
    module = request_module(28, 3)
    partition = make(
        module, "TxnOffsetCommitRequestPartition", partition_index=0, committed_offset=offset,
        committed_leader_epoch=-1, committed_metadata="",
    )  # fmt: skip
    request = make(
        module, "TxnOffsetCommitRequest", transactional_id=f"tx-{producer_id}", group_id=group,
        producer_id=producer_id, producer_epoch=0, generation_id=-1, member_id="",
        group_instance_id=None,
        topics=(make(module, "TxnOffsetCommitRequestTopic", name=TOPIC, partitions=(partition,)),),
    )  # fmt: skip
    (topic,) = raw_call(bootstrap, request).topics
    (answer,) = topic.partitions
    return ErrorCode(answer.error_code)


def end_txn(bootstrap: str, offsets_partition: int, producer_id: int, commit: bool) -> Any:
    module = request_module(27, 1)
    marker = make(
        module, "WritableTxnMarker", producer_id=producer_id, producer_epoch=0,
        transaction_result=commit, coordinator_epoch=0,
        topics=(
            make(module, "WritableTxnMarkerTopic", name=OFFSETS,
                 partition_indexes=(offsets_partition,)),
        ),
    )  # fmt: skip
    (result,) = raw_call(
        bootstrap, make(module, "WriteTxnMarkersRequest", markers=(marker,))
    ).markers
    (topic,) = result.topics
    (answer,) = topic.partitions
    return ErrorCode(answer.error_code)


def committed(bootstrap: str, group: str) -> int:
    module = request_module(9, 7)
    topic = make(module, "OffsetFetchRequestTopic", name=TOPIC, partition_indexes=(0,))
    response = raw_call(
        bootstrap,
        make(module, "OffsetFetchRequest", group_id=group, topics=(topic,), require_stable=False),
    )
    assert response.error_code == ErrorCode.none
    (answer,) = response.topics[0].partitions
    assert answer.error_code == ErrorCode.none
    return int(answer.committed_offset)


@pytest.mark.parametrize(("commit", "expected"), [(True, 42), (False, -1)])
def test_a_marker_on_the_offsets_partition_completes_pending_offsets(
    running: tuple[Broker, str], commit: bool, expected: int
) -> None:
    broker, bootstrap = running
    group = f"group-{commit}"
    producer_id = 500 + int(commit)
    wait_until(
        lambda: find_coordinator(bootstrap, group) == ErrorCode.none,
        what="the group coordinator loaded",
    )
    assert txn_offset_commit(bootstrap, group, producer_id, 42) == ErrorCode.none
    assert committed(bootstrap, group) == -1  # pending until the marker
    partition = broker.groups.coordinator.partition_for(group)  # pure: abs(hashCode) % 50
    assert end_txn(bootstrap, partition, producer_id, commit) == ErrorCode.none
    assert committed(bootstrap, group) == expected
