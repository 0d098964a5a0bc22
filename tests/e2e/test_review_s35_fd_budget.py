"""Review of s35 (H5): what the descriptor budget promises partitions must still be there when
they are written, with the broker's sockets within the reserve they are given.

A real broker with a low open-file limit (`prlimit --nofile`, test_fd_limit's), real clients. The
budget: `files + promised + max(reserve, others) + 4 per new partition <= limit` (others:
sockets, pipes, epoll, eventfd, devices).
- Two topics created as the refusals allowed, the clients' connections within the reserve: every
  partition takes its first record (43 of 56 failed with EMFILE and went offline while an empty
  partition's unopened write descriptor was promised again to the next topic; fixed by 43fa3a4).
- One client's connections past the reserve shrink what every tenant may create unless a cap keeps
  them inside it (84 connections cut 45 allowed partitions to 38 before 7a9d72d): with
  max.connections.per.ip set, one address's connections past the cap are closed and the answer holds.
- Partitions created as allowed must roll with the clients' connections within the reserve (22
  of 45 rolls failed with KAFKA_STORAGE_ERROR while a roll kept the old segment's `.log` open, one
  descriptor per roll that nothing budgeted; an inactive segment now holds none and opens its
  file on demand for a read, brokers/log/file_records.py).
- After a restart, a reloaded partition holds only its `.log` read descriptor until its first
  append and index entry: topics created as allowed before and after the restart must all take
  their records and index entries (the budget promised a reloaded partition only its write
  descriptor, so the topic created after the restart took the 2 more each one's writes needed).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from brokers.common.descriptors import reserve_for
from infra.broker import PIER_PROGRAM
from infra.stack import BrokerProcess, start_broker
from tests.conftest import remember_log
from tests.e2e.test_fd_limit import (
    CONFIG,
    NOFILE,
    create_topic_error,
    held_connections,
    refusal,
    start_limited,
)
from tests.polling import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
MARGIN = 2  # connections kept below the reserve: clearly within what sockets are given
ROLLS = 3  # rolls of every partition: not only the first one must fit what was promised


def broker_others(pid: int) -> int:
    """The broker's descriptors that draw on the reserve: all but regular files and directories
    (sockets, pipes, epoll and eventfd instances, devices)."""
    found = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        found += not target.startswith("/") or target.startswith("/dev/")
    return found


def first_records(producer: Producer, topics: dict[str, int], value: bytes = b"first") -> list[str]:
    """One record to every partition; the failures' errors."""
    failed: list[str] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failed.append(f"{message.topic()}-{message.partition()}: {error.name()}")

    for topic, partitions in topics.items():
        for partition in range(partitions):
            producer.produce(topic, value, partition=partition, on_delivery=delivered)
    assert producer.flush(60) == 0, "records still in flight"
    return failed


def test_partitions_created_as_allowed_take_their_first_records(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    broker = start_limited(tmp_path, request)
    try:
        failed, created = _created_as_allowed_then_written(broker)
    finally:
        broker.stop()
    assert failed == [], f"{len(failed)} of {created} partitions refused: {failed[:3]}"


def _created_as_allowed_then_written(broker: BrokerProcess) -> tuple[list[str], int]:
    """Two topics as the refusals allowed; one record to each partition with the clients'
    connections held up to just below the reserve: (the failures, the partitions created)."""
    _, first = refusal(broker.bootstrap, "probe-a", 10 * NOFILE)
    assert create_topic_error(broker.bootstrap, "a", first) is None
    _, second = refusal(broker.bootstrap, "probe-b", 10 * NOFILE)
    if second > 0:  # none once the first topic's unopened write descriptors count as taken
        assert create_topic_error(broker.bootstrap, "b", second) is None
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "retries": 0, "message.timeout.ms": 30_000}
    )
    producer.list_topics(timeout=10)  # its connections are open before the others
    clients = reserve_for(NOFILE) - broker_others(broker.pid) - MARGIN
    assert clients > 0
    with held_connections(broker, clients):
        assert broker_others(broker.pid) <= reserve_for(NOFILE)  # within what sockets are given
        topics = {"a": first, "b": second} if second > 0 else {"a": first}
        return first_records(producer, topics), first + second


