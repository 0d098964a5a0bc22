"""A Fetch answer queued behind a client that does not read sends its own segment's bytes after
the segment is deleted and another tenant's files are opened — or the connection ends — never
the other tenant's bytes (security: tenant isolation fails closed).

A real broker on each answer path (the transport, and the writer thread; retention, and with it
the unlink of `.deleted` files, runs every 200 ms) holds topic A in 1 MiB segments with
`file.delete.delay.ms=0`. A raw client with a small receive buffer pipelines Fetch requests for
A's first segment and reads nothing, so an answer's file region waits in the broker (its socket
full). DeleteRecords then removes the segment, its
files are unlinked, and topic B is created and filled with a marker (its files take the lowest
free descriptor numbers, the ones A's segment had if they were closed). Then the client reads
every answer: none may hold B's marker. Once the connection is gone, the broker holds no
descriptor of A's deleted files (the region let go of them).
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from infra.stack import BrokerProcess
from tests.conftest import BrokerFactory
from tests.e2e.conftest import SHARED_BROKER_CONFIG
from tests.e2e.kafka_admin import wait_for_leaders
from tests.e2e.raw_wire import frame, request_bytes
from tests.e2e.test_fetch_answer_size import fetch
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

KiB, MiB = 1024, 1024 * 1024
SEGMENT = {"segment.bytes": str(MiB), "file.delete.delay.ms": "0"}
RECORD = 64 * KiB
A_RECORDS = 48  # three segments of topic A
B_PARTITIONS, B_RECORDS = 4, 24  # 1.5 MiB of the marker in each of B's partitions
MARKER = b"tenant-b-secret|"
FETCHES = 6  # ~1 MiB answers each: more than the sockets hold
READ_S = 30.0  # bounds a hang only


def _produce(producer: Producer, topic: str, values: list[tuple[int, bytes]]) -> None:
    for partition, value in values:
        producer.produce(topic, value, partition=partition)
    assert producer.flush(60) == 0


def _create(admin: AdminClient, topic: str, partitions: int) -> None:
    future = admin.create_topics([NewTopic(topic, partitions, config=SEGMENT)])[topic]
    future.result(timeout=30)
    wait_for_leaders(admin, topic, partitions)


def _unsent(broker_port: int, client_port: int) -> int:
    """Bytes the broker's socket of this connection has not got acknowledged (/proc/net/tcp)."""
    local, remote = f":{broker_port:04X}", f":{client_port:04X}"
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if fields[1].endswith(local) and fields[2].endswith(remote):
                return int(fields[4].split(":")[0], 16)
    return 0


def _deleted_files_held(pid: int, directory: Path) -> list[str]:
    held = []
    for entry in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{entry}")
        except OSError:
            continue
        if target.startswith(f"{directory}/") and target.endswith(" (deleted)"):
            held.append(target)
    return held


def _read_answers(client: socket.socket, count: int) -> bytes:
    """Everything the broker sends for `count` answers, or until it closes the connection."""
    received = bytearray()
    client.settimeout(READ_S)
    for _ in range(count):
        head = _receive(client, 4)
        received += head
        if len(head) < 4:
            break
        body = _receive(client, struct.unpack(">i", head)[0])
        received += body
        if len(body) < struct.unpack(">i", head)[0]:
            break
    return bytes(received)


def _receive(client: socket.socket, size: int) -> bytes:
    """`size` bytes, or fewer if the broker closes the connection first."""
    data = bytearray()
    while len(data) < size:
        chunk = client.recv(min(size - len(data), MiB))
        if not chunk:
            break
        data += chunk
    return bytes(data)


@pytest.fixture(params=["transport", "thread"])
def broker(
    request: pytest.FixtureRequest,
    module_broker: BrokerProcess,
    broker_factory: BrokerFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> BrokerProcess:
    """The broker answering on each path: the transport (the default: the shared broker) or the
    writer thread (`PIER_ANSWER_WRITER_THREAD=1`, a broker of its own)."""
    if request.param == "transport":
        return module_broker
    monkeypatch.setenv("PIER_ANSWER_WRITER_THREAD", "1")
    return broker_factory(config=SHARED_BROKER_CONFIG)


def test_a_queued_fetch_answer_never_sends_another_tenants_file(
    broker: BrokerProcess, topic_name: str
) -> None:
    mine, theirs = f"{topic_name}-a", f"{topic_name}-b"
    # The clients connect first, so that after the deletion the broker opens nothing but B's
    # files (a new connection's socket would take the freed numbers instead).
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    producer = Producer(  # one record a batch: A's first segment holds 15 of them, ~1 MiB
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 1}
    )
    _create(admin, mine, 1)
    _produce(producer, mine, [(0, os.urandom(RECORD)) for _ in range(A_RECORDS)])
    directory = broker.data_dir / f"{mine}-0"

    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * KiB)
    client.connect((broker.host, broker.port))
    try:
        request = fetch(mine, partition_max_bytes=MiB, max_bytes=50 * MiB)
        client.sendall(b"".join(frame(request_bytes(request, i)) for i in range(FETCHES)))
        port = client.getsockname()[1]
        wait_until(lambda: _unsent(broker.port, port) > 0, what="a fetch answer waits")

        deleted = admin.delete_records([TopicPartition(mine, 0, A_RECORDS)])
        for future in deleted.values():
            future.result(timeout=30)
        wait_until(lambda: not list(directory.glob("*.deleted")), what="A's segments unlinked")
        _create(admin, theirs, B_PARTITIONS)
        secret = MARKER * (RECORD // len(MARKER))
        _produce(
            producer, theirs, [(p, secret) for p in range(B_PARTITIONS) for _ in range(B_RECORDS)]
        )

        received = _read_answers(client, FETCHES)
    finally:
        client.close()
        del producer, admin  # their connections end before the shared broker stops
    assert len(received) > MiB  # the answers (or most of one) arrived
    assert received.count(MARKER) == 0  # another topic's bytes, through a reused descriptor
    wait_until(
        lambda: not _deleted_files_held(broker.pid, directory),
        what="the broker lets go of A's deleted files",
    )
