"""Tiered storage (KIP-405) on one broker with the local-directory store: closed segments go to
the remote tier and leave local disk past local retention, and every record stays readable from
offset 0 with confluent-kafka and kafka-python; ListOffsets -2/-4/-5 tell the tiers apart;
DeleteRecords below the local log start moves the remote log start; a store that is down keeps
local segments on disk (never loses data) and shows in RemoteCopyErrorsPerSec.

The broker runs its remote task and retention every 200 ms; tests poll with deadlines.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]

from infra.probes import free_port
from infra.stack import BrokerProcess, start_broker
from tests.conftest import remember_log
from tests.e2e.kafka_admin import create_topic
from tests.e2e.tiered import (
    EARLIEST,
    EARLIEST_LOCAL,
    LATEST,
    LATEST_TIERED,
    TIERED_TOPIC,
    VALUE,
    list_offset,
    local_segments,
    metric,
    numbers_confluent,
    numbers_kafka_python,
    produce,
    remote_objects,
    tiered_broker_config,
    topic_series,
)
from tests.polling import wait_until

pytestmark = [pytest.mark.e2e]

RECORDS = 4_000  # ~4 MiB: four 1 MiB segments
TRANSACTIONS, PER_TRANSACTION = 30, 150  # ~4.5 MiB, every third transaction aborted
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def tiered_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Path]]:
    root = tmp_path_factory.mktemp("tiered")
    remote = root / "remote"
    broker = start_broker(
        root / "data", config=tiered_broker_config(remote), metrics_port=free_port("127.0.0.1")
    )
    try:
        yield broker, remote
    finally:
        broker.stop()


@pytest.fixture(autouse=True)
def _attach_log(request: pytest.FixtureRequest) -> None:
    if "tiered_broker" in request.fixturenames:
        broker, _ = request.getfixturevalue("tiered_broker")
        remember_log(request.node, "tiered broker", broker.log_path)


def wait_local_start_past(broker: BrokerProcess, topic: str, offset: int) -> int:
    found = wait_until(
        lambda: (s := list_offset(broker.host, broker.port, topic, EARLIEST_LOCAL)) > offset and s,
        what=f"{topic}: local log start past {offset}", timeout=DEADLINE_S, interval=0.2,
    )  # fmt: skip
    return int(found)


def test_history_past_local_retention_is_read_from_the_remote_tier(
    tiered_broker: tuple[BrokerProcess, Path], topic_name: str
) -> None:
    broker, remote = tiered_broker
    create_topic(broker.bootstrap, topic_name, config=TIERED_TOPIC)
    produce(broker.bootstrap, topic_name, RECORDS)
    local_start = wait_local_start_past(broker, topic_name, 0)
    # Local disk holds only what is not yet past local retention; the rest is remote.
    assert local_segments(broker.data_dir, topic_name)[0] == local_start
    assert remote_objects(remote, topic_name, "log"), "no segment reached the remote tier"
    assert list_offset(broker.host, broker.port, topic_name, EARLIEST) == 0
    assert list_offset(broker.host, broker.port, topic_name, LATEST) == RECORDS
    assert list_offset(broker.host, broker.port, topic_name, LATEST_TIERED) >= local_start - 1
    # Every record, in order, exactly once, from both clients (the remote part first).
    assert numbers_confluent(broker.bootstrap, topic_name) == list(range(RECORDS))
    assert numbers_kafka_python(broker.bootstrap, topic_name, RECORDS) == list(range(RECORDS))


def test_delete_records_below_the_local_log_start_moves_the_remote_start(
    tiered_broker: tuple[BrokerProcess, Path], topic_name: str
) -> None:
    broker, remote = tiered_broker
    create_topic(broker.bootstrap, topic_name, config=TIERED_TOPIC)
    produce(broker.bootstrap, topic_name, RECORDS)
    local_start = wait_local_start_past(broker, topic_name, 1_500)
    cut = 1_200  # inside the remote tier
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.delete_records([TopicPartition(topic_name, 0, cut)])
    low = futures[TopicPartition(topic_name, 0, cut)].result(30)
    assert low.low_watermark == cut
    assert list_offset(broker.host, broker.port, topic_name, EARLIEST) == cut
    assert list_offset(broker.host, broker.port, topic_name, EARLIEST_LOCAL) == local_start
    # From the new log start, every record (the client drops those before its fetch offset).
    assert numbers_confluent(broker.bootstrap, topic_name, cut) == list(range(cut, RECORDS))
    # Remote segments wholly below the cut are deleted from the store.
    wait_until(
        lambda: 0 < _remote_start(remote, topic_name) <= cut,
        what="remote segments below the cut deleted", timeout=DEADLINE_S,
    )  # fmt: skip


def _remote_start(remote: Path, topic: str) -> int:
    bases = [int(p.name[:20]) for p in remote_objects(remote, topic, "log")]
    return min(bases) if bases else -1


def test_a_store_that_is_down_delays_local_deletion_and_shows_in_metrics(
    tiered_broker: tuple[BrokerProcess, Path], topic_name: str
) -> None:
    broker, remote = tiered_broker
    create_topic(broker.bootstrap, topic_name, config=TIERED_TOPIC)
    parked = remote.with_name("remote-parked")
    remote.rename(parked)
    remote.write_text("the store is down")  # the root is a file: every store call fails
    try:
        errors_before = metric(broker, "remote_copy_errors_total", topic_name)
        produce(broker.bootstrap, topic_name, RECORDS)
        wait_until(
            lambda: metric(broker, "remote_copy_errors_total", topic_name) > errors_before,
            what="a failed copy counted", timeout=DEADLINE_S, interval=0.2,
        )  # fmt: skip
        wait_until(
            lambda: metric(broker, "remote_copy_lag_segments", topic_name) >= 2,
            what="copy lag shown", timeout=DEADLINE_S, interval=0.2,
        )  # fmt: skip
        # Retention ran many times meanwhile (every 200 ms): nothing local went.
        assert local_segments(broker.data_dir, topic_name)[0] == 0
        assert list_offset(broker.host, broker.port, topic_name, EARLIEST_LOCAL) == 0
    finally:
        remote.unlink()
        parked.rename(remote)
    wait_local_start_past(broker, topic_name, 0)  # the store is back: copies, then deletion
    assert numbers_confluent(broker.bootstrap, topic_name) == list(range(RECORDS))
    shutil.rmtree(parked, ignore_errors=True)


@pytest.mark.slow
def test_a_leader_killed_during_an_upload_resumes_with_nothing_lost_or_duplicated(
    tmp_path: Path, topic_name: str, request: pytest.FixtureRequest
) -> None:
    """SIGKILL while a segment is being copied (uploads paced at 256 KiB/s, so one 1 MiB segment
    takes seconds), restart: the unfinished copy is deleted, copying resumes after the last
    COPY_SEGMENT_FINISHED, and every record is read once."""
    remote = tmp_path / "remote"
    config = tiered_broker_config(
        remote, **{"remote.log.manager.copy.max.bytes.per.second": str(256 * 1024)}
    )
    broker = start_broker(tmp_path / "data", config=config)
    remember_log(request.node, "broker", broker.log_path)
    try:
        create_topic(broker.bootstrap, topic_name, config=TIERED_TOPIC)
        produce(broker.bootstrap, topic_name, RECORDS)
        partition_dir = remote / f"{topic_name}-0"
        wait_until(
            lambda: partition_dir.is_dir() and any(partition_dir.glob("*.log.*.tmp")),
            what="an upload in progress", timeout=DEADLINE_S, interval=0.05,
        )  # fmt: skip
        broker.kill()
        assert any(partition_dir.glob("*.log.*.tmp")), "the kill did not land mid-upload"
        broker.restart()
        last_closed = local_segments(broker.data_dir, topic_name)[-1] - 1
        wait_until(
            lambda: list_offset(broker.host, broker.port, topic_name, LATEST_TIERED)
            >= last_closed,
            what="every closed segment copied", timeout=120, interval=0.5,
        )  # fmt: skip
        wait_until(
            lambda: not any(partition_dir.glob("*.tmp")),
            what="the unfinished copy deleted", timeout=DEADLINE_S, interval=0.2,
        )  # fmt: skip
        data = sorted(p.name[:20] for p in partition_dir.glob("*.log"))
        assert len(data) == len(set(data)), f"a segment was copied twice: {data}"
        indexes = {p.name.removesuffix(".index") for p in partition_dir.glob("*.index")}
        assert indexes == {p.name.removesuffix(".log") for p in partition_dir.glob("*.log")}
        wait_local_start_past(broker, topic_name, 0)
        assert numbers_confluent(broker.bootstrap, topic_name) == list(range(RECORDS))
    finally:
        broker.stop()


def test_a_timestamp_older_than_the_local_log_is_found_in_the_remote_tier(
    tiered_broker: tuple[BrokerProcess, Path], topic_name: str
) -> None:
    broker, _ = tiered_broker
    create_topic(broker.bootstrap, topic_name, config=TIERED_TOPIC)
    base = int(time.time() * 1000) - 2 * RECORDS * 1000  # record n stamped base + n seconds
    produce(broker.bootstrap, topic_name, RECORDS, stamped_from=base)
    local_start = wait_local_start_past(broker, topic_name, 1_500)
    # The first record at or after the timestamp, searched in the remote tier too (as Kafka).
    assert list_offset(broker.host, broker.port, topic_name, base + 1_234_500) == 1_235
    assert list_offset(broker.host, broker.port, topic_name, 0) == 0
    assert list_offset(broker.host, broker.port, topic_name, base + local_start * 1000) == (
        local_start
    )
    assert list_offset(broker.host, broker.port, topic_name, 2**62) == -1  # none reaches it


def test_read_committed_from_the_remote_tier_skips_aborted_transactions(
    tiered_broker: tuple[BrokerProcess, Path], topic_name: str
) -> None:
    """Aborted transactions in copied segments are dropped by a read_committed consumer: the
    aborted ones come from the remote `.txnindex` objects."""
    broker, _ = tiered_broker
    create_topic(broker.bootstrap, topic_name, config=TIERED_TOPIC)
    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-tx",
        "linger.ms": 5,
    })  # fmt: skip
    producer.init_transactions(30)
    committed: list[int] = []
    number = 0
    for transaction in range(TRANSACTIONS):
        producer.begin_transaction()
        for _ in range(PER_TRANSACTION):
            producer.produce(topic_name, b"%08d" % number + VALUE, partition=0)
            if transaction % 3 != 1:
                committed.append(number)
            number += 1
            producer.poll(0)
        if transaction % 3 == 1:
            assert producer.flush(30) == 0  # written, then aborted (not just dropped unsent)
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    produce(broker.bootstrap, topic_name, 1, first=number)  # the log then ends with data
    committed.append(number)
    wait_local_start_past(broker, topic_name, number // 2)
    read_committed = {"isolation.level": "read_committed"}
    assert numbers_confluent(broker.bootstrap, topic_name, 0, **read_committed) == committed


def test_a_topic_created_again_under_the_same_name_does_not_see_the_old_remote_data(
    tiered_broker: tuple[BrokerProcess, Path], topic_name: str
) -> None:
    """Remote segments belong to a topic id: the new topic starts empty in the remote tier (its
    local retention is not bounded by the old copies) and the old topic's segments are deleted."""
    broker, remote = tiered_broker
    create_topic(broker.bootstrap, topic_name, config=TIERED_TOPIC)
    produce(broker.bootstrap, topic_name, RECORDS)
    wait_local_start_past(broker, topic_name, 0)
    old = {p.name for p in remote_objects(remote, topic_name, "log")}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([topic_name])[topic_name].result(30)
    wait_until(
        lambda: topic_name not in admin.list_topics(timeout=10).topics,
        what="the topic deleted", timeout=DEADLINE_S,
    )  # fmt: skip
    create_topic(broker.bootstrap, topic_name, config=TIERED_TOPIC)
    again = RECORDS // 2
    produce(broker.bootstrap, topic_name, again, first=RECORDS)  # numbered after the old ones
    assert list_offset(broker.host, broker.port, topic_name, LATEST_TIERED) < again
    wait_local_start_past(broker, topic_name, 0)
    assert list_offset(broker.host, broker.port, topic_name, EARLIEST) == 0
    assert numbers_confluent(broker.bootstrap, topic_name) == list(range(RECORDS, RECORDS + again))
    wait_until(
        lambda: not old & {p.name for p in remote_objects(remote, topic_name, "log")},
        what="the old topic's remote segments deleted", timeout=DEADLINE_S, interval=0.2,
    )  # fmt: skip


