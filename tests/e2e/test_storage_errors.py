"""Producing to a broker whose disk fails (issue 13, finding 1; docs/storage-errors.md).

A real broker, a real client (confluent-kafka), and a real failure from the kernel, no injection
layer in the broker:
- `file-size-limit`: the running broker's RLIMIT_FSIZE is lowered (prlimit) to half a batch past
  the active segment's size, so the kernel refuses the next `.log` write with EFBIG after a short
  write (a torn batch the broker must undo); raising the limit again is "space comes back".
  Works as any user on Linux.
- `disk-full`: the data dir is a 4 MiB tmpfs filled with a ballast file until ENOSPC; deleting the
  ballast frees the space. Needs mount privileges (root), else skipped with the reason.

Each produce during the fault must answer KAFKA_STORAGE_ERROR (librdkafka reports it per
partition in the delivery report; retries are off so the first answer is the one reported). Once
the fault clears the same partition takes writes again without a restart, and after a restart
every acknowledged record is there once, at its acknowledged offset, and no failed one is.
"""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer

from infra.stack import BrokerProcess, start_broker
from tests.conftest import remember_log
from tests.e2e.kafka_admin import create_topic, read_partitions

pytestmark = [pytest.mark.e2e, pytest.mark.fault]

TOPIC = "storage"
TMPFS_SIZE = "4m"
# Outcome of one produce: (offset, None) when acknowledged, (-1, error code) when not.
Outcome = tuple[int, int | None]


def produce_one_by_one(bootstrap: str, values: list[bytes]) -> dict[bytes, Outcome]:
    """Each value in its own request (flushed before the next), retries off."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "retries": 0,
         "enable.idempotence": False}
    )  # fmt: skip
    outcomes: dict[bytes, Outcome] = {}

    def report(error: KafkaError | None, message: Message) -> None:
        value = message.value()
        assert value is not None
        if error is None:
            offset = message.offset()
            assert offset is not None
            outcomes[value] = (offset, None)
        else:
            outcomes[value] = (-1, error.code())

    for value in values:
        producer.produce(TOPIC, value=value, partition=0, on_delivery=report)
        assert producer.flush(30) == 0, f"no delivery report for {value!r} within 30 s"
    return outcomes


def values(prefix: str, count: int) -> list[bytes]:
    return [b"%s-%04d" % (prefix.encode(), i) for i in range(count)]


def acknowledged(outcomes: dict[bytes, Outcome]) -> dict[int, bytes]:
    return {offset: value for value, (offset, code) in outcomes.items() if code is None}


# -- the two real faults ------------------------------------------------------------------------


def active_segment(broker: BrokerProcess) -> Path:
    return sorted((broker.data_dir / f"{TOPIC}-0").glob("*.log"))[-1]


@contextlib.contextmanager
def file_size_limit(broker: BrokerProcess) -> Iterator[None]:
    """The broker may not write past half a batch beyond its active segment's current end."""
    soft, hard = resource.prlimit(broker.pid, resource.RLIMIT_FSIZE)
    resource.prlimit(
        broker.pid, resource.RLIMIT_FSIZE, (active_segment(broker).stat().st_size + 40, hard)
    )
    try:
        yield
    finally:
        resource.prlimit(broker.pid, resource.RLIMIT_FSIZE, (soft, hard))


@contextlib.contextmanager
def disk_full(broker: BrokerProcess) -> Iterator[None]:
    """Fill the broker's tmpfs data dir to the last page; delete the ballast afterwards."""
    ballast = broker.data_dir / "ballast"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for chunk in (1 << 16, 1 << 12, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * chunk)
        yield
    finally:
        os.close(fd)
        ballast.unlink()


Fault = Callable[[BrokerProcess], contextlib.AbstractContextManager[None]]


@contextlib.contextmanager
def tmpfs(mountpoint: Path) -> Iterator[None]:
    mountpoint.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(mountpoint)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {mounted.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", str(mountpoint)], check=True)


@pytest.fixture(params=["file-size-limit", "disk-full"])
def faulty_broker(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[BrokerProcess, Fault]]:
    data_dir = tmp_path / "broker" / "data"
    remember_log(request.node, "broker 0", data_dir.parent / "broker-0.log")
    with contextlib.ExitStack() as stack:
        if request.param == "disk-full":
            stack.enter_context(tmpfs(data_dir))
            fault: Fault = disk_full
        else:
            fault = file_size_limit
        broker = start_broker(data_dir)
        stack.callback(broker.stop)
        yield broker, fault


# -- the test ----------------------------------------------------------------------------------


def test_produce_answers_kafka_storage_error_and_nothing_is_lost_or_duplicated(
    faulty_broker: tuple[BrokerProcess, Fault],
) -> None:
    broker, fault = faulty_broker
    create_topic(broker.bootstrap, TOPIC)
    before = produce_one_by_one(broker.bootstrap, values("before", 50))
    assert all(code is None for _, code in before.values()), f"failed before the fault: {before}"

    with fault(broker):
        # A tmpfs may still hold a few batches in the segment's last page: produce until the
        # disk refuses, then it must keep refusing.
        during = produce_one_by_one(broker.bootstrap, values("during", 40))
    codes = [code for _, code in during.values()]
    refused = [value for value, (_, code) in during.items() if code is not None]
    assert set(codes) <= {None, KafkaError.KAFKA_STORAGE_ERROR}, f"error codes seen: {codes}"
    assert len(refused) >= 30 and codes[-10:] == [KafkaError.KAFKA_STORAGE_ERROR] * 10, (
        f"{len(refused)} of 40 produces refused during the fault, codes {codes}"
    )

    # Space is back: the same partition takes writes again, no restart (the failed appends were
    # undone, so nothing half-written sits under the new ones).
    after = produce_one_by_one(broker.bootstrap, values("after", 50))
    assert all(code is None for _, code in after.values()), f"failed after the fault: {after}"

    broker.restart()
    acked = acknowledged(before) | acknowledged(during) | acknowledged(after)
    stored = read_partitions(broker.bootstrap, TOPIC, {0: 0})
    offsets = [record.offset for record in stored]
    assert offsets == list(range(len(stored))), f"offsets not contiguous: {offsets}"
    by_offset = {record.offset: record.value for record in stored}
    wrong = {o: (v, by_offset.get(o)) for o, v in acked.items() if by_offset.get(o) != v}
    assert not wrong, (
        f"{len(wrong)} acknowledged records lost or changed: {dict(list(wrong.items())[:5])}"
    )
    surviving_failures = sorted(set(refused) & set(by_offset.values()))
    assert not surviving_failures, f"refused records stored anyway: {surviving_failures[:5]}"
    assert len(stored) == len(acked) == 100 + len(during) - len(refused), (
        f"{len(stored)} stored, {len(acked)} acknowledged, {len(refused)} refused"
    )