def test_partitions_created_as_allowed_roll_with_clients_within_the_reserve(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    broker = start_limited(tmp_path, request)
    try:
        _, allowed = refusal(broker.bootstrap, "probe", 10 * NOFILE)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = NewTopic("rolls", allowed, 1, config={"segment.ms": "1"})  # the next append rolls
        admin.create_topics([topic])["rolls"].result(timeout=30)
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "retries": 0, "message.timeout.ms": 30_000}
        )
        assert first_records(producer, {"rolls": allowed}) == []  # every write descriptor open
        clients = reserve_for(NOFILE) - broker_others(broker.pid) - MARGIN
        with held_connections(broker, clients):
            assert broker_others(broker.pid) <= reserve_for(NOFILE)
            failed: list[str] = []
            for _ in range(ROLLS):  # each round rolls every partition's segment once more
                failed += first_records(producer, {"rolls": allowed})
    finally:
        broker.stop()
    assert failed == [], f"{len(failed)} of {ROLLS} x {allowed} rolls failed: {failed[:3]}"
    segments = list((tmp_path / "broker" / "data").glob("rolls-*/*.log"))
    assert len(segments) == (ROLLS + 1) * allowed  # every round did roll every partition


PAST_RESERVE = 24  # connections past the reserve
CAP = 40  # one address's connections (max.connections.per.ip): inside the 64-socket reserve
ATTACKER = "127.0.0.2"  # another loopback address: the admin client's own (127.0.0.1) is not capped


def test_a_per_ip_cap_keeps_one_client_s_connections_from_shrinking_what_tenants_may_create(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    data_dir = tmp_path / "broker" / "data"
    remember_log(request.node, "broker", data_dir.parent / "broker-0.log")
    capped = dict(CONFIG, **{"max.connections.per.ip": str(CAP)})
    program = ("prlimit", f"--nofile={NOFILE}:{NOFILE}", *PIER_PROGRAM)
    broker = start_broker(data_dir, config=capped, program=program)
    held: list[socket.socket] = []
    try:
        _, before = refusal(broker.bootstrap, "probe-before", 10 * NOFILE)
        sockets_before = broker_others(broker.pid)
        for _ in range(CAP + PAST_RESERVE + reserve_for(NOFILE)):  # far past the reserve
            address = (broker.host, broker.port)
            held.append(socket.create_connection(address, timeout=5, source_address=(ATTACKER, 0)))
        wait_until(
            lambda: broker_others(broker.pid) <= sockets_before + CAP,
            what="connections past the cap closed by the broker",
            timeout=10,
        )
        _, during = refusal(broker.bootstrap, "probe-during", 10 * NOFILE)
    finally:
        for sock in held:
            sock.close()
        broker.stop()
    assert during == before, (
        f"{len(held)} connections cut the partitions allowed {before} -> {during}"
    )


def test_partitions_created_as_allowed_before_and_after_a_restart_are_all_written(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    broker = start_limited(tmp_path, request)
    try:
        _, before = refusal(broker.bootstrap, "probe-before", 10 * NOFILE)
        assert create_topic_error(broker.bootstrap, "before", before) is None
        broker.restart()  # "before" reloaded: each partition holds its .log's read descriptor
        _, after = refusal(broker.bootstrap, "probe-after", 10 * NOFILE)
        topics = {"before": before}
        if after > 0:
            assert create_topic_error(broker.bootstrap, "after", after) is None
            topics["after"] = after
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "retries": 0, "message.timeout.ms": 30_000}
        )
        producer.list_topics(timeout=10)  # its connections are open before the others
        clients = reserve_for(NOFILE) - broker_others(broker.pid) - MARGIN
        with held_connections(broker, clients):  # the sockets within the reserve they are given
            assert broker_others(broker.pid) <= reserve_for(NOFILE)
            # Past index.interval.bytes (4096): the next record makes each partition's first
            # index entry, so every write descriptor opens, then every .index and .timeindex.
            failed = first_records(producer, topics, b"x" * 5_000)
            failed += first_records(producer, topics)
    finally:
        broker.stop()
    written = before + after
    assert failed == [], (
        f"{len(failed)} of 2 x {written} writes failed ({after} admitted after the restart): "
        f"{failed[:3]}"
    )