def test_deleting_a_tiered_topic_deletes_its_remote_segments(
    tiered_broker: tuple[BrokerProcess, Path], topic_name: str
) -> None:
    broker, remote = tiered_broker
    create_topic(broker.bootstrap, topic_name, config=TIERED_TOPIC)
    produce(broker.bootstrap, topic_name, RECORDS)
    wait_local_start_past(broker, topic_name, 0)
    assert remote_objects(remote, topic_name, "log")
    assert topic_series(broker, topic_name, "remote_copy_requests")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([topic_name])[topic_name].result(30)
    wait_until(
        lambda: not remote_objects(remote, topic_name, "log")
        and not remote_objects(remote, topic_name, "index"),
        what="the deleted topic's remote segments gone", timeout=DEADLINE_S, interval=0.2,
    )  # fmt: skip
    # ...and its series, remote tier's included (a topic churned all day left them for good)
    wait_until(
        lambda: not topic_series(broker, topic_name),
        what="the deleted topic's metric series gone", timeout=DEADLINE_S, interval=0.2,
    )  # fmt: skip


def test_turning_remote_storage_off_needs_delete_on_disable_which_deletes_the_remote_data(
    tiered_broker: tuple[BrokerProcess, Path], topic_name: str
) -> None:
    """Kafka's KIP-950 rule, with its message; then the remote segments go."""
    broker, remote = tiered_broker
    create_topic(broker.bootstrap, topic_name, config=TIERED_TOPIC)
    produce(broker.bootstrap, topic_name, RECORDS)
    wait_local_start_past(broker, topic_name, 0)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def alter(**values: str) -> None:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic_name, set_config=values)
        admin.alter_configs([resource])[resource].result(30)

    with pytest.raises(KafkaException, match="invalid to disable remote storage without deleting"):
        alter(**{**TIERED_TOPIC, "remote.storage.enable": "false"})
    assert remote_objects(remote, topic_name, "log")
    alter(
        **{**TIERED_TOPIC, "remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}
    )
    wait_until(
        lambda: not remote_objects(remote, topic_name, "log"),
        what="the remote data deleted", timeout=DEADLINE_S, interval=0.2,
    )  # fmt: skip
